//! `chainship runs`: each run's transitions checked against the runtime's
//! rules (unknown outcomes, tools run twice, policy bypasses, runs left
//! running...), from the database or from an exported copy.
//!
//! Streaming: a row is printed as each run ends; state is kept only for
//! runs still open.

use std::collections::BTreeMap;

use chainship_chain::EventDb;
use chainship_chain::record::Record;
use chainship_runs::payload::Payload;
use chainship_runs::{RunCheck, RunEvent, RunFinding, RunSummary};
use chainship_sinks::{SinkConfig, read_records};
use clap::Args;
use serde_json::{Value, json};

use crate::affected::RecordEvent;
use crate::args::{DbArgs, OriginArg, OutputArgs, RunRulesArgs, SinkConnectArgs};
use crate::exit::{CliError, CmdResult, verdict};
use crate::progress::records_spinner;
use crate::report;

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

/// Findings kept for printing; all are counted.
const FINDINGS_KEPT: usize = 10_000;

/// What is printed as the walk goes, and what is kept for the end.
struct Report<'a> {
    args: &'a RunsArgs,
    rows: u64,
    timeline: u64,
    findings: Vec<RunFinding>,
    finding_count: u64,
    by_kind: BTreeMap<&'static str, u64>,
    by_status: BTreeMap<&'static str, u64>,
    events: u64,
    tool_calls: u64,
    side_effects: u64,
    the_run: Option<RunSummary>,
    /// Lines of a copy that are not records, and seq gaps: the first, and how many.
    not_whole: Option<(String, u64)>,
}

impl<'a> Report<'a> {
    fn new(args: &'a RunsArgs) -> Self {
        Report {
            args,
            rows: 0,
            timeline: 0,
            findings: Vec::new(),
            finding_count: 0,
            by_kind: BTreeMap::new(),
            by_status: BTreeMap::new(),
            events: 0,
            tool_calls: 0,
            side_effects: 0,
            the_run: None,
            not_whole: None,
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

    /// A copy that is not whole: the run check saw only part of it.
    fn not_whole(&mut self, what: String) {
        match &mut self.not_whole {
            Some((_, n)) => *n += 1,
            None => self.not_whole = Some((what, 1)),
        }
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
        for f in check.take_findings() {
            self.finding_count += 1;
            *self.by_kind.entry(f.kind.as_str()).or_default() += 1;
            let shown = self.args.run.as_ref().is_none_or(|id| *id == f.run_id);
            if shown && self.findings.len() < FINDINGS_KEPT {
                self.findings.push(f);
            }
        }
        for s in check.take_summaries() {
            self.summary(s);
        }
    }

    fn summary(&mut self, s: RunSummary) {
        *self.by_status.entry(s.status.as_str()).or_default() += 1;
        self.tool_calls += s.tool_calls;
        self.side_effects += s.side_effects;
        if let Some(id) = &self.args.run {
            if *id == s.run_id {
                self.the_run = Some(s);
            }
            return;
        }
        if self.args.findings_only {
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
    fn end(&self) -> u8 {
        let findings: Vec<&RunFinding> = self.findings.iter().collect();
        let relevant = match &self.args.run {
            Some(_) => findings.len() as u64,
            None => self.finding_count,
        };
        let nothing = self.events == 0 || (self.args.run.is_some() && self.timeline == 0);
        let status = if nothing {
            "nothing checked"
        } else if self.not_whole.is_some() {
            "not whole"
        } else if relevant > 0 {
            "findings"
        } else {
            "ok"
        };
        if self.args.output.json {
            let mut tail = json!({
                "findings": findings.iter().map(|f| finding_json(f)).collect::<Vec<_>>(),
                "findings_total": relevant,
                "findings_by_kind": self.by_kind,
                "events": self.events,
                "runs_by_status": self.by_status,
                "tool_calls": self.tool_calls,
                "side_effects": self.side_effects,
                "status": status,
                "not_whole": self.not_whole.as_ref().map(|(first, n)| json!({"first": first, "count": n})),
            });
            if self.args.run.is_some() {
                tail["run"] = self.the_run.as_ref().map_or(Value::Null, summary_json);
            }
            // Closes the streamed array and the object around it.
            let tail = tail.to_string();
            outln!("],{}", &tail[1..]);
        } else {
            if let Some(s) = &self.the_run {
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
            if findings.len() as u64 > relevant.min(FINDINGS_KEPT as u64) {
                outln!("... {} more finding(s)", relevant - findings.len() as u64);
            }
            let statuses: Vec<String> = self.by_status.iter().map(|(k, v)| format!("{v} {k}")).collect();
            outln!(
                "{} event(s), {} run(s) ({}), {} tool call(s), {} side effect(s), {} finding(s)",
                self.events,
                self.by_status.values().sum::<u64>(),
                statuses.join(", "),
                self.tool_calls,
                self.side_effects,
                relevant
            );
            if let Some((first, n)) = &self.not_whole {
                outln!(
                    "not whole ({n} unreadable line(s), seq gap(s) or row(s) no seq reaches, the first: {first}): findings cover only what was read; run verify or verify-export"
                );
            }
            match status {
                "nothing checked" => outln!(
                    "nothing checked: no event read{}",
                    self.args
                        .run
                        .as_ref()
                        .map_or(String::new(), |id| format!(" of run {id}"))
                ),
                "ok" => outln!(
                    "ok: every run's transitions follow the {} rules",
                    self.args.rules.profile
                ),
                _ => {}
            }
        }
        verdict(status == "ok")
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
        report.events += 1;
        if report.events.is_multiple_of(SWEEP_EVERY) {
            check.sweep();
            report.take(&mut check);
            bar.set_position(report.events);
        }
    };
    match &args.source {
        Some(source) => {
            let origin = args
                .origin
                .get()
                .map_err(|_| CliError::usage("--origin is needed to read a copy with --from"))?;
            let source = args.sink.apply(source);
            report.begin();
            let mut last = 0u64;
            report::runtime()?
                .block_on(read_records(&source, origin, &mut |line, place| {
                    let r = match Record::parse(line) {
                        Ok(r) => r,
                        Err(e) => {
                            report.not_whole(format!("{}: not a record: {e}", place()));
                            return;
                        }
                    };
                    // Another origin's records, and seqs already read (duplicates), are skipped.
                    if r.origin != origin || r.seq <= last {
                        return;
                    }
                    if r.seq != last + 1 {
                        report.not_whole(format!("{}: seq {} follows seq {last}", place(), r.seq));
                    }
                    last = r.seq;
                    if let Some(e) = RecordEvent::of(&r) {
                        feed(&e.event(r.seq), &mut report);
                    }
                }))
                .map_err(|e| CliError::from_kind(&e))?;
        }
        None => {
            let path = args
                .db
                .path()
                .map_err(|_| CliError::usage("--db or --from is required"))?;
            let options = args.db.open_options().map_err(|e| CliError::from_kind(&e))?;
            let db = EventDb::open(path, &options)?;
            let head = db.head()?.map_or(0, |(s, _)| s);
            report.begin();
            if let Some(value) = db.first_unreachable_seq()? {
                report.not_whole(chainship_chain::check::unreachable_reason(&value));
            }
            db.scan(0, head, &mut |e| {
                feed(&RunEvent::from(e), &mut report);
                true
            })?;
        }
    }
    bar.finish_and_clear();
    check.finish();
    report.take(&mut check);
    Ok(report.end())
}
