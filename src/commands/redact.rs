//! `chainship redact`: withhold one event's payload (a secret or personal
//! data logged by mistake) while the log stays evidence. The use case is
//! `chainship_evidence::redact`; this maps flags and prints.

use std::time::SystemTime;

use chainship_evidence::redact::{EventSource, RedactRequest, redact};
use chainship_sinks::SinkConfig;
use clap::Args;

use crate::args::{AnchorStoreArgs, DbArgs, OriginArg, OutputArgs, SigningArgs, SinkConnectArgs, TrustArgs};
use crate::exit::{CliError, CmdResult, OK};

/// Withhold one event's payload: a signed redaction statement, and a tombstone in the copy.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship redact --anchor file:/mnt/anchors --origin prod-eu1/agentrt --seq 1200 \\
      --reason 'INC-1312: a customer API token in the tool arguments' \\
      --signing-key /etc/chainship/redaction.key --trusted-key /etc/chainship/head.pub \\
      --from file:/siem/events.jsonl
  chainship verify-export --from file:/siem/events.jsonl --anchor file:/mnt/anchors \\
      --trusted-key /etc/chainship/head.pub --redaction-key /etc/chainship/redaction.pub
  chainship redact --anchor file:/mnt/anchors --origin prod-eu1/agentrt --seq 1201 \\
      --reason 'GDPR erasure 2026-118' --signing-key /etc/chainship/redaction.key \\
      --trusted-key /etc/chainship/head.pub --db /var/lib/agentrt/audit.db
                                  # the statement alone; the runtime then blanks the payload itself

The event is read from the copy (--from) or the database (--db, read-only), and must hash to
its stored hash. Its hash must be vouched for by a trusted checkpoint (its tiles prove it) or
a trusted head at that seq. The statement, signed by the redaction key (made by
`chainship keygen`, never a head key), names the origin, seq, hash, a digest of the other
fields, the time and the reason, and nothing of the payload; it is kept write-once at
ORIGIN/redactions/SEQ in the anchor store. With --from the record is replaced by a tombstone:
every field kept but the payload, and `redacted` naming the statement. A file is rewritten
whole and renamed into place (refused while a follower writes to it); an S3 object is
rewritten and its older versions deleted (refused where Object Lock keeps them); on Kafka the
tombstone is appended and the original stays until the topic's retention removes it.
Run again, it reuses the statement kept and finishes the copy.
Verifiers accept the tombstone with --redaction-key naming the redaction key's public key.
Exit codes: 0 done, 1 the hash is vouched for by nothing trusted or the copy is not sound,
2 usage or setup.")]
#[command(mut_arg("anchor", |a| a.required(true)))]
#[command(mut_arg("origin", |a| a.required(true)))]
pub struct RedactArgs {
    #[command(flatten)]
    pub store: AnchorStoreArgs,
    #[command(flatten)]
    pub origin: OriginArg,
    /// The event whose payload is withheld.
    #[arg(long, value_name = "SEQ", value_parser = clap::value_parser!(u64).range(1..=i64::MAX as u64))]
    pub seq: u64,
    /// Why (one line, kept in the signed statement: never the secret itself).
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    /// The copy to read the event from and put the tombstone in: file:PATH, s3://BUCKET/PREFIX
    /// or kafka://HOST:PORT/TOPIC.
    #[arg(long = "from", value_name = "URL", conflicts_with = "db")]
    pub source: Option<SinkConfig>,
    #[command(flatten)]
    pub sink: SinkConnectArgs,
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub signing: SigningArgs,
    #[command(flatten)]
    pub trust: TrustArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &RedactArgs) -> CmdResult {
    let keys = args.trust.load()?;
    if args.signing.signing_keys.is_empty() {
        return Err(CliError::usage("--signing-key: the redaction key is required"));
    }
    let signers = args.signing.load()?;
    if let Some(s) = signers.iter().find(|s| keys.iter().any(|k| k.key == s.public_key())) {
        return Err(CliError::usage(format!(
            "--signing-key {}: is a key trusted for heads; a redaction key must be its own (chainship keygen)",
            s.describe()
        )));
    }
    let open = args.db.open_options().map_err(|e| CliError::from_kind(&e))?;
    let copy = args.source.as_ref().map(|s| args.sink.apply(s));
    let source = match (&copy, &args.db.db) {
        (Some(cfg), _) => EventSource::Copy(cfg),
        (None, Some(path)) => EventSource::Database(path, &open),
        (None, None) => {
            return Err(CliError::usage(
                "name where the event is read from: --from COPY_URL (the copy, also given its tombstone) or --db PATH",
            ));
        }
    };
    let store = args.store.open(args.store.url()?, None);
    let origin = args.origin.get()?;
    let done = crate::report::runtime()?
        .block_on(redact(&RedactRequest {
            store: store.as_ref(),
            origin,
            seq: args.seq,
            reason: &args.reason,
            keys: &keys,
            signers: &signers,
            source,
            now: SystemTime::now(),
        }))
        .map_err(|e| CliError::from_kind(&e))?;
    let hash = String::from_utf8_lossy(&done.statement.hash).into_owned();
    if args.output.json {
        outln!(
            "{}",
            serde_json::json!({
                "status": "ok",
                "origin": origin,
                "seq": args.seq,
                "hash": hash,
                "statement": done.path,
                "reused": done.reused,
                "vouched_by": done.vouched_by,
                "copy": done.placed.as_ref().map(|p| p.to_string()),
            })
        );
    } else {
        outln!(
            "statement {}{}: seq {} (hash {hash}) vouched for by {}",
            done.path,
            if done.reused { " (kept already)" } else { "" },
            args.seq,
            done.vouched_by
        );
        match &done.placed {
            Some(p) => outln!("copy: {p}"),
            None if copy.is_some() => outln!("copy: holds the tombstone already"),
            None => outln!(
                "no copy given: blank the payload in the database (the runtime's job), and redact each copy with --from"
            ),
        }
    }
    Ok(OK)
}
