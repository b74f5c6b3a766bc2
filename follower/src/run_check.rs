//! The run check inside the follower: every event that passed the chain
//! check is also judged against the runtime's run rules (see
//! `chainship_runs`). A finding is logged and counted, never a reason to
//! stop: the log is what it is, and the export must carry it.
//!
//! On start the state of the runs still open at the resume point is
//! restored, so a restart neither forgets an open tool start nor raises a
//! finding a continuous run would not have: from the state saved beside
//! the cursor ([`crate::run_state`]) and the events after it, or, without a
//! usable one, from the database, events 1 to the cursor. Either way the
//! events read are checked against the chain on the way (a row rewritten
//! under the cursor must not steer the rules). Findings from before the
//! cursor were logged by the life that shipped them: they are counted
//! again (the counters restart with the process) but not logged again.
//!
//! The thread saves the state now and then (every few seconds at most,
//! never more than a tenth of its time), and once more on the way out
//! unless the saved one is fewer than 4,096 events behind (reading those
//! again costs less than writing), each time only after the sink
//! acknowledged the event it describes.

use std::time::{Duration, Instant};

use chainship_chain::{ChainCheck, Error, EventBatch, EventDb, Head, PrevHash, Recycler, Setting};
use chainship_runs::{Profile, RunCheck, RunCheckConfig, RunEvent};
use crossbeam_channel::{RecvTimeoutError, Sender, bounded};
use tokio::sync::watch;

use crate::error::FollowError;
use crate::metrics;
use crate::run_state::{MAX_BYTES, RunStateFile, StageError, StagedState};

/// Which rules, and how they are applied.
#[derive(Clone, Debug)]
pub struct RunRules {
    pub profile: &'static Profile,
    pub config: RunCheckConfig,
    /// How often the state is saved (at most: never more than a tenth of
    /// the thread's time), when there is a file to save it in.
    pub save_interval: Duration,
}

pub struct FollowerRunCheck {
    check: RunCheck,
    profile: &'static Profile,
    log: FindingLog,
    /// The last event fed.
    fed: Option<Head>,
    saver: Option<Saver>,
}

/// Saves the check's state beside the cursor, once delivered.
struct Saver {
    file: RunStateFile,
    delivered: watch::Receiver<Option<Head>>,
    /// The head of the state on disk.
    saved: Option<Head>,
    /// A state taken (written beside the file), waiting for the sink to
    /// acknowledge its head.
    waiting: Option<StagedState>,
    interval: Duration,
    since: Instant,
    events_since: u64,
    /// How long the last save took: saves stay under a tenth of the time.
    cost: Duration,
    said_too_large: bool,
    said_failed: bool,
}

/// Saved after this many events even before the interval is over.
const SAVE_EVENTS: u64 = 1 << 18;
/// On the way out, a state fewer events behind than this is kept as it is:
/// the next start reads them again in less time than writing costs.
const EXIT_SAVE_EVENTS: u64 = 4096;

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
    /// Findings held back, by kind.
    held_back: std::collections::BTreeMap<&'static str, u64>,
    /// Provisional ones held back (silent so far, while the log goes on):
    /// said apart, as they are not findings and not in `chainship runs`.
    held_back_provisional: std::collections::BTreeMap<&'static str, u64>,
    /// Keyed hashes of (kind, run, seq): 8 bytes each, whatever the ids.
    provisional_seen: std::collections::HashSet<u64>,
    provisional_ids: std::collections::hash_map::RandomState,
    events: u64,
    unknown_types: u64,
    said_not_the_profile: bool,
    said_given_up_active: bool,
    /// Runs given up while active before this start (said by the life that
    /// gave them up): only more than these is said again.
    given_up_before: u64,
}

impl FindingLog {
    /// Whether this finding (or a provisional one) gets a line of its own
    /// (else it is counted).
    fn admit(&mut self, kind: &'static str, provisional: bool) -> bool {
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
        let held = if provisional {
            &mut self.held_back_provisional
        } else {
            &mut self.held_back
        };
        *held.entry(kind).or_default() += 1;
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
        fn said(held: &std::collections::BTreeMap<&'static str, u64>) -> (u64, String) {
            let by_kind: Vec<String> = held.iter().map(|(k, n)| format!("{k}={n}")).collect();
            (held.values().sum(), by_kind.join(", "))
        }
        if !self.held_back.is_empty() {
            let (total, by_kind) = said(&self.held_back);
            tracing::warn!(
                held_back = total,
                "run check: {total} more finding(s) not logged one by one ({by_kind}); `chainship runs` lists every one"
            );
        }
        if !self.held_back_provisional.is_empty() {
            let (total, by_kind) = said(&self.held_back_provisional);
            tracing::warn!(
                held_back = total,
                provisional = true,
                "run check: {total} more run(s) or call(s) silent so far not logged one by one ({by_kind}); not findings while the log goes on"
            );
        }
        self.held_back.clear();
        self.held_back_provisional.clear();
    }

    /// Whether a provisional finding is new (each is logged once).
    fn first_time(&mut self, key: (&'static str, &str, u64)) -> bool {
        use std::hash::BuildHasher;
        if self.provisional_seen.len() >= REMEMBERED_PROVISIONAL {
            self.provisional_seen.clear();
        }
        self.provisional_seen.insert(self.provisional_ids.hash_one(key))
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
    /// With `state`, the runs are restored from it when it can be used
    /// (see [`crate::run_state`]), and it is kept up to date from then on;
    /// `delivered` says what the sink has acknowledged.
    pub fn rebuild(
        rules: &RunRules,
        db: &EventDb,
        after: Option<Head>,
        state: Option<(RunStateFile, watch::Receiver<Option<Head>>)>,
    ) -> Result<FollowerRunCheck, FollowError> {
        let end = after.map_or(0, |h| h.seq);
        let restored = match (&state, after) {
            (Some((file, _)), Some(after)) => restore(rules, db, file, after),
            _ => None,
        };
        let saved = restored.as_ref().map(|(_, head)| *head);
        let (mut check, mut chain) = match restored {
            Some((check, head)) => (check, ChainCheck::after(head)),
            None => (
                RunCheck::new(rules.profile, rules.config.clone()),
                ChainCheck::from_start(),
            ),
        };
        let start = saved.map_or(0, |h| h.seq);
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
        db.scan(start, end, &mut |e| {
            if let Err(b) = chain.check(e) {
                broken = Some(b);
                return false;
            }
            check.feed(&RunEvent::from(e));
            fed += 1;
            if fed.is_multiple_of(4096) {
                // Keeps the open runs bounded while rebuilding, as while following;
                // the findings were logged by the life that shipped them (their
                // totals stay counted): what is queued is let go.
                check.sweep();
                let _ = (check.take_findings(), check.take_newly_silent(), check.take_summaries());
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
        // Every finding before the resume point, those restored included.
        let _ = check.take_findings();
        for (kind, n) in check.totals() {
            metrics::run_findings(kind.as_str(), n);
            findings += n;
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
                saved_state = saved.map_or(0, |h| h.seq),
                events_read = head.seq - start,
                open_runs = check.open_runs(),
                findings,
                "run check: the open runs rebuilt {} (findings before the cursor are counted, not logged again; `chainship runs` lists them)",
                match saved {
                    Some(s) => format!(
                        "from the state saved at seq {} and the {} event(s) after it",
                        s.seq,
                        head.seq - s.seq
                    ),
                    None => format!("from the database, events 1 to {}", head.seq),
                }
            );
        }
        let _ = check.take_newly_silent();
        let _ = check.take_summaries();
        let log = FindingLog {
            given_up_before: check.given_up_active(),
            ..FindingLog::default()
        };
        let mut me = FollowerRunCheck {
            check,
            profile: rules.profile,
            log,
            fed: after,
            saver: state.map(|(file, delivered)| Saver {
                file,
                delivered,
                saved,
                waiting: None,
                interval: rules.save_interval,
                since: Instant::now(),
                events_since: 0,
                cost: Duration::ZERO,
                said_too_large: false,
                said_failed: false,
            }),
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
                loop {
                    let wait = self.saver.as_ref().map_or(Duration::from_secs(1), |s| {
                        s.interval.clamp(Duration::from_millis(10), Duration::from_secs(1))
                    });
                    match rx.recv_timeout(wait) {
                        Ok((page, checked)) => {
                            for e in page.iter().take(checked) {
                                self.log.saw(self.profile, e.kind);
                                self.check.feed(&RunEvent::from(&e));
                                self.fed = Head::from_stored(e.seq, e.hash);
                            }
                            recycler.give_back(page);
                            self.check.sweep();
                            self.publish();
                            if let Some(saver) = &mut self.saver {
                                saver.events_since += checked as u64;
                            }
                        }
                        Err(RecvTimeoutError::Timeout) => {}
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                    if let Some(saver) = &mut self.saver {
                        saver.now_and_then(&mut self.check, self.fed);
                    }
                }
                // The follower is stopping: what was held back is said now.
                self.log.summarize();
                if let Some(saver) = &mut self.saver {
                    saver.on_exit(&mut self.check, self.fed);
                }
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
            if !self.log.admit(f.kind.as_str(), false) {
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
            if !self.log.first_time((f.kind.as_str(), &f.run_id, f.seq)) || !self.log.admit(f.kind.as_str(), true) {
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
        if self.check.given_up_active() > self.log.given_up_before && !self.log.said_given_up_active {
            self.log.said_given_up_active = true;
            tracing::warn!(
                open_runs = self.check.open_runs(),
                "run check: more runs are active at once than it keeps; the least recently active are given up (their later events are checked as new runs): this log does not look like one runtime's"
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

/// The saved state usable at `after`, with the head it describes; `None`
/// (said, unless there is simply none) when there is none that can be used.
fn restore(rules: &RunRules, db: &EventDb, file: &RunStateFile, after: Head) -> Option<(RunCheck, Head)> {
    let usable = || -> Result<Option<(RunCheck, Head)>, Error> {
        let restored = file.load_with(|head, input| {
            if head.seq > after.seq {
                return Err(Error::integrity(format!(
                    "it describes seq {}, past the resume point {} (the cursor was moved back)",
                    head.seq, after.seq
                )));
            }
            let stored = db.hash_at(head.seq).map_err(Error::integrity)?;
            if Head::from_stored(head.seq, &stored.unwrap_or_default()) != Some(head) {
                return Err(Error::integrity(format!(
                    "the database no longer holds {head} (rewritten, restored, or another database)"
                )));
            }
            let check = RunCheck::restore_from(rules.profile, rules.config.clone(), input).map_err(Error::integrity)?;
            if let Some(seq) = check.last_seq_held().filter(|seq| *seq > head.seq) {
                return Err(Error::integrity(format!(
                    "it holds a run fed seq {seq}, past the event it describes ({}): not a state the check made",
                    head.seq
                )));
            }
            Ok(check)
        })?;
        Ok(restored.map(|(head, check)| (check, head)))
    };
    match usable() {
        Ok(found) => found,
        Err(why) => {
            tracing::warn!(
                file = %file.path().display(),
                "run check: the saved state cannot be used: {why}; rebuilding the open runs from the start of the log"
            );
            None
        }
    }
}

impl Saver {
    fn delivered(&self, head: Head) -> bool {
        self.delivered.borrow().is_some_and(|d| d.seq >= head.seq)
    }

    /// Takes the state when it is due, and writes the one waiting once the
    /// sink holds its head.
    fn now_and_then(&mut self, check: &mut RunCheck, fed: Option<Head>) {
        let due = self.since.elapsed() >= self.interval.max(self.cost * 10) || self.events_since >= SAVE_EVENTS;
        if self.waiting.is_none()
            && due
            && let Some(head) = fed.filter(|h| Some(*h) != self.saved)
        {
            self.take(check, head);
        }
        if let Some(staged) = self
            .waiting
            .take_if(|s| self.delivered.borrow().is_some_and(|d| d.seq >= s.head.seq))
        {
            self.commit(staged);
        }
    }

    /// The follower is stopping: the state as of the last event fed, if
    /// the sink holds it (else the one waiting, if it does).
    fn on_exit(&mut self, check: &mut RunCheck, fed: Option<Head>) {
        let close_enough = |h: &Head| {
            self.saved
                .is_some_and(|s| h.seq.saturating_sub(s.seq) < EXIT_SAVE_EVENTS)
        };
        if let Some(head) = fed.filter(|h| Some(*h) != self.saved && !close_enough(h) && self.delivered(*h)) {
            self.waiting = None;
            self.take(check, head);
        }
        // One the sink does not hold is dropped (and its file removed).
        if let Some(staged) = self.waiting.take()
            && self.delivered(staged.head)
        {
            self.commit(staged);
        }
    }

    /// Writes the state as of `head` beside the file, to put in place once delivered.
    fn take(&mut self, check: &mut RunCheck, head: Head) {
        let started = Instant::now();
        let staged = self.file.stage(head, |out| check.save_to(out));
        self.cost = started.elapsed();
        self.since = Instant::now();
        self.events_since = 0;
        match staged {
            Ok(staged) => self.waiting = Some(staged),
            Err(StageError::TooLarge) if !self.said_too_large => {
                self.said_too_large = true;
                tracing::warn!(
                    open_runs = check.open_runs(),
                    "run check: the state is larger than {} MiB and is not saved; a restart rebuilds the open runs from the state saved before, or the start of the log",
                    MAX_BYTES >> 20
                );
            }
            Err(StageError::Io(e)) => self.failed(&e),
            Err(StageError::TooLarge) => {}
        }
    }

    /// Puts a state the sink holds in place.
    fn commit(&mut self, staged: StagedState) {
        let started = Instant::now();
        let head = staged.head;
        match staged.commit() {
            Ok(()) => {
                self.saved = Some(head);
                self.said_failed = false;
                self.cost += started.elapsed();
            }
            Err(e) => self.failed(&e),
        }
    }

    fn failed(&mut self, e: &std::io::Error) {
        if !self.said_failed {
            self.said_failed = true;
            tracing::warn!(
                file = %self.file.path().display(),
                error = %e,
                "run check: cannot save the state (a restart reads the log from the state saved before)"
            );
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Past the lines an interval allows, findings and provisional ones
    /// (silent so far) are held back apart: a summary of findings never
    /// counts what `chainship runs` would not call one.
    #[test]
    fn provisional_lines_held_back_are_never_counted_as_findings() {
        let mut log = FindingLog::default();
        for _ in 0..LOGGED_PER_INTERVAL {
            assert!(log.admit("executed-twice", false));
        }
        assert!(!log.admit("executed-twice", false));
        assert!(!log.admit("left-running", true));
        assert!(!log.admit("left-running", true));
        assert_eq!(log.held_back.iter().collect::<Vec<_>>(), [(&"executed-twice", &1)]);
        assert_eq!(
            log.held_back_provisional.iter().collect::<Vec<_>>(),
            [(&"left-running", &2)]
        );
        log.summarize();
        assert!(log.held_back.is_empty() && log.held_back_provisional.is_empty());
    }
}
