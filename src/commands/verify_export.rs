//! `chainship verify-export`: check the SIEM's copy (a file, the S3 objects
//! or the Kafka partition) against the signed heads, without the database.

use chainship_anchor::AnchorUrl;
use chainship_anchor::audit::{self, Finding};
use chainship_anchor::export_check::ExportCheck;
use chainship_anchor::keys::load_trusted;
use chainship_chain::Head;
use chainship_chain::record::Record;
use chainship_sinks::SinkUrl;
use chainship_sinks::read_back::read_records;
use clap::Args;
use serde_json::json;

use crate::anchor_args::AnchorS3Args;
use crate::exit::{CliError, CmdResult, FAILED, OK};
use crate::origin::parse_origin;
use crate::report;
use crate::sink_args::SinkS3Args;

/// Check an exported copy against the kept heads, without the database.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship verify-export --from file:/siem/events.jsonl --anchor file:/mnt/anchors --trusted-key keys.txt
  chainship verify-export --from s3://siem-bucket/exports --origin prod-eu1/agentrt \\
      --anchor s3://audit-anchors/heads --trusted-key keys.txt --s3-endpoint http://minio:9000 --s3-path-style
  chainship verify-export --from kafka://kafka:9092/audit --origin prod-eu1/agentrt --anchor file:/mnt/anchors \\
      --trusted-key keys.txt --json

Kinds: altered, gap, duplicate, reordered, foreign, cut, fork, and the anchor store's
(bad-signature, untrusted-key, heads-disagree). Identical duplicates are a warning.
Exit codes: 0 whole and matching, 1 any error, 2 usage or an unreadable source.")]
pub struct VerifyExportArgs {
    /// The copy: file:PATH, s3://BUCKET/PREFIX or kafka://HOST:PORT/TOPIC.
    #[arg(long = "from", env = "CHAINSHIP_EXPORT", value_name = "URL")]
    pub source: SinkUrl,
    /// The anchor store: file:DIR or s3://BUCKET/PREFIX.
    #[arg(long, env = "CHAINSHIP_ANCHOR", value_name = "URL", value_parser = str::parse::<AnchorUrl>)]
    pub anchor: AnchorUrl,
    /// A trusted verifier key (NAME+KEYID+BASE64), or a file of them; repeat for several.
    #[arg(
        long = "trusted-key",
        env = "CHAINSHIP_TRUSTED_KEYS",
        value_name = "KEY|FILE",
        value_delimiter = ','
    )]
    pub trusted_keys: Vec<String>,
    /// Whose copy (needed for s3:// and kafka://; a file's first record names it otherwise).
    #[arg(long, env = "CHAINSHIP_ORIGIN", value_parser = parse_origin)]
    pub origin: Option<String>,
    /// The copy starts after this trusted head (SEQ:HASH) instead of at seq 1.
    #[arg(long, value_name = "SEQ:HASH")]
    pub after: Option<Head>,
    #[command(flatten)]
    pub sink_s3: SinkS3Args,
    #[command(flatten)]
    pub anchor_s3: AnchorS3Args,
    #[arg(long)]
    pub json: bool,
}

/// The origin of the first record of a file.
fn origin_of_file(url: &SinkUrl) -> Option<String> {
    let SinkUrl::File(path) = url else { return None };
    let file = std::fs::File::open(path).ok()?;
    let mut line = Vec::new();
    std::io::BufRead::read_until(&mut std::io::BufReader::new(file), b'\n', &mut line).ok()?;
    Record::parse(line.strip_suffix(b"\n").unwrap_or(&line))
        .ok()
        .map(|r| r.origin.into_owned())
}

pub fn run(args: &VerifyExportArgs) -> CmdResult {
    let keys = load_trusted(&args.trusted_keys).map_err(CliError::usage)?;
    let origin = match (&args.origin, &args.source) {
        (Some(o), _) => o.clone(),
        (None, SinkUrl::File(_)) => origin_of_file(&args.source).ok_or_else(|| {
            CliError::usage(format!(
                "--from {}: no record to take the origin from; pass --origin",
                args.source
            ))
        })?,
        (None, _) => return Err(CliError::usage("--origin is needed to read an s3:// or kafka:// copy")),
    };
    let runtime = report::runtime()?;
    let store = args.anchor_s3.open(&args.anchor);
    let notes = runtime
        .block_on(store.list(&origin))
        .map_err(|e| CliError::usage(e.message))?;
    let set = audit::check_heads(&notes, &origin, &keys);
    let mut check = ExportCheck::new(&origin, &set.heads(), args.after);
    let options = args.sink_s3.options().map_err(CliError::usage)?;
    runtime
        .block_on(read_records(&args.source, &origin, &options, &mut |line, place| {
            check.feed_line(line, place)
        }))
        .map_err(|e| CliError::usage(e.message))?;
    let last_trusted = check.finish();
    let mut findings: Vec<Finding> = set.findings.clone();
    findings.extend(check.findings.iter().cloned());
    findings.sort_by_key(|f| (f.seq, f.kind));
    let warnings: Vec<String> = (check.identical_duplicates > 0)
        .then(|| {
            format!(
                "duplicate: {} identical record(s) delivered more than once (drop them by seq)",
                check.identical_duplicates
            )
        })
        .into_iter()
        .collect();

    if args.json {
        outln!(
            "{}",
            json!({
                "status": if findings.is_empty() { "ok" } else { "failed" },
                "origin": origin,
                "source": args.source.to_string(),
                "records": check.records,
                "end_seq": check.end(),
                "identical_duplicates": check.identical_duplicates,
                "heads": {"kept": set.kept, "trusted": set.trusted.len()},
                "findings": findings.iter().map(report::finding_json).collect::<Vec<_>>(),
                "warnings": warnings,
                "last_trusted_head": last_trusted.map(|h| json!({"seq": h.seq, "hash": h.hash_str()})),
            })
        );
    } else {
        outln!(
            "copy: {} record(s) read from {}, up to seq {}; heads: {} kept, {} trusted",
            check.records,
            args.source,
            check.end().map_or("-".into(), |s| s.to_string()),
            set.kept,
            set.trusted.len()
        );
        for w in &warnings {
            outln!("warning: {w}");
        }
        report::print_outcome(
            &findings,
            "the copy is whole and matches every trusted head",
            last_trusted,
        );
    }
    Ok(if findings.is_empty() { OK } else { FAILED })
}
