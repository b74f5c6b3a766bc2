//! The one verdict on a bundle (`check-evidence`, and `evidence` before it
//! hands one out). Nothing the bundle says about itself is trusted: every
//! record is re-hashed and its proof checked against the checkpoint, the
//! checkpoint against the trusted keys and the witnesses' quorum, and the
//! run check runs again on the records (`run.json` is never read).
//!
//! What is proven and what the run check found are kept apart: a record is
//! proven or not ([`RecordStatus`]); the run has findings or not.

use chainship_anchor::checkpoint::Checkpoint;
use chainship_anchor::cosignature::WitnessPolicy;
use chainship_anchor::note::{SignedNote, VerifierKey};
use chainship_anchor::signed_head::SignedHead;
use chainship_chain::record::{Record, RecordError};
use chainship_chain::{Error, permanent};
use chainship_runs::payload::Payload;
use chainship_runs::{Profile, Role, RunCheck, RunCheckConfig, RunEvent, RunFinding, RunFindingKind, RunSummary};
use chainship_tlog::proof::TlogProof;
use chainship_verify::checkpoints::trust_checkpoint;
use chainship_verify::proof::{self, NotProven};
use chainship_verify::{Finding, Kind, Verdict};

use super::gaps::{GapsStatus, RevealStatus, check_gaps, check_reveal};
use super::proving::{Form, proof_from_tiles, read_tiles};
use super::{BundleFiles, CHECKPOINT, GAPS, GAPS_PROOF, HEAD, NEWEST, PROOFS_DIR, RECORDS, TILES_DIR, proof_name};

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
    /// The redaction statement of a revealed tombstone, as the anchor store
    /// keeps it: what binds the tombstone's fields (its run id) to its hash.
    pub reveal_statement: Option<&'a [u8]>,
    /// The bundle must account for every position (`--with-gaps`).
    pub require_gaps: bool,
    /// The keys that may authorize erasure: a tombstone passes where the
    /// bundle's statement for it is signed by one of them.
    pub redaction_keys: &'a [VerifierKey],
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
    /// The records accepted as tombstones (their payload withheld).
    pub redacted: Vec<chainship_verify::redactions::Redacted>,
    /// What a rule would have said of a step whose payload was withheld:
    /// the run check could not be made there (not a finding, never ok).
    pub content_redacted: Vec<RunFinding>,
    /// A bundle written before the tiles: one `tlog-proof` a record, and the
    /// gaps as hashes with a range proof (its pages render as they did).
    pub per_record_proofs: bool,
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

    /// The bundle's verdict: each part that does not prove what it says a
    /// finding (of its kind, or `unproven`), a bundle without a record
    /// `nothing-checked`; with `runs` (checking, not building), each run
    /// finding `run-rule` and each rendering that is not what the records
    /// render `unproven` too.
    pub fn verdict(self, runs: bool) -> Verdict<EvidenceReport> {
        let mut findings: Vec<Finding> = self.not_proven().into_iter().map(|(seq, p)| p.finding(seq)).collect();
        if self.records.is_empty() {
            findings.push(Finding::new(Kind::NothingChecked, None, "the bundle proves no record"));
        }
        if runs {
            if let Some(first) = self.content_redacted.first() {
                findings.push(Finding::new(
                    Kind::NotWhole,
                    Some(first.seq),
                    format!(
                        "{} rule check(s) of the run could not be made: the payloads they need were withheld (redacted), the first: {first}",
                        self.content_redacted.len()
                    ),
                ));
            }
            findings.extend(self.findings.iter().map(chainship_verify::finding::run_rule));
            findings.extend(self.renderings.iter().map(|p| p.finding(None)));
        }
        let redacted = self.redacted.clone();
        let mut v = Verdict::new(self);
        v.findings = findings;
        v.redacted = redacted;
        v
    }

    /// Every record proven, and at least one.
    pub fn all_proven(&self) -> bool {
        !self.records.is_empty() && self.not_proven().is_empty()
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

/// Whether a revealed record's fields are bound to its hash: it hashes to
/// it, or (a tombstone, its payload withheld) a statement signed by a
/// trusted redaction key names its seq, hash and fields. A tombstone without
/// one is a usage error: it reveals nothing yet.
fn revealed_is_bound(r: &Record<'_>, input: &CheckInput<'_>, origin: &str) -> Result<bool, Error> {
    if !r.is_tombstone() {
        return Ok(r.expected_hash()[..] == *r.hash.as_bytes());
    }
    let Some(statement) = input.reveal_statement else {
        return Err(permanent!(
            "--record is a tombstone (its payload withheld): give its redaction statement (--statement FILE, as the anchor store keeps it at {origin}/{}) and --redaction-key",
            chainship_anchor::redaction::statement_path(r.seq)
        ));
    };
    if input.redaction_keys.is_empty() {
        return Err(permanent!(
            "--statement: give --redaction-key, the key trusted for erasure its signature is checked with"
        ));
    }
    let mut loaded = chainship_verify::redactions::Loaded::default();
    let path = chainship_anchor::redaction::statement_path(r.seq);
    chainship_verify::redactions::judge_one(&mut loaded, origin, input.redaction_keys, &path, Some(r.seq), statement);
    if let Some(f) = loaded.findings.first() {
        return Err(permanent!("--statement: {}", f.message));
    }
    if !loaded.redactions.accepts_record(r) {
        return Err(permanent!(
            "--statement does not bind --record: it is not signed by a --redaction-key trusted for seq {}, or names another seq, hash or fields than the tombstone's",
            r.seq
        ));
    }
    Ok(true)
}

/// Problems named one by one before the rest are only counted: a bundle of
/// a million bad lines must not cost a million messages (memory follows the
/// run's records, not what a hostile bundle holds).
pub(super) const MAX_NAMED: usize = 1000;

/// The records' statuses as [`check`] gathers them, problems capped.
#[derive(Default)]
struct Statuses {
    list: Vec<RecordStatus>,
    named: usize,
    unnamed: u64,
}

impl Statuses {
    fn add(&mut self, status: RecordStatus) {
        if status.problem.is_some() {
            if self.named == MAX_NAMED {
                self.unnamed += 1;
                return;
            }
            self.named += 1;
        }
        self.list.push(status);
    }

    fn finish(mut self) -> Vec<RecordStatus> {
        if self.unnamed > 0 {
            self.list.push(RecordStatus {
                seq: 0,
                line: 0,
                problem: Some(not_proven(
                    None,
                    format!(
                        "{} more problem(s) of the bundle, past the first {MAX_NAMED}, not listed",
                        self.unnamed
                    ),
                )),
            });
        }
        self.list
    }
}

impl std::ops::Deref for Statuses {
    type Target = [RecordStatus];
    fn deref(&self) -> &[RecordStatus] {
        &self.list
    }
}

pub(super) fn not_proven(kind: Option<Kind>, reason: impl std::fmt::Display) -> NotProven {
    NotProven::new(kind, reason)
}

pub(super) fn text<'a>(files: &'a BundleFiles, name: &str) -> Result<&'a str, Error> {
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

    // Its signatures were judged once, above; each proof is then only checked
    // for its record (its proof must carry this very note).
    let (cp, _) =
        Checkpoint::parse_text(&cp_note.text).map_err(|e| permanent!("{}: {CHECKPOINT}: {e}", files.place))?;
    let untrusted = checkpoint.problem.is_some();
    // The statements the bundle carries, judged as a verifier of the store judges them.
    let mut statements = chainship_verify::redactions::Loaded::default();
    for name in files.names().filter(|n| n.starts_with(super::REDACTIONS_DIR)) {
        let seq = chainship_anchor::redaction::seq_of_name(name);
        chainship_verify::redactions::judge_one(
            &mut statements,
            &checkpoint.origin,
            input.redaction_keys,
            name,
            seq,
            files.get(name).unwrap_or_default(),
        );
    }
    let covers = |record: &Record<'_>| statements.redactions.accepts_record(record);
    // The bundle's tiles, each proven to be of the checkpoint's tree before
    // any proof is computed from them (a tile that is not names the bundle).
    let (tiles, tile_problems) = read_tiles(files, &cp);
    let form = Form::of(files);
    let prove = |record: &Record<'_>| -> Result<(), NotProven> {
        let name = proof_name(record.seq);
        let proof = match files.get(&name) {
            // A bundle written before the tiles: one tlog-proof a record.
            Some(proof_text) => {
                let proof = std::str::from_utf8(proof_text)
                    .map_err(|_| ())
                    .and_then(|t| TlogProof::parse(t).map_err(|_| ()))
                    .map_err(|()| not_proven(None, format!("{name} is not a tlog-proof")))?;
                // The very note, signatures and all: one checkpoint, judged once.
                let same = SignedNote::parse(proof.checkpoint.as_bytes()).is_ok_and(|n| n == cp_note);
                if !same {
                    return Err(not_proven(
                        None,
                        format!(
                            "{name} is a proof against another checkpoint (or other signatures on it) than the bundle's"
                        ),
                    ));
                }
                proof
            }
            None => proof_from_tiles(&tiles, record.seq, &cp, &cp_note)?,
        };
        if record.is_tombstone() && !covers(record) {
            return Err(not_proven(
                Some(Kind::Altered),
                format!(
                    "seq {} is a tombstone no redaction statement signed by a trusted redaction key covers (--redaction-key)",
                    record.seq
                ),
            ));
        }
        proof::prove_record_redacted(&proof, record, &cp, record.is_tombstone())?;
        if untrusted {
            return Err(not_proven(
                None,
                format!("checkpoint {} is not trusted (above)", cp.size),
            ));
        }
        Ok(())
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

    let mut records = Statuses::default();
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
            records.add(RecordStatus {
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
        records.add(RecordStatus {
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
    // A proof is only for a record of the bundle (or its newest event):
    // any other proves nothing here, and nothing unchecked travels inside.
    let held: std::collections::HashSet<String> = records
        .iter()
        .map(|r| proof_name(r.seq))
        .chain(newest.as_ref().map(|r| proof_name(r.seq)))
        .collect();
    for name in files
        .names()
        .filter(|n| n.starts_with(PROOFS_DIR) && !held.contains(*n))
    {
        records.add(RecordStatus {
            seq: 0,
            line: 0,
            problem: Some(not_proven(
                Some(Kind::Foreign),
                format!("{name} proves no record of the bundle (planted beside them, or its record was removed)"),
            )),
        });
    }
    if form == Form::Mixed {
        records.add(RecordStatus {
            seq: 0,
            line: 0,
            problem: Some(not_proven(
                Some(Kind::Foreign),
                format!(
                    "the bundle holds both tiles ({TILES_DIR}/) and what bundles before the tiles held ({PROOFS_DIR}/ or {GAPS_PROOF}): no writer makes that mix, and its pages could describe the wrong one"
                ),
            )),
        });
    }
    for problem in tile_problems {
        records.add(RecordStatus {
            seq: 0,
            line: 0,
            problem: Some(problem),
        });
    }
    // The log's newest event is the run's own: it must be among the records
    // (else the bundle shows the run's event and leaves it out of the run).
    if let (Some(n), Some(expected)) = (&newest, &run_id)
        && n.seq > 0
        && n.field_bytes("run_id").is_some_and(|b| *b == expected[..])
        && !records.iter().any(|r| r.seq == n.seq)
    {
        records.add(RecordStatus {
            seq: n.seq,
            line: 0,
            problem: Some(not_proven(
                Some(Kind::Gap),
                format!(
                    "{NEWEST} (seq {}) is an event of the run, and {RECORDS} leaves it out",
                    n.seq
                ),
            )),
        });
    }
    // A statement is only for a tombstone of the bundle.
    let tombstones: std::collections::HashSet<u64> = run
        .iter()
        .chain(newest.as_ref())
        .filter(|r| r.is_tombstone())
        .map(|r| r.seq)
        .collect();
    for name in files.names().filter(|n| n.starts_with(super::REDACTIONS_DIR)) {
        if !chainship_anchor::redaction::seq_of_name(name).is_some_and(|s| tombstones.contains(&s)) {
            records.add(RecordStatus {
                seq: 0,
                line: 0,
                problem: Some(not_proven(
                    Some(Kind::Foreign),
                    format!("{name} is the statement of no tombstone of the bundle"),
                )),
            });
        }
    }
    let redacted = run
        .iter()
        .filter(|r| r.is_tombstone() && covers(r))
        .filter_map(|r| {
            let c = statements.redactions.get(r.seq)?;
            Some(chainship_verify::redactions::Redacted {
                seq: r.seq,
                statement: c.statement.to_string(),
                key: c.key.to_string(),
                reason: c.reason.to_string(),
            })
        })
        .collect();
    let run_bytes = run_id.unwrap_or_default();
    let run_id = String::from_utf8_lossy(&run_bytes).into_owned();
    if records.is_empty() {
        records.add(RecordStatus {
            seq: 0,
            line: 0,
            problem: Some(not_proven(
                None,
                format!("{RECORDS} holds no record: nothing is proven"),
            )),
        });
    }

    let gaps = match (files.get(GAPS), files.get(GAPS_PROOF)) {
        (Some(_), _) => Some(check_gaps(files, &run, &checkpoint, input.profile, &tiles)?),
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
        (None, Some(_)) => return Err(permanent!("{}: {GAPS_PROOF} without {GAPS}", files.place)),
    };
    let reveal = input
        .reveal
        .map(|r| {
            let bound = revealed_is_bound(r, input, &checkpoint.origin)?;
            check_reveal(r, bound, files, &run_bytes, &run, gaps.is_some(), &tiles)
        })
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
    let (summary, findings, content_redacted) = run_check(&run, newest.as_ref(), input);
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
        records: records.finish(),
        timeline,
        summary,
        findings,
        profile: input.profile,
        rules: input.rules.clone(),
        gaps,
        reveal,
        renderings: Vec::new(),
        redacted,
        content_redacted,
        per_record_proofs: form == Form::PerRecord,
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
    let judged = trust_checkpoint(text.as_bytes(), input.keys, input.witnesses, Default::default())
        .map_err(|e| permanent!("{CHECKPOINT}: {e}"))?;
    let problem = judged.distrust.map(|d| not_proven(Some(d.kind), d.message));
    let read = judged.read;
    let cp: &Checkpoint = &read.checkpoint;
    let status = CheckpointStatus {
        origin: cp.origin.clone(),
        size: cp.size,
        root_b64: cp.root_b64(),
        signers: read.signers.clone(),
        witnesses: judged.cosignatures.map(|c| c.valid).unwrap_or_default(),
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
) -> (Option<RunSummary>, Vec<RunFinding>, Vec<RunFinding>) {
    let mut check = RunCheck::new(input.profile, input.rules.clone());
    for r in run {
        let fields = ["run_id", "step_id", "at", "type", "payload_json"].map(|f| r.field_bytes(f).unwrap_or_default());
        check.feed(&RunEvent {
            seq: r.seq,
            run_id: &fields[0],
            step_id: &fields[1],
            at: &fields[2],
            kind: &fields[3],
            payload: if r.is_tombstone() { b"" } else { &fields[4] },
            redacted: r.is_tombstone(),
        });
    }
    if let Some(n) = newest {
        check.clock(n.at.as_bytes());
    }
    check.finish();
    let mut findings = check.take_findings();
    findings.sort_by_key(|f| f.seq);
    let withheld = check.content_redacted().0.to_vec();
    (check.take_summaries().into_iter().next(), findings, withheld)
}

fn timeline_event(r: &Record<'_>, profile: &Profile, proven: bool) -> TimelineEvent {
    // A tombstone's payload is withheld: nothing it holds is shown.
    let payload_bytes = match r.is_tombstone() {
        true => Default::default(),
        false => r.field_bytes("payload_json").unwrap_or_default(),
    };
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
