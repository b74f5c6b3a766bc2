//! The check's state as bytes, so a follower that restarts carries on from
//! where it saved instead of reading the whole log again.
//!
//! What is saved is everything the rules remember: the open runs, the
//! finished runs' keyed hashes (with their key), the newest time seen and
//! the findings counted by kind. Queued findings and summaries are not: the
//! caller saves right after taking them. The rules it was made under are
//! saved too; under other rules the bytes are refused, not reinterpreted.
//! Layout: a version byte (changed whenever the layout does); the finished
//! runs' hashes as their sorted generations (the bulk of a large state,
//! written and read as plain 8-byte words, see [`super::finished`]); then
//! the rest in postcard (compact, no field names).

use serde::{Deserialize, Serialize};

use super::finished::FinishedRuns;
use super::{Map, Run, RunCheck, RunCheckConfig, saturating_ms};
use crate::finding::RunFindingKind;
use crate::profile::Profile;

/// Bumped whenever [`Saved`] (or anything it holds) changes shape or
/// meaning (3: model calls keyed `id:`/`step:`, long ids' longer short form;
/// 4: what a run holds is counted on restore, not saved).
const VERSION: u8 = 4;

/// Why saved bytes cannot be used (the caller rebuilds from the log).
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("saved by another version of the run check (layout {found}, this one reads {VERSION})")]
    Version { found: u8 },
    #[error("saved under other rules ({0})")]
    OtherRules(String),
    #[error("unreadable: {0}")]
    Unreadable(String),
}

#[derive(Serialize, Deserialize)]
struct Rules {
    profile: String,
    open_after_ms: i64,
    #[serde(deserialize_with = "super::held::tools")]
    read_only_tools: Vec<String>,
}

impl Rules {
    fn of(profile: &Profile, cfg: &RunCheckConfig) -> Rules {
        Rules {
            profile: profile.name.to_owned(),
            open_after_ms: saturating_ms(cfg.open_after),
            read_only_tools: cfg.read_only_tools.clone(),
        }
    }

    /// What differs from `other`, said for the operator.
    fn differs_from(&self, other: &Rules) -> Option<String> {
        if self.profile != other.profile {
            return Some(format!("profile {} here, {} saved", self.profile, other.profile));
        }
        if self.open_after_ms != other.open_after_ms {
            return Some(format!(
                "open limit {} ms here, {} ms saved",
                self.open_after_ms, other.open_after_ms
            ));
        }
        fn set(tools: &[String]) -> std::collections::BTreeSet<&String> {
            tools.iter().collect()
        }
        if set(&self.read_only_tools) != set(&other.read_only_tools) {
            return Some("another list of read-only tools".into());
        }
        None
    }
}

#[derive(Serialize, Deserialize)]
struct Saved {
    rules: Rules,
    finished_key: [u64; 2],
    newest_at: Option<i64>,
    #[serde(deserialize_with = "super::held::totals")]
    totals: Vec<(String, u64)>,
    silent_runs: u64,
    silent_calls: u64,
    given_up_active: u64,
    #[serde(deserialize_with = "super::held::bounded")]
    runs: Map<String, Box<Run>>,
}

/// Counts no log can reach (a counter near u64::MAX would wrap at the next finding).
const IMPOSSIBLE_COUNT: u64 = 1 << 48;
/// Longer than any id, tool name or profile the check keeps (ids past
/// [`super::MAX_ID`] are kept shortened).
const LONGEST_TEXT: usize = 512;

impl Saved {
    /// The check's own limits hold: a state that passes them is no larger
    /// in memory than one the check could have made (a crafted one with a
    /// million open runs, or megabyte ids, is refused, not loaded). Counts
    /// what each run holds on the way (see [`super::held`]).
    fn within_bounds(&mut self) -> Result<(), RestoreError> {
        let refuse = |why: String| Err(RestoreError::Unreadable(why));
        if self.runs.len() > super::MAX_OPEN_RUNS {
            return refuse(format!("{} open runs, more than the check keeps", self.runs.len()));
        }
        let mut held = 0;
        for (id, run) in &mut self.runs {
            run.held = run.count_held();
            run.accounted = run.held_by(id);
            held += run.accounted;
        }
        if held > super::MAX_HELD {
            return refuse(format!("runs that hold {} MiB, more than the check keeps", held >> 20));
        }
        let counts = self.totals.iter().map(|(_, n)| *n);
        if counts
            .chain([self.silent_runs, self.silent_calls, self.given_up_active])
            .any(|n| n > IMPOSSIBLE_COUNT)
        {
            return refuse("a count no log can reach".into());
        }
        let rules = &self.rules;
        let texts = self
            .runs
            .iter()
            .flat_map(|(id, run)| std::iter::once(id.as_str()).chain(run.texts()))
            .chain(std::iter::once(rules.profile.as_str()))
            .chain(rules.read_only_tools.iter().map(String::as_str));
        for text in texts {
            if text.len() > LONGEST_TEXT {
                return refuse(format!("a text of {} bytes, longer than the check keeps", text.len()));
            }
        }
        // What the check could have made: ids it keeps as themselves or in
        // their short form; a run's seqs and times in order.
        let ids = self
            .runs
            .iter()
            .flat_map(|(id, run)| std::iter::once(id.as_str()).chain(run.texts()));
        for id in ids {
            if id.len() > super::MAX_ID && !super::is_short_form(id) {
                return refuse(format!(
                    "an id of {} bytes kept whole (the check keeps ids past {} bytes short)",
                    id.len(),
                    super::MAX_ID
                ));
            }
        }
        for run in self.runs.values() {
            let later_than_all = |t: Option<i64>| t.is_some_and(|t| self.newest_at.is_none_or(|n| t > n));
            let seqs = run.pending().map(|(_, p)| p.seq).chain(run.taken_over);
            if run.first_seq == 0
                || run.first_seq > run.last_seq
                || seqs.into_iter().any(|seq| seq > run.last_seq)
                || later_than_all(run.last_at)
                || run.queued.is_some_and(|q| run.last_at.is_none_or(|l| q > l))
            {
                return refuse("a run whose seqs or times are out of order".into());
            }
        }
        if rules.read_only_tools.len() > 4096 {
            return refuse("more read-only tools than a command line holds".into());
        }
        Ok(())
    }
}

/// A writer that keeps the first error it met.
struct KeepsError<'a, W: ?Sized> {
    out: &'a mut W,
    error: Option<std::io::Error>,
}

impl<W: std::io::Write + ?Sized> std::io::Write for KeepsError<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.write(buf).map_err(|e| {
            let told = std::io::Error::from(e.kind());
            self.error.get_or_insert(e);
            told
        })
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

impl RunCheck {
    /// The check's state as bytes, for [`RunCheck::restore`]. Take the
    /// findings, provisional findings and summaries first: they are not saved.
    pub fn save(&mut self) -> Vec<u8> {
        let mut bytes = Vec::new();
        // Maps with known lengths, strings and integers into a Vec: nothing here can fail.
        self.save_to(&mut bytes).expect("a Vec takes every write");
        bytes
    }

    /// [`RunCheck::save`], written to `out` as it is encoded: a large state
    /// is never held in memory beside the check. Fails only as `out` does.
    pub fn save_to<W: std::io::Write + ?Sized>(&mut self, out: &mut W) -> std::io::Result<()> {
        out.write_all(&[VERSION])?;
        self.finished.save(out)?;
        // Moved out and back rather than cloned: the state may be large.
        let saved = Saved {
            rules: Rules::of(self.profile, &self.cfg),
            finished_key: self.finished_key,
            newest_at: self.newest_at,
            totals: RunFindingKind::ALL
                .iter()
                .map(|k| (k.as_str().to_owned(), self.total(*k)))
                .filter(|(_, n)| *n > 0)
                .collect(),
            silent_runs: self.silent_runs,
            silent_calls: self.silent_calls,
            given_up_active: self.given_up_active,
            runs: std::mem::take(&mut self.runs),
        };
        // postcard says only that a write failed: the writer keeps the why.
        let mut kept = KeepsError { out, error: None };
        let encoded = postcard::to_io(&saved, &mut kept).map(|_| ());
        self.runs = saved.runs;
        match (encoded, kept.error) {
            (Ok(_), _) => Ok(()),
            (Err(_), Some(e)) => Err(e),
            (Err(e), None) => Err(std::io::Error::other(e)),
        }
    }

    /// A check that carries on from `bytes` (made by [`RunCheck::save`])
    /// under the same rules; anything else is refused, never guessed at.
    pub fn restore(profile: &'static Profile, cfg: RunCheckConfig, bytes: &[u8]) -> Result<RunCheck, RestoreError> {
        RunCheck::restore_from(profile, cfg, &mut &bytes[..])
    }

    /// [`RunCheck::restore`], read from `input` to its end as it is decoded:
    /// no more is held than the check it makes (ids past what the check
    /// keeps and tables past its cap are refused as they are read).
    pub fn restore_from<R: std::io::Read + ?Sized>(
        profile: &'static Profile,
        cfg: RunCheckConfig,
        input: &mut R,
    ) -> Result<RunCheck, RestoreError> {
        let mut version = [0u8];
        input
            .read_exact(&mut version)
            .map_err(|_| RestoreError::Unreadable("empty".into()))?;
        if version[0] != VERSION {
            return Err(RestoreError::Version { found: version[0] });
        }
        let finished = FinishedRuns::restore(input)?;
        // Every text is read through this buffer: a longer one is refused.
        let mut text = [0u8; LONGEST_TEXT];
        let reading = super::held::Reading::start(super::MAX_HELD);
        let decoded = postcard::from_io::<Saved, _>((&mut *input, &mut text[..]));
        let over = reading.over();
        drop(reading);
        let (mut saved, _) = decoded.map_err(|e| {
            RestoreError::Unreadable(match (over, e) {
                (true, _) => "it holds more than the check keeps (its runs, or a list)".into(),
                // The decoder says only that its buffer ran out.
                (false, postcard::Error::DeserializeUnexpectedEnd) => {
                    format!("a text longer than the check keeps ({LONGEST_TEXT} bytes), or the state ends early")
                }
                (false, e) => e.to_string(),
            })
        })?;
        let mut after = [0u8];
        if !matches!(input.read(&mut after), Ok(0)) {
            return Err(RestoreError::Unreadable("bytes after the state".into()));
        }
        saved.within_bounds()?;
        if let Some(why) = Rules::of(profile, &cfg).differs_from(&saved.rules) {
            return Err(RestoreError::OtherRules(why));
        }
        let mut check = RunCheck::new(profile, cfg);
        for (name, n) in saved.totals {
            let kind = RunFindingKind::ALL
                .into_iter()
                .find(|k| k.as_str() == name)
                .ok_or_else(|| {
                    RestoreError::Unreadable(format!("a finding kind this version does not know: {name:?}"))
                })?;
            if check.totals.insert(kind, n).is_some() {
                return Err(RestoreError::Unreadable(format!(
                    "the finding kind {name:?} counted twice"
                )));
            }
        }
        check.finished_key = saved.finished_key;
        check.finished = finished;
        check.newest_at = saved.newest_at;
        check.silent_runs = saved.silent_runs;
        check.silent_calls = saved.silent_calls;
        check.given_up_active = saved.given_up_active;
        check.runs = saved.runs;
        // The sweep's indexes and the entries held are derived from the runs, not saved.
        check.held = check.runs.values().map(|r| r.accounted).sum();
        for (id, run) in &check.runs {
            if let Some(t) = run.queued {
                check.by_activity.push(std::cmp::Reverse((t, id.clone())));
            }
            if run.touched {
                check.touched.push(id.clone());
            }
        }
        Ok(check)
    }

    /// Findings so far, by kind (for counters that restart with the process).
    pub fn totals(&self) -> impl Iterator<Item = (RunFindingKind, u64)> + '_ {
        RunFindingKind::ALL
            .into_iter()
            .map(|k| (k, self.total(k)))
            .filter(|(_, n)| *n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RunEvent;
    use crate::finding::{RunFinding, RunSummary};
    use crate::profile::AGENTRT;
    use crate::synth::{Inject, RunGenerator};
    use std::time::Duration;

    /// agentrt's sequences with every fault injected, times that jump
    /// (silences), go back, and are sometimes unreadable.
    fn log(events: u64) -> Vec<(u64, String, String, String, String, String)> {
        let injects: Vec<Inject> = [
            "unknown-outcome@50",
            "executed-twice@120",
            "started-without-decision@300",
            "left-running@400",
            "event-after-finish@700",
            "unknown-step@900",
            "unrequested-approval@1100",
            "left-running@1500",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
        let mut g = RunGenerator::new(7, 12, injects);
        let mut secs: u64 = 0;
        (1..=events)
            .map(|seq| {
                let e = g.next_event(seq);
                secs += if seq % 600 == 0 { 3600 } else { 1 };
                let t = if seq % 97 == 0 { secs - 30 } else { secs };
                let at = if seq % 331 == 0 {
                    "yesterday".to_owned()
                } else {
                    humantime::format_rfc3339_millis(std::time::UNIX_EPOCH + Duration::from_secs(1_786_953_600 + t))
                        .to_string()
                };
                (seq, e.run_id, e.step_id, at, e.kind.to_owned(), e.payload)
            })
            .collect()
    }

    fn feed(c: &mut RunCheck, e: &(u64, String, String, String, String, String)) {
        c.feed(&RunEvent {
            seq: e.0,
            run_id: e.1.as_bytes(),
            step_id: e.2.as_bytes(),
            at: e.3.as_bytes(),
            kind: e.4.as_bytes(),
            payload: e.5.as_bytes(),
            redacted: false,
        });
    }

    type Seen = (Vec<RunFinding>, Vec<RunFinding>, Vec<RunSummary>);

    fn take(c: &mut RunCheck, seen: &mut Seen) {
        seen.0.extend(c.take_findings());
        seen.1.extend(c.take_newly_silent());
        seen.2.extend(c.take_summaries());
    }

    /// Everything the check says over `events`, saved and restored after
    /// every event whose index `restart_at` picks.
    fn run(events: &[(u64, String, String, String, String, String)], restart_at: impl Fn(usize) -> bool) -> Seen {
        let mut c = RunCheck::new(&AGENTRT, RunCheckConfig::default());
        let mut seen = Seen::default();
        for (i, e) in events.iter().enumerate() {
            feed(&mut c, e);
            if i % 64 == 63 {
                c.sweep();
            }
            if restart_at(i) {
                take(&mut c, &mut seen);
                let bytes = c.save();
                c = RunCheck::restore(&AGENTRT, RunCheckConfig::default(), &bytes).unwrap();
            }
        }
        c.finish();
        take(&mut c, &mut seen);
        seen
    }

    #[test]
    fn a_check_restored_from_its_saved_state_says_exactly_what_one_never_stopped_says() {
        let events = log(4000);
        let whole = run(&events, |_| false);
        assert!(
            RunFindingKind::ALL
                .iter()
                .filter(|k| whole.0.iter().any(|f| f.kind == **k))
                .count()
                >= 6,
            "the log exercises most rules: {:?}",
            whole
                .0
                .iter()
                .map(|f| f.kind)
                .collect::<std::collections::BTreeSet<_>>()
        );
        assert!(!whole.1.is_empty(), "and silences");
        for every in [1, 7, 64, 333, 1000] {
            let restarted = run(&events, |i| i % every == every - 1);
            assert_eq!(
                format!("{:?}", restarted.0),
                format!("{:?}", whole.0),
                "findings, restarted every {every}"
            );
            // Runs that fall silent in one sweep come in the map's order, which is random.
            let sorted = |v: &[RunFinding]| {
                let mut v: Vec<String> = v.iter().map(|f| format!("{f:?}")).collect();
                v.sort();
                v
            };
            assert_eq!(sorted(&restarted.1), sorted(&whole.1), "provisional, every {every}");
            assert_eq!(
                format!("{:?}", restarted.2),
                format!("{:?}", whole.2),
                "summaries, every {every}"
            );
        }
    }

    /// The sweep looks only at runs that may have changed; what it finds
    /// must be what looking at every run finds.
    #[test]
    fn the_sweep_by_last_activity_finds_what_looking_at_every_run_finds() {
        let events = log(6000);
        for limit in [Duration::from_secs(60), Duration::from_secs(15 * 60), Duration::ZERO] {
            let cfg = RunCheckConfig {
                open_after: limit,
                ..RunCheckConfig::default()
            };
            let mut c = RunCheck::new(&AGENTRT, cfg);
            let mut silences = 0;
            for (i, e) in events.iter().enumerate() {
                feed(&mut c, e);
                if i % 50 != 49 {
                    continue;
                }
                c.sweep();
                silences += c.take_newly_silent().len();
                let newest = c.newest_at.unwrap();
                let (mut runs, mut calls) = (0, 0);
                for (id, r) in &c.runs {
                    let silent = r.last_at.is_some_and(|t| newest.saturating_sub(t) > c.limit_ms);
                    assert_eq!(r.silent, silent, "run {id} after event {i}");
                    if silent {
                        runs += u64::from(!r.waiting());
                        calls += r.unreported_open() as u64;
                    }
                }
                assert_eq!((c.silent_runs(), c.silent_calls()), (runs, calls), "after event {i}");
            }
            assert!(silences > 0, "{limit:?}: the log has silences");
        }
    }

    /// Runs that wait for an approval, or are all active at once, are held
    /// to the cap too: silent waiting ones go first, then the least recently active.
    #[test]
    fn the_cap_on_open_runs_holds_for_runs_that_wait_or_never_go_quiet() {
        let mut c = RunCheck::new(&AGENTRT, RunCheckConfig::default());
        c.max_open = 100;
        let mut seq = 0;
        let mut waiting_given_up = 0;
        for (hour, at) in ["2026-08-17T08:00:00Z", "2026-08-17T09:00:00Z"].iter().enumerate() {
            for i in 0..2000 {
                let run = format!("r{hour}-{i}");
                for (step, kind, payload) in [
                    ("", "run.created", "{}"),
                    ("s", "approval.requested", r#"{"approval_id":"a"}"#),
                ] {
                    seq += 1;
                    let event = (
                        seq,
                        run.clone(),
                        step.to_owned(),
                        at.to_string(),
                        kind.to_owned(),
                        payload.to_owned(),
                    );
                    feed(&mut c, &event);
                }
                if i % 64 == 63 {
                    c.sweep();
                    assert!(c.open_runs() <= 100, "{} open", c.open_runs());
                    waiting_given_up += c
                        .take_summaries()
                        .iter()
                        .filter(|s| s.status == crate::RunStatus::Waiting)
                        .count();
                }
            }
        }
        assert!(
            c.given_up_active() > 0,
            "runs all active at once are given up past the cap"
        );
        assert!(
            waiting_given_up >= 80,
            "silent runs waiting for an approval are given up first"
        );
        assert_eq!(
            c.total(RunFindingKind::LeftRunning),
            0,
            "a run waiting for an approval is not left running"
        );
    }

    /// Past the caps the same log gives up the same runs however often it is
    /// swept (a follower sweeps per page, a rebuild per 4,096 events).
    #[test]
    fn what_is_given_up_past_the_caps_does_not_depend_on_the_paging() {
        let mut g = RunGenerator::new(3, 400, Vec::new());
        let events: Vec<_> = (1..=6000u64)
            .map(|seq| {
                let e = g.next_event(seq);
                let at = humantime::format_rfc3339_millis(
                    std::time::UNIX_EPOCH + Duration::from_secs(1_786_953_600 + seq * 3),
                )
                .to_string();
                // Long ids are kept short, the same way every time.
                let run = if seq % 5 == 0 {
                    format!("{}{}", e.run_id, "x".repeat(300))
                } else {
                    e.run_id
                };
                (seq, run, e.step_id, at, e.kind.to_owned(), e.payload)
            })
            .collect();
        let run_with = |sweep_every: usize| {
            let cfg = RunCheckConfig {
                open_after: Duration::from_secs(600),
                ..RunCheckConfig::default()
            };
            let mut c = RunCheck::new(&AGENTRT, cfg);
            c.max_open = 60;
            c.max_held = 150_000;
            let mut findings = Vec::new();
            for (i, e) in events.iter().enumerate() {
                feed(&mut c, e);
                assert!(
                    c.open_runs() <= 60 && c.held <= 150_000 + 20_000,
                    "{} runs, {} bytes held",
                    c.open_runs(),
                    c.held
                );
                if i % sweep_every == 0 {
                    c.sweep();
                    findings.extend(c.take_findings());
                }
            }
            c.finish();
            findings.extend(c.take_findings());
            (format!("{findings:?}"), c.given_up_active())
        };
        let (per_7, given_up) = run_with(7);
        assert!(given_up > 0, "the caps were reached");
        assert_eq!(run_with(500), (per_7.clone(), given_up));
        assert_eq!(run_with(4096), (per_7, given_up));
    }

    /// What each run holds is kept as its entries change, and is exactly
    /// what counting it from scratch gives (as a restored state is counted):
    /// the cap gives up the same runs either way.
    #[test]
    fn what_a_run_holds_is_kept_exactly_as_counting_it_again_gives() {
        let mut events = log(3000);
        // Long ids too, kept in their short form.
        for e in events.iter_mut().filter(|e| e.0 % 7 == 0) {
            e.1 = format!("{}{}", e.1, "r".repeat(200));
            e.2 = format!("{}{}", e.2, "s".repeat(150));
        }
        let mut c = RunCheck::new(&AGENTRT, RunCheckConfig::default());
        let mut most = 0;
        for (i, e) in events.iter().enumerate() {
            feed(&mut c, e);
            let mut held = 0;
            for (id, run) in &c.runs {
                assert_eq!(run.held, run.count_held(), "run {id} after event {i}");
                assert_eq!(run.accounted, run.held_by(id), "run {id} after event {i}");
                held += run.accounted;
            }
            assert_eq!(c.held, held, "after event {i}");
            most = most.max(c.held);
            if i % 500 == 499 {
                take(&mut c, &mut Seen::default());
                let bytes = c.save();
                let restored = RunCheck::restore(&AGENTRT, RunCheckConfig::default(), &bytes).unwrap();
                assert_eq!(restored.held, c.held, "restored after event {i}");
            }
        }
        assert!(most > 10_000, "the runs held something: {most}");
    }

    #[test]
    fn saved_state_is_refused_under_other_rules_another_layout_or_damaged() {
        let events = log(500);
        let mut c = RunCheck::new(&AGENTRT, RunCheckConfig::default());
        for e in &events {
            feed(&mut c, e);
        }
        let bytes = c.save();
        let other_limit = RunCheckConfig {
            open_after: Duration::from_secs(60),
            ..RunCheckConfig::default()
        };
        let err = RunCheck::restore(&AGENTRT, other_limit, &bytes).unwrap_err();
        assert!(matches!(err, RestoreError::OtherRules(_)), "{err}");
        let read_only = RunCheckConfig {
            read_only_tools: vec!["fs.read_file".into()],
            ..RunCheckConfig::default()
        };
        assert!(matches!(
            RunCheck::restore(&AGENTRT, read_only, &bytes),
            Err(RestoreError::OtherRules(_))
        ));
        let mut other_version = bytes.clone();
        other_version[0] = VERSION + 1;
        assert!(matches!(
            RunCheck::restore(&AGENTRT, RunCheckConfig::default(), &other_version),
            Err(RestoreError::Version { .. })
        ));
        // Cut anywhere: an error, never a panic, never a check.
        for len in (0..bytes.len()).step_by(7) {
            assert!(
                RunCheck::restore(&AGENTRT, RunCheckConfig::default(), &bytes[..len]).is_err(),
                "{len}"
            );
        }
        assert_eq!(
            RunCheck::restore(&AGENTRT, RunCheckConfig::default(), &bytes)
                .unwrap()
                .open_runs(),
            c.open_runs()
        );
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(RunCheck::restore(&AGENTRT, RunCheckConfig::default(), &trailing).is_err());
    }

    /// A state the check could never have made is refused before it is used:
    /// it would hold more memory, or wrap a counter, than the check's own caps allow.
    #[test]
    fn a_crafted_state_past_the_checks_own_bounds_is_refused() {
        let crafted = |edit: &dyn Fn(&mut Saved)| {
            let mut saved = Saved {
                rules: Rules::of(&AGENTRT, &RunCheckConfig::default()),
                finished_key: [1, 2],
                newest_at: None,
                totals: Vec::new(),
                silent_runs: 0,
                silent_calls: 0,
                given_up_active: 0,
                runs: Map::default(),
            };
            edit(&mut saved);
            let mut bytes = vec![VERSION];
            FinishedRuns::default().save(&mut bytes).unwrap();
            postcard::to_extend(&saved, bytes).unwrap()
        };
        let restore = |bytes: &[u8]| RunCheck::restore(&AGENTRT, RunCheckConfig::default(), bytes);
        assert!(restore(&crafted(&|_| {})).is_ok());
        type Edit<'a> = &'a dyn Fn(&mut Saved);
        let short = |len: &str, hash: &str| format!("{}…({len} bytes, sha256 {hash}…)", "p".repeat(100));
        let malformed = [
            short("129", &"g".repeat(32)),
            short("129", &"a".repeat(31)),
            short("129", &"A".repeat(32)),
            short("12", &"a".repeat(32)),
            short("0129", &"a".repeat(32)),
            format!("{}…(129 bytes, sha256 {}…)", "p".repeat(120), "a".repeat(32)),
        ];
        assert!(
            restore(&crafted(&|s| {
                s.runs.insert(short("129", &"a".repeat(32)), Box::new(Run::new(1)));
            }))
            .is_ok()
        );
        for id in malformed {
            let err = restore(&crafted(&|s| {
                s.runs.insert(id.clone(), Box::new(Run::new(1)));
            }))
            .err();
            assert!(matches!(err, Some(RestoreError::Unreadable(_))), "{id}: {err:?}");
        }
        let refused: [(&str, Edit); 12] = [
            ("a kind counted twice", &|s| {
                s.totals.push(("unknown-outcome".into(), 1));
                s.totals.push(("unknown-outcome".into(), 2));
            }),
            ("more read-only tools than a command line holds", &|s| {
                s.rules.read_only_tools = (0..5000).map(|i| format!("t{i}")).collect();
            }),
            ("an open call after the run's last event", &|s| {
                let mut run = Run::new(1);
                run.step("s").tool = Some(Box::new(super::super::Pending {
                    seq: 9,
                    step_id: "s".into(),
                    what: "t".into(),
                    reported: false,
                }));
                s.runs.insert("r".into(), Box::new(run));
            }),
            ("a run's first seq 0", &|s| {
                s.runs.insert("r".into(), Box::new(Run::new(0)));
            }),
            ("a long id kept whole", &|s| {
                s.runs
                    .insert("r".repeat(super::super::MAX_ID + 2), Box::new(Run::new(1)));
            }),
            ("a run's first seq after its last", &|s| {
                let mut run = Run::new(7);
                run.last_seq = 6;
                s.runs.insert("r".into(), Box::new(run));
            }),
            ("a run's time after the newest the state has seen", &|s| {
                s.newest_at = Some(1_000);
                let mut run = Run::new(1);
                run.last_at = Some(1_000 + 100 * 365 * 86_400_000);
                s.runs.insert("r".into(), Box::new(run));
            }),
            ("too many runs", &|s| {
                for i in 0..=super::super::MAX_OPEN_RUNS {
                    s.runs.insert(format!("r{i}"), Box::new(Run::new(1)));
                }
            }),
            ("a long run id", &|s| {
                s.runs.insert("r".repeat(LONGEST_TEXT + 1), Box::new(Run::new(1)));
            }),
            ("a long step id", &|s| {
                let mut run = Run::new(1);
                run.steps.insert("s".repeat(10_000), super::super::Step::default());
                s.runs.insert("r".into(), Box::new(run));
            }),
            ("a count near u64::MAX", &|s| {
                s.totals.push(("unknown-outcome".into(), u64::MAX))
            }),
            ("runs that hold too much", &|s| {
                for r in 0..10 {
                    let mut run = Run::new(1);
                    for i in 0..=super::super::MAX_HELD / 10 / 100 {
                        run.steps.insert(format!("s{i}"), super::super::Step::default());
                    }
                    s.runs.insert(format!("r{r}"), Box::new(run));
                }
            }),
        ];
        for (what, edit) in refused {
            let err = restore(&crafted(edit)).err();
            assert!(matches!(err, Some(RestoreError::Unreadable(_))), "{what}: {err:?}");
            // Refused as it is read, before it is all in memory.
            if what == "runs that hold too much" {
                let err = err.unwrap().to_string();
                assert!(err.contains("it holds more than the check keeps"), "{what}: {err}");
            } else if what == "a long step id" {
                let err = err.unwrap().to_string();
                assert!(
                    err.contains("a text longer than the check keeps (512 bytes)"),
                    "{what}: {err}"
                );
            }
        }
    }
}
