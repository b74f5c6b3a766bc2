//! `chainship anchor verify` and `chainship anchor list`: the auditor's view
//! of the kept heads.

use std::time::{Duration, SystemTime};

use chainship_anchor::audit::{self, HeadSet};
use chainship_anchor::{Kind, VerifierKey};
use chainship_chain::{EventDb, WalkPlan, walk_chain};
use clap::{Args, Subcommand};
use serde_json::json;

use crate::affected;
use crate::args::{AnchorStoreArgs, DbArgs, OriginArg, OutputArgs, RunRulesArgs, TrustArgs};
use crate::exit::{CliError, CmdResult, FAILED, OK};
use crate::progress::events_bar;
use crate::report;

#[derive(Subcommand, Debug)]
pub enum AnchorCommand {
    Verify(AnchorVerifyArgs),
    List(AnchorListArgs),
}

/// Check the database against every signed head kept in the anchor store.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship anchor verify --db /data/audit.db --anchor file:/mnt/anchors --origin prod-eu1/agentrt \\
      --trusted-key /etc/chainship/head.pub
  chainship anchor verify --db audit.db --anchor s3://audit-anchors/heads --origin prod-eu1/agentrt \\
      --trusted-key /etc/chainship/trusted-keys --max-age 2h --json

Kinds reported: altered, cut, fork, bad-signature, untrusted-key, heads-disagree, stale,
no-trusted-head (none kept for --origin: a typo? --allow-no-heads on a first run).
Exit codes: 0 all good, 1 any finding, 2 usage or an unreadable store or database.")]
#[command(mut_arg("db", |a| a.required(true)))]
#[command(mut_arg("anchor", |a| a.required(true)))]
#[command(mut_arg("origin", |a| a.required(true)))]
pub struct AnchorVerifyArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub common: AnchorCommon,
    /// Fail as `stale` when the newest head is older than this (e.g. 2h).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub max_age: Option<Duration>,
    /// Pass with no trusted head for the origin (a first run, before any head
    /// was published); the output then says that no head was checked.
    #[arg(long)]
    pub allow_no_heads: bool,
    #[command(flatten)]
    pub rules: RunRulesArgs,
}

/// Show the heads kept in the anchor store.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship anchor list --anchor file:/mnt/anchors --origin prod-eu1/agentrt
  chainship anchor list --anchor s3://audit-anchors/heads --origin prod-eu1/agentrt --trusted-key keys.txt --json")]
#[command(mut_arg("anchor", |a| a.required(true)))]
#[command(mut_arg("origin", |a| a.required(true)))]
pub struct AnchorListArgs {
    #[command(flatten)]
    pub common: AnchorCommon,
}

/// What both anchor commands take: the store, whose heads, whose keys.
#[derive(Args, Debug)]
pub struct AnchorCommon {
    #[command(flatten)]
    pub store: AnchorStoreArgs,
    #[command(flatten)]
    pub origin: OriginArg,
    #[command(flatten)]
    pub trust: TrustArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

fn load_heads(common: &AnchorCommon, keys: &[VerifierKey]) -> Result<HeadSet, CliError> {
    let store = common.store.open(common.store.url()?, None);
    let origin = common.origin.get()?;
    let notes = crate::report::runtime()?
        .block_on(store.list(origin))
        .map_err(|e| CliError::from_kind(&e))?;
    Ok(audit::check_heads(&notes, origin, keys))
}

pub fn run(cmd: &AnchorCommand) -> CmdResult {
    match cmd {
        AnchorCommand::Verify(args) => verify(args),
        AnchorCommand::List(args) => list(args),
    }
}

fn verify(args: &AnchorVerifyArgs) -> CmdResult {
    let open = args.db.open_options().map_err(|e| CliError::from_kind(&e))?;
    let keys = args.common.trust.load()?;
    let db = EventDb::open(args.db.path()?, &open)?;
    let set = load_heads(&args.common, &keys)?;
    let heads = set.heads();
    // Only for the progress bar: a head the walk cannot read is its to report.
    let total = db.head().ok().flatten().map_or(0, |(s, _)| s);
    let bar = events_bar(total, args.common.output.json);
    bar.set_message("walking the chain");
    let report = walk_chain(
        db,
        &WalkPlan {
            from: 1,
            to: None,
            heads,
        },
        &mut |n| bar.set_position(n),
    )?;
    bar.finish_and_clear();

    let mut findings = set.findings.clone();
    findings.extend(audit::walk_findings(&report, &set));
    if let Some(max_age) = args.max_age {
        findings.extend(audit::check_stale(&set, max_age, SystemTime::now()));
    }
    // Every trusted head is walked to, so none trusted means none checked.
    let checked = report.heads.len();
    let no_heads = audit::no_trusted_head(args.common.origin.get()?, checked, "");
    let mut warnings = Vec::new();
    match no_heads {
        Some(_) if args.allow_no_heads => warnings.push(format!(
            "{}: no head was checked, only the chain itself (--allow-no-heads)",
            audit::no_head_text(args.common.origin.get()?, "")
        )),
        Some(f) => findings.push(f),
        None => {}
    }
    findings.sort_by_key(|f| (f.kind, f.seq));
    let last_trusted = report.last_trusted_head();
    // What the invalid range touches: its runs, and side effects to reconcile.
    let touched = match (affected::invalid_from(&report), args.rules.touched()?) {
        (Some(from), Some(touched)) => {
            let db = EventDb::open(args.db.path()?, &open)?;
            let to = db.head().ok().flatten().map_or(from, |(s, _)| s);
            Some(affected::scan_db(&db, from, to, touched))
        }
        _ => None,
    };

    if args.common.output.json {
        outln!(
            "{}",
            json!({
                "status": if findings.is_empty() { "ok" } else { "failed" },
                "origin": args.common.origin.get()?,
                "heads": {"kept": set.kept, "trusted": set.trusted.len(), "checked": checked},
                "warnings": warnings,
                "database": {
                    "head": report.db_head.as_ref().map(|(s, h)| json!({"seq": s, "hash": h})),
                    "checked": report.checked,
                },
                "findings": findings.iter().map(report::finding_json).collect::<Vec<_>>(),
                "last_trusted_head": last_trusted.map(|h| json!({"seq": h.seq, "hash": h.hash_str()})),
                "affected": touched.as_ref().map(affected::json),
            })
        );
    } else {
        outln!(
            "heads: {} kept, {} trusted; database: {} event(s) checked{}",
            set.kept,
            set.trusted.len(),
            report.checked,
            report
                .db_head
                .as_ref()
                .map_or(String::new(), |(s, h)| format!(", head seq {s} {h}"))
        );
        for w in &warnings {
            outln!("warning: {w}");
        }
        let ok = if checked == 0 {
            "the chain is intact; no head was checked"
        } else {
            "the database matches every trusted head"
        };
        report::print_outcome(&findings, ok, last_trusted);
        for line in touched.iter().flat_map(affected::lines) {
            outln!("{line}");
        }
    }
    Ok(if findings.is_empty() { OK } else { FAILED })
}

fn list(args: &AnchorListArgs) -> CmdResult {
    let keys: Vec<VerifierKey> = if args.common.trust.trusted_keys.is_empty() {
        Vec::new()
    } else {
        args.common.trust.load()?
    };
    let set = load_heads(&args.common, &keys)?;
    let mut trusted: Vec<_> = set.trusted.iter().collect();
    trusted.sort_by_key(|t| t.signed.head.seq);
    if args.common.output.json {
        outln!(
            "{}",
            json!({
                "kept": set.kept,
                "heads": trusted.iter().map(|t| json!({
                    "seq": t.signed.head.seq, "hash": t.signed.head.hash_str(), "published": t.signed.published,
                    "signers": t.signers, "source": t.source,
                })).collect::<Vec<_>>(),
                "unverified": set.findings.iter().map(report::finding_json).collect::<Vec<_>>(),
            })
        );
    } else {
        for t in &trusted {
            outln!(
                "{} {} published {} signed by {}",
                t.signed.head.seq,
                t.signed.head.hash_str(),
                t.signed.published,
                t.signers.join(",")
            );
        }
        for f in &set.findings {
            if keys.is_empty() && f.kind == Kind::UntrustedKey {
                outln!(
                    "{} (unverified: pass --trusted-key to check signatures)",
                    f.source.as_deref().unwrap_or("?")
                );
            } else {
                outln!("{}", report::finding_text(f));
            }
        }
        outln!("{} head(s) kept, {} verified", set.kept, trusted.len());
    }
    Ok(OK)
}
