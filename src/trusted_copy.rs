//! The exported copy as evidence: reads a copy (`file:`, `s3://`,
//! `kafka://`) once, checks every record against the chain and the trusted
//! heads (the `verify-export` checks), and hands each checked record to a
//! caller as it goes, so `verify-export`, `restore` and `diff` stream the
//! same read and judge the copy alike.

use chainship_anchor::audit::Kind;
use chainship_anchor::copy_audit::{self, CopyCheck};
use chainship_anchor::stream_audit::{self, Against, StreamInput};
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

pub use chainship_anchor::copy_audit::{CopyExpectations, CopyOutcome};

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
///
/// The store is judged by the same pass as `anchor verify`, on a thread of
/// its own, handing each head and checkpoint it trusts to the copy's check
/// as the copy reaches its seq ([`chainship_anchor::copy_audit`]).
pub fn read_checked(
    args: &TrustedCopyArgs,
    expect: CopyExpectations,
    each: &mut dyn FnMut(&Record<'_>),
) -> Result<CopyOutcome, CliError> {
    let keys = args.trust.load()?;
    let policy = args.trust.witness_policy(&args.witness)?;
    let origin = match origin_of(args)? {
        Ok(origin) => origin,
        Err(refused) => return Ok(refused),
    };
    let url = args.anchor.url()?;
    let runtime = report::runtime()?;
    let store = args.anchor.open(url, None);
    let (sender, vouchers) = copy_audit::channel();
    let mut copy = CopyCheck::new(&origin, &expect, vouchers);
    let source = args.sink.apply(&args.source);
    let (read, pass) = std::thread::scope(|scope| {
        let pass = scope.spawn(|| {
            let mut sender = sender;
            let store = args.anchor.open(url, None);
            let input = StreamInput {
                store: store.as_ref(),
                origin: &origin,
                keys: &keys,
                witness: policy.as_ref().map(|p| (p, args.witness.witness_grace)),
                since: None,
                every_tile: true,
            };
            report::runtime()?.block_on(async {
                let listing = stream_audit::list(&input).await.map_err(|e| CliError::from_kind(&e))?;
                stream_audit::audit(&input, listing, Against::Copy(&mut sender))
                    .await
                    .map_err(|e| CliError::from_kind(&e))
            })
        });
        let read = runtime.block_on(read_records(&source, &origin, &mut |line, place| {
            copy.feed_line(line, place, each)
        }));
        match &read {
            Ok(_) => copy.end_of_copy(),
            // The pass must not wait on a reader that stopped.
            Err(_) => copy.abandon(),
        }
        let pass = pass
            .join()
            .unwrap_or_else(|_| Err(CliError::usage("the store audit stopped unexpectedly")));
        (read, pass)
    });
    let read = read.map_err(|e| CliError::from_kind(&e))?;
    let audit = pass?;
    let strays: Vec<(u64, String)> = read.strays.iter().map(|s| (s.records, s.place.clone())).collect();
    let mut lookup = |seq: u64| {
        runtime
            .block_on(stream_audit::trusted_head_at(store.as_ref(), &origin, &keys, seq))
            .ok()
            .flatten()
    };
    Ok(copy.finish(audit, &expect, &strays, read.narrowed.as_slice(), &mut lookup))
}

/// The first seq of the copy that cannot be trusted (see [`CopyOutcome::invalid_from`]).
pub fn invalid_from(o: &CopyOutcome) -> Option<u64> {
    o.invalid_from()
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
        ranges: Vec::new(),
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
