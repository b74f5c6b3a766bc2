//! The counts of a whole run check (`chainship runs`): every finding and
//! run counted, the first findings kept for showing, and what could not be
//! read. What they add up to is `chainship_verify::run_rules::verdict`.

use std::collections::BTreeMap;

use crate::{RunCheck, RunFinding, RunSummary};

/// Findings kept for showing; all are counted.
pub const FINDINGS_KEPT: usize = 10_000;

/// What a run check found over a whole read.
#[derive(Clone, Debug, Default)]
pub struct RunTally {
    /// The run asked for, when one is: only its findings are kept.
    pub run: Option<String>,
    pub findings: Vec<RunFinding>,
    pub finding_count: u64,
    pub by_kind: BTreeMap<&'static str, u64>,
    pub by_status: BTreeMap<&'static str, u64>,
    /// Events fed to the check (the caller counts them as it feeds).
    pub events: u64,
    pub tool_calls: u64,
    pub side_effects: u64,
    /// The summary of the run asked for, once it ended.
    pub the_run: Option<RunSummary>,
    /// What made the read not whole: the first, and how many.
    pub not_whole: Option<(String, u64)>,
    /// What a rule would have said of steps whose payload was withheld
    /// (redacted): the first few, and how many.
    pub content_redacted: Vec<RunFinding>,
    pub content_redacted_count: u64,
}

impl RunTally {
    pub fn new(run: Option<String>) -> Self {
        RunTally {
            run,
            ..RunTally::default()
        }
    }

    /// Part of the events could not be read: the check saw only the rest.
    pub fn not_whole(&mut self, what: String) {
        match &mut self.not_whole {
            Some((_, n)) => *n += 1,
            None => self.not_whole = Some((what, 1)),
        }
    }

    /// Counts the findings and summaries `check` has ready; returns the
    /// summaries of the runs that ended (to be listed as they end).
    pub fn take(&mut self, check: &mut RunCheck) -> Vec<RunSummary> {
        for f in check.take_findings() {
            self.finding_count += 1;
            *self.by_kind.entry(f.kind.as_str()).or_default() += 1;
            let shown = self.run.as_ref().is_none_or(|id| *id == f.run_id);
            if shown && self.findings.len() < FINDINGS_KEPT {
                self.findings.push(f);
            }
        }
        let (notes, count) = check.content_redacted();
        self.content_redacted_count = count;
        if self.content_redacted.len() < notes.len().min(FINDINGS_KEPT) {
            self.content_redacted = notes[..notes.len().min(FINDINGS_KEPT)].to_vec();
        }
        let summaries = check.take_summaries();
        for s in &summaries {
            *self.by_status.entry(s.status.as_str()).or_default() += 1;
            self.tool_calls += s.tool_calls;
            self.side_effects += s.side_effects;
            if self.run.as_ref() == Some(&s.run_id) {
                self.the_run = Some(s.clone());
            }
        }
        summaries
    }

    /// The findings that count: the run's (kept whole, it is one run), or all.
    pub fn relevant(&self) -> u64 {
        match &self.run {
            Some(_) => self.findings.len() as u64,
            None => self.finding_count,
        }
    }
}
