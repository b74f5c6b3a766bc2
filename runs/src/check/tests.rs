//! Each rule with exactly its fault, and agentrt's own sequences (its proxy
//! tests' allowed, denied, approved and invalid runs, and an interrupted
//! side effect approved and re-run) with none.

use super::*;
use crate::profile::AGENTRT;

/// A run's events, written as agentrt writes them: (step, type, payload),
/// one second apart from `start` seconds.
struct Log {
    events: Vec<(u64, String, String, String, String, String)>,
}

impl Log {
    fn new() -> Self {
        Log { events: Vec::new() }
    }

    fn at(&mut self, secs: u64, run: &str, step: &str, kind: &str, payload: &str) -> &mut Self {
        let seq = self.events.len() as u64 + 1;
        let at = humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_secs(1_786_953_600 + secs))
            .to_string();
        self.events
            .push((seq, run.into(), step.into(), at, kind.into(), payload.into()));
        self
    }

    /// Appends a run's events one second apart, starting after the last.
    fn run(&mut self, run: &str, events: &[(&str, &str, &str)]) -> &mut Self {
        for (step, kind, payload) in events {
            let secs = self.events.len() as u64;
            self.at(secs, run, step, kind, payload);
        }
        self
    }

    fn check(&self) -> (Vec<(RunFindingKind, String, u64)>, Vec<RunSummary>) {
        let (found, summaries) = self.findings();
        (
            found.into_iter().map(|f| (f.kind, f.step_id, f.seq)).collect(),
            summaries,
        )
    }

    fn findings(&self) -> (Vec<RunFinding>, Vec<RunSummary>) {
        let mut c = self.fed(None);
        c.finish();
        (c.take_findings(), c.take_summaries())
    }

    /// A check fed every event, the one at `redacted` as a tombstone.
    fn fed(&self, redacted: Option<u64>) -> RunCheck {
        let mut c = RunCheck::new(&AGENTRT, RunCheckConfig::default());
        for (seq, run, step, at, kind, payload) in &self.events {
            c.feed(&RunEvent {
                seq: *seq,
                run_id: run.as_bytes(),
                step_id: step.as_bytes(),
                at: at.as_bytes(),
                kind: kind.as_bytes(),
                payload: payload.as_bytes(),
                redacted: Some(*seq) == redacted,
            });
        }
        c
    }
}

const ALLOWED: &[(&str, &str, &str)] = &[
    ("", "run.created", r#"{"goal":"g"}"#),
    ("", "run.started", "{}"),
    ("s0", "step.started", r#"{"index":0}"#),
    (
        "s0",
        "step.decided",
        r#"{"kind":"tool_call","tool":"bank_balance","args":{}}"#,
    ),
    ("s0", "step.policy", r#"{"outcome":"allow"}"#),
    ("s0", "step.tool_started", r#"{"tool":"bank_balance","args":{}}"#),
    ("s0", "step.tool_finished", r#"{"tool":"bank_balance","summary":"ok"}"#),
    ("", "run.finished", r#"{"status":"COMPLETED"}"#),
];

const DENIED: &[(&str, &str, &str)] = &[
    ("", "run.created", "{}"),
    ("", "run.started", "{}"),
    ("s0", "step.started", r#"{"index":0}"#),
    ("s0", "step.decided", r#"{"kind":"tool_call","tool":"bank_refund"}"#),
    ("s0", "step.policy", r#"{"outcome":"deny","reason":"operator's rule"}"#),
    ("s0", "step.failed", r#"{"kind":"policy_denied"}"#),
    ("s1", "step.started", r#"{"index":1}"#),
    ("s1", "step.decided", r#"{"kind":"fail"}"#),
    ("", "run.finished", r#"{"status":"FAILED"}"#),
];

const APPROVED: &[(&str, &str, &str)] = &[
    ("", "run.created", "{}"),
    ("", "run.started", "{}"),
    ("s0", "step.started", r#"{"index":0}"#),
    ("s0", "step.decided", r#"{"kind":"tool_call","tool":"bank_pay"}"#),
    ("s0", "step.policy", r#"{"outcome":"require_approval"}"#),
    ("s0", "approval.requested", r#"{"approval_id":"a1","kind":"payment"}"#),
    (
        "s0",
        "approval.decided",
        r#"{"approval_id":"a1","status":"approved","by":"op"}"#,
    ),
    ("", "run.resumed", r#"{"approval_id":"a1"}"#),
    ("s0", "step.policy", r#"{"outcome":"require_approval"}"#),
    (
        "s0",
        "step.tool_started",
        r#"{"tool":"bank_pay","args":{},"approval_id":"a1"}"#,
    ),
    ("s0", "step.tool_finished", r#"{"tool":"bank_pay"}"#),
    ("", "run.finished", r#"{"status":"COMPLETED"}"#),
];

const INVALID: &[(&str, &str, &str)] = &[
    ("", "run.created", "{}"),
    ("", "run.started", "{}"),
    ("s0", "step.started", r#"{"index":0}"#),
    (
        "s0",
        "step.decided",
        r#"{"kind":"tool_call","tool":"bank_balance","args":{"acount":1}}"#,
    ),
    ("s0", "step.failed", r#"{"kind":"invalid_decision"}"#),
    ("s1", "step.started", r#"{"index":1}"#),
    ("s1", "step.decided", r#"{"kind":"fail"}"#),
    ("", "run.finished", r#"{"status":"FAILED"}"#),
];

/// A worker killed after dispatching the tool; another takes the lease,
/// marks the step interrupted, asks an operator, and re-runs it approved.
const INTERRUPTED_THEN_APPROVED: &[(&str, &str, &str)] = &[
    ("", "run.created", "{}"),
    ("", "run.started", "{}"),
    ("s0", "step.started", r#"{"index":0}"#),
    ("s0", "model.dispatched", r#"{"call_id":"m1","attempt":1,"model":"m"}"#),
    ("s0", "model.completed", r#"{"call_id":"m1"}"#),
    ("s0", "step.decided", r#"{"kind":"tool_call","tool":"bank_pay"}"#),
    ("s0", "step.policy", r#"{"outcome":"allow"}"#),
    ("s0", "step.tool_started", r#"{"tool":"bank_pay","args":{}}"#),
    ("", "lease.taken_over", r#"{"previous_owner":"w1","owner":"w2"}"#),
    ("", "run.resumed", "{}"),
    ("s0", "step.interrupted", r#"{"tool":"bank_pay"}"#),
    (
        "s0",
        "approval.requested",
        r#"{"approval_id":"a9","kind":"interrupted_side_effect"}"#,
    ),
    ("s0", "approval.decided", r#"{"approval_id":"a9","status":"approved"}"#),
    ("", "run.resumed", r#"{"approval_id":"a9"}"#),
    (
        "s0",
        "step.tool_started",
        r#"{"tool":"bank_pay","args":{},"approval_id":"a9"}"#,
    ),
    ("s0", "step.tool_finished", r#"{"tool":"bank_pay"}"#),
    ("s1", "step.started", r#"{"index":1}"#),
    ("s1", "step.decided", r#"{"kind":"complete"}"#),
    ("", "run.finished", r#"{"status":"COMPLETED"}"#),
];

#[test]
fn agentrts_own_sequences_raise_nothing() {
    let mut log = Log::new();
    log.run("allowed", ALLOWED)
        .run("denied", DENIED)
        .run("approved", APPROVED)
        .run("invalid", INVALID)
        .run("interrupted", INTERRUPTED_THEN_APPROVED);
    let (found, summaries) = log.check();
    assert_eq!(found, vec![]);
    assert_eq!(summaries.len(), 5);
    assert!(
        summaries
            .iter()
            .all(|s| s.status == RunStatus::Finished && s.findings == 0)
    );
    let approved = summaries.iter().find(|s| s.run_id == "approved").unwrap();
    assert_eq!(
        (approved.tool_calls, approved.side_effects, approved.events),
        (1, 1, 12)
    );
}

#[test]
fn interleaved_runs_are_judged_apart() {
    let mut log = Log::new();
    for (i, ((s1, k1, p1), (s2, k2, p2))) in ALLOWED.iter().zip(APPROVED.iter()).enumerate() {
        log.at(i as u64, "a", s1, k1, p1).at(i as u64, "b", s2, k2, p2);
    }
    for (s, k, p) in &APPROVED[ALLOWED.len()..] {
        log.at(20, "b", s, k, p);
    }
    assert_eq!(log.check().0, vec![]);
}

fn without(
    seq: &[(&'static str, &'static str, &'static str)],
    kind: &str,
) -> Vec<(&'static str, &'static str, &'static str)> {
    seq.iter().copied().filter(|(_, k, _)| *k != kind).collect()
}

#[test]
fn an_unclosed_tool_start_in_a_finished_run_is_an_unknown_outcome() {
    let mut log = Log::new();
    log.run("r", &without(ALLOWED, "step.tool_finished"));
    assert_eq!(log.check().0, vec![(RunFindingKind::UnknownOutcome, "s0".into(), 6)]);
}

#[test]
fn an_unanswered_model_dispatch_in_a_finished_run_is_an_unknown_outcome() {
    let mut log = Log::new();
    log.run("r", &without(INTERRUPTED_THEN_APPROVED, "model.completed"));
    let found = log.check().0;
    assert_eq!(found, vec![(RunFindingKind::UnknownOutcome, "s0".into(), 4)]);
}

#[test]
fn a_start_left_open_by_a_takeover_is_an_unknown_outcome_once_the_run_moves_on() {
    let mut log = Log::new();
    log.run("r", &without(INTERRUPTED_THEN_APPROVED, "step.interrupted"));
    let found = log.check().0;
    // The tool start at seq 8 was never closed; the approved re-run (which
    // is allowed: there is an approval to re-run it) cannot say what the first did.
    assert!(
        found.contains(&(RunFindingKind::UnknownOutcome, "s0".into(), 8)),
        "{found:?}"
    );
}

#[test]
fn a_silent_run_is_left_running_and_its_open_start_unknown() {
    let mut log = Log::new();
    log.run("quiet", &ALLOWED[..6]); // tool started at seq 6, nothing after
    log.at(16 * 60 + 10, "other", "", "run.created", "{}");
    let (found, summaries) = log.check();
    assert_eq!(
        found,
        vec![
            (RunFindingKind::UnknownOutcome, "s0".into(), 6),
            (RunFindingKind::LeftRunning, String::new(), 6)
        ]
    );
    let quiet = summaries.iter().find(|s| s.run_id == "quiet").unwrap();
    assert_eq!(quiet.status, RunStatus::LeftRunning);
    let other = summaries.iter().find(|s| s.run_id == "other").unwrap();
    assert_eq!(
        other.status,
        RunStatus::Open,
        "a run with recent events is open, not left"
    );
}

#[test]
fn a_run_waiting_for_an_approval_is_not_left_running() {
    let mut log = Log::new();
    log.run("w", &APPROVED[..6]);
    log.at(3 * 3600, "other", "", "run.created", "{}");
    let (found, summaries) = log.check();
    assert_eq!(found, vec![]);
    assert_eq!(summaries[0].status, RunStatus::Waiting);
}

#[test]
fn a_second_start_without_an_approval_is_executed_twice() {
    let mut log = Log::new();
    let mut seq = ALLOWED.to_vec();
    seq.insert(7, ("s0", "step.policy", r#"{"outcome":"allow"}"#));
    seq.insert(8, ("s0", "step.tool_started", r#"{"tool":"bank_balance","args":{}}"#));
    seq.insert(9, ("s0", "step.tool_finished", r#"{"tool":"bank_balance"}"#));
    log.run("r", &seq);
    assert_eq!(log.check().0, vec![(RunFindingKind::ExecutedTwice, "s0".into(), 9)]);

    // One approval executed twice is executed twice, too.
    let mut seq = APPROVED.to_vec();
    seq.insert(
        11,
        ("s0", "step.tool_started", r#"{"tool":"bank_pay","approval_id":"a1"}"#),
    );
    seq.insert(12, ("s0", "step.tool_finished", r#"{"tool":"bank_pay"}"#));
    let mut log = Log::new();
    log.run("r", &seq);
    assert_eq!(log.check().0, vec![(RunFindingKind::ExecutedTwice, "s0".into(), 12)]);
}

#[test]
fn a_start_with_no_decision_is_a_policy_bypass() {
    for (name, seq) in [
        ("no policy event", without(ALLOWED, "step.policy")),
        (
            "a denying policy",
            ALLOWED
                .iter()
                .map(|e| {
                    if e.1 == "step.policy" {
                        ("s0", "step.policy", r#"{"outcome":"deny"}"#)
                    } else {
                        *e
                    }
                })
                .collect(),
        ),
        (
            "an approval never decided",
            APPROVED
                .iter()
                .copied()
                .filter(|e| e.1 != "approval.decided" && e.1 != "run.resumed")
                .collect(),
        ),
        (
            "a rejected approval",
            APPROVED
                .iter()
                .map(|e| {
                    if e.1 == "approval.decided" {
                        ("s0", "approval.decided", r#"{"approval_id":"a1","status":"rejected"}"#)
                    } else {
                        *e
                    }
                })
                .collect(),
        ),
    ] {
        let mut log = Log::new();
        log.run("r", &seq);
        let found = log.check().0;
        assert!(
            found
                .iter()
                .any(|(k, step, _)| *k == RunFindingKind::StartedWithoutDecision && step == "s0"),
            "{name}: {found:?}"
        );
    }
}

#[test]
fn an_event_after_finish_is_named_once() {
    let mut log = Log::new();
    log.run("r", ALLOWED)
        .run("r", &[("", "run.resumed", "{}"), ("", "run.finished", "{}")]);
    assert_eq!(
        log.check().0,
        vec![(RunFindingKind::EventAfterFinish, String::new(), 9)]
    );
}

#[test]
fn a_run_id_reused_after_finish_hides_nothing() {
    let mut log = Log::new();
    log.run("r", ALLOWED).run(
        "r",
        &[
            ("", "run.created", "{}"),
            ("s9", "step.started", "{}"),
            ("s9", "step.tool_started", r#"{"tool":"bank_pay"}"#),
            ("", "run.finished", "{}"),
        ],
    );
    let kinds: Vec<RunFindingKind> = log.check().0.into_iter().map(|f| f.0).collect();
    assert_eq!(
        kinds,
        vec![
            RunFindingKind::EventAfterFinish,
            RunFindingKind::StartedWithoutDecision,
            RunFindingKind::UnknownOutcome
        ]
    );
}

#[test]
fn contradicting_decisions_never_let_a_tool_start() {
    let bypass = |events: &[(&'static str, &'static str, &'static str)]| {
        let mut seq = vec![
            ("", "run.created", "{}"),
            ("", "run.started", "{}"),
            ("s0", "step.started", "{}"),
            ("s0", "step.decided", r#"{"kind":"tool_call","tool":"bank_pay"}"#),
        ];
        seq.extend_from_slice(events);
        seq.push(("s0", "step.tool_finished", "{}"));
        seq.push(("", "run.finished", "{}"));
        let mut log = Log::new();
        log.run("r", &seq);
        log.check()
            .0
            .iter()
            .any(|f| f.0 == RunFindingKind::StartedWithoutDecision)
    };
    let allow = ("s0", "step.policy", r#"{"outcome":"allow"}"#);
    let start = ("s0", "step.tool_started", r#"{"tool":"bank_pay"}"#);
    let require = ("s0", "step.policy", r#"{"outcome":"require_approval"}"#);
    let deny = ("s0", "step.policy", r#"{"outcome":"deny"}"#);
    let requested = ("s0", "approval.requested", r#"{"approval_id":"a1"}"#);
    let approved = ("s0", "approval.decided", r#"{"approval_id":"a1","status":"approved"}"#);
    let rejected = ("s0", "approval.decided", r#"{"approval_id":"a1","status":"rejected"}"#);
    let start_a1 = ("s0", "step.tool_started", r#"{"tool":"bank_pay","approval_id":"a1"}"#);
    assert!(!bypass(&[allow, start]), "the plain allowed flow");
    assert!(
        !bypass(&[require, requested, approved, allow, start_a1]),
        "the approved flow"
    );
    assert!(
        !bypass(&[require, requested, approved, require, start_a1]),
        "approved, policy asked again"
    );
    assert!(
        bypass(&[require, allow, start]),
        "an allow while an approval is outstanding"
    );
    assert!(
        bypass(&[require, requested, rejected, allow, start]),
        "an allow after a rejection"
    );
    assert!(bypass(&[deny, allow, start]), "an allow after a denial");
    assert!(
        bypass(&[deny, requested, approved, start_a1]),
        "an approval after a denial"
    );
    assert!(
        bypass(&[require, requested, rejected, approved, start_a1]),
        "decided twice"
    );
    assert!(
        bypass(&[allow, ("s0", "step.failed", "{}"), start]),
        "a failed step needs a new decision"
    );
}

#[test]
fn an_approval_of_one_step_never_starts_another() {
    let mut log = Log::new();
    log.run(
        "r",
        &[
            ("", "run.created", "{}"),
            ("sA", "step.started", "{}"),
            ("sA", "step.policy", r#"{"outcome":"require_approval"}"#),
            ("sA", "approval.requested", r#"{"approval_id":"a1"}"#),
            ("sA", "approval.decided", r#"{"approval_id":"a1","status":"approved"}"#),
            ("sA", "step.failed", "{}"),
            ("sB", "step.started", "{}"),
            ("sB", "step.policy", r#"{"outcome":"require_approval"}"#),
            ("sB", "step.tool_started", r#"{"tool":"bank_pay","approval_id":"a1"}"#),
            ("sB", "step.tool_finished", "{}"),
            ("", "run.finished", "{}"),
        ],
    );
    assert_eq!(
        log.check().0,
        vec![(RunFindingKind::StartedWithoutDecision, "sB".into(), 9)]
    );
}

#[test]
fn a_long_call_that_finishes_is_no_finding_and_a_repeated_dispatch_is_unknown() {
    let mut log = Log::new();
    log.run("slow", &ALLOWED[..6]);
    // The tool finishes 25 minutes later, then the run.
    log.at(25 * 60, "slow", "s0", "step.tool_finished", "{}");
    log.at(25 * 60 + 1, "slow", "", "run.finished", "{}");
    assert_eq!(log.check().0, vec![]);

    // A model call dispatched twice under one id: the first has no outcome.
    let mut log = Log::new();
    let mut seq = INTERRUPTED_THEN_APPROVED.to_vec();
    seq.insert(4, ("s0", "model.dispatched", r#"{"call_id":"m1","attempt":2}"#));
    log.run("r", &seq);
    assert_eq!(log.check().0, vec![(RunFindingKind::UnknownOutcome, "s0".into(), 4)]);
}

/// Attack round 14: a call id written as another call's key closed it.
#[test]
fn a_call_id_never_closes_the_call_of_a_step_that_gave_none() {
    let mut log = Log::new();
    log.run("r", &ALLOWED[..2]);
    log.at(2, "r", "s1", "model.dispatched", "{}");
    log.at(3, "r", "s2", "model.completed", r#"{"call_id":"step:s1"}"#);
    log.at(4, "r", "", "run.finished", "{}");
    let unknown: Vec<u64> = log
        .check()
        .0
        .into_iter()
        .filter(|(kind, _, _)| *kind == RunFindingKind::UnknownOutcome)
        .map(|(_, _, seq)| seq)
        .collect();
    assert_eq!(unknown, vec![3], "the dispatch at seq 3 has no outcome");
}

/// Attack round 14: an id written as a long id's short form matched it.
#[test]
fn no_id_kept_as_itself_equals_a_long_ids_short_form() {
    let check = RunCheck::new(&AGENTRT, RunCheckConfig::default());
    for len in [MAX_ID + 1, MAX_ID + 2, 300, 5000] {
        for fill in ["x", "é", "€", "😀"] {
            let long = fill.repeat(len / fill.len() + 1);
            let short = check.short_str(&long);
            assert!(short.len() > MAX_ID, "{} bytes: {short}", long.len());
            // A saved state holding it is read back; one holding the long id whole is not.
            assert!(is_short_form(&short), "{short}");
            assert!(!is_short_form(&long));
            // Written literally, the short form is long itself, so shortened again.
            assert_ne!(check.short_str(&short), short);
        }
    }
    let long = "c".repeat(300);
    let call = |id: &str| format!(r#"{{"call_id":"{id}"}}"#);
    let forged = check.short_str(&long).into_owned();
    let mut log = Log::new();
    log.run("r", &ALLOWED[..2]);
    log.at(2, "r", "s1", "model.dispatched", &call(&long));
    log.at(3, "r", "s1", "model.completed", &call(&forged));
    log.at(4, "r", "", "run.finished", "{}");
    let found: Vec<RunFindingKind> = log.check().0.into_iter().map(|(kind, _, _)| kind).collect();
    assert!(found.contains(&RunFindingKind::UnknownOutcome), "{found:?}");
}

#[test]
fn an_open_model_call_is_named_by_its_key_wherever_it_is_reported() {
    let mut log = Log::new();
    log.run("r", &ALLOWED[..2]);
    log.at(2, "r", "s0", "model.dispatched", r#"{"call_id":"m1"}"#);
    // Dispatched again: the first is unknown; then the run finishes with the second open.
    log.at(3, "r", "s0", "model.dispatched", r#"{"call_id":"m1"}"#);
    log.at(4, "r", "", "run.finished", "{}");
    // A call with no id is keyed by its step; the log ends with it open.
    log.at(5, "q", "", "run.created", r#"{"goal":"g"}"#);
    log.at(6, "q", "s9", "model.dispatched", "{}");
    log.at(60 * 60, "p", "", "run.created", r#"{"goal":"g"}"#);
    let named: Vec<(u64, Option<String>)> = log
        .findings()
        .0
        .into_iter()
        .filter(|f| f.kind == RunFindingKind::UnknownOutcome)
        .map(|f| (f.seq, f.tool))
        .collect();
    let model = |key: &str| Some(format!("model call {key}"));
    assert_eq!(named, vec![(3, model("m1")), (4, model("m1")), (7, model("step:s9"))]);
}

fn feed_all(c: &mut RunCheck, at: &[u8]) {
    for (i, (step, kind, payload)) in ALLOWED[..6].iter().enumerate() {
        c.feed(&RunEvent {
            seq: i as u64 + 1,
            run_id: b"r",
            step_id: step.as_bytes(),
            at,
            kind: kind.as_bytes(),
            payload: payload.as_bytes(),
            redacted: false,
        });
    }
}

fn other_at(c: &mut RunCheck, at: &[u8]) {
    c.feed(&RunEvent {
        seq: 7,
        run_id: b"other",
        step_id: b"",
        at,
        kind: b"run.created",
        payload: b"{}",
        redacted: false,
    });
}

#[test]
fn time_offsets_count_and_a_huge_limit_is_no_limit() {
    let config = RunCheckConfig {
        open_after: Duration::from_secs(u64::MAX / 2),
        ..RunCheckConfig::default()
    };
    let mut c = RunCheck::new(&AGENTRT, config);
    feed_all(&mut c, b"2026-08-17T08:00:05Z");
    other_at(&mut c, b"2099-01-01T00:00:00Z");
    c.finish();
    assert_eq!(c.take_findings(), vec![], "no limit reached");

    // An offset is applied: 06:00-04:00 is two hours after 08:00Z.
    let mut c = RunCheck::new(&AGENTRT, RunCheckConfig::default());
    feed_all(&mut c, b"2026-08-17T08:00:05Z");
    other_at(&mut c, b"2026-08-17T06:00:00-04:00");
    c.finish();
    let kinds: Vec<_> = c.take_findings().into_iter().map(|f| f.kind).collect();
    assert_eq!(kinds, vec![RunFindingKind::UnknownOutcome, RunFindingKind::LeftRunning]);
}

#[test]
fn step_events_need_a_started_step_and_decisions_a_request() {
    let mut log = Log::new();
    let mut seq = ALLOWED.to_vec();
    seq.insert(7, ("s7", "step.decided", r#"{"kind":"complete"}"#));
    seq.insert(
        8,
        (
            "s0",
            "approval.decided",
            r#"{"approval_id":"nope","status":"approved"}"#,
        ),
    );
    log.run("r", &seq);
    assert_eq!(
        log.check().0,
        vec![
            (RunFindingKind::UnknownStep, "s7".into(), 8),
            (RunFindingKind::UnrequestedApproval, "s0".into(), 9)
        ]
    );
}

#[test]
fn read_only_tools_are_not_side_effects() {
    let mut c = RunCheck::new(
        &AGENTRT,
        RunCheckConfig {
            read_only_tools: vec!["bank_balance".into()],
            ..RunCheckConfig::default()
        },
    );
    for (i, (step, kind, payload)) in ALLOWED.iter().enumerate() {
        c.feed(&RunEvent {
            seq: i as u64 + 1,
            run_id: b"r",
            step_id: step.as_bytes(),
            at: b"2026-08-17T08:00:00Z",
            kind: kind.as_bytes(),
            payload: payload.as_bytes(),
            redacted: false,
        });
    }
    let s = c.take_summaries();
    assert_eq!((s[0].tool_calls, s[0].side_effects), (1, 0));
}

#[test]
fn a_tool_other_than_the_decided_one_is_a_bypass_and_only_an_interruption_earns_a_rerun() {
    let mut log = Log::new();
    let seq: Vec<_> = ALLOWED
        .iter()
        .map(|e| {
            if e.1 == "step.tool_started" {
                ("s0", "step.tool_started", r#"{"tool":"bank_pay"}"#)
            } else {
                *e
            }
        })
        .collect();
    log.run("r", &seq);
    let found = log.check().0;
    assert_eq!(found, vec![(RunFindingKind::StartedWithoutDecision, "s0".into(), 6)]);

    // Done, then another approval of the same step, then the tool again: not an interrupted re-run.
    let mut seq = ALLOWED.to_vec();
    seq.insert(
        7,
        ("s0", "approval.requested", r#"{"approval_id":"p1","kind":"payment"}"#),
    );
    seq.insert(
        8,
        ("s0", "approval.decided", r#"{"approval_id":"p1","status":"approved"}"#),
    );
    seq.insert(
        9,
        (
            "s0",
            "step.tool_started",
            r#"{"tool":"bank_balance","approval_id":"p1"}"#,
        ),
    );
    seq.insert(10, ("s0", "step.tool_finished", "{}"));
    let mut log = Log::new();
    log.run("r", &seq);
    assert_eq!(log.check().0, vec![(RunFindingKind::ExecutedTwice, "s0".into(), 10)]);
}

#[test]
fn an_unreadable_time_is_named_once_per_run() {
    let mut c = RunCheck::new(&AGENTRT, RunCheckConfig::default());
    for (i, at) in [&b"2026-08-17T08:00:00Z"[..], b"garbage", b"1786953600"]
        .iter()
        .enumerate()
    {
        c.feed(&RunEvent {
            seq: i as u64 + 1,
            run_id: b"r",
            step_id: b"",
            at,
            kind: b"run.started",
            payload: b"{}",
            redacted: false,
        });
    }
    let found: Vec<_> = c.take_findings().into_iter().map(|f| (f.kind, f.seq)).collect();
    assert_eq!(found, vec![(RunFindingKind::UnreadableTime, 2)]);
}

#[test]
fn arguments_other_than_the_decided_ones_are_a_bypass() {
    let mut log = Log::new();
    let seq: Vec<_> = ALLOWED
        .iter()
        .map(|e| {
            if e.1 == "step.tool_started" {
                (
                    "s0",
                    "step.tool_started",
                    r#"{"tool":"bank_balance","args":{"account":"B-2"}}"#,
                )
            } else {
                *e
            }
        })
        .collect();
    log.run("r", &seq);
    assert_eq!(
        log.check().0,
        vec![(RunFindingKind::StartedWithoutDecision, "s0".into(), 6)]
    );
}

#[test]
fn a_withheld_payload_is_content_redacted_not_a_finding() {
    let mut log = Log::new();
    log.run("r", ALLOWED);
    // The decision's payload withheld (a tombstone): as the run check sees it, empty.
    let decided = log.events.iter().position(|e| e.4 == "step.decided").unwrap();
    log.events[decided].5 = String::new();
    let feed = |redacted_seq: Option<u64>| {
        let mut c = log.fed(redacted_seq);
        c.finish();
        let (notes, count) = c.content_redacted();
        let notes: Vec<_> = notes.iter().map(|n| (n.kind, n.message.clone())).collect();
        (c.take_findings(), notes, count)
    };
    // Not marked redacted: an emptied payload is the false finding it would be.
    let (found, _, _) = feed(None);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].kind, RunFindingKind::StartedWithoutDecision);
    // Marked: said as "content redacted", and no finding.
    let (found, notes, count) = feed(Some(decided as u64 + 1));
    assert!(found.is_empty(), "{found:?}");
    assert_eq!(count, 1);
    assert_eq!(notes[0].0, RunFindingKind::StartedWithoutDecision);
    assert!(notes[0].1.starts_with("content redacted: "));
}

#[test]
fn a_withheld_payload_hides_nothing_of_another_step() {
    // s0's decision withheld; s1 starts a tool with no decision at all: still a finding.
    let mut log = Log::new();
    log.run(
        "r",
        &[
            ("", "run.created", "{}"),
            ("", "run.started", "{}"),
            ("s0", "step.started", r#"{"index":0}"#),
            ("s0", "step.decided", ""),
            ("s1", "step.started", r#"{"index":1}"#),
            ("s1", "step.tool_started", r#"{"tool":"bank_pay","args":{}}"#),
        ],
    );
    let mut c = log.fed(Some(4));
    let found = c.take_findings();
    assert!(
        found
            .iter()
            .any(|f| f.kind == RunFindingKind::StartedWithoutDecision && f.step_id == "s1"),
        "{found:?}"
    );
}
