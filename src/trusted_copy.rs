//! The exported copy as evidence: reads a copy (`file:`, `s3://`,
//! `kafka://`) once, checks every record against the chain and the trusted
//! heads (the `verify-export` checks), and hands each checked record to a
//! caller as it goes, so `verify-export`, `restore` and `diff` stream the
//! same read and judge the copy alike.

use chainship_anchor::audit::Kind;
use chainship_chain::record::Record;
use chainship_sinks::SinkConfig;
use clap::Args;

use crate::args::{AnchorStoreArgs, OriginArg, SinkConnectArgs, TrustArgs, WitnessTrustArgs};
use crate::exit::CliError;
use crate::report;
use chainship_chain::origin::parse_origin;

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

pub use chainship_evidence::copy::{self, CopyExpectations, CopyInput, CopyOutcome};

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
/// the origin that parses ([`chainship_evidence::copy::read_checked`]).
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
    let source = args.sink.apply(&args.source);
    let input = CopyInput {
        source: &source,
        origin: &origin,
        keys: &keys,
        witness: policy.as_ref().map(|p| (p, args.witness.witness_grace)),
        open_store: &|| args.anchor.open(url, None),
    };
    copy::read_checked(&input, expect, each).map_err(|e| CliError::from_kind(&e))
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
