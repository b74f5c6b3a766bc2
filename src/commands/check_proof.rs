//! `chainship check-proof`: checks a `tlog-proof` for one record, as a
//! third party holds them: recomputes the event's hash from the record's
//! fields and `prev_hash`, then its inclusion in the signed checkpoint.

use std::path::PathBuf;

use chainship_chain::record::{Record, RecordError};
use chainship_tlog::proof::TlogProof;
use chainship_verify::proof;
use clap::Args;
use serde_json::json;

use crate::args::{OutputArgs, TrustArgs, WitnessTrustArgs};
use crate::exit::{self, CliError, CmdResult};
use chainship_verify::Kind;

/// Check that a record is in a signed checkpoint, from a proof (C2SP tlog-proof).
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship prove --anchor file:/mnt/anchors --origin prod-eu1/agentrt --seq 1200 > seq-1200.tlog-proof
  grep '\"seq\":1200,' /siem/events.jsonl > record.json     # the SIEM's record of that event
  chainship check-proof --proof seq-1200.tlog-proof --record record.json --trusted-key /etc/chainship/head.pub
  chainship check-proof --proof seq-1200.tlog-proof --record \"$(cat record.json)\" \\
      --trusted-key /etc/chainship/head.pub --json

--record is the event's record exactly as the sink delivered it (one JSON object: a file,
or the JSON itself), in any --record-format (chainship, OCSF or ECS). Its hash is recomputed
from its fields and prev_hash; the proof must show that hash at index seq - 1 of a
checkpoint a trusted key signed for the record's origin.
Exit codes: 0 proven, 1 not proven (a changed field, another event, a forged or untrusted
checkpoint), 2 usage or an unreadable file.")]
pub struct CheckProofArgs {
    /// The proof (a tlog-proof file, e.g. from `chainship prove`).
    #[arg(long, value_name = "PATH")]
    pub proof: PathBuf,
    /// The record: a file holding its JSON, or the JSON itself.
    #[arg(long, value_name = "FILE|JSON")]
    pub record: String,
    #[command(flatten)]
    pub trust: TrustArgs,
    #[command(flatten)]
    pub witness: WitnessTrustArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &CheckProofArgs) -> CmdResult {
    let keys = args.trust.load()?;
    let policy = args.trust.witness_policy(&args.witness)?;
    let proof_text =
        std::fs::read(&args.proof).map_err(|e| CliError::usage(format!("--proof {}: {e}", args.proof.display())))?;
    let proof_text = String::from_utf8(proof_text)
        .map_err(|_| CliError::usage(format!("--proof {}: not text", args.proof.display())))?;
    let proof = TlogProof::parse(&proof_text)
        .map_err(|e| CliError::usage(format!("--proof {}: not a tlog-proof: {e}", args.proof.display())))?;
    let record_bytes = if args.record.trim_start().starts_with('{') {
        args.record.as_bytes().to_vec()
    } else {
        std::fs::read(&args.record).map_err(|e| CliError::usage(format!("--record {}: {e}", args.record)))?
    };
    // A SIEM-format record whose mapped fields were changed is no usage
    // error: it is a record, and not the one that was delivered.
    let (record, altered) = match Record::parse(record_bytes.trim_ascii()) {
        Ok(record) => (record, None),
        Err(e) if e.carried().is_some() => {
            let why = proof::NotProven::new(Some(Kind::Altered), &e);
            (e.into_carried().expect("checked"), Some(why))
        }
        // A record in a SIEM format that cannot be checked (a key twice, no
        // carried record) is a record, and not proven.
        Err(e @ RecordError::Malformed { .. }) => {
            let reason = format!("--record {}: {e}", shorten(&args.record));
            let verdict = proof::verdict(Err(proof::NotProven::new(None, &reason)), None);
            if args.output.json {
                outln!("{}", json!({"status": verdict.status(), "reason": reason}));
            } else {
                outln!("not proven: {reason}");
            }
            return Ok(exit::of(&verdict));
        }
        Err(e) => {
            return Err(CliError::usage(format!(
                "--record {}: not a chainship record: {e}",
                shorten(&args.record)
            )));
        }
    };

    if record.seq == 0 {
        return Err(CliError::usage(format!(
            "--record {}: seq 0 is not an event (seqs start at 1)",
            shorten(&args.record)
        )));
    }
    let checked = match altered {
        Some(why) => Err(why),
        None => proof::check(&proof, &record, &keys, policy.as_ref()),
    };
    let seq = record.seq;
    let reason = checked.as_ref().err().map(ToString::to_string);
    let verdict = proof::verdict(checked, Some(seq));
    if args.output.json {
        outln!(
            "{}",
            json!({
                "status": verdict.status(),
                "origin": record.origin,
                "seq": seq,
                "hash": record.hash,
                "index": proof.index,
                "proven": verdict.covered.as_ref().map(|p| json!({"checkpoint_size": p.size, "signers": p.signers})),
                "kind": verdict.findings.first().map(|f| f.kind.as_str()),
                "reason": reason,
                "findings": verdict.findings.iter().map(crate::report::finding_json).collect::<Vec<_>>(),
            })
        );
    } else {
        match (&verdict.covered, &reason) {
            (Some(p), _) => outln!(
                "ok: seq {seq} of {:?} (hash {}) is entry {} of checkpoint {}, signed by {}",
                record.origin,
                record.hash,
                proof.index,
                p.size,
                p.signers.join(",")
            ),
            (None, why) => outln!("not proven: seq {seq}: {}", why.as_deref().unwrap_or_default()),
        }
    }
    Ok(exit::of(&verdict))
}

fn shorten(text: &str) -> String {
    if text.len() <= 60 {
        text.to_owned()
    } else {
        format!("{}...", &text[..text.floor_char_boundary(60)])
    }
}
