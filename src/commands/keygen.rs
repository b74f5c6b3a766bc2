//! `chainship keygen`: a new Ed25519 signing key for heads.

use std::path::PathBuf;

use chainship_anchor::SignerKey;
use clap::Args;

use crate::args::OutputArgs;
use crate::exit::{CliError, CmdResult, OK};

/// Create a signing key for heads; print its verifier key.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship keygen --name prod-eu1/agentrt --out /etc/chainship/head.key
  chainship keygen --name prod-eu1/agentrt --out head.key --json

Name the key after the origin it signs for: C2SP recommends that a log's key name match the
origin line of its checkpoints (witnesses and tlog clients are set up with both).

The key file is written with mode 0600 and never overwritten. Give the printed
verifier key (NAME+KEYID+BASE64) to auditors for `anchor verify --trusted-key`.
The signing key belongs to the follower, never to the audit database's writer.")]
pub struct KeygenArgs {
    /// The key's name (no spaces or '+'): the origin it signs for, e.g. prod-eu1/agentrt.
    #[arg(long)]
    pub name: String,
    /// Where to write the private key (must not exist).
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &KeygenArgs) -> CmdResult {
    let key = SignerKey::generate(&args.name).map_err(|e| CliError::usage(format!("--name: {e}")))?;
    key.write_new(&args.out)
        .map_err(|e| CliError::usage(format!("--out {e}")))?;
    let verifier = key.verifier().to_text();
    if args.output.json {
        outln!(
            "{}",
            serde_json::json!({"name": args.name, "key_file": args.out, "verifier_key": verifier})
        );
    } else {
        outln!("{verifier}");
    }
    Ok(OK)
}
