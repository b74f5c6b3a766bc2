//! The run check inside the follower: every event that passed the chain
//! check is also judged against the runtime's run rules (see
//! `chainship_runs`). A finding is logged and counted, never a reason to
//! stop: the log is what it is, and the export must carry it.
//!
//! On start the state of the runs still open at the resume point is
//! rebuilt from the database, events 1 to the cursor, each checked against
//! the chain on the way (a row rewritten under the cursor must not steer
//! the rules), so a restart neither forgets an open tool start nor raises
//! a finding a continuous run would not have. Findings from before the
//! cursor were logged by the life that shipped them: they are counted
//! again (the counters restart with the process) but not logged again.

use chainship_chain::{ChainCheck, Error, EventBatch, EventDb, Head, PrevHash, Recycler, Setting};
use chainship_runs::{Profile, RunCheck, RunCheckConfig, RunEvent};
use crossbeam_channel::{Sender, bounded};

use crate::error::FollowError;
use crate::metrics;

/// Which rules, and how they are applied.
#[derive(Clone, Debug)]
pub struct RunRules {
    pub profile: &'static Profile,
    pub config: RunCheckConfig,
}

pub struct FollowerRunCheck {
    check: RunCheck,
    profile: &'static Profile,
    log: FindingLog,
}

/// How many findings are logged one by one in each [`LOG_INTERVAL`]; past
/// that they are counted by kind and summed up in one line.
const LOGGED_PER_INTERVAL: u32 = 20;
const LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);
/// How many events (from the follower's start) say whether the database
/// looks like the profile's.
const PROFILE_CENSUS: u64 = 10_000;
/// Provisional findings remembered so each is logged once (a bounded set).
const REMEMBERED_PROVISIONAL: usize = 100_000;

/// The run check's log lines, bounded: a database that is not the profile's
/// must not turn into millions of lines. Every finding is still counted in
/// the metrics; `chainship runs` lists them all.
#[derive(Default)]
struct FindingLog {
    window: Option<std::time::Instant>,
    logged: u32,
    held_back: std::collections::BTreeMap<&'static str, u64>,
    provisional_seen: std::collections::HashSet<(&'static str, String, u64)>,
    events: u64,
    unknown_types: u64,
    said_not_the_profile: bool,
}

impl FindingLog {
    /// Whether this finding gets a line of its own (else it is counted).
    fn admit(&mut self, kind: &'static str) -> bool {
        let now = std::time::Instant::now();
        let start = *self.window.get_or_insert(now);
        if now.duration_since(start) >= LOG_INTERVAL {
            self.summarize();
            self.window = Some(now);
            self.logged = 0;
        }
        if self.logged < LOGGED_PER_INTERVAL {
            self.logged += 1;
            return true;
        }
        *self.held_back.entry(kind).or_default() += 1;
        false
    }

    /// Sums up what was held back once its interval is over, even when no
    /// finding comes after it.
    fn tick(&mut self) {
        if self.window.is_some_and(|w| w.elapsed() >= LOG_INTERVAL) {
            self.summarize();
            self.window = None;
            self.logged = 0;
        }
    }

    /// The findings held back, one line by kind.
    fn summarize(&mut self) {
        if self.held_back.is_empty() {
            return;
        }
        let total: u64 = self.held_back.values().sum();
        let by_kind: Vec<String> = self.held_back.iter().map(|(k, n)| format!("{k}={n}")).collect();
        tracing::warn!(
            held_back = total,
            "run check: {total} more finding(s) not logged one by one ({}); `chainship runs` lists every one",
            by_kind.join(", ")
        );
        self.held_back.clear();
    }

    /// Whether a provisional finding is new (each is logged once).
    fn first_time(&mut self, key: (&'static str, String, u64)) -> bool {
        if self.provisional_seen.len() >= REMEMBERED_PROVISIONAL {
            self.provisional_seen.clear();
        }
        self.provisional_seen.insert(key)
    }

    /// Counts events the profile does not know, and says once when most
    /// are: judged on the first events only, so the census costs nothing after.
    fn saw(&mut self, profile: &Profile, kind: &[u8]) {
        if self.said_not_the_profile || self.events >= PROFILE_CENSUS {
            return;
        }
        self.events += 1;
        if profile.role(kind) == chainship_runs::Role::Other {
            self.unknown_types += 1;
        }
        if !self.said_not_the_profile && self.events >= 1000 && self.unknown_types * 2 > self.events {
            self.said_not_the_profile = true;
            tracing::warn!(
                events = self.events,
                unknown_types = self.unknown_types,
                "run check: {} of the first {} events have types the {} profile does not know: this database does not look like {}'s (the profile none turns the run check off)",
                self.unknown_types,
                self.events,
                profile.name,
                profile.name
            );
        }
    }
}

impl FollowerRunCheck {
    /// The check, with the runs open at `after` rebuilt from `db`, whose
    /// chain up to `after` must hold (and end at `after`'s hash).
    pub fn rebuild(rules: &RunRules, db: &EventDb, after: Option<Head>) -> Result<FollowerRunCheck, FollowError> {
        let mut check = RunCheck::new(rules.profile, rules.config.clone());
        let end = after.map_or(0, |h| h.seq);
        let mut chain = ChainCheck::from_start();
        let mut findings = 0u64;
        let refuse = |why: String| {
            FollowError::Stop(
                Error::integrity(format!(
                    "{}: {why}; the run check cannot rebuild the open runs from it (verify the database; the profile none turns the run check off)",
                    db.path().display()
                ))
                .with_setting(Setting::RunProfile),
            )
        };
        let mut broken = None;
        let mut fed = 0u64;
        db.scan(0, end, &mut |e| {
            if let Err(b) = chain.check(e) {
                broken = Some(b);
                return false;
            }
            check.feed(&RunEvent::from(e));
            fed += 1;
            if fed.is_multiple_of(4096) {
                // Keeps the open runs bounded while rebuilding, as while following.
                check.sweep();
            }
            true
        })?;
        if let Some(b) = broken {
            return Err(refuse(format!(
                "the chain breaks at seq {} before the resume point: {}",
                b.seq,
                b.reason()
            )));
        }
        check.sweep();
        for f in check.take_findings() {
            metrics::run_finding(f.kind.as_str());
            findings += 1;
        }
        if let Some(head) = after {
            let last = chain.last_good();
            if last.map(|h| (h.seq, PrevHash::of(h.hash))) != Some((head.seq, PrevHash::of(head.hash))) {
                return Err(refuse(format!(
                    "the chain up to the resume point does not end at {head}"
                )));
            }
            tracing::info!(
                after = head.seq,
                open_runs = check.open_runs(),
                findings,
                "run check: the open runs rebuilt from the database (findings before the cursor are counted, not logged again; `chainship runs` lists them)"
            );
        }
        let _ = check.take_newly_silent();
        let mut me = FollowerRunCheck {
            check,
            profile: rules.profile,
            log: FindingLog::default(),
        };
        me.publish();
        Ok(me)
    }

    /// Runs the check on its own thread, off the export's critical path:
    /// the follow loop hands over each page once it has shipped it (with
    /// how many of its events passed the chain check), and the thread gives
    /// the page back to the reader when done.
    pub fn spawn(mut self, recycler: Recycler) -> RunCheckThread {
        let (pages, rx) = bounded::<(EventBatch, usize)>(2);
        let thread = std::thread::Builder::new()
            .name("run-check".into())
            .spawn(move || {
                for (page, checked) in rx {
                    for e in page.iter().take(checked) {
                        self.log.saw(self.profile, e.kind);
                        self.check.feed(&RunEvent::from(&e));
                    }
                    recycler.give_back(page);
                    self.check.sweep();
                    self.publish();
                }
                // The follower is stopping: what was held back is said now.
                self.log.summarize();
            })
            .expect("spawning the run check thread");
        RunCheckThread {
            pages: Some(pages),
            thread: Some(thread),
        }
    }

    fn publish(&mut self) {
        for f in self.check.take_findings() {
            metrics::run_finding(f.kind.as_str());
            if !self.log.admit(f.kind.as_str()) {
                continue;
            }
            tracing::warn!(
                kind = f.kind.as_str(),
                run = %f.run_id,
                step = %f.step_id,
                seq = f.seq,
                tool = f.tool.as_deref().unwrap_or(""),
                "run check: {}",
                f.message
            );
        }
        for f in self.check.take_newly_silent() {
            if !self.log.first_time((f.kind.as_str(), f.run_id.clone(), f.seq)) || !self.log.admit(f.kind.as_str()) {
                continue;
            }
            tracing::warn!(
                kind = f.kind.as_str(),
                run = %f.run_id,
                seq = f.seq,
                provisional = true,
                "run check: {}",
                f.message
            );
        }
        self.log.tick();
        let _ = self.check.take_summaries();
        metrics::runs(
            self.check.open_runs(),
            self.check.silent_runs(),
            self.check.unknown_outcomes(),
        );
    }
}

/// The run check's thread; dropping it lets the thread finish the pages it
/// was given, then waits for it.
pub struct RunCheckThread {
    pages: Option<Sender<(EventBatch, usize)>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RunCheckThread {
    /// Hands over a shipped page, of which the first `checked` events passed the chain check.
    pub fn send(&self, page: EventBatch, checked: usize) {
        if let Some(tx) = &self.pages {
            let _ = tx.send((page, checked));
        }
    }
}

impl Drop for RunCheckThread {
    fn drop(&mut self) {
        drop(self.pages.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
