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

With --out set to a pkcs11: URI (RFC 7512), e.g.
'pkcs11:token=chainship;object=prod-heads?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/secrets/hsm-pin',
the key pair is made inside the token (the private key is never extractable and never exists
outside it); --name must be the label (object=). Follow then with --signing-key set to the
same URI. For a key already in a token, `check --sink stdout: --signing-key URI --signing-key-name
NAME` prints its verifier key.

Name the key after the origin it signs for: C2SP recommends that a log's key name match the
origin line of its checkpoints (witnesses and tlog clients are set up with both).

The key file is written with mode 0600 and never overwritten. Give the printed
verifier key (NAME+KEYID+BASE64) to auditors for `anchor verify --trusted-key`.
The signing key belongs to the follower, never to the audit database's writer.")]
pub struct KeygenArgs {
    /// The key's name (no spaces or '+'): the origin it signs for, e.g. prod-eu1/agentrt.
    #[arg(long)]
    pub name: String,
    /// Where to write the private key (must not exist), or a pkcs11: URI of a token to make it in.
    #[arg(long, value_name = "PATH|pkcs11:URI")]
    pub out: PathBuf,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &KeygenArgs) -> CmdResult {
    let out = args.out.to_string_lossy();
    if out.starts_with("pkcs11:") {
        if !chainship_anchor::note::valid_key_name(&args.name) {
            return Err(CliError::usage(format!(
                "--name: key name {:?}: a key name must be non-empty, without spaces or '+'",
                args.name
            )));
        }
        // The follower names its notes after the object's label: so must the printed key.
        let label = chainship_anchor::signer::pkcs11::Pkcs11Uri::parse(&out)
            .map_err(|e| CliError::usage(format!("--out {}: {e}", chainship_anchor::signer::shown(&args.out))))?
            .object;
        if label.as_deref() != Some(args.name.as_str()) {
            return Err(CliError::usage(format!(
                "--name {:?} must be the key's label in the token (object={}): the follower signs under that name",
                args.name,
                label.unwrap_or_default()
            )));
        }
        let public =
            chainship_anchor::signer::pkcs11::generate(&out).map_err(|e| CliError::usage(format!("--out {e}")))?;
        let verifier = chainship_anchor::VerifierKey::new(&args.name, public).to_text();
        let shown = chainship_anchor::signer::shown(&args.out);
        if args.output.json {
            outln!(
                "{}",
                serde_json::json!({"name": args.name, "token_key": shown, "verifier_key": verifier})
            );
        } else {
            outln!("{verifier}");
        }
        return Ok(OK);
    }
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
