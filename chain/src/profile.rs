//! A runtime's rules as data: which event type plays which part in a run,
//! and which payload values mean "allowed" and "approved". The one table
//! of a runtime's event types: the run check (`chainship_runs`) judges runs
//! by it, and the SIEM mapping ([`crate::record`]) says what each event did
//! by it. Adding another runtime is adding another `Profile`.

/// The part an event type plays in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    RunCreated,
    RunStarted,
    RunFinished,
    RunResumed,
    RunInterrupted,
    LeaseTakenOver,
    StepStarted,
    StepDecided,
    StepPolicy,
    ToolStarted,
    ToolFinished,
    StepFailed,
    StepInterrupted,
    ApprovalRequested,
    ApprovalDecided,
    LimitExceeded,
    LoopDetected,
    ModelDispatched,
    ModelCompleted,
    ModelFailed,
    /// A type the profile does not know: counted, never judged.
    Other,
}

impl Role {
    /// Roles that belong to a step: with a step id, the step must have started.
    pub fn is_step_event(self) -> bool {
        matches!(
            self,
            Role::StepDecided
                | Role::StepPolicy
                | Role::ToolStarted
                | Role::ToolFinished
                | Role::StepFailed
                | Role::StepInterrupted
                | Role::ApprovalRequested
                | Role::ModelDispatched
                | Role::ModelCompleted
                | Role::ModelFailed
        )
    }

    /// Roles that close a tool start of the same step.
    pub fn closes_tool(self) -> bool {
        matches!(self, Role::ToolFinished | Role::StepFailed | Role::StepInterrupted)
    }

    /// Roles whose payload the rules read.
    pub fn reads_payload(self) -> bool {
        matches!(
            self,
            Role::StepDecided
                | Role::StepPolicy
                | Role::ToolStarted
                | Role::ApprovalRequested
                | Role::ApprovalDecided
                | Role::ModelDispatched
                | Role::ModelCompleted
                | Role::ModelFailed
        )
    }
}

/// One runtime's rules.
#[derive(Debug)]
pub struct Profile {
    pub name: &'static str,
    /// Event type to role; types not listed are [`Role::Other`].
    pub types: &'static [(&'static str, Role)],
    /// The `step.policy` outcome that lets a tool start.
    pub allow_outcome: &'static str,
    /// The `approval.decided` status that grants the request.
    pub approved_status: &'static str,
    /// The `step.policy` outcome that refuses a tool.
    pub deny_outcome: &'static str,
    /// The `approval.decided` status that refuses the request.
    pub rejected_status: &'static str,
    /// The `run.finished` status of a run that succeeded, and those of one that did not.
    pub completed_status: &'static str,
    pub failed_statuses: &'static [&'static str],
}

impl Profile {
    /// The role of an event type (exact bytes).
    pub fn role(&self, kind: &[u8]) -> Role {
        self.types
            .iter()
            .find(|(name, _)| name.as_bytes() == kind)
            .map_or(Role::Other, |&(_, role)| role)
    }

    /// The profile of this name (`agentrt`).
    pub fn named(name: &str) -> Option<&'static Profile> {
        [&AGENTRT].into_iter().find(|p| p.name == name)
    }
}

/// agentrt's event types (`agentrt.go`) and payloads (`driver.go`): a tool
/// start names `tool` and, when an approval granted it, `approval_id`; a
/// policy decision its `outcome`; an approval decision its `approval_id`
/// and `status`; model calls their `call_id`.
pub const AGENTRT: Profile = Profile {
    name: "agentrt",
    types: &[
        ("run.created", Role::RunCreated),
        ("run.started", Role::RunStarted),
        ("run.finished", Role::RunFinished),
        ("run.resumed", Role::RunResumed),
        ("run.interrupted", Role::RunInterrupted),
        ("lease.taken_over", Role::LeaseTakenOver),
        ("step.started", Role::StepStarted),
        ("step.decided", Role::StepDecided),
        ("step.policy", Role::StepPolicy),
        ("step.tool_started", Role::ToolStarted),
        ("step.tool_finished", Role::ToolFinished),
        ("step.failed", Role::StepFailed),
        ("step.interrupted", Role::StepInterrupted),
        ("approval.requested", Role::ApprovalRequested),
        ("approval.decided", Role::ApprovalDecided),
        ("limit.exceeded", Role::LimitExceeded),
        ("loop.detected", Role::LoopDetected),
        ("model.dispatched", Role::ModelDispatched),
        ("model.completed", Role::ModelCompleted),
        ("model.failed", Role::ModelFailed),
    ],
    allow_outcome: "allow",
    approved_status: "approved",
    deny_outcome: "deny",
    rejected_status: "rejected",
    completed_status: "COMPLETED",
    failed_statuses: &["FAILED", "CANCELLED"],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_agentrt_type_has_one_role_and_unknown_types_have_none() {
        assert_eq!(AGENTRT.role(b"step.tool_started"), Role::ToolStarted);
        assert_eq!(AGENTRT.role(b"step.tool_started "), Role::Other);
        assert_eq!(AGENTRT.role(b"tool.called"), Role::Other);
        let mut names: Vec<_> = AGENTRT.types.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), AGENTRT.types.len());
        assert!(Profile::named("agentrt").is_some() && Profile::named("none").is_none());
    }
}
