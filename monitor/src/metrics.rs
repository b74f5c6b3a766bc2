//! The monitor's metric names, in one place, and how an origin gets its
//! own series: the first [`Labels::limit`] origins seen each get an
//! `origin` label; the rest are counted under `origin="_other"` and have no
//! per-origin gauges, so a fleet of any size keeps a bounded number of
//! series (the log line of each finding still names its origin).

use std::collections::BTreeSet;

use metrics::{counter, describe_counter, describe_gauge, gauge};

pub const VERIFIED_SEQ: &str = "chainship_monitor_verified_seq";
pub const COPY_SEQ: &str = "chainship_monitor_copy_seq";
pub const FINDINGS: &str = "chainship_monitor_findings_total";
pub const HEAD_AGE: &str = "chainship_monitor_head_age_seconds";
pub const CHECKPOINT_SIZE: &str = "chainship_monitor_checkpoint_size";
pub const RECORDS: &str = "chainship_monitor_records_total";
pub const ORIGINS: &str = "chainship_monitor_origins";
pub const STALE_ORIGINS: &str = "chainship_monitor_stale_origins";
pub const READ_ERRORS: &str = "chainship_monitor_read_errors_total";
pub const READY: &str = "chainship_monitor_ready";

/// Which origins get their own series.
pub struct Labels {
    limit: usize,
    labelled: BTreeSet<String>,
}

/// The label of origins past the limit.
pub const OTHER: &str = "_other";

impl Labels {
    pub fn new(limit: usize) -> Self {
        Labels {
            limit,
            labelled: BTreeSet::new(),
        }
    }

    /// The `origin` label for `origin`, or `None` past the limit.
    pub fn of(&mut self, origin: &str) -> Option<String> {
        if self.labelled.contains(origin) {
            return Some(origin.to_owned());
        }
        if self.labelled.len() < self.limit {
            self.labelled.insert(origin.to_owned());
            return Some(origin.to_owned());
        }
        None
    }

    pub fn finding(&mut self, origin: &str, kind: &str) {
        let label = self.of(origin).unwrap_or_else(|| OTHER.to_owned());
        counter!(FINDINGS, "origin" => label, "kind" => kind.to_owned()).increment(1);
    }

    pub fn gauge(&mut self, name: &'static str, origin: &str, value: f64) {
        if let Some(label) = self.of(origin) {
            gauge!(name, "origin" => label).set(value);
        }
    }
}

pub fn describe() {
    describe_gauge!(
        VERIFIED_SEQ,
        "Highest seq of the copy a trusted head vouches for, by origin."
    );
    describe_gauge!(COPY_SEQ, "Highest seq read from the copy in order, by origin.");
    describe_counter!(
        FINDINGS,
        "Findings (tampering, damage, staleness), by origin and kind; origins past --max-origin-labels count as origin=\"_other\"."
    );
    describe_gauge!(
        HEAD_AGE,
        "Seconds since the origin's newest trusted head was published."
    );
    describe_gauge!(CHECKPOINT_SIZE, "Size of the origin's newest trusted checkpoint.");
    describe_counter!(RECORDS, "Records read from the copy.");
    describe_gauge!(ORIGINS, "Origins watched.");
    describe_gauge!(STALE_ORIGINS, "Origins with no trusted head newer than --max-age.");
    describe_counter!(
        READ_ERRORS,
        "Failed reads of the copy or the store (retried, never findings), by part."
    );
    describe_gauge!(READY, "1 while /readyz answers 200 (set at each scrape).");
    counter!(RECORDS).absolute(0);
    for part in ["copy", "store"] {
        counter!(READ_ERRORS, "part" => part).absolute(0);
    }
}
