//! `chainship monitor`: the scheduled checks made continuous. One
//! long-running loop follows the copy (a topic's partitions or a directory
//! of files, `chainship_sinks::tail`) and the anchor store, and says what
//! it finds as it finds it, for one origin or a whole fleet:
//!
//! - **the copy**: each record is checked as it arrives by its origin's
//!   watch (`chainship_verify::watch`): a planted, edited, repeated or
//!   out-of-place record is a finding at once, with its seq;
//! - **the store**: an origin whose listing changed (or every `recheck`)
//!   is judged by the same incremental store pass as `anchor verify
//!   --no-db --state` (`chainship_verify::db_check`): signatures, trusted
//!   keys, growth, consistency proofs from the last verified checkpoint,
//!   the witness quorum, a rolled-back or forked store; its newest trusted
//!   head is then handed to the origin's watch, which compares the copy's
//!   record at its seq (a rewritten tail is a `fork` over its exact range);
//! - **staleness**: an origin with no trusted head newer than `max_age`.
//!
//! A finding is one log line and a metric; the monitor keeps watching. An
//! outage of the copy or the store is retried with backoff and shows in
//! readiness ([`health`]), never as a finding. What it verified is saved in
//! the state directory ([`state`]) so a restart reads nothing twice.

pub mod health;
pub mod metrics;
pub mod state;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use backon::{BackoffBuilder, ExponentialBuilder};
use chainship_anchor::AnchorStore;
use chainship_anchor::cosignature::WitnessPolicy;
use chainship_anchor::note::VerifierKey;
use chainship_anchor::store::OriginNames;
use chainship_chain::record::Record;
use chainship_chain::{Error, Head, Setting, permanent};
use chainship_runs::affected::RecordEvent;
use chainship_runs::{Profile, RunCheck, RunCheckConfig};
use chainship_sinks::file_tail::Notice;
use chainship_sinks::tail::CopyTail;
use chainship_sinks::{Shard, SinkConfig};
use chainship_verify::db_check::{self, DbCheck};
use chainship_verify::finding::{self, Finding, Kind};
use chainship_verify::watch::CopyWatch;

pub use health::MonitorHealth;

/// Which origins to watch.
#[derive(Clone, Debug)]
pub enum Scope {
    One(String),
    /// Every origin in the copy and the store (those starting with the prefix).
    All {
        prefix: Option<String>,
    },
}

impl Scope {
    fn takes(&self, origin: &str) -> bool {
        match self {
            Scope::One(o) => o == origin,
            Scope::All { prefix } => prefix.as_deref().is_none_or(|p| origin.starts_with(p)),
        }
    }
}

/// How often each part runs.
#[derive(Clone, Debug)]
pub struct Timing {
    /// How long one read of the copy waits for something new.
    pub poll: Duration,
    /// How often the store is listed.
    pub store_interval: Duration,
    /// Each origin's store is judged at least this often, changed or not
    /// (what finds a publication deleted below the newest).
    pub recheck: Duration,
    /// How long a record ahead of its turn waits before it is named.
    pub grace: Duration,
    /// How often the state is saved (and on the way out).
    pub save_interval: Duration,
    /// An origin with no trusted head newer than this is stale.
    pub max_age: Option<Duration>,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            poll: Duration::from_millis(250),
            store_interval: Duration::from_secs(2),
            recheck: Duration::from_secs(60),
            grace: Duration::from_secs(30),
            save_interval: Duration::from_secs(10),
            max_age: None,
        }
    }
}

/// The run rules to check each origin's runs with as its records arrive.
#[derive(Clone)]
pub struct RunRules {
    pub profile: &'static Profile,
    pub config: RunCheckConfig,
}

/// Everything the monitor watches, and how.
pub struct MonitorInput<'a> {
    pub copy: &'a SinkConfig,
    pub store: &'a AnchorStore,
    pub scope: Scope,
    pub shard: Option<Shard>,
    pub keys: &'a [VerifierKey],
    pub witness: Option<(&'a WitnessPolicy, Duration)>,
    pub state_dir: &'a Path,
    pub timing: Timing,
    /// Origins with their own metric series at most (see [`metrics::Labels`]).
    pub max_origin_labels: usize,
    /// The run check on the copy as it arrives (unknown outcomes, bypasses,
    /// calls executed twice), when given.
    pub runs: Option<RunRules>,
    /// The keys that may authorize erasure: tombstones their statements
    /// cover pass (statements read at start and on each store judgement).
    pub redaction_keys: &'a [VerifierKey],
}

/// A finding as the monitor reports it: whose, and what.
pub struct Reported<'a> {
    pub origin: &'a str,
    pub finding: &'a Finding,
    /// The exact range it makes invalid, where it names one.
    pub range: Option<(u64, u64)>,
}

/// What the store said of one origin last time.
#[derive(Default)]
struct StoreSeen {
    names: Option<OriginNames>,
    /// The store kept this origin (seen in a listing, or in the state
    /// directory): one that vanishes from the listing is still judged.
    known: bool,
    judged: Option<Instant>,
    newest: Option<(Head, Option<SystemTime>)>,
    /// When a trusted head of the origin was first seen (its records may
    /// still be on their way into the copy for a while after).
    first_head_at: Option<Instant>,
    checkpoint: Option<u64>,
    stale: bool,
    /// Findings already reported (reported once while they last).
    reported: BTreeSet<(Kind, Option<u64>, String)>,
}

/// Findings remembered per origin, to say each once.
const MAX_REMEMBERED: usize = 10_000;

struct Monitor<'a> {
    input: &'a MonitorInput<'a>,
    health: &'a MonitorHealth,
    watches: BTreeMap<String, CopyWatch>,
    runs: BTreeMap<String, RunCheck>,
    stores: BTreeMap<String, StoreSeen>,
    labels: metrics::Labels,
    runtime: tokio::runtime::Runtime,
    on_finding: &'a mut dyn FnMut(&Reported<'_>),
    /// The copy was read to its end at least once (an origin the store
    /// publishes for and the copy lacks is then missing from it).
    caught_up: bool,
    /// When each origin's first record was read (this run).
    first_seen: BTreeMap<String, Instant>,
    /// Each origin's trusted redactions, as last read from the store.
    redactions: BTreeMap<String, Option<std::sync::Arc<chainship_chain::redaction::Redactions>>>,
}

/// Runs until `stop` is set, then saves the state and returns. Returns an
/// error only for what retrying cannot mend (a state of another copy,
/// store or origin, a copy it cannot follow, an unwritable state directory).
pub fn run(
    input: &MonitorInput<'_>,
    health: &MonitorHealth,
    stop: &AtomicBool,
    on_finding: &mut dyn FnMut(&Reported<'_>),
) -> Result<(), Error> {
    state::prepare(input.state_dir)?;
    // Named as resolved: the same file by another relative path is the same copy.
    let (copy_name, store_name) = (
        state::identity(&input.copy.to_string()),
        state::identity(&input.store.describe()),
    );
    let saved = state::load(input.state_dir, &copy_name, &store_name)?.unwrap_or_default();
    let mut watches = BTreeMap::new();
    for w in saved.watches {
        if !input.scope.takes(&w.origin) {
            return Err(permanent!(
                "{}: it holds origin {}, which this monitor does not watch: one state directory per monitor",
                state::file(input.state_dir).display(),
                w.origin
            ));
        }
        let origin = w.origin.clone();
        let watch = CopyWatch::resume(w, input.timing.grace)
            .map_err(|e| permanent!("{}: origin {origin}: {e}", state::file(input.state_dir).display()))?;
        state::agrees_with_store(input.state_dir, &watch, &input.store.describe())?;
        watches.insert(origin, watch);
    }
    let mut runs = BTreeMap::new();
    if let Some(rules) = &input.runs {
        for (origin, bytes) in saved.runs {
            let bytes = decode_b64(&bytes);
            let check = bytes
                .ok_or_else(|| "not base64".to_owned())
                .and_then(|b| RunCheck::restore(rules.profile, rules.config.clone(), &b).map_err(|e| e.to_string()))
                .map_err(|e| {
                    permanent!(
                        "{}: origin {origin}'s run check: {e}",
                        state::file(input.state_dir).display()
                    )
                })?;
            runs.insert(origin, check);
        }
    }
    let resumed = !watches.is_empty();
    let mut stores: BTreeMap<String, StoreSeen> = BTreeMap::new();
    for origin in state::store_origins(input.state_dir)? {
        if input.scope.takes(&origin) {
            stores.entry(origin).or_default().known = true;
        }
    }
    let mut tail = CopyTail::open(input.copy, input.shard, saved.positions)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| permanent!("cannot start the async runtime: {e}"))?;
    let mut m = Monitor {
        input,
        health,
        watches,
        runs,
        stores,
        labels: metrics::Labels::new(input.max_origin_labels),
        runtime,
        on_finding,
        caught_up: false,
        first_seen: BTreeMap::new(),
        redactions: BTreeMap::new(),
    };
    m.load_all_redactions();
    tracing::info!(copy = %copy_name, store = %store_name, origins = m.watches.len(), resumed, "monitor started");
    let t = &input.timing;
    let mut backoff = None;
    let (mut store_due, mut save_due, mut probe_due) =
        (Instant::now(), Instant::now() + t.save_interval, Instant::now());
    while !stop.load(Ordering::Relaxed) {
        health.turned();
        match m.read_copy(&mut tail) {
            Ok(_) => {
                backoff = None;
                m.caught_up |= tail.caught_up();
            }
            Err(e) => m.copy_failed(&e, &mut backoff, stop),
        }
        m.settle();
        if Instant::now() >= probe_due {
            // A paused broker answers nothing at all: ask it.
            if let Err(e) = tail.reachable() {
                m.copy_failed(&e, &mut backoff, stop);
            }
            probe_due = Instant::now() + t.store_interval;
        }
        if Instant::now() >= store_due {
            m.read_store()?;
            store_due = Instant::now() + t.store_interval;
        }
        if Instant::now() >= save_due {
            m.save(&tail)?;
            save_due = Instant::now() + t.save_interval;
        }
    }
    m.save(&tail)?;
    tracing::info!("monitor stopped; state saved");
    Ok(())
}

impl Monitor<'_> {
    /// Reads what arrived and feeds each record to its origin's watch.
    fn read_copy(&mut self, tail: &mut CopyTail) -> Result<usize, Error> {
        let now = SystemTime::now();
        let mut found: Vec<(String, Finding)> = Vec::new();
        let scope = &self.input.scope;
        let grace = self.input.timing.grace;
        let watches = &mut self.watches;
        let runs = &mut self.runs;
        let first_seen = &mut self.first_seen;
        let redactions = &self.redactions;
        let rules = self.input.runs.as_ref();
        let mut unplaced = Vec::new();
        let mut notices = Vec::new();
        let read = tail.poll(
            self.input.timing.poll,
            &mut |line, _partition, place| {
                let origin = match (Record::parse(line), scope) {
                    (Ok(r), _) => r.origin.into_owned(),
                    (Err(e), _) if e.carried().is_some() => e.carried().expect("checked").origin.to_string(),
                    (Err(_), Scope::One(o)) => o.clone(),
                    (Err(e), Scope::All { .. }) => {
                        unplaced.push(Finding::new(
                            Kind::Altered,
                            None,
                            format!("{}: not a record: {e}", place()),
                        ));
                        return;
                    }
                };
                if !scope.takes(&origin) {
                    return;
                }
                // A name no origin can have (`..`, control characters, ...): never a label or a key.
                if let Err(e) = chainship_core::parse_origin(&origin) {
                    unplaced.push(Finding::new(Kind::Foreign, None, format!("{}: {e}", place())));
                    return;
                }
                first_seen.entry(origin.clone()).or_insert_with(Instant::now);
                let watch = watches.entry(origin.clone()).or_insert_with(|| {
                    let mut w = CopyWatch::new(&origin, grace);
                    w.set_redactions(redactions.get(&origin).cloned().flatten());
                    w
                });
                let mut check = rules.map(|r| {
                    runs.entry(origin.clone())
                        .or_insert_with(|| RunCheck::new(r.profile, r.config.clone()))
                });
                let mut accepted = |r: &Record<'_>| {
                    if let Some(check) = check.as_deref_mut() {
                        feed_run_check(check, r);
                    }
                };
                for f in watch.feed_with(line, &place(), now, &mut accepted) {
                    found.push((origin.clone(), f));
                }
            },
            &mut |path, notice| {
                let kind = match notice {
                    Notice::Rewritten(_) => Kind::Cut,
                    Notice::NotARecord(_) => Kind::Altered,
                };
                let mut f = Finding::new(kind, None, format!("{}: {}", path.display(), notice.text()));
                f.source = Some(path.display().to_string());
                notices.push(f);
            },
        )?;
        unplaced.extend(notices);
        ::metrics::counter!(metrics::RECORDS).increment(read as u64);
        self.health.copy(Ok(()));
        for f in unplaced {
            self.report("(copy)", &f, None);
        }
        for (origin, f) in found {
            self.report(&origin, &f, None);
        }
        self.take_run_findings();
        for (origin, w) in &self.watches {
            if let Some(p) = w.position() {
                self.labels.gauge(metrics::COPY_SEQ, origin, p.seq as f64);
            }
            // A head handed on before its record is verified as the record
            // comes; a finding below it takes the verified seq back down.
            if w.position().is_some() || w.verified().is_some() {
                let verified = w.verified().map_or(0.0, |v| v.seq as f64);
                self.labels.gauge(metrics::VERIFIED_SEQ, origin, verified);
            }
        }
        ::metrics::gauge!(metrics::ORIGINS).set(self.watches.len() as f64);
        Ok(read)
    }

    fn copy_failed(&mut self, e: &Error, backoff: &mut Option<backon::ExponentialBackoff>, stop: &AtomicBool) {
        ::metrics::counter!(metrics::READ_ERRORS, "part" => "copy").increment(1);
        self.health.copy(Err(e.to_string()));
        let delays = backoff.get_or_insert_with(|| {
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(250))
                .with_max_delay(Duration::from_secs(15))
                .without_max_times()
                .build()
        });
        let wait = delays.next().unwrap_or(Duration::from_secs(15));
        tracing::warn!(error = %e, retry_in = ?wait, "cannot read the copy; retrying");
        sleep_unless(stop, wait);
    }

    /// Records that waited past the grace are named.
    fn settle(&mut self) {
        let now = SystemTime::now();
        let mut found = Vec::new();
        let rules = self.input.runs.as_ref();
        for (origin, w) in &mut self.watches {
            let mut out = Vec::new();
            let mut check = rules.map(|r| {
                self.runs
                    .entry(origin.clone())
                    .or_insert_with(|| RunCheck::new(r.profile, r.config.clone()))
            });
            w.settle_with(now, &mut out, &mut |r| {
                if let Some(check) = check.as_deref_mut() {
                    feed_run_check(check, r);
                }
            });
            found.extend(out.into_iter().map(|f| (origin.clone(), f)));
        }
        for (origin, f) in found {
            self.report(&origin, &f, None);
        }
    }

    /// The run check's findings, and the calls and runs that fell silent
    /// (an unknown outcome: a side effect to reconcile), as they come.
    fn take_run_findings(&mut self) {
        let mut found = Vec::new();
        for (origin, check) in &mut self.runs {
            for f in check.take_findings().into_iter().chain(check.take_newly_silent()) {
                found.push((origin.clone(), finding::run_rule(&f)));
            }
            let _ = check.take_summaries();
        }
        for (origin, f) in found {
            self.report(&origin, &f, None);
        }
    }

    /// Lists the store once; judges each origin that changed or is due.
    fn read_store(&mut self) -> Result<(), Error> {
        let listed = self.runtime.block_on(self.input.store.origins());
        let origins = match listed {
            Ok((origins, _junk)) => origins,
            Err(e) => {
                ::metrics::counter!(metrics::READ_ERRORS, "part" => "store").increment(1);
                tracing::warn!(error = %e, "cannot list the anchor store; retrying");
                self.health.store(Err(e.to_string()));
                return Ok(());
            }
        };
        let now = Instant::now();
        let recheck = self.input.timing.recheck;
        let mut failed = None;
        let mut origins: BTreeMap<String, OriginNames> =
            origins.into_iter().filter(|(o, _)| self.input.scope.takes(o)).collect();
        // An origin the store kept and keeps no more (its folder deleted,
        // the mount empty) is judged as one with nothing in it: the pass
        // names what its state verified and the store no longer holds.
        for (origin, seen) in &self.stores {
            if seen.known && !origins.contains_key(origin) {
                origins.insert(origin.clone(), OriginNames::default());
            }
        }
        for (origin, names) in origins {
            let seen = self.stores.entry(origin.clone()).or_default();
            let changed = seen.names.as_ref() != Some(&names);
            let due = seen.judged.is_none_or(|t| now.duration_since(t) >= recheck);
            if !(changed || due) {
                continue;
            }
            match self.judge_store(&origin, names) {
                Ok(()) => {}
                // A state file that is not this store's and origin's: refused, never rebuilt.
                Err(e) if e.setting == Some(Setting::VerifyState) => return Err(e),
                // Anything else (an unreadable object planted in the store, an
                // outage) is retried: it must not stop the watch.
                Err(e) => failed = Some(e),
            }
            self.health.turned();
        }
        match failed {
            Some(e) => {
                ::metrics::counter!(metrics::READ_ERRORS, "part" => "store").increment(1);
                tracing::warn!(error = %e, "cannot read the anchor store; retrying");
                self.health.store(Err(e.to_string()));
            }
            None => self.health.store(Ok(())),
        }
        self.judge_staleness();
        self.judge_missing();
        Ok(())
    }

    /// Every watched origin's redaction statements, read once at start (with
    /// `--redaction-key`): a tombstone read before its origin's first store
    /// judgement is still accepted.
    fn load_all_redactions(&mut self) {
        if self.input.redaction_keys.is_empty() {
            return;
        }
        let origins: Vec<String> = match &self.input.scope {
            Scope::One(origin) => vec![origin.clone()],
            Scope::All { .. } => match self.runtime.block_on(self.input.store.origins()) {
                Ok((origins, _)) => origins.into_keys().filter(|o| self.input.scope.takes(o)).collect(),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot list the anchor store for redaction statements; read on each origin's store round");
                    Vec::new()
                }
            },
        };
        for origin in origins {
            self.load_redactions(&origin);
        }
    }

    /// `origin`'s trusted redaction statements, read for the first time
    /// (after that, each store judgement reads them: [`Self::judge_store`]).
    fn load_redactions(&mut self, origin: &str) {
        let loaded = self.runtime.block_on(chainship_verify::redactions::load(
            self.input.store,
            origin,
            self.input.redaction_keys,
        ));
        match loaded {
            Ok(loaded) => self.set_redactions(origin, loaded.shared()),
            Err(e) => {
                tracing::warn!(origin, error = %e, "cannot read the redaction statements; retrying on the next store round")
            }
        }
    }

    /// Gives `origin`'s watch (and any made later) the redactions now trusted.
    fn set_redactions(&mut self, origin: &str, shared: Option<std::sync::Arc<chainship_chain::redaction::Redactions>>) {
        if let Some(w) = self.watches.get_mut(origin) {
            w.set_redactions(shared.clone());
        }
        self.redactions.insert(origin.to_owned(), shared);
    }

    /// The store pass for one origin, from its state file.
    fn judge_store(&mut self, origin: &str, names: OriginNames) -> Result<(), Error> {
        let keys = match self.input.scope {
            Scope::One(_) => self.input.keys.to_vec(),
            Scope::All { .. } => finding::keys_named_for(self.input.keys, origin),
        };
        let path = state::store_file(self.input.state_dir, origin);
        let verdict = db_check::check_database(
            DbCheck {
                store: self.input.store,
                origin,
                keys: &keys,
                witness: self.input.witness,
                db: None,
                state: Some(&path),
                max_age: None,
                allow_no_heads: true,
                max_unvouched: u64::MAX,
                touched: None,
                redaction_keys: self.input.redaction_keys,
            },
            &mut |_, _| {},
        )?;
        // The statements the judgement read: given to the watch, not read again.
        if !self.input.redaction_keys.is_empty() {
            self.set_redactions(origin, verdict.covered.redactions.clone());
        }
        let seen = self.stores.entry(origin.to_owned()).or_default();
        seen.known |= names.publishes();
        seen.names = Some(names);
        seen.judged = Some(Instant::now());
        if let Some(head) = verdict.last_trusted {
            let published = verdict.last_trusted_published;
            seen.first_head_at.get_or_insert_with(Instant::now);
            if seen.newest.is_none_or(|(h, _)| head.seq >= h.seq) {
                seen.newest = Some((head, published.or(seen.newest.and_then(|(_, p)| p))));
            }
        }
        if let Some(cp) = &verdict.covered.audit.largest {
            seen.checkpoint = Some(cp.size);
        }
        let (head, checkpoint) = (seen.newest.map(|(h, _)| h), seen.checkpoint);
        let range = verdict.ranges.as_ref().and_then(|r| r.first().map(|r| (r.from, r.to)));
        for f in &verdict.findings {
            self.report(origin, f, range);
        }
        if let Some(size) = checkpoint {
            self.labels.gauge(metrics::CHECKPOINT_SIZE, origin, size as f64);
        }
        // The copy's record at the newest trusted head's seq must be it.
        if let (Some(head), true) = (head, verdict.passed()) {
            let grace = self.input.timing.grace;
            let watch = self
                .watches
                .entry(origin.to_owned())
                .or_insert_with(|| CopyWatch::new(origin, grace));
            let found = watch.trusted_head(head);
            let v = watch.verdict(found);
            let verified = v.last_trusted.map_or(0.0, |h| h.seq as f64);
            self.labels.gauge(metrics::VERIFIED_SEQ, origin, verified);
            let range = v.ranges.as_ref().and_then(|r| r.first().map(|r| (r.from, r.to)));
            for f in &v.findings {
                self.report(origin, f, range);
            }
        }
        Ok(())
    }

    /// An origin whose newest trusted head is older than `max_age` is
    /// stale, once, until a newer one is published.
    fn judge_staleness(&mut self) {
        let now = SystemTime::now();
        let mut found = Vec::new();
        let mut stale_count = 0;
        for (origin, seen) in &mut self.stores {
            let Some((head, Some(published))) = seen.newest else {
                continue;
            };
            let age = now.duration_since(published).unwrap_or_default();
            self.labels.gauge(metrics::HEAD_AGE, origin, age.as_secs_f64());
            let Some(max_age) = self.input.timing.max_age else {
                continue;
            };
            match finding::stale_finding(Some((published, &head)), max_age, now) {
                Some(f) => {
                    stale_count += 1;
                    if !seen.stale {
                        seen.stale = true;
                        found.push((origin.clone(), f));
                    }
                }
                None if seen.stale => {
                    seen.stale = false;
                    tracing::info!(
                        origin,
                        seq = head.seq,
                        "origin no longer stale: a newer head was published"
                    );
                }
                None => {}
            }
        }
        ::metrics::gauge!(metrics::STALE_ORIGINS).set(stale_count as f64);
        for (origin, f) in found {
            self.report(&origin, &f, None);
        }
    }

    /// Once the copy was read to its end: an origin the store vouched for
    /// a grace ago that the copy holds nothing of (a whole fleet's copy only).
    fn judge_missing(&mut self) {
        if !self.caught_up || self.input.shard.is_some() || matches!(self.input.scope, Scope::One(_)) {
            return;
        }
        let grace = self.input.timing.grace;
        let missing: Vec<(String, Head)> = self
            .stores
            .iter()
            .filter(|(_, s)| s.first_head_at.is_some_and(|t| t.elapsed() >= grace))
            .filter(|(o, _)| self.watches.get(*o).is_none_or(|w| w.position().is_none()))
            .filter_map(|(o, s)| s.newest.map(|(h, _)| (o.clone(), h)))
            .collect();
        // The other way round: records of an origin the store vouches for
        // nothing of (no head its own key signed), a grace after the first.
        let unvouched: Vec<String> = self
            .first_seen
            .iter()
            .filter(|(_, t)| t.elapsed() >= grace)
            .filter(|(o, _)| self.stores.get(*o).is_none_or(|s| s.newest.is_none()))
            .map(|(o, _)| o.clone())
            .collect();
        for origin in unvouched {
            let f = Finding::new(
                Kind::NoTrustedHead,
                None,
                format!(
                    "the copy holds records of origin {origin}, and the store keeps no head its own key signed for it: nothing vouches for them"
                ),
            );
            self.report(&origin, &f, None);
        }
        for (origin, head) in missing {
            let f = Finding::new(
                Kind::MissingCopy,
                Some(head.seq),
                format!(
                    "the store vouches for seqs up to {} of origin {origin}, and the copy holds none of its records",
                    head.seq
                ),
            );
            self.report(&origin, &f, Some((1, head.seq)));
        }
    }

    /// Says a finding once: a log line and a metric.
    fn report(&mut self, origin: &str, f: &Finding, range: Option<(u64, u64)>) {
        let seen = self.stores.entry(origin.to_owned()).or_default();
        let key = (f.kind, f.seq, f.message.clone());
        if seen.reported.contains(&key) {
            return;
        }
        if seen.reported.len() < MAX_REMEMBERED {
            seen.reported.insert(key);
        }
        self.labels.finding(origin, f.kind.as_str());
        let range_text = range.map(|(a, b)| format!("{a}..{b}"));
        tracing::warn!(
            origin,
            kind = %f.kind,
            seq = f.seq,
            range = range_text.as_deref(),
            "finding: {}",
            f.message
        );
        (self.on_finding)(&Reported {
            origin,
            finding: f,
            range,
        });
    }

    fn save(&mut self, tail: &CopyTail) -> Result<(), Error> {
        state::save(
            self.input.state_dir,
            state::Saved {
                copy: state::identity(&self.input.copy.to_string()),
                store: state::identity(&self.input.store.describe()),
                positions: tail.positions(),
                watches: self.watches.values().map(CopyWatch::state).collect(),
                runs: self
                    .runs
                    .iter_mut()
                    .map(|(origin, check)| (origin.clone(), encode_b64(&check.save())))
                    .collect(),
                ..Default::default()
            },
        )
    }
}

/// A record that took its place, to the run check.
fn feed_run_check(check: &mut RunCheck, r: &Record<'_>) {
    // A record whose fields cannot be decoded was named altered by its watch.
    if let Some(event) = RecordEvent::of(r) {
        check.feed(&event.event(r.seq));
    }
}

fn encode_b64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn decode_b64(text: &str) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(text).ok()
}

/// Sleeps `wait`, waking early when `stop` is set.
fn sleep_unless(stop: &AtomicBool, wait: Duration) {
    let end = Instant::now() + wait;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50).min(end - Instant::now()));
    }
}
