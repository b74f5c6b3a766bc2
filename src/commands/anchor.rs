//! `chainship anchor verify` and `chainship anchor list`: the auditor's view
//! of the kept heads (`anchor status`, a fleet's store at a glance, is
//! [`crate::commands::anchor_status`]).

use std::time::Duration;

use chainship_anchor::VerifierKey;
use chainship_anchor::cosignature::WitnessPolicy;
use chainship_verify::Kind;
use chainship_verify::database::DbVerdict;
use chainship_verify::db_check::{self, DbCheck, DbSource};
use chainship_verify::finding::{self, HeadSet};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::args::{
    AnchorStoreArgs, DbArgs, JobMetricsArgs, OriginArg, OutputArgs, RunRulesArgs, TrustArgs, WalkArgs, WitnessTrustArgs,
};
use crate::exit::{CliError, CmdResult, OK};
use crate::job_metrics::JobReport;
use crate::progress::events_bar;
use crate::report;

#[derive(Subcommand, Debug)]
pub enum AnchorCommand {
    Verify(AnchorVerifyArgs),
    List(AnchorListArgs),
    Status(crate::commands::anchor_status::AnchorStatusArgs),
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
--witness-key: checkpoints without the quorum of witness cosignatures), no-trusted-head (none kept for --origin: a typo? --allow-no-heads on a first run),
nothing-checked (--allow-no-heads, and no event or head at all), unvouched (past --max-unvouched). A run with
--state that finds anything judges every kept head and checkpoint again, so its ranges are a full run's.
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
        AnchorCommand::Status(args) => crate::commands::anchor_status::run(args),
    }
}

fn verify(args: &AnchorVerifyArgs, job: &mut JobReport) -> CmdResult {
    let keys = args.common.trust.load()?;
    let redaction_keys = args.common.trust.redaction_keys(&keys)?;
    let policy = args.common.trust.witness_policy(&args.witness)?;
    let origin = args.common.origin.get()?;
    let store = args.common.store.open(args.common.store.url()?, None);
    let open = match args.no_db {
        true => None,
        false => Some(args.db.open_options().map_err(|e| CliError::from_kind(&e))?),
    };
    let bar = events_bar(0, args.common.output.json);
    bar.set_message("walking the chain");
    let verdict = db_check::check_database(
        DbCheck {
            store: store.as_ref(),
            origin,
            keys: &keys,
            witness: policy.as_ref().map(|p| (p, args.witness.witness_grace)),
            db: match &open {
                Some(open) => Some(DbSource {
                    path: args.db.path()?,
                    open,
                    jobs: args.walk.jobs(),
                }),
                None => None,
            },
            state: args.state.as_deref(),
            max_age: args.max_age,
            allow_no_heads: args.no_heads.allow_no_heads,
            max_unvouched: args.unvouched.max_unvouched,
            touched: args.rules.touched()?,
            redaction_keys: &redaction_keys,
        },
        &mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        },
    )
    .map_err(|e| CliError::from_kind(&e))?;
    bar.finish_and_clear();
    job.verdict(&verdict);
    job.events_checked = verdict.covered.database.as_ref().map_or(0, |d| d.checked);
    job.heads_checked = verdict.covered.checked as u64;
    if args.common.output.json {
        outln!("{}", verdict_json(args, origin, policy.as_ref(), &verdict));
    } else {
        print_text(policy.as_ref(), &verdict);
    }
    Ok(crate::exit::of(&verdict))
}

fn verdict_json(args: &AnchorVerifyArgs, origin: &str, policy: Option<&WitnessPolicy>, v: &DbVerdict) -> Value {
    let (audit, since) = (&v.covered.audit, v.covered.since.as_ref());
    let database = v.covered.database.as_ref();
    report::with(
        report::verdict_json(v),
        json!({
            "origin": origin,
            "heads": {"kept": audit.heads_kept, "trusted": audit.heads_trusted, "checked": v.covered.checked},
            "checkpoints": {
                "kept": audit.checkpoints_kept,
                "trusted": audit.checkpoints_trusted,
                "consistency_proofs": audit.consistent,
                "tiles_checked": audit.tiles_audited,
                "largest": audit.largest.as_ref().map(|c| json!({"size": c.size, "root": c.root_b64()})),
                "matched_database": database.map(|_| audit.matched_database),
                "cosigned": audit.cosign.as_ref().map(|c| json!({"quorum": policy.map(|p| match p.rule { Some(_) => json!(p.describe()), None => json!(p.quorum) }), "checkpoints": c.cosigned, "newest": c.newest_cosigned})),
            },
            "state": args.state.as_ref().map(|path| json!({
                "file": path.display().to_string(),
                "incremental": since.is_some(),
                "since_head": since.map(|s| json!({"seq": s.head.seq, "hash": s.head.hash_str()})),
                "since_checkpoint": since.and_then(|s| s.checkpoint.as_ref().map(|(size, _, _)| *size)),
                "saved": v.covered.state_saved,
            })),
            "database": database.map(|d| json!({
                "head": d.head.as_ref().map(|(s, h)| json!({"seq": s, "hash": h})),
                "checked": d.checked,
            })),
        }),
    )
}

fn print_text(policy: Option<&WitnessPolicy>, v: &DbVerdict) {
    let (audit, since) = (&v.covered.audit, v.covered.since.as_ref());
    let database = v.covered.database.as_ref();
    let since_text = since.map_or(String::new(), |s| format!(" (since seq {}, --state)", s.head.seq));
    match database {
        Some(d) => outln!(
            "heads: {} kept, {} trusted{since_text}; database: {} event(s) checked{}",
            audit.heads_kept,
            audit.heads_trusted,
            d.checked,
            d.head
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
        database.map_or(String::new(), |_| format!(
            ", {} matching the database",
            audit.matched_database
        ))
    );
    if let (Some(c), Some(p)) = (&audit.cosign, policy) {
        outln!(
            "witnesses: {} checkpoint(s) meeting the quorum of {} ({} trusted witness key(s)); newest cosigned: {}",
            c.cosigned,
            p.describe(),
            p.keys.len(),
            c.newest_cosigned.map_or("none".into(), |s| s.to_string())
        );
    }
    let ok = match database {
        None => "the store's heads and checkpoints are signed and its checkpoints are one tree",
        Some(_) if v.covered.checked == 0 => "the chain is intact; no head was checked",
        Some(_) => "the database matches every trusted head",
    };
    report::print_verdict(v, ok);
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
    let redaction_keys = args.common.trust.redaction_keys(&keys)?;
    let store = args.common.store.open(args.common.store.url()?, None);
    let statements = report::runtime()?
        .block_on(chainship_verify::redactions::list(
            store.as_ref(),
            args.common.origin.get()?,
            &redaction_keys,
        ))
        .map_err(|e| CliError::from_kind(&e))?;
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
                "redactions": statements.iter().map(|r| json!({
                    "statement": r.path,
                    "seq": r.statement.as_ref().map(|s| s.seq),
                    "hash": r.statement.as_ref().map(|s| String::from_utf8_lossy(&s.hash).into_owned()),
                    "redacted": r.statement.as_ref().map(|s| s.redacted.clone()),
                    "reason": r.statement.as_ref().map(|s| s.reason.clone()),
                    "signed_by": r.signed_by,
                    "trusted": r.trusted,
                    "problem": r.problem,
                })).collect::<Vec<_>>(),
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
        for r in &statements {
            let what = match &r.statement {
                Some(s) => format!(
                    "redaction of seq {} (hash {}) at {} signed by {}: {}",
                    s.seq,
                    String::from_utf8_lossy(&s.hash),
                    s.redacted,
                    r.signed_by.join(","),
                    s.reason
                ),
                None => format!("{}: not a redaction statement", r.path),
            };
            let judged = match (r.trusted, &r.problem) {
                (Some(true), _) => " [trusted]".to_owned(),
                (Some(false), Some(p)) => format!(" [not accepted: {p}]"),
                (Some(false), None) => " [not accepted]".to_owned(),
                (None, _) => " (unverified: pass --redaction-key to check)".to_owned(),
            };
            outln!("{what}{judged}");
        }
        outln!("{} head(s) kept, {} verified", set.kept, trusted.len());
        if !statements.is_empty() {
            outln!("{} redaction statement(s) kept", statements.len());
        }
    }
    Ok(OK)
}
