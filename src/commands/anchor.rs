//! `chainship anchor verify` and `chainship anchor list`: the auditor's view
//! of the kept heads.

use std::time::{Duration, SystemTime};

use chainship_anchor::audit::{self, HeadSet};
use chainship_anchor::cosignature::WitnessPolicy;
use chainship_anchor::log_audit::{self, CheckpointAudit};
use chainship_anchor::{Kind, VerifierKey};
use chainship_chain::{EventDb, WalkPlan, WalkReport, walk_chain};
use clap::{Args, Subcommand};
use serde_json::json;

use crate::affected;
use crate::args::{
    AnchorStoreArgs, DbArgs, JobMetricsArgs, OriginArg, OutputArgs, RunRulesArgs, TrustArgs, WitnessTrustArgs,
};
use crate::exit::{CliError, CmdResult, FAILED, OK};
use crate::job_metrics::JobReport;
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

  chainship anchor verify --no-db --anchor s3://audit-anchors/heads --origin prod-eu1/agentrt \
      --trusted-key /etc/chainship/head.pub     # the store alone: signatures, checkpoints, tiles

--db is required unless --no-db is given.

Kinds reported: altered, cut, fork, bad-signature, untrusted-key, heads-disagree, stale,
checkpoint-fork (two checkpoints that are not one tree), tiles-disagree (the tiles do not give a
checkpoint's root, a tile or bundle is missing or contradicts the newest checkpoint's tree),
checkpoint-missing (a head without its checkpoint once checkpoints began), uncosigned (with
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
    /// Pass with no trusted head for the origin (a first run, before any head
    /// was published); the output then says that no head was checked.
    #[arg(long)]
    pub allow_no_heads: bool,
    /// Audit the store alone, without a database: head signatures, and every
    /// checkpoint against its tiles and the next (consistency proofs).
    #[arg(long)]
    pub no_db: bool,
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
    Ok(audit::check_heads(&notes, origin, keys))
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

fn load_checkpoints(common: &AnchorCommon, keys: &[VerifierKey], heads: &HeadSet) -> Result<CheckpointAudit, CliError> {
    let store = common.store.open(common.store.url()?, None);
    let origin = common.origin.get()?;
    let trusted_heads = heads.heads();
    crate::report::runtime()?
        .block_on(async {
            let mut audit = log_audit::audit_checkpoints(store.as_ref(), origin, keys, true).await?;
            let findings =
                log_audit::check_heads_in_tree(store.as_ref(), origin, &audit.trusted, &trusted_heads).await?;
            audit.findings.extend(findings);
            audit
                .findings
                .extend(log_audit::missing_checkpoints(&audit.trusted, &trusted_heads));
            Ok::<_, chainship_anchor::StoreError>(audit)
        })
        .map_err(|e| CliError::from_kind(&e))
}

fn verify(args: &AnchorVerifyArgs, job: &mut JobReport) -> CmdResult {
    let keys = args.common.trust.load()?;
    let policy = args.witness.load()?;
    let set = load_heads(&args.common, &keys)?;
    let checkpoints = load_checkpoints(&args.common, &keys, &set)?;
    let mut findings = set.findings.clone();
    findings.extend(checkpoints.findings.iter().cloned());
    let cosigns = match &policy {
        Some(policy) => Some(cosign_audit(
            &args.common,
            &set,
            &checkpoints,
            policy,
            args.witness.witness_grace,
        )?),
        None => None,
    };
    let mut warnings = Vec::new();
    if let Some(c) = &cosigns {
        findings.extend(c.findings.iter().cloned());
        warnings.extend(c.waiting.iter().cloned());
    }
    if let Some(max_age) = args.max_age {
        findings.extend(audit::check_stale(&set, max_age, SystemTime::now()));
    }
    let walked = if args.no_db {
        None
    } else {
        Some(walk_database(args, &set, &checkpoints)?)
    };
    let (report, matched_roots) = match &walked {
        Some((report, root_findings, matched)) => {
            findings.extend(audit::walk_findings(report, &set));
            findings.extend(root_findings.iter().cloned());
            (Some(report), *matched)
        }
        None => (None, 0),
    };
    // Without a database a head is checked by its signature and its place in
    // the tree; with one, by the walk reaching it.
    let checked = match report {
        Some(r) => r.heads.len(),
        None => set.trusted.len() + checkpoints.trusted.len(),
    };
    let no_heads = audit::no_trusted_head(args.common.origin.get()?, checked, "");
    match no_heads {
        Some(_) if args.allow_no_heads => warnings.push(format!(
            "{}: no head was checked, only the chain itself (--allow-no-heads)",
            audit::no_head_text(args.common.origin.get()?, "")
        )),
        Some(f) => findings.push(f),
        None => {}
    }
    findings.sort_by_key(|f| (f.kind, f.seq));
    let last_trusted = match report {
        Some(r) => r.last_trusted_head(),
        // Store only: the newest signed head no finding names.
        None => set
            .heads()
            .into_iter()
            .filter(|h| !findings.iter().any(|f| f.seq.is_some_and(|s| s <= h.seq)))
            .max_by_key(|h| h.seq),
    };
    // What the invalid range touches: its runs, and side effects to reconcile.
    let touched = match (report.and_then(affected::invalid_from), args.rules.touched()?) {
        (Some(from), Some(touched)) => {
            let open = args.db.open_options().map_err(|e| CliError::from_kind(&e))?;
            let db = EventDb::open(args.db.path()?, &open)?;
            let to = db.head().ok().flatten().map_or(from, |(s, _)| s);
            Some(affected::scan_db(&db, from, to, touched))
        }
        _ => None,
    };
    let checkpoint_json = json!({
        "kept": checkpoints.kept,
        "trusted": checkpoints.trusted.len(),
        "consistency_proofs": checkpoints.consistent_pairs,
        "tiles_checked": checkpoints.tiles_audited,
        "largest": checkpoints.trusted.last().map(|t| json!({"size": t.checkpoint.size, "root": t.checkpoint.root_b64()})),
        "matched_database": report.map(|_| matched_roots),
        "cosigned": cosigns.as_ref().map(|c| json!({"quorum": policy.as_ref().map(|p| p.quorum), "checkpoints": c.cosigned, "newest": c.newest_cosigned})),
    });

    if args.common.output.json {
        outln!(
            "{}",
            json!({
                "status": if findings.is_empty() { "ok" } else { "failed" },
                "origin": args.common.origin.get()?,
                "heads": {"kept": set.kept, "trusted": set.trusted.len(), "checked": checked},
                "checkpoints": checkpoint_json,
                "warnings": warnings,
                "database": report.map(|r| json!({
                    "head": r.db_head.as_ref().map(|(s, h)| json!({"seq": s, "hash": h})),
                    "checked": r.checked,
                })),
                "findings": findings.iter().map(report::finding_json).collect::<Vec<_>>(),
                "last_trusted_head": last_trusted.map(|h| json!({"seq": h.seq, "hash": h.hash_str()})),
                "affected": touched.as_ref().map(affected::json),
            })
        );
    } else {
        match report {
            Some(r) => outln!(
                "heads: {} kept, {} trusted; database: {} event(s) checked{}",
                set.kept,
                set.trusted.len(),
                r.checked,
                r.db_head
                    .as_ref()
                    .map_or(String::new(), |(s, h)| format!(", head seq {s} {h}"))
            ),
            None => outln!(
                "heads: {} kept, {} trusted; no database (--no-db)",
                set.kept,
                set.trusted.len()
            ),
        }
        outln!(
            "checkpoints: {} kept, {} trusted, {} consistency proof(s) and {} tile(s) checked{}",
            checkpoints.kept,
            checkpoints.trusted.len(),
            checkpoints.consistent_pairs,
            checkpoints.tiles_audited,
            report.map_or(String::new(), |_| format!(", {matched_roots} matching the database"))
        );
        if let (Some(c), Some(p)) = (&cosigns, &policy) {
            outln!(
                "witnesses: {} checkpoint(s) with {} of {} trusted cosignatures; newest cosigned: {}",
                c.cosigned,
                p.quorum,
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
    job.last_trusted_published = last_trusted.and_then(|h| set.published_at(h.seq));
    job.events_checked = report.map_or(0, |r| r.checked);
    job.heads_checked = checked as u64;
    Ok(if findings.is_empty() { OK } else { FAILED })
}

/// The witness check of the trusted checkpoints, with the heads' publication times.
fn cosign_audit(
    common: &AnchorCommon,
    set: &HeadSet,
    checkpoints: &CheckpointAudit,
    policy: &WitnessPolicy,
    grace: Duration,
) -> Result<log_audit::CosignAudit, CliError> {
    let store = common.store.open(common.store.url()?, None);
    let origin = common.origin.get()?;
    let published = |seq: u64| set.published_at(seq);
    crate::report::runtime()?
        .block_on(log_audit::audit_cosignatures(
            store.as_ref(),
            origin,
            &checkpoints.trusted,
            policy,
            &published,
            grace,
        ))
        .map_err(|e| CliError::from_kind(&e))
}

/// Walks the database against the trusted heads, computing the tree's root
/// at each trusted checkpoint's size and comparing them.
fn walk_database(
    args: &AnchorVerifyArgs,
    set: &HeadSet,
    checkpoints: &CheckpointAudit,
) -> Result<(WalkReport, Vec<chainship_anchor::Finding>, usize), CliError> {
    let open = args.db.open_options().map_err(|e| CliError::from_kind(&e))?;
    let db = EventDb::open(args.db.path()?, &open)?;
    // Only for the progress bar: a head the walk cannot read is its to report.
    let total = db.head().ok().flatten().map_or(0, |(s, _)| s);
    let bar = events_bar(total, args.common.output.json);
    bar.set_message("walking the chain");
    let report = walk_chain(
        db,
        &WalkPlan {
            from: 1,
            to: None,
            heads: set.heads(),
            roots_at: checkpoints.sizes(),
        },
        &mut |n| bar.set_position(n),
    )?;
    bar.finish_and_clear();
    let (findings, matched) = log_audit::compare_roots(&checkpoints.trusted, &report.roots, "database");
    Ok((report, findings, matched))
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
