//! What the run check reports: findings, and one summary per run.

use std::fmt;

/// A broken rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RunFindingKind {
    /// A tool started with no allowing policy decision and no approval
    /// granting it: a policy bypass.
    StartedWithoutDecision,
    /// A tool started again in a step with no approval to re-run it.
    ExecutedTwice,
    /// A tool start (or model dispatch) whose outcome was never recorded,
    /// in a run that ended, was taken over, or went silent: the tool may or
    /// may not have acted.
    UnknownOutcome,
    /// An event of a run after its `run.finished`.
    EventAfterFinish,
    /// A run silent for longer than the open limit, not finished and not
    /// waiting for an approval.
    LeftRunning,
    /// A step event for a step that never started.
    UnknownStep,
    /// An approval decision for an approval the run never requested.
    UnrequestedApproval,
    /// An event whose `at` is not an RFC 3339 time: the silence rules
    /// cannot see it (named once per run).
    UnreadableTime,
}

impl RunFindingKind {
    pub const ALL: [RunFindingKind; 8] = [
        RunFindingKind::StartedWithoutDecision,
        RunFindingKind::ExecutedTwice,
        RunFindingKind::UnknownOutcome,
        RunFindingKind::EventAfterFinish,
        RunFindingKind::LeftRunning,
        RunFindingKind::UnknownStep,
        RunFindingKind::UnrequestedApproval,
        RunFindingKind::UnreadableTime,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunFindingKind::StartedWithoutDecision => "started-without-decision",
            RunFindingKind::ExecutedTwice => "executed-twice",
            RunFindingKind::UnknownOutcome => "unknown-outcome",
            RunFindingKind::EventAfterFinish => "event-after-finish",
            RunFindingKind::LeftRunning => "left-running",
            RunFindingKind::UnknownStep => "unknown-step",
            RunFindingKind::UnrequestedApproval => "unrequested-approval",
            RunFindingKind::UnreadableTime => "unreadable-time",
        }
    }
}

impl fmt::Display for RunFindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One broken rule, where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunFinding {
    pub kind: RunFindingKind,
    pub run_id: String,
    /// Empty for run-level findings.
    pub step_id: String,
    /// The event that shows it (for an unknown outcome: the start).
    pub seq: u64,
    /// The tool (or `model:NAME` for a model call), when one is concerned.
    pub tool: Option<String>,
    pub message: String,
}

impl fmt::Display for RunFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at seq {}: run {}", self.kind, self.seq, self.run_id)?;
        if !self.step_id.is_empty() {
            write!(f, " step {}", self.step_id)?;
        }
        if let Some(tool) = &self.tool {
            write!(f, " tool {tool}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Where a run stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunStatus {
    Finished,
    /// Waiting for an approval decision.
    Waiting,
    Open,
    LeftRunning,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Finished => "finished",
            RunStatus::Waiting => "waiting",
            RunStatus::Open => "open",
            RunStatus::LeftRunning => "left running",
        }
    }
}

/// One run, as the events show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSummary {
    pub run_id: String,
    pub status: RunStatus,
    pub first_seq: u64,
    pub last_seq: u64,
    pub events: u64,
    pub tool_calls: u64,
    pub side_effects: u64,
    pub findings: u64,
}
