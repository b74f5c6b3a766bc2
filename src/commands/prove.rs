//! `chainship prove`: an offline proof that one event is in the signed
//! tree, in the C2SP `tlog-proof` format, read from the anchor store alone
//! (its checkpoints and tiles: neither the database nor a copy is needed).

use std::path::PathBuf;

use chainship_anchor::VerifierKey;
use chainship_verify::prove;
use clap::Args;

use crate::args::{AnchorStoreArgs, OriginArg, OutputArgs, TrustArgs};
use crate::exit::{CliError, CmdResult, OK};

/// Write a proof that one event is in a signed checkpoint (C2SP tlog-proof).
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship prove --anchor file:/mnt/anchors --origin prod-eu1/agentrt --seq 1200 > seq-1200.tlog-proof
  chainship prove --anchor s3://audit-anchors/heads --origin prod-eu1/agentrt --seq 1200 \\
      --checkpoint 3000 --trusted-key /etc/chainship/head.pub --out seq-1200-at-3000.tlog-proof

The proof holds the event's index (seq - 1), about log2(size) hashes and the signed
checkpoint, and no other event: hand it with the event's record to a third party,
who checks both with `chainship check-proof` (or any C2SP tlog client).
Without --checkpoint the largest kept checkpoint is used (with --trusted-key, the
largest one a trusted key signed).
Exit codes: 0 written, 1 the store's tiles do not prove the checkpoint, 2 usage or setup error
(no such checkpoint, seq beyond it, store unreadable).")]
#[command(mut_arg("anchor", |a| a.required(true)))]
#[command(mut_arg("origin", |a| a.required(true)))]
pub struct ProveArgs {
    #[command(flatten)]
    pub store: AnchorStoreArgs,
    #[command(flatten)]
    pub origin: OriginArg,
    /// The event to prove.
    #[arg(long, value_name = "SEQ", value_parser = clap::value_parser!(u64).range(1..=i64::MAX as u64))]
    pub seq: u64,
    /// Prove against the checkpoint of this tree size (default: the largest kept).
    #[arg(long, value_name = "SIZE")]
    pub checkpoint: Option<u64>,
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Write the proof here instead of stdout (refused if it exists).
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &ProveArgs) -> CmdResult {
    let keys: Vec<VerifierKey> = if args.trust.trusted_keys.is_empty() {
        Vec::new()
    } else {
        args.trust.load()?
    };
    let store = args.store.open(args.store.url()?, None);
    let origin = args.origin.get()?;
    let proof = crate::report::runtime()?
        .block_on(prove::build(store.as_ref(), origin, args.seq, args.checkpoint, &keys))
        .map_err(|e| CliError::from_kind(&e))?;
    let text = proof.to_text();
    match &args.out {
        Some(path) => write_new(path, text.as_bytes()).map_err(|e| {
            CliError::usage(format!(
                "--out {}: {}",
                path.display(),
                chainship_chain::access::explain(path, &e)
            ))
        })?,
        // The text ends in the note's newline, which outln adds back.
        None if !args.output.json => outln!("{}", text.strip_suffix('\n').unwrap_or(&text)),
        None => {}
    }
    if args.output.json {
        outln!(
            "{}",
            serde_json::json!({
                "seq": args.seq,
                "index": proof.index,
                "proof_hashes": proof.hashes.len(),
                "bytes": text.len(),
                "out": args.out,
                "proof": args.out.is_none().then_some(&text),
            })
        );
    }
    Ok(OK)
}

/// Writes a new file, whole (synced), refusing to replace one.
fn write_new(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}
