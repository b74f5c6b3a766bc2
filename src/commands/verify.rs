//! `chainship verify`: walk the database and check every event against the
//! chain, optionally against one head kept elsewhere.

use chainship_chain::check::unreachable_reason;
use chainship_chain::{Head, HeadCheck, WalkPlan, WalkReport};
use chainship_verify::db_check::{self, DbSource};
use clap::Args;
use serde_json::json;

use crate::args::{DbArgs, OutputArgs, RunRulesArgs, WalkArgs};
use crate::exit::{CliError, CmdResult};
use crate::progress::events_bar;
use crate::report;
use chainship_runs::affected;

/// Check the hash chain of the audit database.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship verify --db /var/lib/agentrt/audit.db
  chainship verify --db audit.db --head 1200:87c93bae8593068bbf6828036f9837b397680da24e402ae0c568e859807af798
  CHAINSHIP_DB=audit.db chainship verify --from 1000 --to 2000 --json
  chainship verify --db audit.db --jobs 1       # one reader thread, e.g. on a busy host

Exit codes: 0 intact, 1 broken (a damaged row included, or --to / --head not matched) or
nothing checked (an empty table, --from past the head), 2 usage or unreadable database.")]
#[command(mut_arg("db", |a| a.required(true)))]
pub struct VerifyArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// First seq to check; the event before it is trusted as stored.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=i64::MAX as u64))]
    pub from: Option<u64>,
    /// Last seq to check (default: the database's head when the walk starts).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=i64::MAX as u64))]
    pub to: Option<u64>,
    /// A head kept elsewhere (SEQ:HASH) that the database must still match.
    #[arg(long, value_name = "SEQ:HASH")]
    pub head: Option<Head>,
    #[command(flatten)]
    pub walk: WalkArgs,
    #[command(flatten)]
    pub rules: RunRulesArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &VerifyArgs) -> CmdResult {
    let options = args.db.open_options().map_err(|e| CliError::from_kind(&e))?;
    if let (Some(from), Some(to)) = (args.from, args.to)
        && to < from
    {
        return Err(CliError::usage(format!("--to {to} is below --from {from}")));
    }
    let plan = WalkPlan {
        from: args.from.unwrap_or(1),
        to: args.to,
        heads: args.head.into_iter().collect(),
        roots_at: Vec::new(),
        jobs: args.walk.jobs(),
        ..WalkPlan::default()
    };
    let bar = events_bar(0, args.output.json);
    bar.set_message("verifying");
    let source = DbSource {
        path: args.db.path()?,
        open: &options,
        jobs: args.walk.jobs(),
    };
    let verdict = db_check::walk_database(&source, &plan, args.rules.touched()?, &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    })
    .map_err(|e| CliError::from_kind(&e))?;
    bar.finish_and_clear();
    let report = &verdict.covered;
    if args.output.json {
        let mut doc = to_json(report);
        doc["findings"] = verdict.findings.iter().map(report::finding_json).collect();
        doc["affected"] = verdict.touched.as_ref().map_or(serde_json::Value::Null, affected::json);
        outln!("{doc}");
    } else {
        outln!("{}", to_text(report).trim_end_matches('\n'));
        for line in verdict.touched.iter().flat_map(affected::lines) {
            outln!("{line}");
        }
    }
    Ok(crate::exit::of(&verdict))
}

fn to_text(r: &WalkReport) -> String {
    let mut out = String::new();
    match &r.db_head {
        Some((seq, hash)) => out += &format!("head: seq {seq} {hash}\n"),
        None if r.db_head_unreadable => out += "head: unreadable (the highest row's seq is not an integer)\n",
        None if r.unreachable_seq.is_some() => out += "head: none above seq 0\n",
        None => out += "head: none (the events table is empty)\n",
    }
    if let Some(value) = &r.unreachable_seq {
        out += &format!("broken: {}\n", unreachable_reason(value));
    }
    if let Some(d) = &r.damage {
        out += &format!("{d}\n");
        out += &format!("  found:    {}\n", d.found);
        match d.last_good {
            Some(h) => out += &format!("last good: seq {} {}\n", h.seq, h.hash_str()),
            None => out += "last good: none\n",
        }
    } else if let Some(b) = &r.chain_break {
        out += &format!("broken at seq {}: {}\n", b.seq, b.reason());
        out += &format!("  expected: {}\n", b.expected_str());
        out += &format!(
            "  found:    {}\n",
            if b.found.is_empty() { "(empty)" } else { &b.found }
        );
        match b.last_good {
            Some(h) => out += &format!("last good: seq {} {}\n", h.seq, h.hash_str()),
            None => out += "last good: none\n",
        }
    } else {
        match (r.first_seq, r.last_good) {
            // Checked without a break, but a row outside the walk is damage: not "intact".
            (Some(first), Some(last)) if r.unreachable_seq.is_some() || r.head_not_reached.is_some() => {
                out += &format!("checked: {} event(s), seq {first} to {}\n", r.checked, last.seq);
                out += &format!("last checked: seq {} {}\n", last.seq, last.hash_str());
            }
            (Some(first), Some(last)) => {
                out += &format!("intact: {} event(s), seq {first} to {}\n", r.checked, last.seq);
                out += &format!("last checked: seq {} {}\n", last.seq, last.hash_str());
            }
            _ if r.unreachable_seq.is_some() => out += "checked: 0 event(s)\n",
            _ => out += "nothing checked: no event in the range (an empty table, or --from past the head)\n",
        }
    }
    if let Some(to) = r.to_not_reached {
        let end = r.last_good.map_or(0, |h| h.seq);
        out += &format!("not reached: --to {to}; the database ends at seq {end}\n");
    }
    if let Some(head) = r.head_not_reached {
        let end = r.last_good.map_or(0, |h| h.seq);
        out += &format!(
            "not reached: the database's head seq {head}; reading in seq order ended at seq {end} (rows the table's order does not reach: a damaged table)\n"
        );
    }
    for (head, check) in &r.heads {
        out += &match check {
            HeadCheck::Matched => format!("head matched: {head}\n"),
            // Only compared: the events up to it were trusted as stored (`--from`).
            HeadCheck::BeforeRange { matched: true } => {
                format!("head matched by lookup, below --from (not walked): {head}\n")
            }
            HeadCheck::Differs { found } => format!(
                "head not matched: seq {}: the database holds {}, the head says {}\n",
                head.seq,
                if found.is_empty() { "(empty)" } else { found },
                head.hash_str()
            ),
            HeadCheck::BeforeRange { matched: false } => {
                format!(
                    "head not matched: seq {}: the database does not hold {}\n",
                    head.seq,
                    head.hash_str()
                )
            }
            HeadCheck::AfterBreak => format!("head not checked: {head} lies past the break\n"),
            HeadCheck::Beyond { db_end } => format!(
                "head not reached: seq {} is past the database's last seq {} (events cut from the end?)\n",
                head.seq,
                db_end.unwrap_or(0)
            ),
        };
    }
    out
}

fn to_json(r: &WalkReport) -> serde_json::Value {
    let head_json = |h: &Head| json!({"seq": h.seq, "hash": h.hash_str()});
    json!({
        "status": match (r.ok(), r.checked) {
            (true, 0) => "nothing-checked",
            (true, _) => "intact",
            (false, _) => "broken",
        },
        "head": r.db_head.as_ref().map(|(seq, hash)| json!({"seq": seq, "hash": hash})),
        "head_unreadable": r.db_head_unreadable,
        "checked": r.checked,
        "first_seq": r.first_seq,
        "last_checked": (r.chain_break.is_none() && r.damage.is_none() && r.checked > 0)
            .then_some(())
            .and(r.last_good.as_ref().map(head_json)),
        "last_good": r.last_good.as_ref().map(head_json),
        "break": match (&r.damage, &r.chain_break) {
            (Some(d), _) => Some(json!({
                "seq": d.seq,
                "after": d.seq.is_none().then_some(d.after),
                "kind": d.kind_name(),
                "column": d.column,
                "reason": d.reason(),
                "expected": null,
                "found": d.found,
            })),
            (None, Some(b)) => Some(json!({
                "seq": b.seq,
                "kind": b.kind_name(),
                "reason": b.reason(),
                "expected": b.expected_str(),
                "found": b.found,
            })),
            (None, None) => None,
        },
        "unreachable_seq": r.unreachable_seq.as_ref().map(|v| json!({
            "seq": v,
            "reason": unreachable_reason(v),
        })),
        "to_not_reached": r.to_not_reached,
        "head_not_reached": r.head_not_reached,
        "heads": r.heads.iter().map(|(h, c)| {
            let (result, found) = match c {
                HeadCheck::Matched => ("matched", None),
                HeadCheck::BeforeRange { matched: true } => ("matched-below-from", None),
                HeadCheck::Differs { found } => ("differs", Some(found.as_str())),
                HeadCheck::BeforeRange { matched: false } => ("differs", None),
                HeadCheck::AfterBreak => ("after-break", None),
                HeadCheck::Beyond { .. } => ("not-reached", None),
            };
            json!({"seq": h.seq, "hash": h.hash_str(), "result": result, "found": found})
        }).collect::<Vec<_>>(),
    })
}
