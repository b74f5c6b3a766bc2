//! The one verdict on a bundle (`check-evidence`, and `evidence` before it
//! hands one out). Nothing the bundle says about itself is trusted: every
//! record is re-hashed and its proof checked against the checkpoint, the
//! checkpoint against the trusted keys and the witnesses' quorum, and the
//! run check runs again on the records (`run.json` is never read).
//!
//! What is proven and what the run check found are kept apart: a record is
//! proven or not ([`RecordStatus`]); the run has findings or not.

use std::collections::BTreeMap;

use chainship_anchor::Kind;
use chainship_anchor::checkpoint::{Checkpoint, read_checkpoint};
use chainship_anchor::cosignature::{WitnessPolicy, check_cosignatures};
use chainship_anchor::note::{SignedNote, VerifierKey};
use chainship_anchor::proof_check::{self, NotProven};
use chainship_anchor::signed_head::SignedHead;
use chainship_chain::record::{Record, RecordError};
use chainship_chain::{Error, permanent};
use chainship_runs::payload::Payload;
use chainship_runs::{Profile, Role, RunCheck, RunCheckConfig, RunEvent, RunFinding, RunFindingKind, RunSummary};
use chainship_tlog::proof::TlogProof;
use chainship_tlog::range::verify_range;

use super::{BundleFiles, CHECKPOINT, GAPS, GAPS_PROOF, HEAD, NEWEST, RANGE_PROOF_HEADER, RECORDS, proof_name};

/// What the bundle is checked against.
pub struct CheckInput<'a> {
    pub keys: &'a [VerifierKey],
    /// The witnesses' keys and quorum the checkpoint must meet, when any.
    pub witnesses: Option<&'a WitnessPolicy>,
    /// The run the bundle must be of (default: its first record's).
    pub run_id: Option<&'a str>,
    /// The log the bundle must be of (default: its checkpoint's origin).
    pub origin: Option<&'a str>,
    pub profile: &'static Profile,
    pub rules: RunCheckConfig,
    /// A record revealed for a seq the bundle gives only as a hash.
    pub reveal: Option<&'a Record<'a>>,
    /// The bundle must account for every position (`--with-gaps`).
    pub require_gaps: bool,
}

/// The checkpoint every proof is against.
#[derive(Debug)]
pub struct CheckpointStatus {
    pub origin: String,
    pub size: u64,
    pub root_b64: String,
    pub signers: Vec<String>,
    /// The witnesses whose cosignatures verify.
    pub witnesses: Vec<String>,
    pub problem: Option<NotProven>,
}

/// The signed head at the checkpoint's size.
#[derive(Debug)]
pub struct HeadStatus {
    pub seq: u64,
    pub hash: String,
    pub published: String,
    pub problem: Option<NotProven>,
}

/// One record of the run.
#[derive(Debug)]
pub struct RecordStatus {
    pub seq: u64,
    /// Its line in `records.jsonl` (from 1).
    pub line: usize,
    pub problem: Option<NotProven>,
}

/// One event of the run, as the timeline shows it.
#[derive(Debug)]
pub struct TimelineEvent {
    pub seq: u64,
    pub at: String,
    pub kind: String,
    pub role: Role,
    pub step_id: String,
    /// `tool`, `outcome`, `status`, `approval_id`, `call_id` from the payload, when present.
    pub details: Vec<(&'static str, String)>,
    pub proven: bool,
}

/// `--with-gaps`: every position from the run's first event (its
/// `run.created`) to the checkpoint's size.
#[derive(Debug)]
pub struct GapsStatus {
    pub first: u64,
    /// The checkpoint's size: the positions after the run's last event are accounted for too.
    pub last: u64,
    /// Other events accounted for by hash.
    pub hashes: u64,
    pub problems: Vec<NotProven>,
}

/// What a revealed record showed.
#[derive(Debug)]
pub struct RevealStatus {
    pub seq: u64,
    pub run_id: String,
    pub problem: Option<NotProven>,
}

/// Everything [`check`] found.
#[derive(Debug)]
pub struct EvidenceReport {
    pub run_id: String,
    pub checkpoint: CheckpointStatus,
    pub head: HeadStatus,
    /// The log's newest event at the checkpoint: its seq and time.
    pub newest: (u64, String),
    pub newest_problem: Option<NotProven>,
    pub records: Vec<RecordStatus>,
    pub timeline: Vec<TimelineEvent>,
    pub summary: Option<RunSummary>,
    pub findings: Vec<RunFinding>,
    pub profile: &'static Profile,
    pub rules: RunCheckConfig,
    pub gaps: Option<GapsStatus>,
    pub reveal: Option<RevealStatus>,
    /// `run.json`, `report.html` or `README.txt` not what the checked
    /// records render (set by [`check_renderings`]).
    pub renderings: Vec<NotProven>,
}

impl EvidenceReport {
    /// Every problem that makes the bundle not prove what it says, in order.
    pub fn not_proven(&self) -> Vec<(Option<u64>, &NotProven)> {
        let mut out: Vec<(Option<u64>, &NotProven)> = Vec::new();
        out.extend(self.checkpoint.problem.iter().map(|p| (None, p)));
        out.extend(self.head.problem.iter().map(|p| (Some(self.head.seq), p)));
        out.extend(self.newest_problem.iter().map(|p| (Some(self.newest.0), p)));
        out.extend(
            self.records
                .iter()
                .filter_map(|r| r.problem.as_ref().map(|p| ((r.seq > 0).then_some(r.seq), p))),
        );
        if let Some(g) = &self.gaps {
            out.extend(g.problems.iter().map(|p| (None, p)));
        }
        if let Some(r) = &self.reveal {
            out.extend(r.problem.iter().map(|p| (Some(r.seq), p)));
        }
        out
    }

    /// Every record proven, and at least one.
    pub fn all_proven(&self) -> bool {
        !self.records.is_empty() && self.not_proven().is_empty()
    }

    /// Every record proven, the run without finding, and the page and
    /// `run.json` what the records render.
    pub fn ok(&self) -> bool {
        self.all_proven() && self.findings.is_empty() && self.renderings.is_empty()
    }

    /// Findings of side effects whose outcome is unknown: to reconcile with the outside world.
    pub fn to_reconcile(&self) -> impl Iterator<Item = &RunFinding> {
        self.findings.iter().filter(|f| {
            f.kind == RunFindingKind::UnknownOutcome
                && f.tool
                    .as_deref()
                    .is_some_and(|t| !t.starts_with("model:") && !self.rules.read_only_tools.iter().any(|r| r == t))
        })
    }
}

fn not_proven(kind: Option<Kind>, reason: impl std::fmt::Display) -> NotProven {
    NotProven::new(kind, reason)
}

fn text<'a>(files: &'a BundleFiles, name: &str) -> Result<&'a str, Error> {
    let bytes = files
        .get(name)
        .ok_or_else(|| permanent!("{}: no {name}: not an evidence bundle", files.place))?;
    std::str::from_utf8(bytes).map_err(|_| permanent!("{}: {name} is not text", files.place))
}

/// A record's line read: the record (when there is one), and why it does
/// not stand (`Altered` when a SIEM record's mapped fields disagree with the
/// record it carries).
fn parse_record(line: &[u8]) -> (Option<Record<'static>>, Option<NotProven>) {
    match Record::parse(line) {
        Ok(r) => (Some(r.into_owned()), None),
        Err(e) if e.carried().is_some() => {
            let why = not_proven(Some(Kind::Altered), &e);
            (e.into_carried(), Some(why))
        }
        Err(e @ RecordError::Malformed { .. }) => (None, Some(not_proven(None, e))),
        Err(e) => (None, Some(not_proven(None, format!("not a chainship record: {e}")))),
    }
}

/// Checks the bundle (see the module doc). `Err` only for a bundle that is
/// malformed: a file it must have is missing or unreadable.
pub fn check(files: &BundleFiles, input: &CheckInput<'_>) -> Result<EvidenceReport, Error> {
    let checkpoint_text = text(files, CHECKPOINT)?;
    let records_text = files
        .get(RECORDS)
        .ok_or_else(|| permanent!("{}: no {RECORDS}: not an evidence bundle", files.place))?;
    let head_text = text(files, HEAD)?;
    let newest_text = text(files, NEWEST)?;
    let (mut checkpoint, cp_note) =
        check_checkpoint(checkpoint_text, input).map_err(|e| permanent!("{}: {e}", files.place))?;
    if let Some(origin) = input.origin.filter(|o| *o != checkpoint.origin) {
        checkpoint.problem = Some(not_proven(
            Some(Kind::Foreign),
            format!("the bundle is of log {:?}, not of {origin:?}", checkpoint.origin),
        ));
    }

    // Each proof must be a proof of the bundle's checkpoint: one tree for all.
    let prove = |record: &Record<'_>| -> Result<(), NotProven> {
        let name = proof_name(record.seq);
        let proof_text = files
            .get(&name)
            .ok_or_else(|| not_proven(None, format!("no {name} in the bundle")))?;
        let proof = std::str::from_utf8(proof_text)
            .map_err(|_| ())
            .and_then(|t| TlogProof::parse(t).map_err(|_| ()))
            .map_err(|()| not_proven(None, format!("{name} is not a tlog-proof")))?;
        // The very note, signatures and all: one checkpoint, judged once.
        let same = SignedNote::parse(proof.checkpoint.as_bytes()).is_ok_and(|n| n == cp_note);
        if !same {
            return Err(not_proven(
                None,
                format!("{name} is a proof against another checkpoint (or other signatures on it) than the bundle's"),
            ));
        }
        proof_check::check(&proof, record, input.keys, input.witnesses).map(|_| ())
    };

    // The log's newest event at the checkpoint: its time is the run check's clock.
    let (newest, newest_problem) = match parse_record(newest_text.trim_end().as_bytes()) {
        (Some(r), None) => {
            let problem = if r.seq != checkpoint.size {
                Some(not_proven(
                    None,
                    format!(
                        "{NEWEST} is seq {}, not the checkpoint's size {}",
                        r.seq, checkpoint.size
                    ),
                ))
            } else {
                prove(&r).err()
            };
            (Some(r), problem)
        }
        (_, why) => {
            let why = why.unwrap_or_else(|| not_proven(None, "not a record"));
            (None, Some(not_proven(why.kind, format!("{NEWEST}: {}", why.reason))))
        }
    };
    let head = check_head(head_text, &checkpoint, newest.as_ref(), input);

    let mut records: Vec<RecordStatus> = Vec::new();
    let mut run: Vec<Record<'static>> = Vec::new();
    let mut run_id: Option<Vec<u8>> = input.run_id.map(|r| r.as_bytes().to_vec());
    let mut last_seq = 0u64;
    for (i, line) in records_text.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let (record, mut problem) = parse_record(line);
        let Some(record) = record.filter(|r| r.seq > 0) else {
            let why = problem.map_or_else(|| "seq 0 is not an event".to_owned(), |p| p.reason);
            records.push(RecordStatus {
                seq: 0,
                line: i + 1,
                problem: Some(not_proven(None, format!("{RECORDS} line {}: {why}", i + 1))),
            });
            continue;
        };
        // Compared as stored bytes: ids that differ only in bytes that are not UTF-8 are two runs.
        let this_run = record.field_bytes("run_id").map(|b| b.into_owned()).unwrap_or_default();
        let expected = run_id.get_or_insert_with(|| this_run.clone());
        if problem.is_none() && this_run != *expected {
            problem = Some(not_proven(
                Some(Kind::Foreign),
                format!(
                    "seq {} is an event of run {:?}, not of run {:?}",
                    record.seq,
                    String::from_utf8_lossy(&this_run),
                    String::from_utf8_lossy(expected)
                ),
            ));
        }
        if problem.is_none() && record.seq <= last_seq {
            let kind = if record.seq == last_seq {
                Kind::Duplicate
            } else {
                Kind::Reordered
            };
            problem = Some(not_proven(
                Some(kind),
                format!("seq {} comes after seq {last_seq} in {RECORDS}", record.seq),
            ));
        }
        if problem.is_none() && record.seq > checkpoint.size {
            problem = Some(not_proven(
                None,
                format!("seq {} is past the checkpoint (size {})", record.seq, checkpoint.size),
            ));
        }
        if problem.is_none() {
            problem = prove(&record).err();
        }
        records.push(RecordStatus {
            seq: record.seq,
            line: i + 1,
            problem,
        });
        // Only the run's own records, in order, go to the run check.
        if this_run == *expected && record.seq > last_seq {
            last_seq = record.seq;
            run.push(record);
        }
    }
    let run_id = String::from_utf8_lossy(&run_id.unwrap_or_default()).into_owned();
    if records.is_empty() {
        records.push(RecordStatus {
            seq: 0,
            line: 0,
            problem: Some(not_proven(
                None,
                format!("{RECORDS} holds no record: nothing is proven"),
            )),
        });
    }

    let gaps = match (files.get(GAPS), files.get(GAPS_PROOF)) {
        (Some(_), Some(_)) => Some(check_gaps(files, &run, &checkpoint, input.profile)?),
        (None, None) if input.require_gaps => Some(GapsStatus {
            first: 0,
            last: 0,
            hashes: 0,
            problems: vec![not_proven(
                Some(Kind::Gap),
                "the bundle has no gaps.txt: it cannot show that no event of the run was left out (write it with --with-gaps)",
            )],
        }),
        (None, None) => None,
        (Some(_), None) => return Err(permanent!("{}: {GAPS} without {GAPS_PROOF}", files.place)),
        (None, Some(_)) => return Err(permanent!("{}: {GAPS_PROOF} without {GAPS}", files.place)),
    };
    let reveal = input
        .reveal
        .map(|r| check_reveal(r, files, &run_id, &run, gaps.is_some()))
        .transpose()?;
    let mut proven: std::collections::HashSet<u64> =
        records.iter().filter(|r| r.problem.is_none()).map(|r| r.seq).collect();
    // A withheld event, once revealed, is the run's again: the run check sees
    // it, so what it hid (an unknown outcome, a bypass) is named too.
    if let (Some(status), Some(r)) = (&reveal, input.reveal)
        && status.problem.is_some()
    {
        let at = run.partition_point(|x| x.seq < r.seq);
        run.insert(at, r.clone().into_owned());
        if gaps.as_ref().is_some_and(|g| g.problems.is_empty()) {
            proven.insert(r.seq);
        }
    }
    let (summary, findings) = run_check(&run, newest.as_ref(), input);
    let timeline = run
        .iter()
        .map(|r| timeline_event(r, input.profile, proven.contains(&r.seq)))
        .collect();
    Ok(EvidenceReport {
        run_id,
        checkpoint,
        head,
        newest: newest.map_or((0, String::new()), |r| (r.seq, r.at.into_owned())),
        newest_problem,
        records,
        timeline,
        summary,
        findings,
        profile: input.profile,
        rules: input.rules.clone(),
        gaps,
        reveal,
        renderings: Vec::new(),
    })
}

/// Compares the bundle's `run.json`, `report.html` and `README.txt` with
/// what the checked report renders: a page a person reads must be the one
/// these records give (with these trust flags and run rules).
pub fn check_renderings(files: &BundleFiles, report: &mut EvidenceReport) {
    for (name, bytes) in super::renderings(report) {
        let problem = match files.get(name) {
            None => format!("{name} is missing"),
            Some(held) if held != bytes.as_slice() => format!(
                "{name} is not what these records render (edited, or written with other trust flags or run rules): do not read it; --render DIR writes it from this check"
            ),
            Some(_) => continue,
        };
        report.renderings.push(not_proven(None, problem));
    }
}

/// Reads the checkpoint and checks its signatures and cosignatures; `Err`
/// only when it is not a checkpoint at all.
fn check_checkpoint(text: &str, input: &CheckInput<'_>) -> Result<(CheckpointStatus, SignedNote), Error> {
    let read = read_checkpoint(text.as_bytes(), input.keys).map_err(|e| permanent!("{CHECKPOINT}: {e}"))?;
    let cp: &Checkpoint = &read.checkpoint;
    let cosigned = input.witnesses.map(|w| (w, check_cosignatures(&read.note, &w.keys)));
    let problem = if read.bad_signature {
        Some(not_proven(
            Some(Kind::BadSignature),
            format!("a trusted key's signature on checkpoint {} does not verify", cp.size),
        ))
    } else if read.signers.is_empty() {
        Some(not_proven(
            Some(Kind::UntrustedKey),
            format!("checkpoint {} is signed by no trusted key", cp.size),
        ))
    } else {
        match &cosigned {
            Some((_, c)) if !c.bad.is_empty() => Some(not_proven(
                Some(Kind::BadSignature),
                format!(
                    "the cosignature of {} on checkpoint {} does not verify",
                    c.bad.join(", "),
                    cp.size
                ),
            )),
            Some((w, c)) if !w.met(&c.valid) => Some(not_proven(
                Some(Kind::Uncosigned),
                format!(
                    "checkpoint {} carries {} valid cosignature(s): {}",
                    cp.size,
                    c.valid.len(),
                    w.shortfall()
                ),
            )),
            _ => None,
        }
    };
    let status = CheckpointStatus {
        origin: cp.origin.clone(),
        size: cp.size,
        root_b64: cp.root_b64(),
        signers: read.signers.clone(),
        witnesses: cosigned.map(|(_, c)| c.valid).unwrap_or_default(),
        problem,
    };
    Ok((status, read.note))
}

/// The signed head at the checkpoint's size: signed by a trusted key, of
/// the checkpoint's origin and size, naming the newest event's hash.
fn check_head(text: &str, cp: &CheckpointStatus, newest: Option<&Record<'_>>, input: &CheckInput<'_>) -> HeadStatus {
    let mut status = HeadStatus {
        seq: cp.size,
        hash: String::new(),
        published: String::new(),
        problem: None,
    };
    let note = match SignedNote::parse(text.as_bytes()) {
        Ok(n) => n,
        Err(e) => {
            status.problem = Some(not_proven(None, format!("{HEAD}: not a signed note: {e}")));
            return status;
        }
    };
    let head = match SignedHead::parse_text(&note.text) {
        Ok(h) => h,
        Err(e) => {
            status.problem = Some(not_proven(None, format!("{HEAD}: not a signed head: {e}")));
            return status;
        }
    };
    status.hash = head.head.hash_str().to_owned();
    status.published = head.published.clone();
    let checks: Vec<Option<bool>> = input.keys.iter().map(|k| k.check(&note)).collect();
    let signed = input
        .keys
        .iter()
        .zip(&checks)
        .any(|(k, c)| *c == Some(true) && k.trusted_for(&head.origin, head.head.seq));
    status.problem = if checks.contains(&Some(false)) {
        Some(not_proven(
            Some(Kind::BadSignature),
            "a trusted key's signature on the head does not verify",
        ))
    } else if !signed {
        Some(not_proven(
            Some(Kind::UntrustedKey),
            "the head is signed by no trusted key",
        ))
    } else if head.origin != cp.origin || head.head.seq != cp.size {
        Some(not_proven(
            Some(Kind::Foreign),
            format!(
                "the head is seq {} of {:?}; the checkpoint is size {} of {:?}",
                head.head.seq, head.origin, cp.size, cp.origin
            ),
        ))
    } else if newest.is_some_and(|r| r.hash != head.head.hash_str()) {
        Some(not_proven(
            Some(Kind::HeadsDisagree),
            format!("the head's hash is not the hash of {NEWEST} (seq {})", cp.size),
        ))
    } else {
        None
    };
    status
}

/// Runs the run check on the run's records, the log's newest event as its clock.
fn run_check(
    run: &[Record<'_>],
    newest: Option<&Record<'_>>,
    input: &CheckInput<'_>,
) -> (Option<RunSummary>, Vec<RunFinding>) {
    let mut check = RunCheck::new(input.profile, input.rules.clone());
    for r in run {
        let fields = ["run_id", "step_id", "at", "type", "payload_json"].map(|f| r.field_bytes(f).unwrap_or_default());
        check.feed(&RunEvent {
            seq: r.seq,
            run_id: &fields[0],
            step_id: &fields[1],
            at: &fields[2],
            kind: &fields[3],
            payload: &fields[4],
        });
    }
    if let Some(n) = newest {
        check.clock(n.at.as_bytes());
    }
    check.finish();
    let mut findings = check.take_findings();
    findings.sort_by_key(|f| f.seq);
    (check.take_summaries().into_iter().next(), findings)
}

fn timeline_event(r: &Record<'_>, profile: &Profile, proven: bool) -> TimelineEvent {
    let payload_bytes = r.field_bytes("payload_json").unwrap_or_default();
    let p = Payload::parse(&payload_bytes);
    let details = [
        ("tool", p.tool.get()),
        ("outcome", p.outcome.get()),
        ("status", p.status.get()),
        ("approval_id", p.approval_id.get()),
        ("call_id", p.call_id.get()),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| (k, v.to_owned())))
    .collect();
    TimelineEvent {
        seq: r.seq,
        at: r.at.to_string(),
        kind: r.kind.to_string(),
        role: profile.role(r.kind.as_bytes()),
        step_id: r.step_id.to_string(),
        details,
        proven,
    }
}

/// The hash at each seq the bundle gives only as a hash, from `gaps.txt`.
fn read_gaps(text: &str) -> Result<BTreeMap<u64, String>, Error> {
    let mut gaps = BTreeMap::new();
    // One spelling: lines of "<seq> <hash>\n", the seq in plain decimal.
    if !text.is_empty() && !text.ends_with('\n') || text.contains('\r') {
        return Err(permanent!(
            "{GAPS}: not lines of \"<seq> <hash>\" each ending in a newline"
        ));
    }
    for (i, line) in text.lines().enumerate() {
        let bad = || permanent!("{GAPS} line {}: not \"<seq> <hash>\"", i + 1);
        let (seq_text, hash) = line.split_once(' ').ok_or_else(bad)?;
        let seq: u64 = seq_text.parse().map_err(|_| bad())?;
        if seq.to_string() != seq_text {
            return Err(bad());
        }
        if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(bad());
        }
        if gaps.insert(seq, hash.to_owned()).is_some() {
            return Err(permanent!("{GAPS} line {}: seq {seq} a second time", i + 1));
        }
    }
    Ok(gaps)
}

/// Parses `gaps.proof`: its start and end index and hashes.
fn read_range_proof(text: &str) -> Result<(u64, u64, Vec<chainship_tlog::Hash>), Error> {
    let mut lines = text.lines();
    let bad = |what: &str| permanent!("{GAPS_PROOF}: {what}");
    if lines.next() != Some(RANGE_PROOF_HEADER) {
        return Err(bad(&format!("the first line is not {RANGE_PROOF_HEADER}")));
    }
    let mut number = |name: &str| -> Result<u64, Error> {
        lines
            .next()
            .and_then(|l| l.strip_prefix(name))
            .and_then(|v| v.strip_prefix(' '))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| bad(&format!("no {name} line")))
    };
    let (start, end) = (number("start")?, number("end")?);
    let hashes = lines
        .map(|l| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(l)
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .ok_or_else(|| bad(&format!("{l:?} is not a base64 SHA-256 hash")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((start, end, hashes))
}

/// Checks that every position from the run's first event (its creation) to
/// the checkpoint's size is accounted for (a record of the run, or another
/// event's hash), that the whole range of entries is in the checkpoint's
/// tree, and that each record's `prev_hash` is the entry before it.
fn check_gaps(
    files: &BundleFiles,
    run: &[Record<'_>],
    cp: &CheckpointStatus,
    profile: &Profile,
) -> Result<GapsStatus, Error> {
    let gaps = read_gaps(text(files, GAPS)?)?;
    let (start, end, proof) = read_range_proof(text(files, GAPS_PROOF)?)?;
    let last = cp.size;
    let mut status = GapsStatus {
        first: run.first().map_or(0, |r| r.seq),
        last,
        hashes: gaps.len() as u64,
        problems: Vec::new(),
    };
    let Some(head) = run.first() else {
        status
            .problems
            .push(not_proven(None, "no record of the run to account for"));
        return Ok(status);
    };
    let first = head.seq;
    // The run's start is its creation, and the range runs on to the
    // checkpoint: no event can be cut off at either end.
    if profile.role(head.kind.as_bytes()) != Role::RunCreated {
        status.problems.push(not_proven(
            Some(Kind::Gap),
            format!(
                "the run's first event in the bundle, seq {first}, is {:?}, not its creation: the events before it are not accounted for",
                head.kind
            ),
        ));
    }
    let mut at: BTreeMap<u64, &str> = gaps.iter().map(|(s, h)| (*s, h.as_str())).collect();
    for r in run {
        if at.insert(r.seq, &r.hash).is_some() {
            status.problems.push(not_proven(
                Some(Kind::Duplicate),
                format!("seq {} is both a record of the run and a hash in {GAPS}", r.seq),
            ));
        }
    }
    let outside: Vec<u64> = at.keys().copied().filter(|s| *s < first || *s > last).collect();
    if let Some(s) = outside.first() {
        status.problems.push(not_proven(
            None,
            format!("{GAPS} names seq {s}, outside seqs {first}..={last} (the run's first event to the checkpoint)"),
        ));
    }
    // Unaccounted positions, as ranges.
    let mut missing: Vec<(u64, u64)> = Vec::new();
    let mut expect = first;
    // Past the last position: a size near u64::MAX must not overflow.
    let past = [last.checked_add(1)].into_iter().flatten();
    for seq in at.keys().copied().filter(|s| (first..=last).contains(s)).chain(past) {
        if seq > expect {
            missing.push((expect, seq - 1));
        }
        expect = seq.saturating_add(1);
    }
    for (from, to) in &missing {
        status.problems.push(not_proven(
            Some(Kind::Gap),
            format!("seq {from}..={to}: neither a record of the run nor a hash in {GAPS}: an event left out"),
        ));
    }
    // Each record follows the entry before it.
    for r in run.iter().filter(|r| r.seq > first) {
        if let Some(prev) = at.get(&(r.seq - 1))
            && *prev != r.prev_hash
        {
            status.problems.push(not_proven(
                Some(Kind::Altered),
                format!(
                    "seq {}: its prev_hash is not the hash the bundle gives for seq {}",
                    r.seq,
                    r.seq - 1
                ),
            ));
        }
    }
    if !missing.is_empty() || !outside.is_empty() {
        return Ok(status);
    }
    if start != first - 1 || end != last {
        status.problems.push(not_proven(
            None,
            format!(
                "{GAPS_PROOF} covers entries {start}..{end}, not {}..{last} (the run's first event to the checkpoint)",
                first - 1
            ),
        ));
        return Ok(status);
    }
    let leaves: Vec<chainship_tlog::Hash> = at.values().map(|h| chainship_tlog::leaf_hash(h.as_bytes())).collect();
    let root = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(&cp.root_b64)
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .unwrap_or_default()
    };
    if !verify_range(start, cp.size, &leaves, &proof, &root) {
        status.problems.push(not_proven(
            None,
            format!(
                "{GAPS_PROOF}: the entries of seqs {first}..={last} do not lead to the root of checkpoint {}",
                cp.size
            ),
        ));
    }
    Ok(status)
}

/// A record revealed for a seq given only as a hash: when it is the entry
/// there and of this run, the run's event was withheld. A record that is not
/// the entry there reveals nothing (`Err`, a usage error).
fn check_reveal(
    revealed: &Record<'_>,
    files: &BundleFiles,
    run_id: &str,
    run: &[Record<'_>],
    has_gaps: bool,
) -> Result<RevealStatus, Error> {
    let seq = revealed.seq;
    let of_run = revealed
        .field_bytes("run_id")
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    if !has_gaps || files.get(GAPS).is_none() {
        return Err(permanent!(
            "{}: the bundle has no {GAPS}: there is no hash to reveal a record for (write it with --with-gaps)",
            files.place
        ));
    }
    if run.iter().any(|r| r.seq == seq) {
        return Err(permanent!(
            "seq {seq} is a record of the bundle, not a hash: nothing to reveal"
        ));
    }
    let gaps = read_gaps(text(files, GAPS)?)?;
    let Some(hash) = gaps.get(&seq) else {
        return Err(permanent!("the bundle gives no hash for seq {seq}"));
    };
    if revealed.expected_hash()[..] != *revealed.hash.as_bytes() || revealed.hash != hash.as_str() {
        return Err(permanent!(
            "--record is not the event at seq {seq}: it does not hash to the bundle's entry there"
        ));
    }
    let problem = (of_run == run_id).then(|| {
        not_proven(
            Some(Kind::Gap),
            format!("seq {seq} is an event of run {run_id:?} that the bundle gives only as a hash: it was withheld"),
        )
    });
    Ok(RevealStatus {
        seq,
        run_id: of_run,
        problem,
    })
}
