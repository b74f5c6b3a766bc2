//! `chainship check`: can the follower start? Connects to the sink and the
//! anchor store and looks at the files, reporting each as ok or the exact
//! failure — the healthcheck a deployment runs before starting the follower.

use chainship_chain::EventDb;
use chainship_follower::resume::database_start;
use chainship_follower::witnessing;
use chainship_follower::{FileCursor, StartFrom};
use chainship_sinks::open_sink;
use clap::Args;
use serde_json::json;

use crate::args::{OutputArgs, PipelineArgs};
use crate::exit::{CliError, CmdResult, FAILED, OK};

/// Check that the database, cursor, sink, anchor store and keys are usable.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship check --config /etc/chainship/chainship.toml
  chainship check --db audit.db --origin prod/agentrt --sink kafka://kafka:9092/audit \\
      --cursor file:/var/lib/chainship/cursor --anchor s3://anchors/heads --signing-key head.key --json

With --witness, each witness is asked to cosign the newest kept checkpoint (as the follower
would), and passes only if its cosignature verifies with the key given.
Exit codes: 0 everything ok, 1 something failed (each item says what), 2 usage error.")]
#[command(mut_arg("origin", |a| a.required(true)))]
pub struct CheckArgs {
    /// Everything `follow` would use.
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// What `follow` and `check` say when no anchor store is set.
pub const NO_ANCHOR_WARNING: &str = "no --anchor: events are shipped, but no signed head is kept where the writer cannot reach, so nothing will prove the copy or the database unaltered (add --anchor and --signing-key)";

pub fn run(check: &CheckArgs) -> CmdResult {
    let args = &check.pipeline;
    args.refuse_overlaps()?;
    let runtime = crate::report::runtime()?;
    let mut results: Vec<(String, Result<String, String>)> = Vec::new();

    let mut database = None;
    if let Some(db) = &args.db.db {
        let open = args.db.open_options().map_err(|e| CliError::from_kind(&e))?;
        let r = EventDb::open(db, &open).and_then(|d| {
            let head = d.head()?;
            database = Some(d);
            Ok(match head {
                Some((seq, _)) => format!("readable, head seq {seq}"),
                None => "readable, no events yet".into(),
            })
        });
        results.push((
            format!("database {}", db.display()),
            r.map_err(|e| CliError::from_kind(&e).message),
        ));
    }
    if let Some(path) = &args.cursor.cursor {
        let c = FileCursor::new(path);
        let r = c.check_writable().and_then(|_| c.load()).map_err(|e| e.to_string());
        // `follow` refuses a cursor the database no longer holds (cut, rewritten,
        // restored): so must the check that says whether it can start.
        let r = r.and_then(|h| match (h, &database) {
            (Some(h), Some(db)) => database_start(db, Some(h), StartFrom::Cursor, &path.display().to_string())
                .map(|_| format!("writable, at {h}, which the database holds"))
                .map_err(|e| e.to_string()),
            (Some(h), None) => Ok(format!("writable, at {h}")),
            (None, _) => Ok("writable, no cursor yet (first run: --from-start)".into()),
        });
        results.push((format!("cursor {}", path.display()), r));
    }
    let sink = args.sink.config().map_err(CliError::usage)?;
    let r = runtime
        .block_on(open_sink(&sink, args.origin.get()?).check())
        .map_err(|e| CliError::from_kind(&e).message);
    results.push((format!("sink {sink}"), r));
    let mut warnings = Vec::new();
    if args.anchor.anchor.is_none() {
        warnings.push(NO_ANCHOR_WARNING.to_owned());
    }
    if let Some(url) = &args.anchor.anchor {
        let store = args.anchor.open(url, Some(args.retain));
        results.push((
            format!("anchor store {url}"),
            runtime
                .block_on(store.check())
                .map_err(|e| CliError::from_kind(&e).message),
        ));
    }
    for key in &args.signing.signing_keys {
        let r = chainship_anchor::signer::open(key, args.signing.signing_key_name.as_deref()).map(|s| {
            format!(
                "verifier key {}",
                chainship_anchor::signer::verifier(s.as_ref()).to_text()
            )
        });
        results.push((
            format!("signing key {}", chainship_anchor::signer::shown(key)),
            r.map_err(|e| e.to_string()),
        ));
    }
    let (witnesses, _) = args.witness.load()?;
    if !witnesses.is_empty() {
        // Each witness asked to cosign the newest kept checkpoint signed by --signing-key.
        let keys = chainship_anchor::signer::verifiers(&args.signing.load()?);
        let store = (args.anchor.anchor.as_ref()).map(|url| args.anchor.open(url, Some(args.retain)));
        let probe = witnessing::probe(store.as_deref(), args.origin.get()?, &keys, &witnesses);
        let probed = runtime.block_on(probe).map_err(|e| CliError::from_kind(&e))?;
        results.extend(probed.into_iter().map(|(what, r)| (what, r.map_err(|e| e.message))));
    }

    let ok = results.iter().all(|(_, r)| r.is_ok());
    if check.output.json {
        outln!(
            "{}",
            json!({
                "ok": ok,
                "warnings": warnings,
                "checks": results.iter().map(|(what, r)| match r {
                    Ok(d) => json!({"check": what, "ok": true, "detail": d}),
                    Err(e) => json!({"check": what, "ok": false, "error": e}),
                }).collect::<Vec<_>>(),
            })
        );
    } else {
        for (what, r) in &results {
            match r {
                Ok(detail) => outln!("ok    {what}: {detail}"),
                Err(e) => outln!("FAIL  {what}: {e}"),
            }
        }
        for w in &warnings {
            outln!("WARN  {w}");
        }
    }
    // Readiness, not a verdict on data: each check's own ok.
    Ok(if ok { OK } else { FAILED })
}
