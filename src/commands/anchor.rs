//! `chainship anchor verify` and `chainship anchor list`: the auditor's view
//! of the kept heads.

use std::time::Duration;

use chainship_anchor::VerifierKey;
use chainship_chain::{EventDb, WalkPlan, WalkReport, walk_chain};
use chainship_verify::Kind;
use chainship_verify::database::{self, DbAudit, DbVerdict};
use chainship_verify::finding::{self, HeadSet};
use chainship_verify::pass::{self, StreamInput};
use clap::{Args, Subcommand};
use serde_json::json;

use crate::args::{
    AnchorStoreArgs, DbArgs, JobMetricsArgs, OriginArg, OutputArgs, RunRulesArgs, TrustArgs, WalkArgs, WitnessTrustArgs,
};
use crate::exit::{CliError, CmdResult, OK};
use crate::job_metrics::JobReport;
use crate::progress::events_bar;
use crate::report;
use chainship_runs::affected;
use chainship_verify::state;

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

  chainship anchor verify --no-db --anchor s3://audit-anchors/heads --origin prod-eu1/agentrt \
      --trusted-key /etc/chainship/head.pub     # the store alone: signatures, checkpoints, tiles
  chainship anchor verify --db audit.db --anchor file:/mnt/anchors --origin prod-eu1/agentrt \
      --trusted-key /etc/chainship/head.pub --state /var/lib/chainship/verify-state.json
                                                # nightly: only the heads published since the last clean run

--db is required unless --no-db is given.

Kinds reported: altered, cut, fork, bad-signature, untrusted-key, heads-disagree, stale,
checkpoint-fork (two checkpoints that are not one tree), tiles-disagree (the tiles do not give a
checkpoint's root, a tile or bundle is missing or contradicts the newest checkpoint's tree),
checkpoint-missing (a head without its checkpoint once checkpoints began), head-missing (a checkpoint
without its head, or a head its successor names as kept before it: a publication deleted), uncosigned (with
--witness-key: checkpoints without the quorum of witness cosignatures), no-trusted-head (none kept for --origin: a typo? --allow-no-heads on a first run).
Exit codes: 0 all good, 1 any finding, 2 usage or an unreadable store or database.")]
#[command(mut_arg("db", |a| a.conflicts_with("no_db")))]
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
    #[command(flatten)]
    pub no_heads: crate::args::NoHeadsArgs,
    #[command(flatten)]
    pub unvouched: crate::args::UnvouchedArgs,
    /// Audit the store alone, without a database: head signatures, and every
    /// checkpoint against its tiles and the next (consistency proofs).
    #[arg(long)]
    pub no_db: bool,
    #[command(flatten)]
    pub walk: WalkArgs,
    /// Keep what a clean run verified in FILE (JSON), and on the next run
    /// list and read only the heads and checkpoints published since; the
    /// database is still walked whole. Created by the first run.
    #[arg(long, value_name = "FILE")]
    pub state: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub witness: WitnessTrustArgs,
    #[command(flatten)]
    pub rules: RunRulesArgs,
    #[command(flatten)]
    pub job: JobMetricsArgs,
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
    Ok(finding::check_heads(&notes, origin, keys))
}

pub fn run(cmd: &AnchorCommand) -> CmdResult {
    match cmd {
        AnchorCommand::Verify(args) => {
            let origin = args.common.origin.origin.as_deref().unwrap_or_default();
            let mut report = JobReport::new("anchor_verify", origin);
            crate::job_metrics::run_job(args.job.metrics_textfile.as_deref(), &mut report, |r| verify(args, r))
        }
        AnchorCommand::List(args) => list(args),
    }
}

fn verify(args: &AnchorVerifyArgs, job: &mut JobReport) -> CmdResult {
    let keys = args.common.trust.load()?;
    let policy = args.common.trust.witness_policy(&args.witness)?;
    let origin = args.common.origin.get()?;
    let store = args.common.store.open(args.common.store.url()?, None);
    let state = match &args.state {
        Some(path) => {
            state::load(path, origin, &store.describe()).map_err(|e| CliError::usage(format!("--state {e}")))?
        }
        None => None,
    };
    let since = state.as_ref();
    let input = StreamInput {
        store: store.as_ref(),
        origin,
        keys: &keys,
        witness: policy.as_ref().map(|p| (p, args.witness.witness_grace)),
        since,
        every_tile: true,
    };
    let runtime = crate::report::runtime()?;
    let listing = runtime
        .block_on(pass::list(&input))
        .map_err(|e| CliError::from_kind(&e))?;
    // The walk first (every core), then the heads and checkpoints in seq order against it.
    let walked = if args.no_db {
        None
    } else {
        Some(walk_database(args, listing.highest_seq())?)
    };
    let verdict = runtime
        .block_on(database::audit_database(
            &DbAudit {
                input: &input,
                walked: walked.as_ref().map(|(r, db)| (r, db)),
                max_age: args.max_age,
                allow_no_heads: args.no_heads.allow_no_heads,
                max_unvouched: args.unvouched.max_unvouched,
            },
            listing,
        ))
        .map_err(|e| CliError::from_kind(&e))?;
    let report = walked.as_ref().map(|(r, _)| r);
    let DbVerdict {
        audit,
        findings,
        warnings,
        ranges,
        last_trusted,
        last_trusted_published,
        invalid_from,
        checked,
        unvouched,
    } = verdict;
    // What the invalid range touches: its runs, and side effects to reconcile.
    let touched = match (invalid_from, args.rules.touched()?) {
        (Some(from), Some(touched)) => {
            let open = args.db.open_options().map_err(|e| CliError::from_kind(&e))?;
            let db = EventDb::open(args.db.path()?, &open)?;
            Some(match &ranges {
                Some(ranges) => affected::scan_ranges(&db, ranges, touched),
                None => affected::scan_to_head(&db, from, touched),
            })
        }
        _ => None,
    };
    let cosigns = audit.cosign.as_ref();
    let checkpoint_json = json!({
        "kept": audit.checkpoints_kept,
        "trusted": audit.checkpoints_trusted,
        "consistency_proofs": audit.consistent,
        "tiles_checked": audit.tiles_audited,
        "largest": audit.largest.as_ref().map(|c| json!({"size": c.size, "root": c.root_b64()})),
        "matched_database": report.map(|_| audit.matched_database),
        "cosigned": cosigns.map(|c| json!({"quorum": policy.as_ref().map(|p| match p.rule { Some(_) => json!(p.describe()), None => json!(p.quorum) }), "checkpoints": c.cosigned, "newest": c.newest_cosigned})),
    });
    let state_json = args.state.as_ref().map(|path| {
        json!({
            "file": path.display().to_string(),
            "incremental": since.is_some(),
            "since_head": since.map(|s| json!({"seq": s.head.seq, "hash": s.head.hash_str()})),
            "since_checkpoint": since.and_then(|s| s.checkpoint.as_ref().map(|(size, _, _)| *size)),
        })
    });

    if args.common.output.json {
        outln!(
            "{}",
            json!({
                "status": if findings.is_empty() { "ok" } else { "failed" },
                "origin": origin,
                "heads": {"kept": audit.heads_kept, "trusted": audit.heads_trusted, "checked": checked},
                "checkpoints": checkpoint_json,
                "state": state_json,
                "warnings": warnings,
                "database": report.map(|r| json!({
                    "head": r.db_head.as_ref().map(|(s, h)| json!({"seq": s, "hash": h})),
                    "checked": r.checked,
                })),
                "findings": findings.iter().map(report::finding_json).collect::<Vec<_>>(),
                "last_trusted_head": last_trusted.map(|h| json!({"seq": h.seq, "hash": h.hash_str()})),
                "unvouched": unvouched.map(|(first, last)| json!({"from": first, "to": last, "records": last.saturating_sub(first).saturating_add(1)})),
                "affected": touched.as_ref().map(affected::json),
                "invalid_ranges": ranges.as_ref().map(|rs| rs.iter().map(affected::range_json).collect::<Vec<_>>()),
            })
        );
    } else {
        let since_text = since.map_or(String::new(), |s| format!(" (since seq {}, --state)", s.head.seq));
        match report {
            Some(r) => outln!(
                "heads: {} kept, {} trusted{since_text}; database: {} event(s) checked{}",
                audit.heads_kept,
                audit.heads_trusted,
                r.checked,
                r.db_head
                    .as_ref()
                    .map_or(String::new(), |(s, h)| format!(", head seq {s} {h}"))
            ),
            None => outln!(
                "heads: {} kept, {} trusted{since_text}; no database (--no-db)",
                audit.heads_kept,
                audit.heads_trusted
            ),
        }
        outln!(
            "checkpoints: {} kept, {} trusted, {} consistency proof(s) and {} tile(s) checked{}",
            audit.checkpoints_kept,
            audit.checkpoints_trusted,
            audit.consistent,
            audit.tiles_audited,
            report.map_or(String::new(), |_| format!(
                ", {} matching the database",
                audit.matched_database
            ))
        );
        if let (Some(c), Some(p)) = (cosigns, &policy) {
            outln!(
                "witnesses: {} checkpoint(s) meeting the quorum of {} ({} trusted witness key(s)); newest cosigned: {}",
                c.cosigned,
                p.describe(),
                p.keys.len(),
                c.newest_cosigned.map_or("none".into(), |s| s.to_string())
            );
        }
        for w in &warnings {
            outln!("warning: {w}");
        }
        let ok = match report {
            None => "the store's heads and checkpoints are signed and its checkpoints are one tree",
            Some(_) if checked == 0 => "the chain is intact; no head was checked",
            Some(_) => "the database matches every trusted head",
        };
        report::print_outcome(&findings, ok, last_trusted);
        for line in touched.iter().flat_map(affected::lines) {
            outln!("{line}");
        }
    }
    job.findings(&findings);
    job.last_trusted_seq = last_trusted.map(|h| h.seq);
    job.last_trusted_published = last_trusted_published;
    job.events_checked = report.map_or(0, |r| r.checked);
    job.heads_checked = checked as u64;
    if findings.is_empty()
        && let (Some(path), Some(head)) = (&args.state, last_trusted)
    {
        let published = last_trusted_published;
        runtime
            .block_on(state::save_after(
                path,
                store.as_ref(),
                origin,
                (head, published),
                &audit,
                since,
            ))
            .map_err(|e| CliError::usage(format!("--state {e}")))?;
    }
    Ok(crate::exit::verdict(findings.is_empty()))
}

/// Walks the whole database (at least to `reach`, the highest kept seq),
/// keeping the tree's groups for the checkpoints' roots.
fn walk_database(args: &AnchorVerifyArgs, reach: u64) -> Result<(WalkReport, EventDb), CliError> {
    let open = args.db.open_options().map_err(|e| CliError::from_kind(&e))?;
    let db = EventDb::open(args.db.path()?, &open)?;
    // Only for the progress bar: a head the walk cannot read is its to report.
    let total = db.head().ok().flatten().map_or(0, |(s, _)| s);
    let bar = events_bar(total, args.common.output.json);
    bar.set_message("walking the chain");
    let lookup = EventDb::open(args.db.path()?, &open)?;
    let report = walk_chain(
        db,
        &WalkPlan {
            from: 1,
            reach: Some(reach),
            tree: true,
            jobs: args.walk.jobs(),
            ..WalkPlan::default()
        },
        &mut |n| bar.set_position(n),
    )?;
    bar.finish_and_clear();
    Ok((report, lookup))
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
