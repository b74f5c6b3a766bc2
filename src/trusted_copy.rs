//! The exported copy as evidence: reads a copy (`file:`, `s3://`,
//! `kafka://`) once, checks every record against the chain and the trusted
//! heads (the `verify-export` checks), and hands each checked record to a
//! caller as it goes, so `verify-export`, `restore` and `diff` stream the
//! same read and judge the copy alike.

use chainship_anchor::audit::{self, Finding, Kind};
use chainship_anchor::export_check::ExportCheck;
use chainship_anchor::log_audit;
use chainship_chain::Head;
use chainship_chain::record::Record;
use chainship_sinks::{SinkConfig, read_records};
use clap::Args;

use crate::args::{AnchorStoreArgs, OriginArg, SinkConnectArgs, TrustArgs, WitnessTrustArgs};
use crate::exit::CliError;
use crate::origin::parse_origin;
use crate::report;

/// Where the copy is, and what it is checked against.
#[derive(Args, Debug)]
pub struct TrustedCopyArgs {
    /// The copy: file:PATH, s3://BUCKET/PREFIX or kafka://HOST:PORT/TOPIC.
    #[arg(long = "from", value_name = "URL")]
    pub source: SinkConfig,
    #[command(flatten)]
    pub anchor: AnchorStoreArgs,
    #[command(flatten)]
    pub trust: TrustArgs,
    #[command(flatten)]
    pub origin: OriginArg,
    #[command(flatten)]
    pub sink: SinkConnectArgs,
    #[command(flatten)]
    pub witness: WitnessTrustArgs,
}

/// How far the copy is expected to reach back, and whether no head is fine.
#[derive(Clone, Copy)]
pub struct CopyExpectations {
    /// The copy starts after this trusted head instead of at seq 1.
    pub after: Option<Head>,
    /// Pass with no trusted head to compare with (a warning instead).
    pub allow_no_heads: bool,
    /// Records after the last trusted head a pass allows (a warning); more is a finding.
    pub max_unvouched: u64,
}

/// What `--max-unvouched` allows by default: the records one default
/// `--anchor-interval` (10 s) leaves unanchored at 1,000 events a second.
pub const DEFAULT_MAX_UNVOUCHED: u64 = 10_000;

impl Default for CopyExpectations {
    fn default() -> Self {
        CopyExpectations {
            after: None,
            allow_no_heads: false,
            max_unvouched: DEFAULT_MAX_UNVOUCHED,
        }
    }
}

/// What reading and checking a copy found.
pub struct CopyOutcome {
    pub origin: Option<String>,
    pub records: u64,
    pub end_seq: Option<u64>,
    pub identical_duplicates: u64,
    pub kept: usize,
    pub trusted: usize,
    /// Trusted heads the copy was compared with (those above `after`).
    pub checked: usize,
    /// Trusted checkpoints, and how many the copy's tree matched.
    pub checkpoints: usize,
    pub matched_roots: usize,
    pub findings: Vec<Finding>,
    pub warnings: Vec<String>,
    /// The highest trusted head the copy matches with nothing wrong below it.
    pub last_trusted: Option<Head>,
    /// When that head was published.
    pub last_trusted_published: Option<std::time::SystemTime>,
    /// The copy's records after the last trusted head, as `(first, last)`
    /// seq: intact as a chain, but vouched for by no signed head.
    pub unvouched: Option<(u64, u64)>,
}

impl CopyOutcome {
    /// How many records the copy holds after its last trusted head.
    pub fn unvouched_count(&self) -> u64 {
        self.unvouched.map_or(0, |(a, b)| b - a + 1)
    }

    /// The unvouched tail in words, if there is one.
    pub fn unvouched_text(&self) -> Option<String> {
        self.unvouched.map(|(a, b)| unvouched_text(a, b))
    }
}

/// Records `first..=last` past the last trusted head, in words.
fn unvouched_text(first: u64, last: u64) -> String {
    format!(
        "{} record(s) after the last trusted head (seq {first}..{last}) are not vouched for by any head",
        last - first + 1
    )
}

impl CopyOutcome {
    /// A copy refused before reading it: one finding, nothing else checked.
    fn refused(origin: Option<String>, kind: Kind, message: String) -> Self {
        CopyOutcome {
            origin,
            records: 0,
            end_seq: None,
            identical_duplicates: 0,
            kept: 0,
            trusted: 0,
            checked: 0,
            checkpoints: 0,
            matched_roots: 0,
            last_trusted_published: None,
            findings: vec![Finding {
                kind,
                seq: None,
                message,
                expected: None,
                found: None,
                source: None,
            }],
            warnings: Vec::new(),
            last_trusted: None,
            unvouched: None,
        }
    }
}

/// The first record of a file copy: its origin, and where it is (for messages).
struct FirstRecord {
    origin: String,
    place: String,
}

/// Reads the first non-empty line of a file copy; `None` when there is no
/// readable record (reading the copy then says why).
fn first_record(url: &SinkConfig) -> Option<FirstRecord> {
    use std::io::BufRead;
    let SinkConfig::File(path) = url else { return None };
    let mut reader = std::io::BufReader::new(std::fs::File::open(path).ok()?);
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        if reader.read_until(b'\n', &mut line).ok()? == 0 {
            return None;
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if text.is_empty() {
            continue;
        }
        let r = Record::parse(text).ok()?;
        return Some(FirstRecord {
            origin: r.origin.into_owned(),
            place: format!("{} line {number} (seq {})", path.display(), r.seq),
        });
    }
    None
}

/// The copy's origin: `--origin`, or the first record's for a file. A file's
/// first record must name `--origin` when given, and its origin (used as a
/// path in the anchor store) must be a valid one.
fn origin_of(args: &TrustedCopyArgs) -> Result<Result<String, CopyOutcome>, CliError> {
    let first = first_record(&args.source);
    Ok(match (&args.origin.origin, first) {
        (Some(given), Some(first)) if first.origin != *given => Err(CopyOutcome::refused(
            Some(given.clone()),
            Kind::Foreign,
            format!(
                "{} names origin {:?}, not --origin {given}: this is not {given}'s copy",
                first.place, first.origin
            ),
        )),
        (Some(given), _) => Ok(given.clone()),
        (None, Some(first)) => match parse_origin(&first.origin) {
            Ok(origin) => Ok(origin),
            Err(why) => Err(CopyOutcome::refused(
                None,
                Kind::Foreign,
                format!("{} names an origin that cannot be used: {why}", first.place),
            )),
        },
        (None, None) if matches!(args.source, SinkConfig::File(_)) => {
            if let SinkConfig::File(path) = &args.source
                && let Err(e) = std::fs::File::open(path)
            {
                return Err(CliError::usage(format!("--from {}: {e}", args.source)));
            }
            return Err(CliError::usage(format!(
                "--from {}: no record to take the origin from; pass --origin",
                args.source
            )));
        }
        (None, None) => return Err(CliError::usage("--origin is needed to read an s3:// or kafka:// copy")),
    })
}

/// Reads the copy once, checking it, and calls `each` with every record of
/// the origin that parses (in the copy's order, duplicates and all: the
/// caller keeps what it needs; the outcome says whether the copy can be
/// trusted, and up to where).
pub fn read_checked(
    args: &TrustedCopyArgs,
    expect: CopyExpectations,
    each: &mut dyn FnMut(&Record<'_>),
) -> Result<CopyOutcome, CliError> {
    let keys = args.trust.load()?;
    let policy = args.witness.load()?;
    let origin = match origin_of(args)? {
        Ok(origin) => origin,
        Err(refused) => return Ok(refused),
    };
    let runtime = report::runtime()?;
    let store = args.anchor.open(args.anchor.url()?, None);
    let notes = runtime
        .block_on(store.list(&origin))
        .map_err(|e| CliError::from_kind(&e))?;
    let set = audit::check_heads(&notes, &origin, &keys);
    let checkpoints = runtime
        .block_on(log_audit::audit_checkpoints(store.as_ref(), &origin, &keys, false))
        .map_err(|e| CliError::from_kind(&e))?;
    let mut check = ExportCheck::new(&origin, &set.heads(), expect.after).with_roots(checkpoints.sizes());
    let source = args.sink.apply(&args.source);
    let read = runtime
        .block_on(read_records(&source, &origin, &mut |line, place| {
            match Record::parse(line) {
                Ok(record) => {
                    check.feed(&record, place);
                    // Another origin's records are named by the check, never used.
                    if record.origin == origin {
                        each(&record);
                    }
                }
                Err(_) => check.feed_line(line, place),
            }
        }))
        .map_err(|e| CliError::from_kind(&e))?;
    let last_trusted = check.finish();
    let mut findings: Vec<Finding> = set.findings.clone();
    // What a consumer reads where this origin's records do not belong.
    for stray in &read.strays {
        findings.push(Finding {
            kind: Kind::ForeignPartition,
            seq: None,
            message: format!(
                "{} record(s) of origin {origin:?} on {}: a SIEM reading the topic ingests them",
                stray.records, stray.place
            ),
            expected: None,
            found: None,
            source: Some(stray.place.clone()),
        });
    }
    findings.extend(check.findings.iter().cloned());
    findings.extend(checkpoints.findings.iter().cloned());
    let (root_findings, matched_roots) = log_audit::compare_roots(&checkpoints.trusted, &check.roots, "copy");
    findings.extend(root_findings);
    // Where tlog clients look first, judged as `anchor verify` judges it.
    let head_seqs = set.heads();
    if let Some(newest) = checkpoints.trusted.iter().map(|t| &t.checkpoint).max_by_key(|c| c.size)
        && head_seqs.iter().any(|h| h.seq == newest.size)
    {
        findings.extend(
            runtime
                .block_on(log_audit::audit_pointer(store.as_ref(), &origin, &keys, newest))
                .map_err(|e| CliError::from_kind(&e))?,
        );
    }
    let mut cosign_warnings = Vec::new();
    if let Some(policy) = &policy {
        let published = |seq: u64| set.published_at(seq);
        let cosigns = runtime
            .block_on(log_audit::audit_cosignatures(
                store.as_ref(),
                &origin,
                &checkpoints.trusted,
                policy,
                &published,
                args.witness.witness_grace,
            ))
            .map_err(|e| CliError::from_kind(&e))?;
        findings.extend(cosigns.findings);
        cosign_warnings = cosigns.waiting;
    }
    let mut warnings: Vec<String> = (check.identical_duplicates > 0)
        .then(|| {
            format!(
                "duplicate: {} identical record(s) delivered more than once (drop them by seq)",
                check.identical_duplicates
            )
        })
        .into_iter()
        .collect();
    warnings.extend(cosign_warnings);
    warnings.extend(read.narrowed.clone());
    // A copy compared with no trusted head proved nothing against one.
    let what = expect
        .after
        .map_or(String::new(), |a| format!("above --after seq {}", a.seq));
    match audit::no_trusted_head(&origin, check.heads_covered(), &what) {
        Some(_) if expect.allow_no_heads => warnings.push(format!(
            "{}: no head was checked, only the copy's own chain (--allow-no-heads)",
            audit::no_head_text(&origin, &what)
        )),
        Some(f) => findings.push(f),
        None => {}
    }
    // An empty copy vouches for nothing, whatever else was (not) compared.
    if check.records == 0 && !findings.iter().any(|f| f.kind == Kind::Cut) {
        findings.push(Finding {
            kind: Kind::Cut,
            seq: None,
            message: format!("the copy holds no record of origin {origin:?}: nothing was checked"),
            expected: None,
            found: None,
            source: None,
        });
    }
    // Records past the last trusted head: a chain no signed head covers yet.
    let end = check.end();
    let unvouched = match (last_trusted, end) {
        (Some(h), Some(end)) if end > h.seq => Some((h.seq + 1, end)),
        _ => None,
    };
    if let Some((first, last)) = unvouched {
        let text = unvouched_text(first, last);
        if last - first + 1 > expect.max_unvouched {
            findings.push(Finding {
                kind: Kind::Unvouched,
                seq: Some(first),
                message: format!("{text} (more than --max-unvouched {})", expect.max_unvouched),
                expected: None,
                found: None,
                source: None,
            });
        } else {
            warnings.push(text);
        }
    }
    findings.sort_by_key(|f| (f.seq, f.kind));
    Ok(CopyOutcome {
        unvouched,
        origin: Some(origin),
        records: check.records,
        end_seq: check.end(),
        identical_duplicates: check.identical_duplicates,
        kept: set.kept,
        trusted: set.trusted.len(),
        checked: check.heads_covered(),
        checkpoints: checkpoints.trusted.len(),
        matched_roots,
        findings,
        warnings,
        last_trusted_published: last_trusted.and_then(|h| set.published_at(h.seq)),
        last_trusted,
    })
}

/// The first seq of the copy that cannot be trusted: the lowest seq a
/// finding names (for a fork at a kept head, the seq after the last
/// trusted head: the copy forked somewhere after it). `None` when the copy
/// is whole, or its findings name no seq it holds (a cut, a bad signature).
pub fn invalid_from(o: &CopyOutcome) -> Option<u64> {
    o.findings
        .iter()
        .filter_map(|f| match f.kind {
            Kind::Fork => Some(o.last_trusted.map_or(1, |h| h.seq + 1)),
            Kind::Altered | Kind::Gap | Kind::Duplicate | Kind::Reordered | Kind::Foreign => f.seq,
            _ => None,
        })
        .min()
}

/// Reads the copy again for the runs and side effects of seqs `from..=to`.
pub fn touched_in_copy(
    args: &TrustedCopyArgs,
    origin: &str,
    from: u64,
    to: u64,
    mut touched: chainship_runs::Touched,
) -> Result<crate::affected::Affected, CliError> {
    let source = args.sink.apply(&args.source);
    let mut last = from.saturating_sub(1);
    report::runtime()?
        .block_on(read_records(&source, origin, &mut |line, _| {
            let Ok(r) = Record::parse(line) else { return };
            if r.origin != origin || r.seq <= last || r.seq > to {
                return;
            }
            last = r.seq;
            if let Some(e) = crate::affected::RecordEvent::of(&r) {
                touched.feed(&e.event(r.seq));
            }
        }))
        .map_err(|e| CliError::from_kind(&e))?;
    Ok(crate::affected::Affected {
        from,
        to,
        touched,
        note: None,
    })
}

/// The copy's summary line, for every command that read one.
pub fn summary(source: &SinkConfig, o: &CopyOutcome) -> String {
    format!(
        "copy: {} record(s) read from {}, up to seq {}; heads: {} kept, {} trusted, {} checked; checkpoints: {} trusted, {} matching the copy",
        o.records,
        source,
        o.end_seq.map_or("-".into(), |s| s.to_string()),
        o.kept,
        o.trusted,
        o.checked,
        o.checkpoints,
        o.matched_roots
    )
}

/// The copy's outcome as JSON fields (merged into each command's object).
pub fn json_fields(source: &SinkConfig, o: &CopyOutcome) -> serde_json::Value {
    serde_json::json!({
        "origin": o.origin,
        "source": source.to_string(),
        "records": o.records,
        "end_seq": o.end_seq,
        "identical_duplicates": o.identical_duplicates,
        "heads": {"kept": o.kept, "trusted": o.trusted, "checked": o.checked},
        "checkpoints": {"trusted": o.checkpoints, "matched_copy": o.matched_roots},
        "findings": o.findings.iter().map(report::finding_json).collect::<Vec<_>>(),
        "warnings": o.warnings,
        "last_trusted_head": o.last_trusted.map(|h| serde_json::json!({"seq": h.seq, "hash": h.hash_str()})),
        "unvouched": o.unvouched.map(|(first, last)| serde_json::json!({"from": first, "to": last, "records": last - first + 1})),
    })
}
