//! The one answer every verifier gives: a [`Verdict`], whatever it read (a
//! database, a copy, a store, a bundle, a proof, a run's events).
//!
//! The parts every consumer acts on are the same for all: the findings (each
//! of a closed [`crate::Kind`], at its exact seq), warnings, the exact invalid
//! ranges, the last trusted head and when it was published, the tail no head
//! vouches for yet, and the runs and side effects the invalid ranges touch.
//! What a verifier covered (how many heads, records, checkpoints) is its own
//! `C`. Whether it passed is decided here, once: [`Verdict::passed`].

use std::time::SystemTime;

use chainship_chain::{Head, InvalidRange};
use chainship_runs::affected::Affected;

use crate::finding::Finding;

/// What a verifier concluded (see the module doc); `C` is what it covered.
#[derive(Debug)]
pub struct Verdict<C> {
    /// Every fault found, each of a [`crate::Kind`] and at its seq where it has one.
    pub findings: Vec<Finding>,
    /// What is worth saying but fails nothing.
    pub warnings: Vec<String>,
    /// The exact invalid ranges, where the chain breaks or a head contradicts it.
    pub ranges: Option<Vec<InvalidRange>>,
    /// The highest trusted head below every finding that ends trust
    /// ([`crate::Kind::ends_trust`]), and when it was published.
    pub last_trusted: Option<Head>,
    pub last_trusted_published: Option<SystemTime>,
    /// Records after the last trusted head, as `(first, last)` seq: intact
    /// as a chain, but vouched for by no signed head yet.
    pub unvouched: Option<(u64, u64)>,
    /// The runs and side effects the invalid seqs touch, when asked for.
    pub touched: Option<Affected>,
    /// The seqs accepted as redacted (a trusted statement covers each), ascending.
    pub redacted: Vec<crate::redactions::Redacted>,
    /// What the verifier read and checked.
    pub covered: C,
}

impl<C> Verdict<C> {
    /// A verdict with nothing found yet over `covered`.
    pub fn new(covered: C) -> Self {
        Verdict {
            findings: Vec::new(),
            warnings: Vec::new(),
            ranges: None,
            last_trusted: None,
            last_trusted_published: None,
            unvouched: None,
            touched: None,
            redacted: Vec::new(),
            covered,
        }
    }

    /// Whether the check passed: nothing found. A check that covered nothing
    /// says so in a finding ([`crate::Kind::NoTrustedHead`], [`crate::Kind::NothingChecked`]),
    /// so it never passes by having read nothing.
    pub fn passed(&self) -> bool {
        self.findings.is_empty()
    }

    /// `ok` or `failed`, as `--json` and the job's metrics say it.
    pub fn status(&self) -> &'static str {
        if self.passed() { "ok" } else { "failed" }
    }

    /// How many records the tail no head vouches for holds.
    pub fn unvouched_count(&self) -> u64 {
        self.unvouched.map_or(0, |(a, b)| b.saturating_sub(a).saturating_add(1))
    }

    /// The unvouched tail in words, if there is one.
    pub fn unvouched_text(&self) -> Option<String> {
        self.unvouched
            .map(|(first, last)| unvouched_text(first, last, "record(s)"))
    }

    /// The same verdict over what `f` makes of the coverage.
    pub fn map<D>(self, f: impl FnOnce(C) -> D) -> Verdict<D> {
        Verdict {
            findings: self.findings,
            warnings: self.warnings,
            ranges: self.ranges,
            last_trusted: self.last_trusted,
            last_trusted_published: self.last_trusted_published,
            unvouched: self.unvouched,
            touched: self.touched,
            redacted: self.redacted,
            covered: f(self.covered),
        }
    }
}

/// Rows or records (`what`) `first..=last` past the last trusted head, in words.
pub fn unvouched_text(first: u64, last: u64, what: &str) -> String {
    format!(
        "{} {what} after the last trusted head (seq {first}..{last}) are not vouched for by any head",
        last.saturating_sub(first).saturating_add(1)
    )
}

pub use chainship_runs::affected::merge;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::Kind;

    #[test]
    fn a_verdict_passes_only_without_findings() {
        let mut v = Verdict::new(());
        assert!(v.passed());
        assert_eq!(v.status(), "ok");
        v.warnings.push("a warning fails nothing".into());
        assert!(v.passed());
        v.findings
            .push(Finding::new(Kind::NothingChecked, None, "no event was read"));
        assert!(!v.passed());
        assert_eq!(v.status(), "failed");
    }

    #[test]
    fn ranges_that_touch_are_one() {
        assert_eq!(merge(vec![(1, 3), (4, 4), (6, 9), (7, 8)]), vec![(1, 4), (6, 9)]);
        assert_eq!(merge(vec![(5, u64::MAX), (u64::MAX, u64::MAX)]), vec![(5, u64::MAX)]);
    }

    #[test]
    fn the_unvouched_tail_is_counted_and_said() {
        let mut v = Verdict::new(());
        v.unvouched = Some((101, 150));
        assert_eq!(v.unvouched_count(), 50);
        assert!(
            v.unvouched_text()
                .unwrap()
                .starts_with("50 record(s) after the last trusted head (seq 101..150)")
        );
    }
}
