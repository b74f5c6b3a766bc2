//! The run check: a state machine per open run, fed events in seq order.
//!
//! State is kept for runs not yet finished (their steps, open tool starts,
//! model calls and approvals), plus the ids of recently finished runs; past
//! 20,000 open runs, or 24 MiB held by them (by the check's own estimate,
//! see [`held`]), the longest-silent ones are given up and their state
//! dropped (those waiting for an approval after the others, active ones
//! only when that is not enough), and ids longer than 128 bytes are kept
//! short, so memory stays bounded however many runs a crashing runtime
//! abandons or a hostile log opens, whatever the length of their ids.
//!
//! Time is the events' own `at`, never the wall clock. Silence is a state,
//! not an event: a run whose last event is older than the open limit (by
//! the newest event seen) is *silent now*; it stops being silent when it
//! writes again. While the log goes on (a follower), silent runs and their
//! open calls are provisional: counted and logged, not findings. At the end
//! of a finite log (`finish`), or when a run is given up, they become
//! findings. So the same log always gives the same findings, and a long
//! tool call that does finish is never reported.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::BuildHasher;
use std::time::Duration;

use chainship_chain::EventRef;
use serde::{Deserialize, Serialize};
use sha2::Digest;

use self::finished::FinishedRuns;
use crate::finding::{RunFinding, RunFindingKind, RunStatus, RunSummary};
use crate::payload::Payload;
use crate::profile::{Profile, Role};
use crate::time::millis;

/// Maps keyed by ids the log's writer chose: a fast hash with a random
/// seed per process, so crafted ids cannot make lookups slow.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Open runs kept in memory; past this, runs are given up (see
/// `give_up_past_the_cap`), even when they hold little.
const MAX_OPEN_RUNS: usize = 20_000;

/// Bytes the open runs may hold, by [`held`]'s estimate (their ids, steps,
/// approvals and open calls, and the tables that hold them); past this,
/// runs are given up as past `MAX_OPEN_RUNS`. agentrt's logs hold well
/// under a megabyte; this is for logs that open runs and never end them.
const MAX_HELD: usize = 24 << 20;

/// Ids and tool names longer than this are kept as a prefix and a keyed
/// hash (still one id per id), so a hostile log cannot grow the state by
/// making them long.
const MAX_ID: usize = 128;
/// "Content redacted" notes kept (the rest are counted).
const MAX_REDACTED_NOTES: usize = 1000;

/// Bytes of a long id kept in its short form (less up to 3 to end on a
/// character): with the length and hash after it, the short form is
/// always longer than `MAX_ID`.
const SHORT_PREFIX: usize = 100;

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
    /// The payload was withheld (a tombstone a redaction statement
    /// covers): the event keeps its type and place, and a rule that needs
    /// its payload says "content redacted" instead of a finding.
    pub redacted: bool,
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
            redacted: chainship_chain::redaction::is_placeholder(e.payload_json),
        }
    }
}

/// A decided call's arguments as kept: their length and a keyed 128-bit
/// hash, not the bytes (arguments can be large; only equality is asked).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Args {
    len: usize,
    hash: [u64; 2],
}

impl Args {
    fn of(key: [u64; 2], args: &str) -> Args {
        let mut h = siphasher::sip128::SipHasher13::new_with_keys(key[0], key[1]);
        std::hash::Hasher::write(&mut h, args.as_bytes());
        let hash = siphasher::sip128::Hasher128::finish128(&h);
        Args {
            len: args.len(),
            hash: [hash.h1, hash.h2],
        }
    }
}

/// A tool start or model dispatch with no outcome yet.
#[derive(Debug, Serialize, Deserialize)]
struct Pending {
    seq: u64,
    step_id: String,
    /// The tool's name; empty for a model call, named by its key (see
    /// [`Pending::label`]): an open call holds its id once, not twice.
    what: String,
    /// Already reported as an unknown outcome.
    reported: bool,
}

impl Pending {
    /// Its box and texts on the heap (see [`held`]).
    fn held(&self) -> usize {
        held::block(size_of::<Pending>()) + held::text(&self.step_id) + held::text(&self.what)
    }

    /// What a finding about it names: the tool, or for a model call (its
    /// key given) `model call <call id>` or `model call step:<step>`.
    fn label(&self, key: Option<&str>) -> String {
        match key {
            Some(key) => format!("model call {}", key.strip_prefix("id:").unwrap_or(key)),
            None => self.what.clone(),
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Step {
    started: bool,
    reported_unknown: bool,
    /// An allowing policy decision not yet used by a tool start.
    allowed: bool,
    /// The policy asked for an approval that has not been granted since.
    needs_approval: bool,
    /// The policy denied the step, or it failed: no tool may start in it.
    denied: bool,
    /// What the step decided: `Some(tool)` for a tool call, `Some("")` for
    /// any other decision; a tool start must be the decided tool.
    decided_tool: Option<String>,
    /// The decided call's arguments as stored; a tool start must carry the same.
    decided_args: Option<Args>,
    /// A tool start of this step was interrupted (its outcome unknown).
    interrupted: bool,
    /// Approvals of this step granted and not yet used by a tool start.
    unused_grants: u32,
    /// Approvals granted after an interruption: each allows one re-run.
    granted: u32,
    starts: u32,
    /// Boxed: most steps have none, and a step is kept per open step.
    tool: Option<Box<Pending>>,
    /// An event of this step had its payload withheld: what the rules
    /// would say of this step from payloads is "content redacted".
    #[serde(default)]
    content_redacted: bool,
}

#[derive(Debug, Serialize, Deserialize)]
struct Approval {
    step_id: String,
    /// Requested after the step's tool start was interrupted: a re-run.
    for_rerun: bool,
    granted: bool,
    decided: bool,
    used: bool,
}

impl Approval {
    /// Its box and text on the heap (see [`held`]).
    fn held(&self) -> usize {
        held::block(size_of::<Approval>()) + held::text(&self.step_id)
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Run {
    first_seq: u64,
    last_seq: u64,
    /// Milliseconds since the epoch of its last event with a readable `at`.
    last_at: Option<i64>,
    /// An event with an unreadable `at` was reported.
    bad_time_reported: bool,
    events: u64,
    tool_calls: u64,
    side_effects: u64,
    findings: u64,
    /// Seq of the last `lease.taken_over`.
    taken_over: Option<u64>,
    /// Silent past the open limit as of the last sweep.
    silent: bool,
    /// The time it waits under in `by_activity`; none while silent or
    /// before its first readable time. Never later than `last_at`.
    queued: Option<i64>,
    /// Fed since the last sweep while silent (listed in `touched`).
    touched: bool,
    /// What it adds to `silent_runs` and `silent_calls` while silent.
    counted: (u64, u64),
    /// The heap its entries' texts and boxes hold (see [`held`]), kept as
    /// they change; not saved, counted again on restore.
    #[serde(skip)]
    held: usize,
    /// What it holds as counted in `RunCheck::held` (see [`Run::held_by`]).
    #[serde(skip)]
    accounted: usize,
    #[serde(deserialize_with = "held::bounded")]
    steps: Map<String, Step>,
    /// Boxed, like `model_calls`: a bucket of a box is 32 bytes, so a
    /// run's table doubling under thousands of them costs a third.
    #[serde(deserialize_with = "held::bounded")]
    approvals: Map<String, Box<Approval>>,
    /// Open model calls by call id.
    #[serde(deserialize_with = "held::bounded")]
    model_calls: Map<String, Box<Pending>>,
}

impl Run {
    fn new(seq: u64) -> Self {
        Run {
            first_seq: seq,
            last_seq: seq,
            last_at: None,
            bad_time_reported: false,
            events: 0,
            tool_calls: 0,
            side_effects: 0,
            findings: 0,
            taken_over: None,
            silent: false,
            queued: None,
            touched: false,
            counted: (0, 0),
            held: 0,
            accounted: 0,
            steps: Map::default(),
            approvals: Map::default(),
            model_calls: Map::default(),
        }
    }

    /// What the run holds, kept under `run_id` (see [`held`]): itself, its
    /// id (the key and the sweep's queue entry), its tables, and its
    /// entries' texts and boxes.
    fn held_by(&self, run_id: &str) -> usize {
        const BOX_BUCKET: usize = size_of::<(String, Box<Pending>)>();
        held::block(size_of::<Run>())
            + 2 * (held::text(run_id) + size_of::<(String, Box<Run>)>() + 1)
            + held::table(self.steps.len(), size_of::<(String, Step)>())
            + held::table(self.approvals.len(), BOX_BUCKET)
            + held::table(self.model_calls.len(), BOX_BUCKET)
            + self.held
    }

    /// `held` counted from scratch (a restored state; the tests).
    fn count_held(&self) -> usize {
        use held::Holds;
        let steps = self.steps.iter().map(|(id, s)| held::text(id) + s.holds());
        let approvals = self.approvals.iter().map(|(id, a)| held::text(id) + a.holds());
        let calls = self.model_calls.iter().map(|(key, p)| held::text(key) + p.holds());
        steps.chain(approvals).chain(calls).sum()
    }

    /// The step, added when new.
    fn step(&mut self, step_id: &str) -> &mut Step {
        if !self.steps.contains_key(step_id) {
            self.held += held::text(step_id);
            self.steps.insert(step_id.to_owned(), Step::default());
        }
        self.steps.get_mut(step_id).expect("inserted above")
    }

    /// Records what the step decided: the tool (`""` for any other
    /// decision) and the call's arguments.
    fn decide(&mut self, step_id: &str, tool: String, args: Option<Args>) {
        let added = held::text(&tool);
        let step = self.step(step_id);
        let dropped = step.decided_tool.as_deref().map_or(0, held::text);
        step.decided_tool = Some(tool);
        step.decided_args = args;
        self.held = self.held + added - dropped;
    }

    /// A tool start of the step (which exists), in place of the one before.
    fn start_tool(&mut self, step_id: &str, start: Pending) -> Option<Box<Pending>> {
        let added = start.held();
        let step = self
            .steps
            .get_mut(step_id)
            .expect("the step is added before its tool starts");
        let previous = step.tool.replace(Box::new(start));
        self.held = self.held + added - previous.as_deref().map_or(0, Pending::held);
        previous
    }

    /// The step's tool start, closed.
    fn end_tool(&mut self, step_id: &str) -> Option<Box<Pending>> {
        let ended = self.steps.get_mut(step_id)?.tool.take();
        self.held -= ended.as_deref().map_or(0, Pending::held);
        ended
    }

    /// An approval requested under `id`, in place of one requested under it before.
    fn request_approval(&mut self, id: String, approval: Approval) {
        let (key, added) = (held::text(&id), approval.held());
        // A replaced entry keeps its key: only the approval changes.
        match self.approvals.insert(id, Box::new(approval)) {
            Some(previous) => self.held = self.held + added - previous.held(),
            None => self.held += key + added,
        }
    }

    /// A model call opened under `key`, in place of one open under it before.
    fn dispatch(&mut self, key: String, call: Pending) -> Option<Box<Pending>> {
        let (key_held, added) = (held::text(&key), call.held());
        let previous = self.model_calls.insert(key, Box::new(call));
        match &previous {
            Some(p) => self.held = self.held + added - p.held(),
            None => self.held += key_held + added,
        }
        previous
    }

    fn complete_call(&mut self, key: &str) {
        if let Some(call) = self.model_calls.remove(key) {
            self.held -= held::text(key) + call.held();
        }
    }

    /// Every id and name it holds (to bound a restored state).
    fn texts(&self) -> impl Iterator<Item = &str> {
        fn pending(p: &Pending) -> [&str; 2] {
            [p.step_id.as_str(), p.what.as_str()]
        }
        self.steps
            .iter()
            .flat_map(move |(id, step)| {
                std::iter::once(id.as_str())
                    .chain(step.decided_tool.as_deref())
                    .chain(step.tool.as_deref().into_iter().flat_map(pending))
            })
            .chain(
                self.approvals
                    .iter()
                    .flat_map(|(id, a)| [id.as_str(), a.step_id.as_str()]),
            )
            .chain(
                self.model_calls
                    .iter()
                    .flat_map(move |(id, p)| std::iter::once(id.as_str()).chain(pending(p))),
            )
    }

    fn waiting(&self) -> bool {
        self.approvals.values().any(|a| !a.decided)
    }

    /// Open tool starts and model calls not yet reported.
    fn unreported_open(&self) -> usize {
        self.pending().filter(|(_, p)| !p.reported).count()
    }

    /// Its open tool starts and model calls, each with its model call's key.
    fn pending(&self) -> impl Iterator<Item = (Option<&str>, &Pending)> {
        let tools = self.steps.values().filter_map(|s| s.tool.as_deref().map(|p| (None, p)));
        tools.chain(self.model_calls.iter().map(|(key, p)| (Some(key.as_str()), &**p)))
    }

    fn pending_mut(&mut self) -> impl Iterator<Item = (Option<&str>, &mut Pending)> {
        let tools = self
            .steps
            .values_mut()
            .filter_map(|s| s.tool.as_deref_mut().map(|p| (None, p)));
        tools.chain(
            self.model_calls
                .iter_mut()
                .map(|(key, p)| (Some(key.as_str()), &mut **p)),
        )
    }
}

/// The check itself. Feed events with [`RunCheck::feed`] in seq order,
/// call [`RunCheck::sweep`] now and then (a page, a second) to update the
/// silence state, and [`RunCheck::finish`] at the end of a finite log.
/// Findings and summaries queue up until taken.
#[derive(Debug)]
pub struct RunCheck {
    profile: &'static Profile,
    cfg: RunCheckConfig,
    /// The open limit, in milliseconds.
    limit_ms: i64,
    /// Open runs kept before some are given up.
    max_open: usize,
    /// Bytes held (see [`held`]) before runs are given up.
    max_held: usize,
    /// Bytes the open runs hold now (each run's `accounted`).
    held: usize,
    /// Boxed: a table of 20,000 runs with churn grows by doubling, and a
    /// bucket of a box is 32 bytes where a `Run` inline is ~270.
    runs: Map<String, Box<Run>>,
    /// Runs not silent, by the time they were last active, oldest first,
    /// so a sweep looks only at those that may have fallen silent. Lazy: an
    /// entry whose time is not its run's `queued` is stale and skipped.
    by_activity: BinaryHeap<Reverse<(i64, String)>>,
    /// Silent runs fed since the last sweep, to look at again.
    touched: Vec<String>,
    /// Finished runs, by a keyed hash of their id (see [`finished`]).
    finished: FinishedRuns,
    /// The SipHash key of `finished` (saved with it, see [`RunCheck::save`]).
    finished_key: [u64; 2],
    /// The profile's event types, for a lookup per event.
    roles: Map<&'static [u8], Role>,
    newest_at: Option<i64>,
    findings: Vec<RunFinding>,
    /// What a rule would have said of a step whose payload was withheld:
    /// not a finding ("content redacted"); the first few kept, all counted.
    content_redacted: Vec<RunFinding>,
    content_redacted_count: u64,
    /// Runs and calls that fell silent since the last take (provisional).
    newly_silent: Vec<RunFinding>,
    summaries: Vec<RunSummary>,
    totals: HashMap<RunFindingKind, u64>,
    silent_runs: u64,
    silent_calls: u64,
    given_up_active: u64,
}

/// Text as stored, borrowed when it is UTF-8 (the validating fast path;
/// only bytes that are not UTF-8 pay for the lossy conversion).
fn lossy(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

fn text(bytes: &[u8]) -> String {
    lossy(bytes).into_owned()
}

/// 128 random bits, from the standard library's per-process random keys.
fn random_key() -> [u64; 2] {
    let state = std::collections::hash_map::RandomState::new();
    [state.hash_one(1u8), state.hash_one(2u8)]
}

fn saturating_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl RunCheck {
    pub fn new(profile: &'static Profile, cfg: RunCheckConfig) -> Self {
        let limit_ms = saturating_ms(cfg.open_after);
        RunCheck {
            profile,
            limit_ms,
            max_open: MAX_OPEN_RUNS,
            max_held: MAX_HELD,
            held: 0,
            cfg,
            runs: Map::default(),
            by_activity: BinaryHeap::new(),
            touched: Vec::new(),
            finished: FinishedRuns::default(),
            finished_key: random_key(),
            roles: profile
                .types
                .iter()
                .map(|&(name, role)| (name.as_bytes(), role))
                .collect(),
            newest_at: None,
            findings: Vec::new(),
            content_redacted: Vec::new(),
            content_redacted_count: 0,
            newly_silent: Vec::new(),
            summaries: Vec::new(),
            totals: HashMap::new(),
            silent_runs: 0,
            silent_calls: 0,
            given_up_active: 0,
        }
    }

    /// Findings since the last call.
    pub fn take_findings(&mut self) -> Vec<RunFinding> {
        std::mem::take(&mut self.findings)
    }

    /// Runs and calls that fell silent since the last call: provisional
    /// (`left-running`, `unknown-outcome`), for a live log; not findings yet.
    pub fn take_newly_silent(&mut self) -> Vec<RunFinding> {
        std::mem::take(&mut self.newly_silent)
    }

    /// Runs that ended (or were given up) since the last call, and all after `finish`.
    pub fn take_summaries(&mut self) -> Vec<RunSummary> {
        std::mem::take(&mut self.summaries)
    }

    /// Runs not yet finished.
    pub fn open_runs(&self) -> usize {
        self.runs.len()
    }

    /// The last seq any open run was fed: a state restored for head `h`
    /// holds none past `h` (see `saved`).
    pub fn last_seq_held(&self) -> Option<u64> {
        self.runs.values().map(|r| r.last_seq).max()
    }

    /// Findings so far, by kind (silence counted once it is final).
    pub fn total(&self, kind: RunFindingKind) -> u64 {
        self.totals.get(&kind).copied().unwrap_or(0)
    }

    /// Silent runs not waiting for an approval, as of the last sweep.
    pub fn silent_runs(&self) -> u64 {
        self.silent_runs
    }

    /// Open calls of silent runs not yet reported, as of the last sweep.
    pub fn silent_calls(&self) -> u64 {
        self.silent_calls
    }

    /// Unknown outcomes: those final, and those of runs silent now.
    pub fn unknown_outcomes(&self) -> u64 {
        self.total(RunFindingKind::UnknownOutcome) + self.silent_calls
    }

    fn args(&self, args: &str) -> Args {
        Args::of(self.finished_key, args)
    }

    /// A finished run's id as kept: a keyed hash, so ids cannot be chosen to collide.
    fn finished_id(&self, run_id: &str) -> u64 {
        FinishedRuns::id(self.finished_key, run_id)
    }

    fn is_side_effect(&self, tool: &str) -> bool {
        !self.cfg.read_only_tools.iter().any(|t| t == tool)
    }

    fn minutes(&self) -> String {
        humantime::format_duration(self.cfg.open_after).to_string()
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
        let redacted = self
            .runs
            .get(run_id)
            .and_then(|r| r.steps.get(step_id))
            .is_some_and(|s| s.content_redacted);
        if redacted {
            self.content_redacted_count += 1;
            if self.content_redacted.len() < MAX_REDACTED_NOTES {
                self.content_redacted.push(RunFinding {
                    kind,
                    run_id: run_id.to_owned(),
                    step_id: step_id.to_owned(),
                    seq,
                    tool,
                    message: format!("content redacted: {message}"),
                });
            }
            return;
        }
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

    /// The log has reached time `at` (an RFC 3339 `at`, as stored) with an
    /// event that is not fed: when only one run's events are fed (a run's
    /// evidence), the log's newest event still says how long the run has
    /// been silent. An unreadable time changes nothing.
    pub fn clock(&mut self, at: &[u8]) {
        if let Some(t) = millis(at) {
            self.newest_at = Some(self.newest_at.map_or(t, |n| n.max(t)));
        }
    }

    /// What the rules would have said of steps whose payload was withheld
    /// (the first few), and how many there were in all.
    pub fn content_redacted(&self) -> (&[RunFinding], u64) {
        (&self.content_redacted, self.content_redacted_count)
    }

    pub fn feed(&mut self, e: &RunEvent<'_>) {
        let run_cow = self.short(lossy(e.run_id));
        self.feed_one(e, &run_cow);
        if let Some(run) = self.runs.get_mut(run_cow.as_ref()) {
            let now = run.held_by(&run_cow);
            self.held = self.held + now - run.accounted;
            run.accounted = now;
        }
        // Checked per event, not per sweep: the same log gives up the same
        // runs however it is paged.
        if self.runs.len() > self.max_open || self.held > self.max_held {
            self.give_up_past_the_cap();
        }
    }

    /// An id or tool name as kept: itself, or when longer than `MAX_ID` a
    /// prefix and 128 bits of its SHA-256 (unkeyed, so every verifier names
    /// it the same; collisions out of reach). The short form is always
    /// longer than `MAX_ID` (a prefix of at least 97 bytes and 58 more), so
    /// no id kept as itself can be written to equal another's short form.
    fn short<'a>(&self, text: std::borrow::Cow<'a, str>) -> std::borrow::Cow<'a, str> {
        if text.len() <= MAX_ID {
            return text;
        }
        let mut cut = SHORT_PREFIX;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let digest = sha2::Sha256::digest(text.as_bytes());
        let hash: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        let mut short = format!("{}…({} bytes, sha256 {hash}…)", &text[..cut], text.len());
        // Kept as long as its length says (see `held`), not as `format!` grew it.
        short.shrink_to_fit();
        std::borrow::Cow::Owned(short)
    }

    fn short_str<'a>(&self, text: &'a str) -> std::borrow::Cow<'a, str> {
        self.short(std::borrow::Cow::Borrowed(text))
    }

    fn feed_one(&mut self, e: &RunEvent<'_>, run_id: &str) {
        // Borrowed unless not UTF-8 or long: most events allocate nothing here.
        let step_cow = self.short(lossy(e.step_id));
        let step_id: &str = &step_cow;
        let at = millis(e.at);
        if let Some(t) = at {
            self.newest_at = Some(self.newest_at.map_or(t, |n| n.max(t)));
        }
        // An open run is never among the finished: only others are looked up.
        if !self.runs.contains_key(run_id) && self.finished.take(self.finished_id(run_id)) {
            // Named once; what follows is checked as a run of its own, so a
            // reused run id hides nothing.
            let kind = text(e.kind);
            self.runs.insert(run_id.to_owned(), Box::new(Run::new(e.seq)));
            self.report(
                RunFindingKind::EventAfterFinish,
                run_id,
                step_id,
                e.seq,
                None,
                format!("{kind} after the run finished"),
            );
        }
        let role = self.roles.get(e.kind).copied().unwrap_or(Role::Other);
        {
            if !self.runs.contains_key(run_id) {
                self.runs.insert(run_id.to_owned(), Box::new(Run::new(e.seq)));
            }
            let run = self.runs.get_mut(run_id).expect("inserted above");
            run.last_seq = e.seq;
            run.events += 1;
            if at.is_some() {
                run.last_at = at;
            }
            if run.silent {
                if !run.touched {
                    run.touched = true;
                    self.touched.push(run_id.to_owned());
                }
            } else if let Some(t) = at
                && run.queued.is_none_or(|k| t < k)
            {
                run.queued = Some(t);
                self.by_activity.push(Reverse((t, run_id.to_owned())));
            }
        }
        if at.is_none() {
            let run = self.runs.get_mut(run_id).expect("inserted above");
            if !run.bad_time_reported {
                run.bad_time_reported = true;
                let shown = String::from_utf8_lossy(e.at).escape_debug().to_string();
                self.report(
                    RunFindingKind::UnreadableTime,
                    run_id,
                    step_id,
                    e.seq,
                    None,
                    format!("at {shown:?} is not an RFC 3339 time: the silence rules cannot see this event"),
                );
            }
        }
        if role.is_step_event() && !step_id.is_empty() {
            let step = self.step(run_id, step_id);
            if !step.started && !step.reported_unknown {
                step.reported_unknown = true;
                let kind = text(e.kind);
                self.report(
                    RunFindingKind::UnknownStep,
                    run_id,
                    step_id,
                    e.seq,
                    None,
                    format!("{kind} for a step that never started"),
                );
            }
        }
        if e.redacted && role.reads_payload() {
            self.step(run_id, step_id).content_redacted = true;
        }
        let payload = if role.reads_payload() && !e.redacted {
            Payload::parse(e.payload)
        } else {
            Payload::default()
        };
        match role {
            Role::StepStarted => self.step_started(run_id, step_id, e.seq),
            Role::StepDecided => {
                let tool = match payload.kind.get() {
                    Some("tool_call") => self.short_str(payload.tool.get().unwrap_or("")).into_owned(),
                    _ => String::new(),
                };
                let args = payload.args.map(|a| self.args(a.get()));
                self.run(run_id).decide(step_id, tool, args);
            }
            Role::StepPolicy => self.policy(run_id, step_id, payload.outcome.get()),
            Role::ApprovalRequested => {
                if let Some(id) = payload.approval_id.get() {
                    let id = self.short_str(id).into_owned();
                    let for_rerun = self.step(run_id, step_id).interrupted;
                    self.run(run_id).request_approval(
                        id,
                        Approval {
                            step_id: step_id.to_owned(),
                            for_rerun,
                            granted: false,
                            decided: false,
                            used: false,
                        },
                    );
                }
            }
            Role::ApprovalDecided => self.approval_decided(run_id, step_id, e.seq, &payload),
            Role::ToolStarted => self.tool_started(run_id, step_id, e.seq, &payload),
            r if r.closes_tool() => {
                let run = self.run(run_id);
                let had_start = run.end_tool(step_id).is_some();
                if let Some(step) = run.steps.get_mut(step_id) {
                    // A failed or interrupted step needs a new decision to act again;
                    // a failed one is over.
                    step.allowed = false;
                    match role {
                        Role::StepFailed => step.denied = true,
                        Role::StepInterrupted if had_start => step.interrupted = true,
                        _ => {}
                    }
                }
            }
            Role::ModelDispatched => self.model_dispatched(run_id, step_id, e.seq, &payload),
            Role::ModelCompleted | Role::ModelFailed => {
                let key = self.short_str(&call_key(&payload, step_id)).into_owned();
                self.run(run_id).complete_call(&key);
            }
            Role::LeaseTakenOver => {
                self.runs.get_mut(run_id).expect("inserted above").taken_over = Some(e.seq);
            }
            Role::RunFinished => self.run_finished(run_id),
            _ => {}
        }
    }

    /// The run being fed.
    fn run(&mut self, run_id: &str) -> &mut Run {
        self.runs
            .get_mut(run_id)
            .expect("the run is in the map while its events are fed")
    }

    fn step(&mut self, run_id: &str, step_id: &str) -> &mut Step {
        self.run(run_id).step(step_id)
    }

    fn policy(&mut self, run_id: &str, step_id: &str, outcome: Option<&str>) {
        let allow = self.profile.allow_outcome;
        let step = self.step(run_id, step_id);
        match outcome {
            // After a denial, or while an approval is outstanding, an allow decides nothing.
            Some(o) if o == allow => step.allowed = !step.denied && !step.needs_approval,
            Some("require_approval") => {
                step.needs_approval = step.unused_grants == 0;
                step.allowed = false;
            }
            _ => {
                // deny, abort, or no readable outcome: nothing may start.
                step.denied = true;
                step.allowed = false;
            }
        }
    }

    fn step_started(&mut self, run_id: &str, step_id: &str, seq: u64) {
        // A run taken over that moves on to a new step has given up on
        // whatever was in flight before the takeover.
        if let Some(taken) = self.runs.get(run_id).and_then(|r| r.taken_over) {
            self.report_open(
                run_id,
                |p| p.seq < taken,
                &format!(
                    "started before the run was taken over, never closed, and the run moved on to a new step at seq {seq}: it may or may not have acted"
                ),
            );
        }
        self.step(run_id, step_id).started = true;
    }

    fn approval_decided(&mut self, run_id: &str, step_id: &str, seq: u64, payload: &Payload<'_>) {
        let approved = payload.status.get() == Some(self.profile.approved_status);
        let Some(id) = payload.approval_id.get().map(|id| self.short_str(id).into_owned()) else {
            self.report(
                RunFindingKind::UnrequestedApproval,
                run_id,
                step_id,
                seq,
                None,
                "an approval decision that names no approval id".into(),
            );
            return;
        };
        let run = self.runs.get_mut(run_id).expect("inserted above");
        let Some(approval) = run.approvals.get_mut(&id) else {
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
        if approval.decided {
            // A decision answers a pending request once; a second one grants nothing.
            self.report(
                RunFindingKind::UnrequestedApproval,
                run_id,
                step_id,
                seq,
                None,
                format!("approval {id:?} was decided again after its decision"),
            );
            return;
        }
        approval.decided = true;
        if approved {
            approval.granted = true;
            let for_rerun = approval.for_rerun;
            let step = approval.step_id.clone();
            let step = run.step(&step);
            if for_rerun {
                step.granted += 1;
            }
            step.unused_grants += 1;
            step.needs_approval = false;
        }
    }

    fn tool_started(&mut self, run_id: &str, step_id: &str, seq: u64, payload: &Payload<'_>) {
        let tool = self
            .short_str(payload.tool.get().unwrap_or("(unnamed tool)"))
            .into_owned();
        let side_effect = self.is_side_effect(&tool);
        let started_args = payload.args.map(|a| self.args(a.get()));
        let named = payload.approval_id.get().map(|id| self.short_str(id).into_owned());
        let mut found: Vec<(RunFindingKind, String)> = Vec::new();
        let run = self.runs.get_mut(run_id).expect("inserted above");
        run.tool_calls += 1;
        if side_effect {
            run.side_effects += 1;
        }
        // The grant it names, if any: this run's, this step's, approved, unused.
        let mut decided = false;
        if let Some(id) = &named {
            match run.approvals.get_mut(id) {
                Some(a) if a.step_id != step_id => found.push((
                    RunFindingKind::StartedWithoutDecision,
                    format!(
                        "names approval {id:?}, which was granted for step {:?}, not this one",
                        a.step_id
                    ),
                )),
                Some(a) if a.granted && a.used => {
                    found.push((
                        RunFindingKind::ExecutedTwice,
                        format!("approval {id:?} was already executed once"),
                    ));
                    decided = true;
                }
                Some(a) if a.granted => {
                    a.used = true;
                    decided = true;
                    if let Some(s) = run.steps.get_mut(step_id) {
                        s.unused_grants = s.unused_grants.saturating_sub(1);
                    }
                }
                Some(_) => found.push((
                    RunFindingKind::StartedWithoutDecision,
                    format!("names approval {id:?}, which was not approved"),
                )),
                None => found.push((
                    RunFindingKind::StartedWithoutDecision,
                    format!("names approval {id:?}, which this run never requested"),
                )),
            }
        }
        let step = run.step(step_id);
        if named.is_none() {
            if step.allowed {
                decided = true;
            } else if step.unused_grants > 0 {
                step.unused_grants -= 1;
                decided = true;
            }
            if !decided {
                found.push((
                    RunFindingKind::StartedWithoutDecision,
                    "no allowing policy decision and no granted approval of this step before it".into(),
                ));
            }
        }
        match step.decided_tool.as_deref() {
            Some(d) if d != tool => found.push((
                RunFindingKind::StartedWithoutDecision,
                if d.is_empty() {
                    format!("started {tool:?}, but the step decided no tool call")
                } else {
                    format!("started {tool:?}, but the step decided {d:?}")
                },
            )),
            _ => {}
        }
        if let (Some(decided), Some(started)) = (step.decided_args, started_args)
            && decided != started
            && !found.iter().any(|(k, _)| *k == RunFindingKind::StartedWithoutDecision)
        {
            found.push((
                RunFindingKind::StartedWithoutDecision,
                format!("started with other arguments than the step decided and its approval covered ({} bytes, decided {} bytes)", started.len, decided.len),
            ));
        }
        if step.denied && !found.iter().any(|(k, _)| *k == RunFindingKind::StartedWithoutDecision) {
            found.push((
                RunFindingKind::StartedWithoutDecision,
                "the policy did not allow this step (deny, abort, or unreadable) or it had failed, yet its tool started".into(),
            ));
        }
        step.allowed = false;
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
        let previous = run.start_tool(
            step_id,
            Pending {
                seq,
                step_id: step_id.to_owned(),
                what: tool.clone(),
                reported: false,
            },
        );
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

    fn model_dispatched(&mut self, run_id: &str, step_id: &str, seq: u64, payload: &Payload<'_>) {
        let id = self.short_str(&call_key(payload, step_id)).into_owned();
        let previous = self.run(run_id).dispatch(
            id.clone(),
            Pending {
                seq,
                step_id: step_id.to_owned(),
                what: String::new(),
                reported: false,
            },
        );
        if let Some(p) = previous.filter(|p| !p.reported) {
            self.report(
                RunFindingKind::UnknownOutcome,
                run_id,
                &p.step_id,
                p.seq,
                Some(p.label(Some(&id))),
                format!("dispatched again at seq {seq} before an outcome was recorded"),
            );
        }
    }

    fn run_finished(&mut self, run_id: &str) {
        self.report_unclosed(
            run_id,
            "the run finished with no outcome recorded: it may or may not have acted",
        );
        let Some(run) = self.remove_run(run_id) else { return };
        self.summaries.push(summary(run_id, &run, RunStatus::Finished));
        self.finished.insert(self.finished_id(run_id));
    }

    /// Reports every tool start and model call of the run still open.
    fn report_unclosed(&mut self, run_id: &str, why: &str) {
        self.report_open(run_id, |_| true, why);
    }

    /// Reports, once each, the run's open tool starts and model calls that `which` picks.
    fn report_open(&mut self, run_id: &str, which: impl Fn(&Pending) -> bool, why: &str) {
        let Some(run) = self.runs.get_mut(run_id) else { return };
        let mut open = Vec::new();
        for (key, p) in run.pending_mut().filter(|(_, p)| !p.reported && which(p)) {
            p.reported = true;
            open.push((p.step_id.clone(), p.seq, p.label(key)));
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

    /// Makes a silent run's state final: left running (unless it waits for
    /// an approval), and its open calls unknown outcomes.
    fn judge_silent(&mut self, run_id: &str) {
        let limit = self.minutes();
        self.report_unclosed(
            run_id,
            &format!(
                "no outcome recorded and the run has been silent for more than {limit}: it may or may not have acted"
            ),
        );
        let Some(run) = self.runs.get(run_id) else { return };
        if run.waiting() {
            return;
        }
        let seq = run.last_seq;
        self.report(
            RunFindingKind::LeftRunning,
            run_id,
            "",
            seq,
            None,
            format!("no run.finished, and silent for more than {limit} (by the events' own time)"),
        );
    }

    /// Removes a run, and what it added to the silent counts.
    fn remove_run(&mut self, run_id: &str) -> Option<Box<Run>> {
        let run = self.runs.remove(run_id)?;
        self.held -= run.accounted;
        if run.silent {
            self.silent_runs -= run.counted.0;
            self.silent_calls -= run.counted.1;
        }
        Some(run)
    }

    /// Updates which runs are silent now, against the newest event time
    /// seen; gives up runs silent far longer (their silence becomes final).
    /// Looks only at runs that may have changed: those whose last activity
    /// is older than the limit, and silent ones fed since.
    pub fn sweep(&mut self) {
        let Some(newest) = self.newest_at else { return };
        let limit = self.limit_ms;
        let silent_at = |t: Option<i64>| t.is_some_and(|t| newest.saturating_sub(t) > limit);
        for id in std::mem::take(&mut self.touched) {
            let Some(r) = self.runs.get_mut(&id).filter(|r| r.touched) else {
                continue;
            };
            r.touched = false;
            if !r.silent {
                continue;
            }
            self.silent_runs -= r.counted.0;
            self.silent_calls -= r.counted.1;
            if silent_at(r.last_at) {
                r.counted = (u64::from(!r.waiting()), r.unreported_open() as u64);
                self.silent_runs += r.counted.0;
                self.silent_calls += r.counted.1;
            } else {
                r.silent = false;
                r.counted = (0, 0);
                if let Some(t) = r.last_at {
                    r.queued = Some(t);
                    self.by_activity.push(Reverse((t, id)));
                }
            }
        }
        let mut newly = Vec::new();
        while self
            .by_activity
            .peek()
            .is_some_and(|Reverse((t, _))| newest.saturating_sub(*t) > limit)
        {
            let Some(Reverse((t, id))) = self.by_activity.pop() else {
                break;
            };
            let Some(r) = self.runs.get_mut(&id).filter(|r| r.queued == Some(t)) else {
                continue;
            };
            r.queued = None;
            if !silent_at(r.last_at) {
                // Active since it was queued: queued again under its last time.
                if let Some(last) = r.last_at {
                    r.queued = Some(last);
                    self.by_activity.push(Reverse((last, id)));
                }
                continue;
            }
            let open: Vec<(String, u64, String)> = r
                .pending()
                .filter(|(_, p)| !p.reported)
                .map(|(key, p)| (p.step_id.clone(), p.seq, p.label(key)))
                .collect();
            r.silent = true;
            r.counted = (u64::from(!r.waiting()), r.unreported_open() as u64);
            self.silent_runs += r.counted.0;
            self.silent_calls += r.counted.1;
            newly.push((id, r.last_seq, r.waiting(), open));
        }
        // Stale entries (a run whose time went back, or that ended) are
        // dropped once they outnumber the runs.
        if self.by_activity.len() > 2 * self.runs.len() + 1024 {
            self.by_activity = self
                .runs
                .iter()
                .filter_map(|(id, r)| r.queued.map(|t| Reverse((t, id.clone()))))
                .collect();
        }
        let limit_text = self.minutes();
        for (id, seq, waiting, open) in newly {
            for (step_id, start, what) in open {
                self.newly_silent.push(RunFinding {
                    kind: RunFindingKind::UnknownOutcome,
                    run_id: id.clone(),
                    step_id,
                    seq: start,
                    tool: Some(what),
                    message: format!("no outcome recorded and the run silent for more than {limit_text} (so far)"),
                });
            }
            if !waiting {
                self.newly_silent.push(RunFinding {
                    kind: RunFindingKind::LeftRunning,
                    run_id: id.clone(),
                    step_id: String::new(),
                    seq,
                    tool: None,
                    message: format!("silent for more than {limit_text} with no run.finished (so far)"),
                });
            }
        }
    }

    /// Memory stays bounded whatever the log holds: past the cap, runs are
    /// given up, those silent and waiting for nothing first (their silence
    /// becomes final: left running), then those silent while waiting for an
    /// approval (final as waiting), then, only on a log where more runs than
    /// the cap are all active at once, the least recently active (counted in
    /// [`RunCheck::given_up_active`]). Below the cap nothing is given up, so
    /// a follower and `runs` over the same log agree.
    fn give_up_past_the_cap(&mut self) {
        // Down to a tenth below the caps, so the runs are ranked once per
        // many new ones, not on every event.
        let runs_target = self.max_open - self.max_open / 10;
        let held_target = self.max_held - self.max_held / 10;
        // Silence is judged here from the events' own times, not from the
        // last sweep, so the same log gives up the same runs however it is paged.
        let (newest, limit) = (self.newest_at, self.limit_ms);
        let mut order: Vec<(u8, i64, &str)> = self
            .runs
            .iter()
            .map(|(id, r)| {
                let silent = newest.zip(r.last_at).is_some_and(|(n, t)| n.saturating_sub(t) > limit);
                match (silent, r.waiting()) {
                    (true, false) => (0, r.last_at.unwrap_or(i64::MIN), id.as_str()),
                    (true, true) => (1, r.last_at.unwrap_or(i64::MIN), id.as_str()),
                    // Least recently active first, by the log's own order.
                    (false, _) => (2, r.last_seq as i64, id.as_str()),
                }
            })
            .collect();
        // A total order: the same log gives up the same runs.
        order.sort_unstable();
        let (mut runs, mut held) = (self.runs.len(), self.held);
        let mut chosen: Vec<(u8, String)> = Vec::new();
        for (rank, _, id) in order {
            if runs <= runs_target && held <= held_target {
                break;
            }
            runs -= 1;
            held -= self.runs[id].accounted;
            chosen.push((rank, id.to_owned()));
        }
        for (rank, id) in chosen {
            let status = match rank {
                0 => RunStatus::LeftRunning,
                1 => RunStatus::Waiting,
                _ => {
                    self.given_up_active += 1;
                    RunStatus::Open
                }
            };
            if rank < 2 {
                self.judge_silent(&id);
            }
            if let Some(run) = self.remove_run(&id) {
                self.summaries.push(summary(&id, &run, status));
            }
        }
    }

    /// Runs given up while still active, because more than the cap were open
    /// at once (a log that is not the profile's, or hostile): their later
    /// events are checked as runs of their own.
    pub fn given_up_active(&self) -> u64 {
        self.given_up_active
    }

    /// The end of a finite log: the runs silent now are judged, then every
    /// run still open is summarized.
    pub fn finish(&mut self) {
        self.sweep();
        let mut silent: Vec<(u64, String)> = self
            .runs
            .iter()
            .filter(|(_, r)| r.silent)
            .map(|(id, r)| (r.first_seq, id.clone()))
            .collect();
        silent.sort();
        for (_, id) in &silent {
            self.judge_silent(id);
        }
        self.silent_runs = 0;
        self.silent_calls = 0;
        let mut open: Vec<(&String, &Run)> = self.runs.iter().map(|(id, run)| (id, &**run)).collect();
        open.sort_by_key(|(_, r)| r.first_seq);
        let summaries: Vec<RunSummary> = open
            .into_iter()
            .map(|(id, r)| {
                let status = if r.waiting() {
                    RunStatus::Waiting
                } else if r.silent {
                    RunStatus::LeftRunning
                } else {
                    RunStatus::Open
                };
                summary(id, r, status)
            })
            .collect();
        self.summaries.extend(summaries);
    }
}

/// Whether `text` has the shape of [`RunCheck::short`]'s output (a saved
/// state is refused when it holds a long id that does not).
fn is_short_form(text: &str) -> bool {
    let Some(rest) = text.strip_suffix("…)") else {
        return false;
    };
    let Some((rest, hash)) = rest.rsplit_once(" bytes, sha256 ") else {
        return false;
    };
    let Some((prefix, len)) = rest.rsplit_once("…(") else {
        return false;
    };
    let hex = hash.len() == 32 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let len = (!len.starts_with('0')).then(|| len.parse::<usize>().ok()).flatten();
    // The prefix is cut at SHORT_PREFIX, less up to 3 bytes to end on a character.
    hex && len.is_some_and(|n| n > MAX_ID && n > prefix.len())
        && (SHORT_PREFIX - 3..=SHORT_PREFIX).contains(&prefix.len())
}

/// How a model call is keyed: `id:` and its call id, else `step:` and its
/// step. Two namespaces: no call id can name the call of a step that gave
/// none (nor the reverse).
fn call_key(payload: &Payload<'_>, step_id: &str) -> String {
    match payload.call_id.get() {
        Some(id) => format!("id:{id}"),
        None => format!("step:{step_id}"),
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

mod finished;
mod held;
mod saved;
pub use saved::RestoreError;

#[cfg(test)]
mod tests;
