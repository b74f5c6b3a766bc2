//! `chainship runs`: each run's transitions checked against the runtime's
//! rules (unknown outcomes, tools run twice, policy bypasses, runs left
//! running...), from the database or from an exported copy.
//!
//! Streaming: a row is printed as each run ends; state is kept only for
//! runs still open.

use chainship_chain::EventDb;
use chainship_evidence::run_events::{self, EventSource};
use chainship_runs::payload::Payload;
use chainship_runs::tally::RunTally;
use chainship_runs::{RunCheck, RunEvent, RunFinding, RunSummary};
use chainship_sinks::SinkConfig;
use chainship_verify::{Kind, run_rules};
use clap::Args;
use serde_json::{Value, json};

use crate::args::{DbArgs, OriginArg, OutputArgs, RunRulesArgs, SinkConnectArgs};
use crate::exit::{CliError, CmdResult};
use crate::progress::records_spinner;

/// Check each run's transitions against the runtime's rules.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship runs --db /data/audit.db
  chainship runs --db audit.db --run run_d56640480004 --json
  chainship runs --from s3://siem-bucket/exports --origin prod-eu1/agentrt --findings-only
  chainship runs --db audit.db --read-only-tool bank_balance,fs.read_file --open-after 30m

Findings: unknown-outcome (a tool start or model call with no outcome, in a run that
finished, was taken over, or went silent past --open-after), executed-twice,
started-without-decision (a policy bypass), left-running, event-after-finish,
unknown-step, unrequested-approval, unreadable-time. Time is the events' own `at`, never the clock.
A copy read with --from is not checked against the chain here: verify-export does that.
Exit codes: 0 no finding, 1 any finding (or no event read), 2 usage or an unreadable source.")]
pub struct RunsArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Read an exported copy instead of the database: file:PATH, s3://BUCKET/PREFIX or kafka://HOST:PORT/TOPIC.
    #[arg(long = "from", value_name = "URL", conflicts_with = "db")]
    pub source: Option<SinkConfig>,
    #[command(flatten)]
    pub origin: OriginArg,
    #[command(flatten)]
    pub sink: SinkConnectArgs,
    #[command(flatten)]
    pub rules: RunRulesArgs,
    /// Show one run: its timeline, event by event, and its findings.
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    /// Print only the findings and the totals, not a row per run.
    #[arg(long)]
    pub findings_only: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// What is printed as the walk goes; the counts and the verdict are the tally's.
struct Report<'a> {
    args: &'a RunsArgs,
    rows: u64,
    timeline: u64,
    tally: RunTally,
}

impl<'a> Report<'a> {
    fn new(args: &'a RunsArgs) -> Self {
        Report {
            args,
            rows: 0,
            timeline: 0,
            tally: RunTally::new(args.run.clone()),
        }
    }

    fn begin(&self) {
        match (&self.args.run, self.args.output.json) {
            (Some(id), true) => outln!("{{\"run_id\":{},\"timeline\":[", json!(id)),
            (None, true) => outln!("{{\"runs\":["),
            (None, false) if !self.args.findings_only => outln!(
                "{:<24} {:<12} {:>10} {:>10} {:>7} {:>6} {:>7} {:>8}",
                "RUN",
                "STATUS",
                "FIRST SEQ",
                "LAST SEQ",
                "EVENTS",
                "TOOLS",
                "EFFECTS",
                "FINDINGS"
            ),
            _ => {}
        }
    }

    fn not_whole(&mut self, what: String) {
        self.tally.not_whole(what);
    }

    /// One event of the run asked for with `--run`.
    fn event(&mut self, e: &RunEvent<'_>) {
        let kind = String::from_utf8_lossy(e.kind);
        if self.args.output.json {
            let sep = if self.timeline == 0 { "" } else { "," };
            outln!(
                "{sep}{}",
                json!({
                    "seq": e.seq,
                    "at": String::from_utf8_lossy(e.at),
                    "type": kind,
                    "step_id": String::from_utf8_lossy(e.step_id),
                    "payload_json": String::from_utf8_lossy(e.payload),
                })
            );
        } else {
            let p = Payload::parse(e.payload);
            let details: Vec<String> = [
                ("tool", p.tool.get()),
                ("outcome", p.outcome.get()),
                ("status", p.status.get()),
                ("approval", p.approval_id.get()),
                ("call", p.call_id.get()),
            ]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| format!("{k}={v}")))
            .collect();
            outln!(
                "{:>10}  {}  {:<20} {:<18} {}",
                e.seq,
                String::from_utf8_lossy(e.at),
                kind,
                String::from_utf8_lossy(e.step_id),
                details.join(" ")
            );
        }
        self.timeline += 1;
    }

    fn take(&mut self, check: &mut RunCheck) {
        for s in self.tally.take(check) {
            self.summary(s);
        }
    }

    /// A run that ended, listed unless one run or only findings are asked for.
    fn summary(&mut self, s: RunSummary) {
        if self.args.run.is_some() || self.args.findings_only {
            return;
        }
        if self.args.output.json {
            let sep = if self.rows == 0 { "" } else { "," };
            outln!("{sep}{}", summary_json(&s));
        } else {
            outln!(
                "{:<24} {:<12} {:>10} {:>10} {:>7} {:>6} {:>7} {:>8}",
                s.run_id,
                s.status.as_str(),
                s.first_seq,
                s.last_seq,
                s.events,
                s.tool_calls,
                s.side_effects,
                s.findings
            );
        }
        self.rows += 1;
    }

    /// The findings and totals; returns the exit code.
    fn end(self) -> u8 {
        let verdict = run_rules::verdict(self.tally, self.timeline);
        let t = &verdict.covered;
        let findings: Vec<&RunFinding> = t.findings.iter().collect();
        let relevant = t.relevant();
        let status = run_rules::status(&verdict);
        if self.args.output.json {
            let mut tail = json!({
                "findings": findings.iter().map(|f| finding_json(f)).collect::<Vec<_>>(),
                "findings_total": relevant,
                "findings_truncated": (findings.len() as u64) < relevant,
                "findings_by_kind": t.by_kind,
                "events": t.events,
                "runs_by_status": t.by_status,
                "tool_calls": t.tool_calls,
                "side_effects": t.side_effects,
                "status": status,
                "not_whole": t.not_whole.as_ref().map(|(first, n)| json!({"first": first, "count": n})),
                "content_redacted": t.content_redacted.iter().map(finding_json).collect::<Vec<_>>(),
                "content_redacted_total": t.content_redacted_count,
            });
            if self.args.run.is_some() {
                tail["run"] = t.the_run.as_ref().map_or(Value::Null, summary_json);
            }
            // Closes the streamed array and the object around it.
            let tail = tail.to_string();
            outln!("],{}", &tail[1..]);
        } else {
            if let Some(s) = &t.the_run {
                outln!(
                    "run {}: {}, seqs {} to {}, {} events, {} tool call(s), {} side effect(s)",
                    s.run_id,
                    s.status.as_str(),
                    s.first_seq,
                    s.last_seq,
                    s.events,
                    s.tool_calls,
                    s.side_effects
                );
            }
            for f in &findings {
                outln!("{f}");
            }
            // Only the first `tally::FINDINGS_KEPT` are listed; all are counted.
            if relevant > findings.len() as u64 {
                outln!("... {} more finding(s)", relevant - findings.len() as u64);
            }
            let statuses: Vec<String> = t.by_status.iter().map(|(k, v)| format!("{v} {k}")).collect();
            outln!(
                "{} event(s), {} run(s) ({}), {} tool call(s), {} side effect(s), {} finding(s)",
                t.events,
                t.by_status.values().sum::<u64>(),
                statuses.join(", "),
                t.tool_calls,
                t.side_effects,
                relevant
            );
            for f in &t.content_redacted {
                outln!("{f}");
            }
            if t.content_redacted_count > 0 {
                outln!(
                    "{} rule check(s) not made: the payloads they need were withheld (redacted)",
                    t.content_redacted_count
                );
            }
            if let Some((first, n)) = &t.not_whole {
                outln!(
                    "not whole ({n} unreadable line(s), seq gap(s) or row(s) no seq reaches, the first: {first}): findings cover only what was read; run verify or verify-export"
                );
            }
            match verdict.findings.first() {
                Some(f) if f.kind == Kind::NothingChecked => outln!("nothing checked: {}", f.message),
                None => outln!(
                    "ok: every run's transitions follow the {} rules",
                    self.args.rules.profile
                ),
                _ => {}
            }
        }
        crate::exit::of(&verdict)
    }
}

fn summary_json(s: &RunSummary) -> Value {
    json!({
        "run_id": s.run_id,
        "status": s.status.as_str(),
        "first_seq": s.first_seq,
        "last_seq": s.last_seq,
        "events": s.events,
        "tool_calls": s.tool_calls,
        "side_effects": s.side_effects,
        "findings": s.findings,
    })
}

fn finding_json(f: &RunFinding) -> Value {
    json!({
        "kind": f.kind.as_str(),
        "run_id": f.run_id,
        "step_id": f.step_id,
        "seq": f.seq,
        "tool": f.tool,
        "message": f.message,
    })
}

/// Events between sweeps of the silence rule.
const SWEEP_EVERY: u64 = 4096;

pub fn run(args: &RunsArgs) -> CmdResult {
    let Some(mut check) = args.rules.check()? else {
        return Err(CliError::usage(
            "--profile none: the run check is off, nothing to report",
        ));
    };
    let mut report = Report::new(args);
    let bar = records_spinner("checking runs", args.output.json);
    let mut feed = |e: &RunEvent<'_>, report: &mut Report<'_>| {
        if args.run.as_ref().is_some_and(|id| id.as_bytes() == e.run_id) {
            report.event(e);
        }
        check.feed(e);
        report.tally.events += 1;
        if report.tally.events.is_multiple_of(SWEEP_EVERY) {
            check.sweep();
            report.take(&mut check);
            bar.set_position(report.tally.events);
        }
    };
    let copy = args.source.as_ref().map(|s| args.sink.apply(s));
    let db;
    let source = match &copy {
        Some(source) => EventSource::Copy {
            source,
            origin: (args.origin.get())
                .map_err(|_| CliError::usage("--origin is needed to read a copy with --from"))?,
        },
        None => {
            let path = (args.db.path()).map_err(|_| CliError::usage("--db or --from is required"))?;
            let options = args.db.open_options().map_err(|e| CliError::from_kind(&e))?;
            db = EventDb::open(path, &options)?;
            EventSource::Database(&db)
        }
    };
    report.begin();
    run_events::read(source, &mut |r| match r {
        Ok(event) => feed(event, &mut report),
        Err(why) => report.not_whole(why),
    })
    .map_err(|e| CliError::from_kind(&e))?;
    bar.finish_and_clear();
    check.finish();
    report.take(&mut check);
    Ok(report.end())
}
