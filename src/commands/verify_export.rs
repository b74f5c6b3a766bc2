//! `chainship verify-export`: check the SIEM's copy (a file, the S3 objects
//! or the Kafka partition) against the signed heads, without the database.

use chainship_anchor::audit::{self, Finding, Kind};
use chainship_anchor::export_check::ExportCheck;
use chainship_chain::Head;
use chainship_chain::record::Record;
use chainship_sinks::{SinkConfig, read_records};
use clap::Args;
use serde_json::json;

use crate::args::{AnchorStoreArgs, OriginArg, OutputArgs, SinkConnectArgs, TrustArgs};
use crate::exit::{CliError, CmdResult, FAILED, OK};
use crate::origin::parse_origin;
use crate::report;

/// Check an exported copy against the kept heads, without the database.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship verify-export --from file:/siem/events.jsonl --anchor file:/mnt/anchors --trusted-key keys.txt
  chainship verify-export --from s3://siem-bucket/exports --origin prod-eu1/agentrt \\
      --anchor s3://audit-anchors/heads --trusted-key keys.txt --s3-endpoint http://minio:9000 --s3-path-style
  chainship verify-export --from kafka://kafka:9092/audit --origin prod-eu1/agentrt --anchor file:/mnt/anchors \\
      --trusted-key keys.txt --json

Kinds: altered, gap, duplicate, reordered, foreign, cut, fork, and the anchor store's
(bad-signature, untrusted-key, heads-disagree), and no-trusted-head when no trusted head
above --after (or at all) was there to compare with (--allow-no-heads on a first run).
Identical duplicates are a warning. A file's first record must name --origin.
Exit codes: 0 whole and matching, 1 any error, 2 usage or an unreadable source.")]
#[command(mut_arg("anchor", |a| a.required(true)))]
#[command(mut_arg("origin", |a| a.help(
    "Whose copy (needed for s3:// and kafka://; a file's first record names it otherwise)"
)))]
pub struct VerifyExportArgs {
    /// The copy: file:PATH, s3://BUCKET/PREFIX or kafka://HOST:PORT/TOPIC.
    #[arg(long = "from", value_name = "URL")]
    pub source: SinkConfig,
    #[command(flatten)]
    pub anchor: AnchorStoreArgs,
    #[command(flatten)]
    pub trust: TrustArgs,
    #[command(flatten)]
    pub origin: OriginArg,
    /// The copy starts after this trusted head (SEQ:HASH) instead of at seq 1;
    /// kept heads at or below it are not checked (one at its seq must match it).
    #[arg(long, value_name = "SEQ:HASH")]
    pub after: Option<Head>,
    /// Pass with no trusted head to compare with (a first run, before any
    /// head was published); the output then says that no head was checked.
    #[arg(long)]
    pub allow_no_heads: bool,
    #[command(flatten)]
    pub sink: SinkConnectArgs,
    #[command(flatten)]
    pub output: OutputArgs,
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

/// What one run found, ready to print.
struct Outcome {
    origin: Option<String>,
    records: u64,
    end_seq: Option<u64>,
    identical_duplicates: u64,
    kept: usize,
    trusted: usize,
    /// Trusted heads the copy was compared with (those above `--after`).
    checked: usize,
    findings: Vec<Finding>,
    warnings: Vec<String>,
    last_trusted: Option<Head>,
}

impl Outcome {
    /// A copy refused before reading it: one finding, nothing else checked.
    fn refused(origin: Option<String>, kind: Kind, message: String) -> Self {
        Outcome {
            origin,
            records: 0,
            end_seq: None,
            identical_duplicates: 0,
            kept: 0,
            trusted: 0,
            checked: 0,
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
        }
    }
}

/// The copy's origin: `--origin`, or the first record's for a file. A file's
/// first record must name `--origin` when given, and its origin (used as a
/// path in the anchor store) must be a valid one.
fn origin_of(args: &VerifyExportArgs) -> Result<Result<String, Outcome>, CliError> {
    let first = first_record(&args.source);
    Ok(match (&args.origin.origin, first) {
        (Some(given), Some(first)) if first.origin != *given => Err(Outcome::refused(
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
            Err(why) => Err(Outcome::refused(
                None,
                Kind::Foreign,
                format!("{} names an origin that cannot be used: {why}", first.place),
            )),
        },
        (None, None) if matches!(args.source, SinkConfig::File(_)) => {
            return Err(CliError::usage(format!(
                "--from {}: no record to take the origin from; pass --origin",
                args.source
            )));
        }
        (None, None) => return Err(CliError::usage("--origin is needed to read an s3:// or kafka:// copy")),
    })
}

pub fn run(args: &VerifyExportArgs) -> CmdResult {
    let keys = args.trust.load()?;
    let origin = match origin_of(args)? {
        Ok(origin) => origin,
        Err(refused) => return Ok(print(args, &refused)),
    };
    let runtime = report::runtime()?;
    let store = args.anchor.open(args.anchor.url()?, None);
    let notes = runtime
        .block_on(store.list(&origin))
        .map_err(|e| CliError::from_kind(&e))?;
    let set = audit::check_heads(&notes, &origin, &keys);
    let mut check = ExportCheck::new(&origin, &set.heads(), args.after);
    let source = args.sink.apply(&args.source);
    runtime
        .block_on(read_records(&source, &origin, &mut |line, place| {
            check.feed_line(line, place)
        }))
        .map_err(|e| CliError::from_kind(&e))?;
    let last_trusted = check.finish();
    let mut findings: Vec<Finding> = set.findings.clone();
    findings.extend(check.findings.iter().cloned());
    let mut warnings: Vec<String> = (check.identical_duplicates > 0)
        .then(|| {
            format!(
                "duplicate: {} identical record(s) delivered more than once (drop them by seq)",
                check.identical_duplicates
            )
        })
        .into_iter()
        .collect();
    // A copy compared with no trusted head proved nothing against one.
    let what = args
        .after
        .map_or(String::new(), |a| format!("above --after seq {}", a.seq));
    match audit::no_trusted_head(&origin, check.heads_covered(), &what) {
        Some(_) if args.allow_no_heads => warnings.push(format!(
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
    findings.sort_by_key(|f| (f.seq, f.kind));
    let outcome = Outcome {
        origin: Some(origin),
        records: check.records,
        end_seq: check.end(),
        identical_duplicates: check.identical_duplicates,
        kept: set.kept,
        trusted: set.trusted.len(),
        checked: check.heads_covered(),
        findings,
        warnings,
        last_trusted,
    };
    Ok(print(args, &outcome))
}

/// Prints the outcome and returns the exit code.
fn print(args: &VerifyExportArgs, o: &Outcome) -> u8 {
    if args.output.json {
        outln!(
            "{}",
            json!({
                "status": if o.findings.is_empty() { "ok" } else { "failed" },
                "origin": o.origin,
                "source": args.source.to_string(),
                "records": o.records,
                "end_seq": o.end_seq,
                "identical_duplicates": o.identical_duplicates,
                "heads": {"kept": o.kept, "trusted": o.trusted, "checked": o.checked},
                "findings": o.findings.iter().map(report::finding_json).collect::<Vec<_>>(),
                "warnings": o.warnings,
                "last_trusted_head": o.last_trusted.map(|h| json!({"seq": h.seq, "hash": h.hash_str()})),
            })
        );
    } else {
        outln!(
            "copy: {} record(s) read from {}, up to seq {}; heads: {} kept, {} trusted, {} checked",
            o.records,
            args.source,
            o.end_seq.map_or("-".into(), |s| s.to_string()),
            o.kept,
            o.trusted,
            o.checked
        );
        for w in &o.warnings {
            outln!("warning: {w}");
        }
        let ok = if o.checked == 0 {
            "the copy is whole; no head was checked"
        } else {
            "the copy is whole and matches every trusted head"
        };
        report::print_outcome(&o.findings, ok, o.last_trusted);
    }
    if o.findings.is_empty() { OK } else { FAILED }
}
