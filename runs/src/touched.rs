//! Which runs and side effects a range of events holds: what a break, cut
//! or fork touches, and what may need reconciling with the outside world.

use std::collections::BTreeMap;

use crate::check::RunEvent;
use crate::payload::Payload;
use crate::profile::{Profile, Role};

/// At most this many runs and side effects are listed; all are counted.
const LISTED: usize = 1000;

/// A tool call that may have acted on the outside world.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SideEffect {
    pub seq: u64,
    pub run_id: String,
    pub step_id: String,
    pub tool: String,
}

/// Runs and side effects seen in a range.
#[derive(Clone, Debug)]
pub struct Touched {
    profile: &'static Profile,
    read_only: Vec<String>,
    /// Run id to the number of its events in the range (the first `LISTED` runs).
    pub runs: BTreeMap<String, u64>,
    pub side_effects: Vec<SideEffect>,
    pub side_effect_count: u64,
    pub events: u64,
}

impl Touched {
    pub fn new(profile: &'static Profile, read_only: &[String]) -> Self {
        Touched {
            profile,
            read_only: read_only.to_vec(),
            runs: BTreeMap::new(),
            side_effects: Vec::new(),
            side_effect_count: 0,
            events: 0,
        }
    }

    pub fn feed(&mut self, e: &RunEvent<'_>) {
        self.events += 1;
        let run = String::from_utf8_lossy(e.run_id);
        let listed = self.runs.len() < LISTED;
        match self.runs.get_mut(run.as_ref()) {
            Some(n) => *n += 1,
            None if listed => {
                self.runs.insert(run.clone().into_owned(), 1);
            }
            None => {}
        }
        if self.profile.role(e.kind) != Role::ToolStarted {
            return;
        }
        let payload = Payload::parse(e.payload);
        let tool = payload.tool.get().unwrap_or("(unnamed tool)");
        if self.read_only.iter().any(|t| t == tool) {
            return;
        }
        self.side_effect_count += 1;
        if self.side_effects.len() < LISTED {
            self.side_effects.push(SideEffect {
                seq: e.seq,
                run_id: run.into_owned(),
                step_id: String::from_utf8_lossy(e.step_id).into_owned(),
                tool: tool.to_owned(),
            });
        }
    }

    /// True when more runs were seen than are listed.
    pub fn runs_truncated(&self) -> bool {
        self.runs.len() >= LISTED
    }
}
