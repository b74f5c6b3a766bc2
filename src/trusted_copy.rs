//! The exported copy as evidence: reads a copy (`file:`, `s3://`,
//! `kafka://`) once, checks every record against the chain and the trusted
//! heads (the `verify-export` checks), and hands each checked record to a
//! caller as it goes, so `verify-export`, `restore` and `diff` stream the
//! same read and judge the copy alike.

use chainship_chain::record::Record;
use chainship_sinks::SinkConfig;
use clap::Args;

use crate::args::{AnchorStoreArgs, OriginArg, SinkConnectArgs, TrustArgs, WitnessTrustArgs};
use crate::exit::CliError;
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

pub use chainship_evidence::copy::{self, CopyExpectations, CopyInput, CopyOrigin, CopyOutcome};

/// The copy's origin: `--origin`, or the first record's for a file
/// ([`copy::origin_of`]); `Err(outcome)` when the copy is refused as it is.
fn origin_of(args: &TrustedCopyArgs) -> Result<Result<String, CopyOutcome>, CliError> {
    match copy::origin_of(&args.source, args.origin.origin.as_deref()) {
        CopyOrigin::Known(origin) => Ok(Ok(origin)),
        CopyOrigin::Refused(outcome) => Ok(Err(*outcome)),
        CopyOrigin::Needed(Some(e)) => Err(CliError::usage(format!("--from {}: {e}", args.source))),
        CopyOrigin::Needed(None) if matches!(args.source, SinkConfig::File(_)) => Err(CliError::usage(format!(
            "--from {}: no record to take the origin from; pass --origin",
            args.source
        ))),
        CopyOrigin::Needed(None) => Err(CliError::usage("--origin is needed to read an s3:// or kafka:// copy")),
    }
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
        "invalid_ranges": o.ranges.as_ref().map(|rs| rs.iter().map(chainship_runs::affected::range_json).collect::<Vec<_>>()),
    })
}
