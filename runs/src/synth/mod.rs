//! The content `generate` writes: agentrt's own event sequences, runs
//! interleaved as a busy runtime writes them (allowed, denied, approved,
//! rejected, invalid arguments, interrupted and taken over then approved
//! and re-run, model calls with a retry), with payloads shaped as agentrt's
//! driver writes them. Deterministic for a seed, and each fault the run
//! check names can be injected at a seq (`--inject KIND@SEQ`).

pub mod database;

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

/// A fault to write into the log, at the first chance at or after `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inject {
    pub fault: Fault,
    pub at: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A tool start whose `step.tool_finished` is never written.
    UnknownOutcome,
    /// A step's tool run a second time with no approval to re-run it.
    ExecutedTwice,
    /// A tool start with its allowing `step.policy` left out.
    StartedWithoutDecision,
    /// A run that stops writing between steps and never finishes.
    LeftRunning,
    /// An event of a run after its `run.finished`.
    EventAfterFinish,
    /// A step whose `step.started` is left out.
    UnknownStep,
    /// An `approval.decided` for an approval never requested.
    UnrequestedApproval,
}

const FAULTS: [(&str, Fault); 7] = [
    ("unknown-outcome", Fault::UnknownOutcome),
    ("executed-twice", Fault::ExecutedTwice),
    ("started-without-decision", Fault::StartedWithoutDecision),
    ("left-running", Fault::LeftRunning),
    ("event-after-finish", Fault::EventAfterFinish),
    ("unknown-step", Fault::UnknownStep),
    ("unrequested-approval", Fault::UnrequestedApproval),
];

impl FromStr for Inject {
    type Err = chainship_chain::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let names = FAULTS.map(|(n, _)| n).join(", ");
        let (name, at) = s
            .split_once('@')
            .ok_or_else(|| chainship_chain::permanent!("{s:?}: expected KIND@SEQ, KIND one of {names}"))?;
        let fault = FAULTS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, f)| f)
            .ok_or_else(|| chainship_chain::permanent!("{name:?}: not a fault; one of {names}"))?;
        let at = at
            .parse::<u64>()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| chainship_chain::permanent!("{at:?}: not a seq (1 or more)"))?;
        Ok(Inject { fault, at })
    }
}

impl fmt::Display for Inject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = FAULTS.iter().find(|(_, x)| *x == self.fault).map_or("?", |(n, _)| n);
        write!(f, "{name}@{}", self.at)
    }
}

/// What an event is for, so an injection finds the one it changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tag {
    Plain,
    /// The allowing `step.policy` right before an unapproved tool start.
    Allow,
    /// A `step.tool_finished`.
    ToolFinished,
    /// The last event of a step (a run may stop after it).
    StepEnd,
    StepStarted,
    RunFinished,
}

#[derive(Clone, Debug)]
struct Planned {
    step_id: String,
    kind: &'static str,
    payload: String,
    tag: Tag,
}

/// One event to write.
pub struct Event {
    pub run_id: String,
    pub step_id: String,
    pub kind: &'static str,
    pub payload: String,
}

struct Run {
    id: String,
    /// The payload of its last tool start (a repeat injected repeats it exactly).
    last_start: String,
    steps: u32,
    planned_steps: u32,
    queue: VecDeque<Planned>,
    finished: bool,
}

const TOOLS: [(&str, &str); 5] = [
    ("bank_balance", r#"{"account":"A-1"}"#),
    ("bank_pay", r#"{"to":"bob","amount":25}"#),
    (
        "github.create_issue",
        r#"{"title":"Triage café ✓ 日本語","labels":["bug"]}"#,
    ),
    ("fs.read_file", r#"{"path":"/srv/notes/résumé.txt"}"#),
    (
        "slack.post_message",
        r##"{"channel":"#ops","text":"\"deploy\" done — ok"}"##,
    ),
];

pub struct RunGenerator {
    rng: u64,
    runs: Vec<Run>,
    injects: Vec<Inject>,
    next_id: u64,
    /// Runs abandoned by a `left-running` injection so far: each is followed
    /// by a silence the run check's default `--open-after` sees.
    pub abandoned: u64,
}

impl RunGenerator {
    pub fn new(seed: u64, concurrent: u64, mut injects: Vec<Inject>) -> Self {
        injects.sort_by_key(|i| i.at);
        let mut g = RunGenerator {
            rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            runs: Vec::new(),
            injects,
            next_id: 0,
            abandoned: 0,
        };
        for _ in 0..concurrent {
            let run = g.new_run();
            g.runs.push(run);
        }
        g
    }

    fn next(&mut self) -> u64 {
        // xorshift64*: plenty for test content, no dependency.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}_{:08x}{:04x}", self.next() >> 32, self.next_id & 0xffff)
    }

    fn new_run(&mut self) -> Run {
        let id = self.id("run");
        let planned_steps = 1 + (self.next() % 4) as u32;
        let mut queue = VecDeque::new();
        queue.push_back(plain("", "run.created", r#"{"goal":"triage the inbox","limits":{"max_steps":50,"max_consecutive_tool_failures":3,"loop_threshold":3}}"#.into()));
        queue.push_back(plain("", "run.started", "{}".into()));
        Run {
            id,
            last_start: String::new(),
            steps: 0,
            planned_steps,
            queue,
            finished: false,
        }
    }

    /// Plans the run's next step (or its end) into its queue.
    fn plan_step(&mut self, r: usize) {
        let index = self.runs[r].steps;
        self.runs[r].steps += 1;
        let step = self.id("step");
        let mut q: Vec<Planned> = vec![tagged(
            &step,
            "step.started",
            format!(r#"{{"index":{index}}}"#),
            Tag::StepStarted,
        )];
        if index >= self.runs[r].planned_steps {
            q.push(plain(
                &step,
                "step.decided",
                r#"{"kind":"complete","result":{"done":true},"reason":"goal met"}"#.into(),
            ));
            q.push(tagged(
                "",
                "run.finished",
                r#"{"status":"COMPLETED","reason":"goal_completed"}"#.into(),
                Tag::RunFinished,
            ));
            self.runs[r].queue.extend(q);
            return;
        }
        let (tool, args) = TOOLS[(self.next() % TOOLS.len() as u64) as usize];
        let roll = self.next() % 100;
        if self.next().is_multiple_of(2) {
            let call = self.id("call");
            q.push(plain(
                &step,
                "model.dispatched",
                format!(r#"{{"call_id":"{call}","attempt":1,"model":"claude-sonnet"}}"#),
            ));
            if roll.is_multiple_of(7) {
                q.push(plain(
                    &step,
                    "model.failed",
                    format!(r#"{{"call_id":"{call}","error":"overloaded","status":"failed"}}"#),
                ));
                let retry = self.id("call");
                q.push(plain(
                    &step,
                    "model.dispatched",
                    format!(r#"{{"call_id":"{retry}","attempt":2,"model":"claude-sonnet"}}"#),
                ));
                q.push(plain(
                    &step,
                    "model.completed",
                    format!(r#"{{"call_id":"{retry}","usage":{{"input_tokens":812,"output_tokens":64}}}}"#),
                ));
            } else {
                q.push(plain(
                    &step,
                    "model.completed",
                    format!(r#"{{"call_id":"{call}","usage":{{"input_tokens":640,"output_tokens":48}}}}"#),
                ));
            }
        }
        let decided =
            format!(r#"{{"kind":"tool_call","tool":"{tool}","args":{args},"reason":"next step","origin":"model"}}"#);
        let started = format!(r#"{{"tool":"{tool}","args":{args}}}"#);
        let hash = format!("{:016x}{:016x}", self.next(), self.next());
        let finished = format!(
            r#"{{"tool":"{tool}","summary":"ok: {} item(s)","content_hash":"{hash}","duration_ms":{}}}"#,
            roll % 9,
            roll * 3
        );
        q.push(plain(&step, "step.decided", decided));
        match roll {
            0..60 => {
                q.push(tagged(
                    &step,
                    "step.policy",
                    r#"{"outcome":"allow","reason":"class allowed"}"#.into(),
                    Tag::Allow,
                ));
                q.push(plain(&step, "step.tool_started", started));
                q.push(tagged(&step, "step.tool_finished", finished, Tag::ToolFinished));
            }
            60..70 => {
                q.push(plain(
                    &step,
                    "step.policy",
                    r#"{"outcome":"deny","reason":"operator's rule"}"#.into(),
                ));
                q.push(tagged(
                    &step,
                    "step.failed",
                    format!(r#"{{"kind":"policy_denied","summary":"denied: {tool}"}}"#),
                    Tag::StepEnd,
                ));
            }
            70..75 => {
                // Arguments the schema refuses: no policy, no tool.
                q.push(tagged(
                    &step,
                    "step.failed",
                    r#"{"kind":"invalid_decision","summary":"args: missing property"}"#.into(),
                    Tag::StepEnd,
                ));
            }
            75..90 => {
                let approval = self.id("apr");
                q.push(plain(
                    &step,
                    "step.policy",
                    r#"{"outcome":"require_approval","kind":"payment","reason":"needs a human"}"#.into(),
                ));
                q.push(plain(
                    &step,
                    "approval.requested",
                    format!(
                        r#"{{"approval_id":"{approval}","kind":"payment","reason":"needs a human","hash":"{hash}"}}"#
                    ),
                ));
                if roll == 89 {
                    q.push(plain(
                        &step,
                        "approval.decided",
                        format!(
                            r#"{{"approval_id":"{approval}","status":"rejected","by":"operator","note":"not today"}}"#
                        ),
                    ));
                    q.push(tagged(
                        "",
                        "run.finished",
                        r#"{"status":"CANCELLED","reason":"approval_rejected"}"#.into(),
                        Tag::RunFinished,
                    ));
                    self.runs[r].queue.extend(q);
                    self.runs[r].planned_steps = 0;
                    return;
                }
                q.push(plain(
                    &step,
                    "approval.decided",
                    format!(r#"{{"approval_id":"{approval}","status":"approved","by":"operator","note":"ok"}}"#),
                ));
                q.push(plain("", "run.resumed", format!(r#"{{"approval_id":"{approval}"}}"#)));
                q.push(plain(
                    &step,
                    "step.policy",
                    r#"{"outcome":"allow","reason":"approved"}"#.into(),
                ));
                q.push(plain(
                    &step,
                    "step.tool_started",
                    format!(r#"{{"tool":"{tool}","args":{args},"approval_id":"{approval}"}}"#),
                ));
                q.push(tagged(&step, "step.tool_finished", finished, Tag::ToolFinished));
            }
            _ => {
                // Killed after dispatch; another worker takes the lease, marks the
                // step interrupted, and re-runs it once an operator approves.
                let approval = self.id("apr");
                q.push(tagged(
                    &step,
                    "step.policy",
                    r#"{"outcome":"allow","reason":"class allowed"}"#.into(),
                    Tag::Allow,
                ));
                q.push(plain(&step, "step.tool_started", started));
                q.push(plain(
                    "",
                    "lease.taken_over",
                    r#"{"previous_owner":"worker-1","owner":"worker-2"}"#.into(),
                ));
                q.push(plain("", "run.resumed", "{}".into()));
                q.push(plain(
                    &step,
                    "step.interrupted",
                    format!(r#"{{"tool":"{tool}","summary":"outcome unknown"}}"#),
                ));
                q.push(plain(
                    &step,
                    "approval.requested",
                    format!(r#"{{"approval_id":"{approval}","kind":"interrupted_side_effect","hash":"{hash}"}}"#),
                ));
                q.push(plain(
                    &step,
                    "approval.decided",
                    format!(r#"{{"approval_id":"{approval}","status":"approved","by":"operator","note":"re-run it"}}"#),
                ));
                q.push(plain("", "run.resumed", format!(r#"{{"approval_id":"{approval}"}}"#)));
                q.push(plain(
                    &step,
                    "step.tool_started",
                    format!(r#"{{"tool":"{tool}","args":{args},"approval_id":"{approval}"}}"#),
                ));
                q.push(tagged(&step, "step.tool_finished", finished, Tag::ToolFinished));
            }
        }
        self.runs[r].queue.extend(q);
    }

    /// The event written at `seq`.
    pub fn next_event(&mut self, seq: u64) -> Event {
        let r = (self.next() % self.runs.len() as u64) as usize;
        if let Some(i) = self.due(seq, Fault::UnrequestedApproval) {
            self.injects.remove(i);
            let id = format!("forged_{seq}");
            return Event {
                run_id: self.runs[r].id.clone(),
                step_id: String::new(),
                kind: "approval.decided",
                payload: format!(r#"{{"approval_id":"{id}","status":"approved","by":"someone"}}"#),
            };
        }
        loop {
            if self.runs[r].queue.is_empty() {
                if self.runs[r].finished {
                    self.runs[r] = self.new_run();
                } else {
                    self.plan_step(r);
                }
                continue;
            }
            let planned = self.runs[r].queue.pop_front().expect("not empty");
            if planned.kind == "step.tool_finished"
                && let Some(i) = self.due(seq, Fault::UnknownOutcome)
            {
                self.injects.remove(i);
                continue; // never written: the start stays open
            }
            if planned.tag == Tag::Allow
                && let Some(i) = self.due(seq, Fault::StartedWithoutDecision)
            {
                self.injects.remove(i);
                continue;
            }
            if planned.tag == Tag::StepStarted
                && self.runs[r].steps > 1
                && let Some(i) = self.due(seq, Fault::UnknownStep)
            {
                self.injects.remove(i);
                continue;
            }
            let run_id = self.runs[r].id.clone();
            if planned.kind == "step.tool_started" {
                self.runs[r].last_start.clone_from(&planned.payload);
            }
            self.after(r, seq, &planned);
            return Event {
                run_id,
                step_id: planned.step_id,
                kind: planned.kind,
                payload: planned.payload,
            };
        }
    }

    /// What an event leads to: the run ends, or a fault follows it.
    fn after(&mut self, r: usize, seq: u64, planned: &Planned) {
        match planned.tag {
            Tag::RunFinished => {
                self.runs[r].finished = true;
                if let Some(i) = self.due(seq, Fault::EventAfterFinish) {
                    self.injects.remove(i);
                    // A stray resume after the finish, closed again: only the finish is broken.
                    self.runs[r].queue.push_back(plain("", "run.resumed", "{}".into()));
                    self.runs[r]
                        .queue
                        .push_back(plain("", "run.finished", r#"{"status":"COMPLETED"}"#.into()));
                }
            }
            Tag::ToolFinished => {
                if let Some(i) = self.due(seq, Fault::ExecutedTwice) {
                    self.injects.remove(i);
                    let tool = tool_of(&planned.payload);
                    let step = planned.step_id.clone();
                    let again = [
                        plain(
                            &step,
                            "step.policy",
                            r#"{"outcome":"allow","reason":"class allowed"}"#.into(),
                        ),
                        plain(&step, "step.tool_started", self.runs[r].last_start.clone()),
                        plain(
                            &step,
                            "step.tool_finished",
                            format!(r#"{{"tool":"{tool}","summary":"ok"}}"#),
                        ),
                    ];
                    for (n, e) in again.into_iter().enumerate() {
                        self.runs[r].queue.insert(n, e);
                    }
                } else {
                    self.maybe_abandon(r, seq);
                }
            }
            Tag::StepEnd => self.maybe_abandon(r, seq),
            _ => {}
        }
    }

    /// `left-running`: the run stops here, between steps, and a new one takes its place.
    fn maybe_abandon(&mut self, r: usize, seq: u64) {
        if self.runs[r].queue.is_empty()
            && let Some(i) = self.due(seq, Fault::LeftRunning)
        {
            self.injects.remove(i);
            self.runs[r] = self.new_run();
            self.abandoned += 1;
        }
    }

    fn due(&self, seq: u64, fault: Fault) -> Option<usize> {
        self.injects.iter().position(|i| i.fault == fault && i.at <= seq)
    }

    /// Injections not yet written (the log was too short for them).
    pub fn pending(&self) -> &[Inject] {
        &self.injects
    }
}

/// The tool a payload this generator wrote names.
fn tool_of(payload: &str) -> &str {
    payload
        .split_once(r#""tool":""#)
        .and_then(|(_, rest)| rest.split_once('"'))
        .map_or("unknown", |(tool, _)| tool)
}

fn plain(step: &str, kind: &'static str, payload: String) -> Planned {
    tagged(step, kind, payload, Tag::Plain)
}

fn tagged(step: &str, kind: &'static str, payload: String, tag: Tag) -> Planned {
    Planned {
        step_id: step.to_owned(),
        kind,
        payload,
        tag,
    }
}
