//! What `chainship anchor verify` concludes: which kept heads are trusted,
//! and how the database (or an exported copy) compares with them. Each
//! problem is a [`Finding`] with a kind an auditor can act on.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime};

use chainship_chain::{Head, HeadCheck, InvalidRange, RangeKind, WalkReport};

use chainship_anchor::note::{NoteError, SignedNote, VerifierKey, check_many};
use chainship_anchor::signed_head::SignedHead;
use chainship_anchor::store::StoredNote;

/// What kind of fault a finding names: the vocabulary every verifier
/// (`anchor verify`, `verify-export`, `restore`, `diff`, `check-proof`)
/// reports in, so the same fault gets the same name wherever it is found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// The chain breaks (an event changed, removed or reordered).
    Altered,
    /// The database ends before a kept head.
    Cut,
    /// The event at a head's seq has another hash.
    Fork,
    /// A trusted key's signature on a head does not verify, or the note is unreadable.
    BadSignature,
    /// A head signed by no trusted key.
    UntrustedKey,
    /// Two heads with one seq and different hashes, or a later head with a lower seq.
    HeadsDisagree,
    /// The newest head is older than `--max-age`.
    Stale,
    /// An exported copy lacks a seq.
    Gap,
    /// An exported copy holds a seq twice (identical copies are a warning).
    Duplicate,
    /// An exported copy holds a seq after a later one.
    Reordered,
    /// A record of another origin where only this origin's should be.
    Foreign,
    /// Records of this origin where a consumer of the copy reads them but
    /// they do not belong (another partition of the topic).
    ForeignPartition,
    /// No trusted head was checked: the run proved nothing against a kept head.
    NoTrustedHead,
    /// Two trusted checkpoints that are not one tree (no consistency proof).
    CheckpointFork,
    /// The store's tiles do not give a checkpoint's root, or lack a tile.
    TilesDisagree,
    /// A head with no checkpoint of its seq, after checkpoints began; or
    /// the `checkpoint` pointer missing, unreadable or behind the newest.
    CheckpointMissing,
    /// A trusted checkpoint whose head, written right after it, is not
    /// kept (deleted; the newest one alone may still be in flight).
    HeadMissing,
    /// Checkpoints without the required witness cosignatures.
    Uncosigned,
    /// More records after the last trusted head than allowed: a tail no
    /// signed head vouches for (`--max-unvouched`).
    Unvouched,
    /// The check read nothing it could judge (no event, no record).
    NothingChecked,
    /// Part of what was to be checked could not be read: the rest was judged alone.
    NotWhole,
    /// A proof or a bundle's part that does not prove what it says.
    Unproven,
    /// A run breaks a rule of its profile (an unapproved call, a missing outcome...).
    RunRule,
    /// An origin the anchor store holds heads for has no record in the copy
    /// (a fleet's SIEM pipeline dropped a runtime).
    MissingCopy,
    /// A redaction statement that is forged, names another origin or seq,
    /// holds another hash than the chain at its seq, or redacts a seq no
    /// trusted head or checkpoint vouches for.
    Redaction,
}

impl Kind {
    /// Whether a finding of this kind at a seq ends trust there: the chain
    /// or the copy is wrong at that seq (not the store around it). The last
    /// trusted head is the highest below every such finding, for every
    /// verifier alike.
    pub fn ends_trust(self) -> bool {
        matches!(
            self,
            Kind::Altered
                | Kind::Fork
                | Kind::Gap
                | Kind::Duplicate
                | Kind::Reordered
                | Kind::Foreign
                | Kind::Unvouched
                | Kind::HeadsDisagree
        )
    }

    /// Every kind, for reports that list each (with 0 when absent).
    pub const ALL: [Kind; 25] = [
        Kind::Altered,
        Kind::Cut,
        Kind::Fork,
        Kind::BadSignature,
        Kind::UntrustedKey,
        Kind::HeadsDisagree,
        Kind::Stale,
        Kind::Gap,
        Kind::Duplicate,
        Kind::Reordered,
        Kind::Foreign,
        Kind::ForeignPartition,
        Kind::NoTrustedHead,
        Kind::CheckpointFork,
        Kind::TilesDisagree,
        Kind::CheckpointMissing,
        Kind::HeadMissing,
        Kind::Uncosigned,
        Kind::Unvouched,
        Kind::NothingChecked,
        Kind::NotWhole,
        Kind::Unproven,
        Kind::RunRule,
        Kind::MissingCopy,
        Kind::Redaction,
    ];

    /// The kind as JSON, metrics and text name it (`heads-disagree`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Altered => "altered",
            Kind::Cut => "cut",
            Kind::Fork => "fork",
            Kind::BadSignature => "bad-signature",
            Kind::UntrustedKey => "untrusted-key",
            Kind::HeadsDisagree => "heads-disagree",
            Kind::Stale => "stale",
            Kind::Gap => "gap",
            Kind::Duplicate => "duplicate",
            Kind::Reordered => "reordered",
            Kind::Foreign => "foreign",
            Kind::ForeignPartition => "foreign-partition",
            Kind::NoTrustedHead => "no-trusted-head",
            Kind::CheckpointFork => "checkpoint-fork",
            Kind::TilesDisagree => "tiles-disagree",
            Kind::CheckpointMissing => "checkpoint-missing",
            Kind::HeadMissing => "head-missing",
            Kind::Uncosigned => "uncosigned",
            Kind::Unvouched => "unvouched",
            Kind::NothingChecked => "nothing-checked",
            Kind::NotWhole => "not-whole",
            Kind::Unproven => "unproven",
            Kind::RunRule => "run-rule",
            Kind::MissingCopy => "missing-copy",
            Kind::Redaction => "redaction",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One fault a verifier found: its kind, the seq it is at (when it has
/// one), a one-line message, the expected and found hashes when it is about
/// a hash, and the head file or object it concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub kind: Kind,
    pub seq: Option<u64>,
    pub message: String,
    pub expected: Option<String>,
    pub found: Option<String>,
    /// The head file or object concerned.
    pub source: Option<String>,
    /// The setting that is this finding's remedy, when one is (a limit it
    /// went past): the CLI names its flag.
    pub remedy: Option<chainship_chain::Setting>,
}

impl Finding {
    /// A finding of `kind` at `seq` (a checkpoint's: its size), in words;
    /// the hashes, source and remedy are added where they are known.
    pub fn new(kind: Kind, seq: Option<u64>, message: impl Into<String>) -> Self {
        Finding {
            kind,
            seq,
            message: message.into(),
            expected: None,
            found: None,
            source: None,
            remedy: None,
        }
    }

    /// The same finding, about the file or object at `source`.
    pub fn at(mut self, source: Option<String>) -> Self {
        self.source = source;
        self
    }
}

/// A run's breach of its profile's rules as a finding (`run-rule`), at the event that shows it.
pub fn run_rule(f: &chainship_runs::RunFinding) -> Finding {
    Finding::new(Kind::RunRule, Some(f.seq), f.to_string())
}

/// A head whose signature a trusted key verified.
#[derive(Clone, Debug)]
pub struct TrustedHead {
    pub signed: SignedHead,
    pub source: String,
    pub signers: Vec<String>,
}

/// The kept heads, sorted out.
#[derive(Clone, Debug, Default)]
pub struct HeadSet {
    pub kept: usize,
    pub trusted: Vec<TrustedHead>,
    pub findings: Vec<Finding>,
}

impl HeadSet {
    /// When the first trusted head of `seq` was published.
    pub fn published_at(&self, seq: u64) -> Option<SystemTime> {
        self.trusted
            .iter()
            .filter(|t| t.signed.head.seq == seq)
            .filter_map(|t| t.signed.published_time())
            .min()
    }

    /// The distinct trusted heads, for the walk.
    pub fn heads(&self) -> Vec<Head> {
        let mut heads: Vec<Head> = self.trusted.iter().map(|t| t.signed.head).collect();
        heads.sort_by_key(|h| (h.seq, h.hash));
        heads.dedup();
        heads
    }
}

/// The keys trusted for `origin` when one list holds a fleet's keys: those
/// given for it (`KEY origin=ORIGIN`), and those named after it without an
/// `origin=` (C2SP: a log's key carries the log's name), so one origin's
/// key never vouches for another's heads.
pub fn keys_named_for(keys: &[VerifierKey], origin: &str) -> Vec<VerifierKey> {
    keys.iter()
        .filter(|k| match &k.only_origin {
            Some(only) => only == origin,
            None => k.name == origin,
        })
        .cloned()
        .collect()
}

/// Checks every kept note's signatures and contents, and that the trusted
/// heads agree with each other.
pub fn check_heads(notes: &[StoredNote], origin: &str, keys: &[VerifierKey]) -> HeadSet {
    let mut set = check_notes(notes, origin, keys);
    set.findings.extend(disagreements(&set.trusted));
    set
}

/// Checks each kept note's signatures and contents on its own (how the
/// trusted heads agree with each other is [`check_heads`]' business, or
/// the streaming audit's).
pub fn check_notes(notes: &[StoredNote], origin: &str, keys: &[VerifierKey]) -> HeadSet {
    let notes: Vec<&StoredNote> = notes.iter().collect();
    let mut set = HeadSet {
        kept: notes.len(),
        ..HeadSet::default()
    };
    for one in check_each(&notes, origin, keys) {
        set.trusted.extend(one.trusted);
        set.findings.extend(one.findings);
    }
    set
}

/// [`check_notes`] of each note alone (a set of one kept note each), the
/// signatures of all of them verified in batches.
pub fn check_each(notes: &[&StoredNote], origin: &str, keys: &[VerifierKey]) -> Vec<HeadSet> {
    let parsed: Vec<_> = notes.iter().map(|n| SignedNote::parse(&n.bytes)).collect();
    let readable: Vec<&SignedNote> = parsed.iter().filter_map(|p| p.as_ref().ok()).collect();
    let mut checks = check_many(&readable, keys).into_iter();
    notes
        .iter()
        .zip(parsed)
        .map(|(stored, note)| {
            let checks = match note {
                Ok(_) => checks.next().unwrap_or_default(),
                Err(_) => Vec::new(),
            };
            judge_note(stored, note, &checks, origin, keys)
        })
        .collect()
}

/// [`check_notes`] of one note, each signature verified alone: for a
/// single note, and the reference the batched judgement is tested against.
pub fn check_alone(stored: &StoredNote, origin: &str, keys: &[VerifierKey]) -> HeadSet {
    let note = SignedNote::parse(&stored.bytes);
    let checks: Vec<Option<bool>> = match &note {
        Ok(n) => keys.iter().map(|k| k.check(n)).collect(),
        Err(_) => Vec::new(),
    };
    judge_note(stored, note, &checks, origin, keys)
}

/// One kept note judged, given what each key said of its signatures.
fn judge_note(
    stored: &StoredNote,
    note: Result<SignedNote, NoteError>,
    checks: &[Option<bool>],
    origin: &str,
    keys: &[VerifierKey],
) -> HeadSet {
    let mut set = HeadSet {
        kept: 1,
        ..HeadSet::default()
    };
    let finding = |kind, message: String| Finding {
        kind,
        seq: stored.seq_in_name,
        message,
        expected: None,
        found: None,
        source: Some(stored.name.clone()),
        remedy: None,
    };
    let note = match note {
        Ok(n) => n,
        Err(e) => {
            set.findings
                .push(finding(Kind::BadSignature, format!("{}: {e}", stored.name)));
            return set;
        }
    };
    let mut signers = Vec::new();
    let mut failed = Vec::new();
    for (key, check) in keys.iter().zip(checks) {
        match check {
            Some(true) => signers.push(key.name.clone()),
            Some(false) => failed.push(key.name.clone()),
            None => {}
        }
    }
    if !failed.is_empty() {
        let msg = format!(
            "{}: the signature by {} does not verify (the head was edited or forged)",
            stored.name,
            failed.join(", ")
        );
        set.findings.push(finding(Kind::BadSignature, msg));
        return set;
    }
    if signers.is_empty() {
        let by: Vec<&str> = note.signatures.iter().map(|s| s.name.as_str()).collect();
        let msg = format!(
            "{}: signed only by keys not trusted here ({})",
            stored.name,
            by.join(", ")
        );
        set.findings.push(finding(Kind::UntrustedKey, msg));
        return set;
    }
    let signed = match SignedHead::parse_text(&note.text) {
        Ok(h) => h,
        Err(e) => {
            set.findings.push(finding(
                Kind::BadSignature,
                format!("{}: signed, but not a chainship head: {e}", stored.name),
            ));
            return set;
        }
    };
    // A key retired at a rotation vouches only for heads up to its last seq:
    // past it, its signature is what a leaked old key would produce.
    let seq = signed.head.seq;
    let retired: Vec<&VerifierKey> = keys
        .iter()
        .filter(|k| signers.contains(&k.name) && !k.trusted_for(&signed.origin, seq))
        .collect();
    signers.retain(|name| !retired.iter().any(|k| &k.name == name));
    if signers.is_empty() {
        let names: Vec<String> = retired
            .iter()
            .map(|k| match (&k.only_origin, k.retired_after) {
                (Some(o), _) if *o != signed.origin => format!("{} (trusted for origin {o} only)", k.name),
                (_, last) => format!("{} (retired after seq {})", k.name, last.unwrap_or_default()),
            })
            .collect();
        let msg = format!(
            "{}: head at seq {seq} is signed only by keys not trusted for it: {}; a head past a key's retirement needs a current key, and a key for one origin vouches for no other",
            stored.name,
            names.join(", ")
        );
        set.findings.push(finding(Kind::UntrustedKey, msg));
        return set;
    }
    if signed.origin != origin || stored.seq_in_name.is_some_and(|s| s != signed.head.seq) {
        let msg = format!(
            "{}: holds head {} of origin {:?}, which its place in the store does not match",
            stored.name, signed.head, signed.origin
        );
        set.findings.push(finding(Kind::HeadsDisagree, msg));
        return set;
    }
    set.trusted.push(TrustedHead {
        signed,
        source: stored.name.clone(),
        signers,
    });
    set
}

/// Same seq with different hashes; a head published later with a lower seq.
fn disagreements(trusted: &[TrustedHead]) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut by_seq: BTreeMap<u64, &TrustedHead> = BTreeMap::new();
    for t in trusted {
        if let Some(other) = by_seq.insert(t.signed.head.seq, t)
            && other.signed.head.hash != t.signed.head.hash
        {
            out.push(Finding {
                kind: Kind::HeadsDisagree,
                seq: Some(t.signed.head.seq),
                message: format!(
                    "two heads for seq {}: {} and {}",
                    t.signed.head.seq, other.source, t.source
                ),
                expected: Some(other.signed.head.hash_str().to_owned()),
                found: Some(t.signed.head.hash_str().to_owned()),
                source: Some(t.source.clone()),
                remedy: None,
            });
        }
    }
    let mut by_time: Vec<&TrustedHead> = trusted.iter().collect();
    by_time.sort_by_key(|t| (t.signed.published_time(), t.signed.head.seq));
    let mut highest: Option<&TrustedHead> = None;
    for t in by_time {
        if let Some(h) = highest
            && t.signed.head.seq < h.signed.head.seq
            && t.signed.published_time() > h.signed.published_time()
        {
            {
                out.push(Finding {
                    kind: Kind::HeadsDisagree,
                    seq: Some(t.signed.head.seq),
                    message: format!(
                        "head {} published {} has a lower seq than head {} published earlier ({}): the log went backwards",
                        t.signed.head, t.signed.published, h.signed.head, h.signed.published
                    ),
                    expected: None,
                    found: None,
                    source: Some(t.source.clone()), remedy: None, });
                continue;
            }
        }
        if highest.is_none_or(|h| t.signed.head.seq >= h.signed.head.seq) {
            highest = Some(t);
        }
    }
    out
}

/// A head "published" more than this ahead of the auditor's clock.
pub const FUTURE_SKEW: Duration = Duration::from_secs(300);

/// A head "published" in the future (a clock far ahead, or a forged time)
/// would make every later run look fresh: it vouches for nothing here.
pub fn published_in_future(t: &TrustedHead) -> Finding {
    Finding {
        kind: Kind::Stale,
        seq: Some(t.signed.head.seq),
        message: format!(
            "{}: published {}, in the future: a clock ahead or a forged time; freshness cannot rely on it",
            t.source, t.signed.published
        ),
        expected: None,
        found: None,
        source: Some(t.source.clone()),
        remedy: None,
    }
}

/// `stale` when the newest trusted head (its publication time) is older than `max_age`.
pub fn stale_finding(newest: Option<(SystemTime, &Head)>, max_age: Duration, now: SystemTime) -> Option<Finding> {
    let message = match newest {
        None => format!(
            "no trusted head at all to be younger than {}",
            humantime::format_duration(max_age)
        ),
        Some((published, head)) => {
            let age = now.duration_since(published).unwrap_or_default();
            if age <= max_age {
                return None;
            }
            format!(
                "the newest head ({head}) was published {} ago, more than the allowed {}: the exporter stopped or the log froze",
                humantime::format_duration(Duration::from_secs(age.as_secs())),
                humantime::format_duration(max_age)
            )
        }
    };
    Some(Finding {
        kind: Kind::Stale,
        seq: None,
        message,
        expected: None,
        found: None,
        source: None,
        remedy: None,
    })
}

/// `no-trusted-head` when a check covered no trusted head of `origin` (a
/// mistyped origin, an empty store, every head at or below `--after`): such
/// a run verified nothing against a kept head and must not pass as if it had.
/// `what` says which heads were looked for (empty, or e.g. "above seq 500").
pub fn no_trusted_head(origin: &str, covered: usize, what: &str) -> Option<Finding> {
    (covered == 0).then(|| Finding {
        kind: Kind::NoTrustedHead,
        seq: None,
        message: no_head_text(origin, what),
        expected: None,
        found: None,
        source: None,
        remedy: None,
    })
}

/// `no trusted head for origin X[ what]`.
pub fn no_head_text(origin: &str, what: &str) -> String {
    let sep = if what.is_empty() { "" } else { " " };
    format!("no trusted head for origin {origin}{sep}{what}")
}

/// Where the walk stopped at a break or a damaged row, if it did.
pub fn break_position(report: &WalkReport) -> Option<u64> {
    let at_break = report.chain_break.as_ref().map(|b| b.seq);
    let at_damage = report.damage.as_ref().map(|d| d.position());
    at_break.into_iter().chain(at_damage).min()
}

/// The walk's own findings: where the chain breaks or a row is damaged,
/// with how many kept heads lie at or past it (`under`).
pub fn break_findings(report: &WalkReport, under: usize) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(b) = &report.chain_break {
        out.push(Finding {
            kind: Kind::Altered,
            seq: Some(b.seq),
            message: format!(
                "the chain breaks at seq {}: {}{}",
                b.seq,
                b.reason(),
                if under > 0 {
                    format!(" ({under} kept head(s) at or past it)")
                } else {
                    String::new()
                }
            ),
            expected: Some(b.expected_str().to_owned()),
            found: Some(b.found.clone()),
            source: None,
            remedy: None,
        });
    }
    out.extend(damage_findings(report, under));
    out
}

/// The exact invalid ranges past a break, one finding each (the first
/// break's hashes on the range that holds it).
pub fn range_findings(ranges: &[InvalidRange], first: Option<&chainship_chain::ChainBreak>) -> Vec<Finding> {
    ranges
        .iter()
        .map(|r| {
            let seqs = if r.from == r.to {
                format!("seq {}", r.from)
            } else {
                format!("seqs {}..{}", r.from, r.to)
            };
            let again = r.anchored_by.map_or(String::new(), |a| {
                format!(
                    "; trusted again from seq {} on (the kept head or checkpoint leaf at seq {a} vouches for it)",
                    r.to + 1
                )
            });
            let (kind, what) = match r.kind {
                RangeKind::Altered => (
                    Kind::Altered,
                    "altered: the stored hash is not the one the fields and the previous stored hash give (the row was changed, or the row before it was changed or removed)".to_owned(),
                ),
                RangeKind::Missing => (Kind::Gap, "missing: no row holds these seqs".to_owned()),
                RangeKind::Unvouched if r.open => (
                    Kind::Unvouched,
                    "not vouched for: past the break no kept head or checkpoint matches them (intact, or rewritten with their hashes recomputed)".to_owned(),
                ),
                RangeKind::Rewritten => (
                    Kind::Fork,
                    format!(
                        "rewritten: they link up to a stored hash a kept head or checkpoint contradicts (a consistent rewrite, or another history){}",
                        if r.open { ", to the end" } else { "" }
                    ),
                ),
                RangeKind::Unvouched => (
                    Kind::Unvouched,
                    format!(
                        "not vouched for: they link to each other but to no kept head or checkpoint before the break at seq {} (intact, or rewritten with their hashes recomputed up to it)",
                        r.to + 1
                    ),
                ),
                RangeKind::Reordered => (Kind::Reordered, "reordered: delivered after later seqs".to_owned()),
            };
            let first = first.filter(|b| r.from <= b.seq && b.seq <= r.to && r.kind == RangeKind::Altered);
            Finding {
                kind,
                seq: Some(r.from),
                message: format!("{seqs} {what}{again}"),
                expected: first.map(|b| b.expected_str().to_owned()),
                found: first.map(|b| b.found.clone()),
                source: None, remedy: None, }
        })
        .collect()
}

/// The walk's findings other than a break: a damaged row, a row no walk reaches.
pub fn damage_findings(report: &WalkReport, under: usize) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(d) = &report.damage {
        out.push(Finding {
            kind: Kind::Altered,
            seq: d.seq,
            message: format!(
                "the chain breaks {}: {}; last good event: {}{}",
                d.place(),
                d.reason(),
                d.last_good
                    .map_or("none".to_owned(), |h| format!("seq {} {}", h.seq, h.hash_str())),
                if under > 0 {
                    format!(" ({under} kept head(s) at or past it)")
                } else {
                    String::new()
                }
            ),
            expected: None,
            found: Some(d.found.clone()),
            source: None,
            remedy: None,
        });
        // The walk stops at a damaged row: what lies past it was not checked.
        let from = d.position().saturating_add(1);
        if let Some((head, _)) = report.db_head.as_ref().filter(|(head, _)| *head >= from) {
            out.push(Finding::new(
                Kind::NotWhole,
                Some(from),
                format!(
                    "seqs {from}..{head} were not checked: the walk stops at the damaged row (their ranges, and the kept heads among them, are unknown)"
                ),
            ));
        }
    }
    if let Some(value) = &report.unreachable_seq {
        out.push(Finding {
            kind: Kind::Altered,
            seq: None,
            message: chainship_chain::check::unreachable_reason(value),
            expected: None,
            found: None,
            source: None,
            remedy: None,
        });
    }
    if let Some(head) = report.head_not_reached {
        let end = report.last_good.map_or(0, |h| h.seq);
        out.push(Finding {
            kind: Kind::Altered,
            seq: Some(head),
            message: format!(
                "the database's head is seq {head}, but reading in seq order ended at seq {end}: rows the table's order does not reach (a damaged table)"
            ),
            expected: None,
            found: None,
            source: None,
            remedy: None,
        });
    }
    out
}

/// What one kept head's check says, if it is a finding: `fork` (another
/// hash at its seq) or `cut` (the database ends before it). A head at or
/// past `break_at` is the break's finding, not its own.
pub fn head_finding(head: &Head, check: &HeadCheck, source: Option<String>, break_at: Option<u64>) -> Option<Finding> {
    {
        match check {
            HeadCheck::Differs { .. } | HeadCheck::BeforeRange { matched: false }
                if break_at.is_none_or(|b| b > head.seq) =>
            {
                let found = match check {
                    HeadCheck::Differs { found } => found.clone(),
                    _ => String::new(),
                };
                Some(Finding {
                    kind: Kind::Fork,
                    seq: Some(head.seq),
                    message: format!(
                        "the event at seq {} has another hash than the kept head: a restored older copy that grew again, or a rewrite",
                        head.seq
                    ),
                    expected: Some(head.hash_str().to_owned()),
                    found: Some(found),
                    source,
                    remedy: None,
                })
            }
            HeadCheck::Beyond { db_end } => Some(Finding {
                kind: Kind::Cut,
                seq: Some(head.seq),
                message: format!(
                    "the database ends at seq {} before the kept head {head}: events were cut from the end",
                    db_end.unwrap_or(0)
                ),
                expected: Some(head.hash_str().to_owned()),
                found: None,
                source,
                remedy: None,
            }),
            _ => None,
        }
    }
}
