//! `chainship check`: can the follower start? Connects to the sink and the
//! anchor store and looks at the files, reporting each as ok or the exact
//! failure — the healthcheck a deployment runs before starting the follower.

use std::path::PathBuf;

use chainship_anchor::{AnchorUrl, SignerKey};
use chainship_chain::EventDb;
use chainship_follower::FileCursor;
use chainship_sinks::open_sink;
use clap::Args;
use serde_json::json;

use crate::args::AnchorS3Args;
use crate::args::SinkArgs;
use crate::exit::{CliError, CmdResult, FAILED, OK};
use crate::origin::parse_origin;

/// Check that the database, cursor, sink, anchor store and keys are usable.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship check --config /etc/chainship/chainship.toml
  chainship check --db audit.db --origin prod/agentrt --sink kafka://kafka:9092/audit \\
      --cursor file:/var/lib/chainship/cursor --anchor s3://anchors/heads --signing-key head.key --json

Exit codes: 0 everything ok, 1 something failed (each item says what), 2 usage error.")]
pub struct CheckArgs {
    /// The audit database (opened read-only), as the follower opens it.
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Follow the database path even if it is a symbolic link.
    #[arg(long)]
    pub allow_symlink: bool,
    #[command(flatten)]
    pub schema: crate::args::SchemaArgs,
    #[arg(long, value_parser = parse_origin)]
    pub origin: String,
    #[command(flatten)]
    pub sink: SinkArgs,
    #[arg(long, value_name = "URL", value_parser = crate::commands::follow::parse_cursor_url)]
    pub cursor: Option<PathBuf>,
    #[arg(long, value_name = "URL", value_parser = str::parse::<AnchorUrl>)]
    pub anchor: Option<AnchorUrl>,
    #[arg(long = "signing-key", value_name = "PATH", value_delimiter = ',')]
    pub signing_keys: Vec<PathBuf>,
    #[command(flatten)]
    pub anchor_s3: AnchorS3Args,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &CheckArgs) -> CmdResult {
    let runtime = crate::report::runtime()?;
    let mut results: Vec<(String, Result<String, String>)> = Vec::new();

    if let Some(db) = &args.db {
        let open = args
            .schema
            .open_options(args.allow_symlink)
            .map_err(|e| CliError::usage(e.to_string()))?;
        let r = EventDb::open(db, &open).and_then(|d| d.head()).map(|h| match h {
            Some((seq, _)) => format!("readable, head seq {seq}"),
            None => "readable, no events yet".into(),
        });
        results.push((format!("database {}", db.display()), r.map_err(|e| e.to_string())));
    }
    if let Some(path) = &args.cursor {
        let c = FileCursor::new(path);
        let r = c.check_writable().and_then(|_| c.load()).map(|h| match h {
            Some(h) => format!("writable, at {h}"),
            None => "writable, no cursor yet (first run: --from-start)".into(),
        });
        results.push((format!("cursor {}", path.display()), r.map_err(|e| e.to_string())));
    }
    let sink = args.sink.config().map_err(CliError::usage)?;
    let r = runtime
        .block_on(open_sink(&sink, &args.origin).check())
        .map_err(|e| e.message);
    results.push((format!("sink {sink}"), r));
    if let Some(url) = &args.anchor {
        let store = args.anchor_s3.open(url);
        results.push((
            format!("anchor store {url}"),
            runtime.block_on(store.check()).map_err(|e| e.message),
        ));
    }
    for key in &args.signing_keys {
        let r = SignerKey::load(key).map(|k| format!("verifier key {}", k.verifier().to_text()));
        results.push((format!("signing key {}", key.display()), r));
    }

    let ok = results.iter().all(|(_, r)| r.is_ok());
    if args.json {
        outln!(
            "{}",
            json!({
                "ok": ok,
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
    }
    Ok(if ok { OK } else { FAILED })
}
