//! The exported copy as evidence: reads a copy (`file:`, `s3://`,
//! `kafka://`) once, checks every record against the chain and the trusted
//! heads (the `verify-export` checks), and hands each checked record to a
//! caller as it goes, so `verify-export`, `restore` and `diff` stream the
//! same read and judge the copy alike.

use chainship_runs::Touched;
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
use chainship_verify::Verdict;
use chainship_verify::copy::CopyCovered;

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

/// The copy checked, and read again for the runs its invalid seqs touch
/// when `touched` is given ([`chainship_evidence::copy::check_copy`]).
pub fn check(
    args: &TrustedCopyArgs,
    expect: CopyExpectations,
    touched: Option<Touched>,
) -> Result<CopyOutcome, CliError> {
    with_input(args, |o| o, |input| copy::check_copy(input, expect, touched))
}

/// Calls `f` with the copy's input: its keys, witness policy, origin and
/// store; a copy refused for its origin is that verdict (`refused`), not read.
pub fn with_input<T>(
    args: &TrustedCopyArgs,
    refused: impl FnOnce(CopyOutcome) -> T,
    f: impl FnOnce(&CopyInput<'_>) -> Result<T, chainship_chain::Error>,
) -> Result<T, CliError> {
    let keys = args.trust.load()?;
    let redaction_keys = args.trust.redaction_keys(&keys)?;
    let policy = args.trust.witness_policy(&args.witness)?;
    let origin = match origin_of(args)? {
        Ok(origin) => origin,
        Err(outcome) => return Ok(refused(outcome)),
    };
    let url = args.anchor.url()?;
    let source = args.sink.apply(&args.source);
    let input = CopyInput {
        source: (&source).into(),
        origin: &origin,
        keys: &keys,
        witness: policy.as_ref().map(|p| (p, args.witness.witness_grace)),
        open_store: &|| args.anchor.open(url, None),
        redaction_keys: &redaction_keys,
    };
    f(&input).map_err(|e| CliError::from_kind(&e))
}

/// The copy's summary line, for every command that read one.
pub fn summary(source: &SinkConfig, c: &CopyCovered) -> String {
    format!(
        "copy: {} record(s) read from {}, up to seq {}; heads: {} kept, {} trusted, {} checked; checkpoints: {} trusted, {} matching the copy",
        c.records,
        source,
        c.end_seq.map_or("-".into(), |s| s.to_string()),
        c.kept,
        c.trusted,
        c.checked,
        c.checkpoints,
        c.matched_roots
    )
}

/// A verdict on a copy as JSON: every verdict's fields, and what the copy covered.
pub fn verdict_json<C>(source: &SinkConfig, v: &Verdict<C>, c: &CopyCovered) -> serde_json::Value {
    report::with(
        report::verdict_json(v),
        serde_json::json!({
            "origin": c.origin,
            "source": source.to_string(),
            "records": c.records,
            "end_seq": c.end_seq,
            "identical_duplicates": c.identical_duplicates,
            "heads": {"kept": c.kept, "trusted": c.trusted, "checked": c.checked},
            "checkpoints": {"trusted": c.checkpoints, "matched_copy": c.matched_roots},
        }),
    )
}
