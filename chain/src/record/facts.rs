//! What the SIEM formats say about an event beyond its stored fields: its
//! time as a number, what it did (started, ended, was allowed or denied),
//! how it turned out, and the tool, call and approval it names.
//!
//! Read from the part the event's type plays ([`crate::profile`], the table
//! the run check judges by) and a few payload fields, the same way every time: a reader derives the
//! facts again from the chainship record a profile carries and compares, so
//! a changed mapped field is found. A change to these rules is a new
//! mapping version (`MAPPING_VERSION`), never an edit of this one.

use std::borrow::Cow;

use super::Record;
use crate::payload::{Payload, Text};
use crate::profile::{AGENTRT, Profile, Role};

/// The version of the mapping every profile record names; bump it (and keep
/// the old rules readable) to change what any mapped field says.
pub const MAPPING_VERSION: &str = "1";

/// The tag (ECS `tags`, OCSF `metadata.labels`) of a record whose `at` is
/// no time a SIEM can hold, so its time 0 is never taken for a real one.
pub const UNREADABLE_AT: &str = "at_not_rfc3339";

/// What the event did, in the words both schemas share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Start,
    End,
    Allowed,
    Denied,
    Info,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Failure,
}

/// The derived facts of one record, borrowed from it where possible.
#[derive(Debug)]
pub struct Facts<'r> {
    /// Milliseconds since the epoch; `None` when `at` is not an RFC 3339
    /// date-time a SIEM can hold (years 0000 to 9999 in UTC). The formats
    /// then write time 0 and say so in a tag ([`UNREADABLE_AT`]); the stored
    /// text still travels in the chainship record.
    pub time_ms: Option<i64>,
    /// The event type, when it is text a schema's string field may hold.
    pub kind: Option<&'r str>,
    pub phase: Phase,
    pub outcome: Option<Outcome>,
    /// The payload's word for how it turned out (a policy outcome, an
    /// approval status, a run's final status), as the payload says it.
    pub detail: Option<Cow<'r, str>>,
    /// Whether `detail` is a decision on the agent's request (a policy
    /// outcome or an approval), not a run's status.
    pub is_decision: bool,
    pub tool: Option<Cow<'r, str>>,
    pub call_id: Option<Cow<'r, str>>,
    pub approval_id: Option<Cow<'r, str>>,
}

/// The longest string OCSF's `string_t` allows (JSON Schema `maxLength`,
/// in characters: a byte count at or under it is always within).
pub const MAX_STRING: usize = 65_535;

/// A hashed field's text (`run_id`, `step_id`, `at`, `type`) for a mapped
/// string field: `None` when it travels as base64 or is too long for one.
pub fn mappable<'r>(record: &'r Record<'_>, field: &str) -> Option<&'r str> {
    let value = match field {
        "run_id" => &record.run_id,
        "step_id" => &record.step_id,
        "at" => &record.at,
        "type" => &record.kind,
        _ => return None,
    };
    (!record.travels_as_base64(field))
        .then_some(value.as_ref())
        .and_then(bounded)
}

/// `text` when a schema's plain string field may hold it.
pub fn bounded(text: &str) -> Option<&str> {
    (text.len() <= MAX_STRING).then_some(text)
}

fn bounded_cow(text: Cow<'_, str>) -> Option<Cow<'_, str>> {
    (text.len() <= MAX_STRING).then_some(text)
}

impl<'r> Facts<'r> {
    pub fn of(record: &'r Record<'_>) -> Facts<'r> {
        let time_ms = (!record.travels_as_base64("at"))
            .then(|| crate::time::millis(record.at.as_bytes()))
            .flatten()
            .filter(|ms| crate::time::RFC3339_RANGE.contains(ms));
        let kind = mappable(record, "type");
        // A payload that is not UTF-8 is no JSON text: nothing to read from it.
        let payload = if !record.travels_as_base64("payload_json") {
            Payload::parse(record.payload_json.as_bytes())
        } else {
            Payload::default()
        };
        let text = |t: Text<'r>| t.0.and_then(bounded_cow);
        // Version 1 of the mapping reads agentrt's types (MAPPING_VERSION):
        // another runtime's profile would be another version.
        let profile = &AGENTRT;
        let (phase, outcome, detail) = classify(profile, kind.unwrap_or(""), &payload);
        let is_decision = matches!(
            profile.role(kind.unwrap_or("").as_bytes()),
            Role::StepPolicy | Role::ApprovalDecided
        );
        Facts {
            time_ms,
            kind,
            phase,
            outcome,
            detail: detail.and_then(|d| bounded(d).map(|d| Cow::Owned(d.to_owned()))),
            is_decision,
            tool: text(payload.tool),
            call_id: text(payload.call_id),
            approval_id: text(payload.approval_id),
        }
    }
}

/// What each event did and how it turned out, by the part its type plays
/// in `profile` (one table with the run check's).
fn classify<'p>(profile: &Profile, kind: &str, payload: &'p Payload<'_>) -> (Phase, Option<Outcome>, Option<&'p str>) {
    use Outcome::{Failure, Success};
    use Phase::*;
    match profile.role(kind.as_bytes()) {
        Role::RunCreated
        | Role::RunStarted
        | Role::RunResumed
        | Role::StepStarted
        | Role::ToolStarted
        | Role::ApprovalRequested
        | Role::ModelDispatched => (Start, None, None),
        Role::RunFinished => {
            let status = payload.status.get();
            let outcome = match status {
                Some(s) if s == profile.completed_status => Some(Success),
                Some(s) if profile.failed_statuses.contains(&s) => Some(Failure),
                _ => None,
            };
            (End, outcome, status)
        }
        Role::ToolFinished | Role::ModelCompleted => (End, Some(Success), None),
        Role::StepFailed | Role::ModelFailed => (End, Some(Failure), None),
        Role::RunInterrupted | Role::StepInterrupted => (End, None, None),
        Role::StepPolicy => match payload.outcome.get() {
            Some(o) if o == profile.allow_outcome => (Allowed, Some(Success), Some(o)),
            Some(o) if o == profile.deny_outcome => (Denied, Some(Failure), Some(o)),
            other => (Info, None, other),
        },
        // The runtime's decisions; any other status is not judged (it stays the detail).
        Role::ApprovalDecided => match payload.status.get() {
            Some(s) if s == profile.approved_status => (Allowed, Some(Success), Some(s)),
            Some(s) if s == profile.rejected_status => (Denied, Some(Failure), Some(s)),
            other => (Info, None, other),
        },
        Role::LimitExceeded | Role::LoopDetected => (Info, Some(Failure), None),
        Role::LeaseTakenOver | Role::StepDecided | Role::Other => (Info, None, None),
    }
}
