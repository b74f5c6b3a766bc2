//! The run check: a state machine per open run, fed events in seq order.
//!
//! State is kept only for runs not yet finished (their open steps, tool
//! starts, model calls and approvals), plus the ids of recently finished
//! runs, so memory follows the number of runs in flight, not the log's
//! size. Time is the events' own `at`: "silent for longer than the open
//! limit" compares a run's last event with the newest event seen, never
//! with the wall clock, so the same log always gives the same findings.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use chainship_chain::EventRef;

use crate::finding::{RunFinding, RunFindingKind, RunStatus, RunSummary};
use crate::payload::Payload;
use crate::profile::{Profile, Role};

/// Finished runs remembered to catch events after their finish.
const FINISHED_REMEMBERED: usize = 200_000;

/// What the check is told.
#[derive(Clone, Debug)]
pub struct RunCheckConfig {
    /// A run (or a tool start, a model call) silent this long by the
    /// events' own time is left running (or its outcome unknown).
    pub open_after: Duration,
    /// Tools that cannot act on the outside world: not side effects.
    pub read_only_tools: Vec<String>,
}

impl Default for RunCheckConfig {
    fn default() -> Self {
        RunCheckConfig {
            open_after: Duration::from_secs(15 * 60),
            read_only_tools: Vec::new(),
        }
    }
}

/// One event's stored fields, as the rules see them.
#[derive(Clone, Copy, Debug)]
pub struct RunEvent<'a> {
    pub seq: u64,
    pub run_id: &'a [u8],
    pub step_id: &'a [u8],
    pub at: &'a [u8],
    pub kind: &'a [u8],
    pub payload: &'a [u8],
}

impl<'a> From<&EventRef<'a>> for RunEvent<'a> {
    fn from(e: &EventRef<'a>) -> Self {
        RunEvent {
            seq: e.seq,
            run_id: e.run_id,
            step_id: e.step_id,
            at: e.at,
            kind: e.kind,
            payload: e.payload_json,
        }
    }
}

/// A tool start or model dispatch with no outcome yet.
#[derive(Debug)]
struct Pending {
    seq: u64,
    what: String,
    /// Already reported as an unknown outcome.
    reported: bool,
}

#[derive(Debug, Default)]
struct Step {
    started: bool,
    reported_unknown: bool,
    /// An allowing policy decision not yet used by a tool start.
    allowed: bool,
    /// Approvals of this step granted and not yet used by a tool start.
    unused_grants: u32,
    granted: u32,
    starts: u32,
    tool: Option<Pending>,
}

#[derive(Debug)]
struct Approval {
    step_id: String,
    granted: bool,
    decided: bool,
    used: bool,
}

#[derive(Debug)]
struct Run {
    first_seq: u64,
    last_seq: u64,
    /// Milliseconds since the epoch of its last event with a readable `at`.
    last_at: Option<i64>,
    events: u64,
    tool_calls: u64,
    side_effects: u64,
    findings: u64,
    /// Seq of the last `lease.taken_over`.
    taken_over: Option<u64>,
    left_running: bool,
    steps: HashMap<String, Step>,
    approvals: HashMap<String, Approval>,
    /// Open model calls by call id.
    model_calls: HashMap<String, Pending>,
}

impl Run {
    fn new(seq: u64) -> Self {
        Run {
            first_seq: seq,
            last_seq: seq,
            last_at: None,
            events: 0,
            tool_calls: 0,
            side_effects: 0,
            findings: 0,
            taken_over: None,
            left_running: false,
            steps: HashMap::new(),
            approvals: HashMap::new(),
            model_calls: HashMap::new(),
        }
    }

    fn waiting(&self) -> bool {
        self.approvals.values().any(|a| !a.decided)
    }

    fn open_tools(&self) -> usize {
        self.steps.values().filter(|s| s.tool.is_some()).count() + self.model_calls.len()
    }
}

/// The check itself. Feed events with [`RunCheck::feed`] in seq order,
/// call [`RunCheck::sweep`] now and then (a page, a second) to apply the
/// silence rules, and [`RunCheck::finish`] at the end of a finite log.
/// Findings and summaries queue up until taken.
#[derive(Debug)]
pub struct RunCheck {
    profile: &'static Profile,
    cfg: RunCheckConfig,
    runs: HashMap<String, Run>,
    finished: HashSet<String>,
    finished_order: VecDeque<String>,
    /// Runs already reported for an event after their finish.
    after_finish_reported: HashSet<String>,
    newest_at: Option<i64>,
    findings: Vec<RunFinding>,
    summaries: Vec<RunSummary>,
    totals: HashMap<RunFindingKind, u64>,
}

/// Milliseconds since the epoch of an RFC 3339 time, if it is one.
fn millis(at: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(at).ok()?;
    let t = humantime::parse_rfc3339_weak(text).ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    i64::try_from(d.as_millis()).ok()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl RunCheck {
    pub fn new(profile: &'static Profile, cfg: RunCheckConfig) -> Self {
        RunCheck {
            profile,
            cfg,
            runs: HashMap::new(),
            finished: HashSet::new(),
            finished_order: VecDeque::new(),
            after_finish_reported: HashSet::new(),
            newest_at: None,
            findings: Vec::new(),
            summaries: Vec::new(),
            totals: HashMap::new(),
        }
    }

    pub fn profile(&self) -> &'static Profile {
        self.profile
    }

    /// Findings since the last call.
    pub fn take_findings(&mut self) -> Vec<RunFinding> {
        std::mem::take(&mut self.findings)
    }

    /// Runs that ended since the last call (all of them after `finish`).
    pub fn take_summaries(&mut self) -> Vec<RunSummary> {
        std::mem::take(&mut self.summaries)
    }

    /// Runs not yet finished.
    pub fn open_runs(&self) -> usize {
        self.runs.len()
    }

    /// Findings so far, by kind.
    pub fn total(&self, kind: RunFindingKind) -> u64 {
        self.totals.get(&kind).copied().unwrap_or(0)
    }

    /// Unknown outcomes found so far.
    pub fn unknown_outcomes(&self) -> u64 {
        self.total(RunFindingKind::UnknownOutcome)
    }

    fn is_side_effect(&self, tool: &str) -> bool {
        !self.cfg.read_only_tools.iter().any(|t| t == tool)
    }

    fn report(
        &mut self,
        kind: RunFindingKind,
        run_id: &str,
        step_id: &str,
        seq: u64,
        tool: Option<String>,
        message: String,
    ) {
        *self.totals.entry(kind).or_default() += 1;
        if let Some(run) = self.runs.get_mut(run_id) {
            run.findings += 1;
        }
        self.findings.push(RunFinding {
            kind,
            run_id: run_id.to_owned(),
            step_id: step_id.to_owned(),
            seq,
            tool,
            message,
        });
    }

    pub fn feed(&mut self, e: &RunEvent<'_>) {
        let run_id = text(e.run_id);
        let step_id = text(e.step_id);
        let at = millis(e.at);
        if let Some(t) = at {
            self.newest_at = Some(self.newest_at.map_or(t, |n| n.max(t)));
        }
        if self.finished.contains(&run_id) {
            if self.after_finish_reported.insert(run_id.clone()) {
                let kind = text(e.kind);
                self.report(
                    RunFindingKind::EventAfterFinish,
                    &run_id,
                    &step_id,
                    e.seq,
                    None,
                    format!("{kind} after the run finished"),
                );
            }
            return;
        }
        let role = self.profile.role(e.kind);
        let gap = {
            let run = self.runs.entry(run_id.clone()).or_insert_with(|| Run::new(e.seq));
            let gap = match (run.last_at, at) {
                (Some(last), Some(now)) if now - last > self.cfg.open_after.as_millis() as i64 => Some(last),
                _ => None,
            };
            run.last_seq = e.seq;
            run.events += 1;
            if at.is_some() {
                run.last_at = at;
            }
            gap
        };
        if gap.is_some() {
            // Silent too long before this event: judged as a sweep at that moment would have.
            self.judge_silent(&run_id);
        }
        if role.is_step_event() && !step_id.is_empty() {
            let run = self.runs.get_mut(&run_id).expect("inserted above");
            let step = run.steps.entry(step_id.clone()).or_default();
            if !step.started && !step.reported_unknown {
                step.reported_unknown = true;
                let kind = text(e.kind);
                self.report(
                    RunFindingKind::UnknownStep,
                    &run_id,
                    &step_id,
                    e.seq,
                    None,
                    format!("{kind} for a step that never started"),
                );
            }
        }
        let payload = if role.reads_payload() {
            Payload::parse(e.payload)
        } else {
            Payload::default()
        };
        match role {
            Role::StepStarted => self.step_started(&run_id, &step_id, e.seq),
            Role::StepPolicy if payload.outcome.get() == Some(self.profile.allow_outcome) => {
                self.step(&run_id, &step_id).allowed = true;
            }
            Role::ApprovalRequested => {
                if let Some(id) = payload.approval_id.get() {
                    let run = self.runs.get_mut(&run_id).expect("inserted above");
                    run.approvals.insert(
                        id.to_owned(),
                        Approval {
                            step_id: step_id.clone(),
                            granted: false,
                            decided: false,
                            used: false,
                        },
                    );
                }
            }
            Role::ApprovalDecided => self.approval_decided(&run_id, &step_id, e.seq, &payload),
            Role::ToolStarted => self.tool_started(&run_id, &step_id, e.seq, &payload),
            r if r.closes_tool() => {
                if let Some(step) = self.runs.get_mut(&run_id).and_then(|r| r.steps.get_mut(&step_id)) {
                    step.tool = None;
                }
            }
            Role::ModelDispatched => {
                let id = payload
                    .call_id
                    .get()
                    .map_or_else(|| format!("step:{step_id}"), str::to_owned);
                let run = self.runs.get_mut(&run_id).expect("inserted above");
                run.model_calls.insert(
                    id.clone(),
                    Pending {
                        seq: e.seq,
                        what: format!("model call {id}"),
                        reported: false,
                    },
                );
            }
            Role::ModelCompleted | Role::ModelFailed => {
                let id = payload
                    .call_id
                    .get()
                    .map_or_else(|| format!("step:{step_id}"), str::to_owned);
                if let Some(run) = self.runs.get_mut(&run_id) {
                    run.model_calls.remove(&id);
                }
            }
            Role::LeaseTakenOver => {
                self.runs.get_mut(&run_id).expect("inserted above").taken_over = Some(e.seq);
            }
            Role::RunFinished => self.run_finished(&run_id),
            _ => {}
        }
    }

    fn step(&mut self, run_id: &str, step_id: &str) -> &mut Step {
        self.runs
            .get_mut(run_id)
            .expect("the run is in the map while its events are fed")
            .steps
            .entry(step_id.to_owned())
            .or_default()
    }

    fn step_started(&mut self, run_id: &str, step_id: &str, seq: u64) {
        // A run taken over that moves on to a new step has given up on
        // whatever was in flight before the takeover.
        let mut orphaned = Vec::new();
        if let Some(run) = self.runs.get_mut(run_id)
            && let Some(taken) = run.taken_over
        {
            for (id, step) in run.steps.iter_mut() {
                if let Some(p) = step.tool.as_mut().filter(|p| p.seq < taken && !p.reported) {
                    p.reported = true;
                    orphaned.push((id.clone(), p.seq, p.what.clone()));
                }
            }
            for (id, call) in run.model_calls.iter_mut() {
                if call.seq < taken && !call.reported {
                    call.reported = true;
                    orphaned.push((String::new(), call.seq, id.clone()));
                }
            }
        }
        for (step, start, what) in orphaned {
            self.report(
                RunFindingKind::UnknownOutcome,
                run_id,
                &step,
                start,
                Some(what),
                format!("started before the run was taken over, never closed, and the run moved on at seq {seq}: it may or may not have acted"),
            );
        }
        self.step(run_id, step_id).started = true;
    }

    fn approval_decided(&mut self, run_id: &str, step_id: &str, seq: u64, payload: &Payload<'_>) {
        let approved = payload.status.get() == Some(self.profile.approved_status);
        let id = payload.approval_id.get().unwrap_or("");
        let run = self.runs.get_mut(run_id).expect("inserted above");
        let Some(approval) = run.approvals.get_mut(id) else {
            self.report(
                RunFindingKind::UnrequestedApproval,
                run_id,
                step_id,
                seq,
                None,
                format!("approval {id:?} was decided but never requested in this run"),
            );
            return;
        };
        approval.decided = true;
        if approved && !approval.granted {
            approval.granted = true;
            let step = approval.step_id.clone();
            let step = run.steps.entry(step).or_default();
            step.granted += 1;
            step.unused_grants += 1;
        }
    }

    fn tool_started(&mut self, run_id: &str, step_id: &str, seq: u64, payload: &Payload<'_>) {
        let tool = payload.tool.get().unwrap_or("(unnamed tool)").to_owned();
        let side_effect = self.is_side_effect(&tool);
        let mut found: Vec<(RunFindingKind, String)> = Vec::new();
        let run = self.runs.get_mut(run_id).expect("inserted above");
        run.tool_calls += 1;
        if side_effect {
            run.side_effects += 1;
        }
        // The grant it names, if any: it must be this run's, approved, and unused.
        let named = payload.approval_id.get().map(str::to_owned);
        if let Some(id) = &named {
            match run.approvals.get_mut(id) {
                Some(a) if a.granted && a.used => {
                    found.push((
                        RunFindingKind::ExecutedTwice,
                        format!("approval {id} was already executed once"),
                    ));
                }
                Some(a) if a.granted => {
                    a.used = true;
                    if let Some(s) = run.steps.get_mut(&a.step_id) {
                        s.unused_grants = s.unused_grants.saturating_sub(1);
                    }
                }
                Some(_) => found.push((
                    RunFindingKind::StartedWithoutDecision,
                    format!("names approval {id}, which was not approved"),
                )),
                None => found.push((
                    RunFindingKind::StartedWithoutDecision,
                    format!("names approval {id}, which this run never requested"),
                )),
            }
        }
        let step = run.steps.entry(step_id.to_owned()).or_default();
        if named.is_none() {
            if step.allowed {
                step.allowed = false;
            } else if step.unused_grants > 0 {
                // A grant of this step, not named in the start: still a decision.
                step.unused_grants -= 1;
            } else {
                found.push((
                    RunFindingKind::StartedWithoutDecision,
                    "no allowing policy decision and no granted approval before it".into(),
                ));
            }
        } else {
            step.allowed = false;
        }
        step.starts += 1;
        if step.starts > 1 + step.granted && !found.iter().any(|(k, _)| *k == RunFindingKind::ExecutedTwice) {
            found.push((
                RunFindingKind::ExecutedTwice,
                format!(
                    "tool start {} of this step, with {} approval(s) to re-run it",
                    step.starts, step.granted
                ),
            ));
        }
        let previous = step.tool.replace(Pending {
            seq,
            what: tool.clone(),
            reported: false,
        });
        if let Some(p) = previous.filter(|p| !p.reported) {
            self.report(
                RunFindingKind::UnknownOutcome,
                run_id,
                step_id,
                p.seq,
                Some(p.what),
                format!("started again at seq {seq} before an outcome was recorded: it may or may not have acted"),
            );
        }
        for (kind, message) in found {
            self.report(kind, run_id, step_id, seq, Some(tool.clone()), message);
        }
    }

    fn run_finished(&mut self, run_id: &str) {
        self.report_unclosed(
            run_id,
            "the run finished with no outcome recorded: it may or may not have acted",
        );
        let Some(run) = self.runs.remove(run_id) else { return };
        self.summaries.push(summary(run_id, &run, RunStatus::Finished));
        self.finished.insert(run_id.to_owned());
        self.finished_order.push_back(run_id.to_owned());
        if self.finished_order.len() > FINISHED_REMEMBERED
            && let Some(old) = self.finished_order.pop_front()
        {
            self.finished.remove(&old);
            self.after_finish_reported.remove(&old);
        }
    }

    /// Reports every tool start and model call of the run still open.
    fn report_unclosed(&mut self, run_id: &str, why: &str) {
        let Some(run) = self.runs.get_mut(run_id) else { return };
        let mut open = Vec::new();
        for (step, s) in run.steps.iter_mut() {
            if let Some(p) = s.tool.as_mut().filter(|p| !p.reported) {
                p.reported = true;
                open.push((step.clone(), p.seq, p.what.clone()));
            }
        }
        for call in run.model_calls.values_mut().filter(|c| !c.reported) {
            call.reported = true;
            open.push((String::new(), call.seq, call.what.clone()));
        }
        open.sort_by_key(|(_, seq, _)| *seq);
        for (step, seq, what) in open {
            self.report(
                RunFindingKind::UnknownOutcome,
                run_id,
                &step,
                seq,
                Some(what),
                why.to_owned(),
            );
        }
    }

    /// A run silent past the open limit: left running (unless it waits for
    /// an approval), and whatever it had in flight has an unknown outcome.
    fn judge_silent(&mut self, run_id: &str) {
        let minutes = self.cfg.open_after.as_secs() / 60;
        self.report_unclosed(
            run_id,
            &format!(
                "no outcome recorded and the run was silent for more than {minutes} min: it may or may not have acted"
            ),
        );
        let Some(run) = self.runs.get_mut(run_id) else { return };
        if run.left_running || run.waiting() {
            return;
        }
        run.left_running = true;
        let seq = run.last_seq;
        self.report(
            RunFindingKind::LeftRunning,
            run_id,
            "",
            seq,
            None,
            format!("no run.finished, and silent for more than {minutes} min (by the events' own time)"),
        );
    }

    /// Applies the silence rule to every open run, against the newest event time seen.
    pub fn sweep(&mut self) {
        let Some(newest) = self.newest_at else { return };
        let limit = self.cfg.open_after.as_millis() as i64;
        let silent: Vec<String> = self
            .runs
            .iter()
            .filter(|(_, r)| r.last_at.is_some_and(|t| newest - t > limit))
            .filter(|(_, r)| !r.left_running || r.open_tools() > 0)
            .map(|(id, _)| id.clone())
            .collect();
        for id in silent {
            self.judge_silent(&id);
        }
    }

    /// The end of a finite log: sweeps, then summarizes every run still open.
    pub fn finish(&mut self) {
        self.sweep();
        let mut open: Vec<(&String, &Run)> = self.runs.iter().collect();
        open.sort_by_key(|(_, r)| r.first_seq);
        let summaries: Vec<RunSummary> = open
            .into_iter()
            .map(|(id, r)| {
                let status = if r.left_running {
                    RunStatus::LeftRunning
                } else if r.waiting() {
                    RunStatus::Waiting
                } else {
                    RunStatus::Open
                };
                summary(id, r, status)
            })
            .collect();
        self.summaries.extend(summaries);
    }
}

fn summary(run_id: &str, run: &Run, status: RunStatus) -> RunSummary {
    RunSummary {
        run_id: run_id.to_owned(),
        status,
        first_seq: run.first_seq,
        last_seq: run.last_seq,
        events: run.events,
        tool_calls: run.tool_calls,
        side_effects: run.side_effects,
        findings: run.findings,
    }
}

#[cfg(test)]
mod tests;
