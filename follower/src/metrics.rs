//! The follower's metric names, in one place, Prometheus style. The CLI
//! installs the exporter; without one these calls cost next to nothing.

use std::sync::atomic::{AtomicU64, Ordering};

use chainship_sinks::ErrorKind;
use metrics::{counter, describe_counter, describe_gauge, gauge};

pub const EVENTS_EXPORTED: &str = "chainship_events_exported_total";
pub const BATCHES: &str = "chainship_batches_total";
pub const BYTES_EXPORTED: &str = "chainship_bytes_exported_total";
pub const CURSOR_SEQ: &str = "chainship_cursor_seq";
pub const DB_HEAD_SEQ: &str = "chainship_db_head_seq";
pub const EXPORT_LAG: &str = "chainship_export_lag_events";
pub const SINK_ERRORS: &str = "chainship_sink_errors_total";
pub const RETRIES: &str = "chainship_retries_total";
pub const CHAIN_BREAKS: &str = "chainship_chain_breaks_total";
pub const DUPLICATES_AVOIDED: &str = "chainship_duplicates_avoided_total";
pub const ANCHORED_SEQ: &str = "chainship_anchor_last_seq";
pub const ANCHOR_AGE: &str = "chainship_anchor_seconds_since_publish";
pub const ANCHOR_ERRORS: &str = "chainship_anchor_publish_errors_total";
pub const ANCHOR_LAG: &str = "chainship_anchor_lag_events";
pub const RUNS_OPEN: &str = "chainship_runs_open";
pub const RUNS_LEFT_RUNNING: &str = "chainship_runs_left_running";
pub const UNKNOWN_OUTCOMES: &str = "chainship_unknown_outcomes";
pub const RUN_FINDINGS: &str = "chainship_run_findings_total";
pub const HEALTHY: &str = "chainship_healthy";
pub const WITNESS_COSIGNED_SIZE: &str = "chainship_witness_cosigned_size";
pub const WITNESS_LAST_SUCCESS: &str = "chainship_witness_last_success_timestamp_seconds";
pub const WITNESS_FAILURES: &str = "chainship_witness_failures_total";
pub const WITNESS_QUORUM_SIZE: &str = "chainship_witness_quorum_size";

/// Registers help texts and every counter at 0 (call once the exporter is
/// installed; the metrics server does, before it serves a scrape).
pub fn describe() {
    describe_gauge!(
        HEALTHY,
        "1 while /healthz answers 200, 0 while it answers 503 (set at each scrape)."
    );
    describe_gauge!(
        WITNESS_COSIGNED_SIZE,
        "Size of the last checkpoint each witness cosigned."
    );
    describe_gauge!(WITNESS_LAST_SUCCESS, "When each witness last cosigned (Unix seconds).");
    describe_counter!(
        WITNESS_FAILURES,
        "Witness calls that did not cosign, by witness and kind (unavailable, inconsistent, refused, bad-cosignature, proof, conflict)."
    );
    describe_gauge!(
        WITNESS_QUORUM_SIZE,
        "Size of the newest checkpoint kept with a quorum of cosignatures."
    );
    describe_counter!(EVENTS_EXPORTED, "Events delivered to the sink and acknowledged.");
    describe_counter!(BATCHES, "Batches delivered to the sink and acknowledged.");
    describe_counter!(BYTES_EXPORTED, "Bytes of records delivered to the sink.");
    describe_gauge!(CURSOR_SEQ, "Seq of the last delivered event (the cursor).");
    describe_gauge!(DB_HEAD_SEQ, "Highest seq in the audit database.");
    describe_gauge!(
        EXPORT_LAG,
        "Events in the database not yet delivered (head seq - cursor seq)."
    );
    describe_counter!(SINK_ERRORS, "Sink errors, by kind (transient, permanent, integrity).");
    describe_counter!(
        RETRIES,
        "Sink calls (deliveries, read-backs) retried after a transient error; anchor publishing counts its failures in chainship_anchor_publish_errors_total."
    );
    describe_counter!(CHAIN_BREAKS, "Chain breaks found while following.");
    describe_counter!(
        DUPLICATES_AVOIDED,
        "Events found already in the sink at start-up and not sent again."
    );
    describe_gauge!(ANCHORED_SEQ, "Seq of the last head published to the anchor store.");
    describe_gauge!(
        ANCHOR_AGE,
        "Seconds since a head was last published to the anchor store."
    );
    describe_counter!(ANCHOR_ERRORS, "Failed attempts to publish a head to the anchor store.");
    describe_gauge!(ANCHOR_LAG, "Delivered events not yet covered by a published head.");
    describe_gauge!(RUNS_OPEN, "Runs with no run.finished yet, as of the last event read.");
    describe_gauge!(
        RUNS_LEFT_RUNNING,
        "Open runs silent longer than the open-after setting by the events' own time (not waiting for an approval)."
    );
    describe_gauge!(
        UNKNOWN_OUTCOMES,
        "Tool starts and model calls found with no outcome recorded (the tool may or may not have acted)."
    );
    describe_counter!(
        RUN_FINDINGS,
        "Run check findings, by kind (unknown-outcome, started-without-decision, ...)."
    );
    register_at_zero();
}

/// Exports every counter at 0 from the start: a counter that appears only
/// at its first increment hides that increment from `increase()` and
/// `rate()`, and until then an alert on it has nothing to match.
pub fn register_at_zero() {
    for kind in [ErrorKind::Transient, ErrorKind::Permanent, ErrorKind::Integrity] {
        counter!(SINK_ERRORS, "kind" => kind.as_str()).increment(0);
    }
    for kind in chainship_runs::RunFindingKind::ALL {
        counter!(RUN_FINDINGS, "kind" => kind.as_str()).increment(0);
    }
    for name in [
        EVENTS_EXPORTED,
        BATCHES,
        BYTES_EXPORTED,
        RETRIES,
        CHAIN_BREAKS,
        DUPLICATES_AVOIDED,
        ANCHOR_ERRORS,
    ] {
        counter!(name).increment(0);
    }
}

/// The last delivered seq (the cursor) and the last database head seen:
/// lag is always head − cursor, whichever of the two moved last.
static CURSOR: AtomicU64 = AtomicU64::new(0);
static DB_HEAD: AtomicU64 = AtomicU64::new(0);

fn set_lag() {
    let lag = DB_HEAD
        .load(Ordering::Relaxed)
        .saturating_sub(CURSOR.load(Ordering::Relaxed));
    gauge!(EXPORT_LAG).set(lag as f64);
}

/// At start: the resume point (already delivered) and the database head.
pub fn resumed(db_head: u64, cursor_seq: u64) {
    CURSOR.store(cursor_seq, Ordering::Relaxed);
    gauge!(CURSOR_SEQ).set(cursor_seq as f64);
    database_head(db_head);
}

pub fn delivered(events: usize, bytes: usize, cursor_seq: u64) {
    counter!(EVENTS_EXPORTED).increment(events as u64);
    counter!(BATCHES).increment(1);
    counter!(BYTES_EXPORTED).increment(bytes as u64);
    CURSOR.store(cursor_seq, Ordering::Relaxed);
    gauge!(CURSOR_SEQ).set(cursor_seq as f64);
    set_lag();
}

/// The database head, as a fresh connection saw it.
pub fn database_head(db_head: u64) {
    DB_HEAD.store(db_head, Ordering::Relaxed);
    gauge!(DB_HEAD_SEQ).set(db_head as f64);
    set_lag();
}

pub fn sink_error(kind: &'static str) {
    counter!(SINK_ERRORS, "kind" => kind).increment(1);
}

pub fn retried() {
    counter!(RETRIES).increment(1);
}

pub fn chain_break() {
    counter!(CHAIN_BREAKS).increment(1);
}

pub fn duplicates_avoided(events: u64) {
    counter!(DUPLICATES_AVOIDED).increment(events);
}

/// One run check finding.
pub fn run_finding(kind: &'static str) {
    counter!(RUN_FINDINGS, "kind" => kind).increment(1);
}

/// `n` run findings of one kind at once (those before the resume point).
pub fn run_findings(kind: &'static str, n: u64) {
    counter!(RUN_FINDINGS, "kind" => kind).increment(n);
}

/// Open runs, those silent now, and unknown outcomes (final, and of silent runs).
pub fn runs(open: usize, left_running: u64, unknown_outcomes: u64) {
    gauge!(RUNS_OPEN).set(open as f64);
    gauge!(RUNS_LEFT_RUNNING).set(left_running as f64);
    gauge!(UNKNOWN_OUTCOMES).set(unknown_outcomes as f64);
}
