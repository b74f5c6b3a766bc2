//! The fleet pass (`verify-export --all-origins`): every origin of a shared
//! copy (a topic, an S3 prefix, a file or a directory of files) verified in
//! one read of the copy, each against its own heads and checkpoints in the
//! anchor store, with its own trusted keys; every origin the store keeps
//! heads for but the copy lacks named `missing-copy`.
//!
//! A topic or files are read once and each origin's records are set aside
//! ([`Spill`], on local disk); then each origin is checked alone by the one
//! copy check ([`crate::copy::check_copy`]), reading only its own records.
//! An S3 prefix keeps a folder per origin, each read once by its check.
//! Memory follows one origin at a time plus a small buffer per origin,
//! never the others' records.
//!
//! [`Scope`] narrows the origins: a prefix, and a [`Shard`] — a worker of
//! N: for a topic the partitions it reads (an origin belongs to the worker
//! reading its home partition; a record of any origin on a partition that
//! is not its home is named `foreign-partition` by the worker reading that
//! partition), elsewhere a stable hash of the origin.

mod spill;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chainship_anchor::AnchorStore;
use chainship_anchor::cosignature::WitnessPolicy;
use chainship_anchor::note::VerifierKey;
use chainship_anchor::store::OriginNames;
use chainship_chain::origin::parse_origin;
use chainship_chain::record::Record;
use chainship_chain::{Error, InvalidRange, RangeKind};
use chainship_runs::Touched;
use chainship_sinks::{Shard, SharedRead, SinkConfig};
use chainship_verify::copy::{CopyExpectations, CopyOutcome};
use chainship_verify::{Finding, Kind, Verdict, pass};

use crate::copy::{CopyInput, CopySource, check_copy, new_runtime};

pub use spill::Spill;

/// Which origins a fleet pass judges.
#[derive(Clone, Copy, Debug, Default)]
pub struct Scope<'a> {
    /// Only origins starting with this.
    pub prefix: Option<&'a str>,
    /// Only this worker's part of the fleet.
    pub shard: Option<Shard>,
}

impl Scope<'_> {
    fn has(&self, origin: &str) -> bool {
        self.prefix.is_none_or(|p| origin.starts_with(p))
    }
}

/// A shared copy and what each of its origins is checked against.
pub struct FleetInput<'a> {
    pub source: &'a SinkConfig,
    /// Every trusted key; an origin trusts those named after it (C2SP: a
    /// log's key carries the log's name), never another origin's.
    pub keys: &'a [VerifierKey],
    pub witness: Option<(&'a WitnessPolicy, Duration)>,
    pub open_store: &'a (dyn Fn() -> Arc<AnchorStore> + Sync),
    pub scope: Scope<'a>,
    pub expect: CopyExpectations,
    /// Where the pass sets each origin's records aside (the temp dir when `None`).
    pub spill_dir: Option<&'a Path>,
    /// The keys that may authorize erasure, for every origin (a key given
    /// `origin=ORIGIN` only for that one).
    pub redaction_keys: &'a [VerifierKey],
}

/// One origin's answer.
#[derive(Debug)]
pub struct OriginVerdict {
    pub origin: String,
    pub verdict: CopyOutcome,
}

/// What the fleet pass read.
#[derive(Debug, Default, Clone)]
pub struct FleetCovered {
    /// Records read from the copy (every origin's, and lines of none).
    pub records: u64,
    /// Origins the anchor store keeps anything for (in scope).
    pub in_store: usize,
    /// The shard judged, and for a topic the partitions it read.
    pub shard: Option<Shard>,
    pub partitions: Vec<i32>,
}

/// The fleet's answer: each origin's verdict, and what belongs to no
/// origin (lines of the copy that name none, keys of the store under
/// none), which fail the fleet as a whole.
#[derive(Debug)]
pub struct FleetVerdict {
    pub origins: Vec<OriginVerdict>,
    pub fleet: Verdict<FleetCovered>,
}

impl FleetVerdict {
    /// Whether every origin passed and nothing belongs to no origin. A pass
    /// that judged no origin at all says so in a finding, so it fails.
    pub fn passed(&self) -> bool {
        self.fleet.passed() && self.origins.iter().all(|o| o.verdict.passed())
    }

    /// The origins that failed.
    pub fn failed(&self) -> impl Iterator<Item = &OriginVerdict> {
        self.origins.iter().filter(|o| !o.verdict.passed())
    }
}

/// How far the pass is, for the caller's progress report.
#[derive(Debug, Clone, Copy)]
pub enum FleetProgress<'a> {
    /// Records read from the shared copy so far.
    Read(u64),
    /// An origin judged: how many of how many, and whether it passed.
    Judged {
        done: usize,
        of: usize,
        origin: &'a str,
        passed: bool,
    },
}

/// The fleet pass (see the module doc). `touched` makes a new run tally
/// for each damaged origin's affected runs.
pub fn check_fleet(
    input: &FleetInput<'_>,
    touched: Option<&dyn Fn() -> Touched>,
    progress: &mut dyn FnMut(FleetProgress<'_>),
) -> Result<FleetVerdict, Error> {
    let runtime = new_runtime()?;
    let store = (input.open_store)();
    let (listed, store_junk) = runtime.block_on(store.origins())?;
    let mut fleet = Verdict::new(FleetCovered {
        shard: input.scope.shard,
        ..FleetCovered::default()
    });
    if let Some(w) = store_junk.warning("no origin") {
        fleet.warnings.push(w);
    }
    // The copy's origins, and for a topic or files their records set aside.
    let (mut spill, shape, in_copy) = match runtime.block_on(input.source.origins())? {
        Some((origins, strays, count)) => {
            for key in &strays {
                fleet.findings.push(Finding::new(
                    Kind::Foreign,
                    None,
                    format!("{key}: a key under no origin's folder of the copy ({count} in all)"),
                ));
            }
            let origins: Vec<String> = origins.into_iter().filter(|o| input.scope.has(o)).collect();
            (None, SharedRead::default(), origins)
        }
        None => {
            let (spill, shape) = read_shared(input, &mut fleet, progress)?;
            let origins = spill.origins().map(|(o, _, _)| o.to_owned()).collect();
            (Some(spill), shape, origins)
        }
    };
    // Whose verdict this worker gives: by home partition, or by the origin's hash.
    let mine = |origin: &str| match (shape.home(origin), input.scope.shard) {
        (Some(home), _) => shape.read.contains(&home),
        (None, Some(shard)) => shard.takes_origin(origin),
        (None, None) => true,
    };
    let stored: BTreeMap<&str, &OriginNames> = listed
        .iter()
        .filter(|(o, names)| names.publishes() && input.scope.has(o) && mine(o))
        .map(|(o, n)| (o.as_str(), n))
        .collect();
    fleet.covered.in_store = stored.len();
    fleet.covered.partitions = shape.read.clone();
    // A topic's origin judged by another worker is here only for its
    // records on this worker's partitions (strays); elsewhere not at all.
    let topic = shape.partitions.is_some();
    let strays_here = |origin: &str| spill.as_ref().is_some_and(|s| s.has_strays(origin));
    let in_copy: std::collections::BTreeSet<String> = in_copy
        .into_iter()
        .filter(|o| mine(o) || (topic && strays_here(o)))
        .collect();
    let mut all: Vec<&str> = stored.keys().copied().collect();
    all.extend(in_copy.iter().map(String::as_str));
    all.sort_unstable();
    all.dedup();
    let of = all.len();
    let mut origins = Vec::with_capacity(of);
    for (done, origin) in all.into_iter().enumerate() {
        let keys = chainship_verify::finding::keys_named_for(input.keys, origin);
        let verdict = if !in_copy.contains(origin) {
            missing_copy(&runtime, &store, origin, &keys, stored[origin])
        } else if !mine(origin) {
            // Records of an origin another worker judges, on a partition
            // this one reads: only where they do not belong.
            strays_only(spill.as_ref(), origin)?
        } else {
            let source = match &spill {
                Some(spill) => CopySource::Spilled(spill),
                None => CopySource::Sink(input.source),
            };
            let copy = CopyInput {
                source,
                origin,
                keys: &keys,
                witness: input.witness,
                open_store: input.open_store,
                redaction_keys: input.redaction_keys,
            };
            let mut verdict = check_copy(&copy, input.expect, touched.map(|t| t()))?;
            if keys.is_empty() {
                verdict.findings.push(Finding::new(
                    Kind::UntrustedKey,
                    None,
                    format!(
                        "no trusted key is named {origin:?}: a fleet pass trusts each origin's heads only to the key named after it (name keys after their origin: chainship keygen --name ORIGIN)"
                    ),
                ));
            }
            verdict
        };
        if let Some(spill) = &mut spill {
            spill.forget(origin);
        }
        progress(FleetProgress::Judged {
            done: done + 1,
            of,
            origin,
            passed: verdict.passed(),
        });
        origins.push(OriginVerdict {
            origin: origin.to_owned(),
            verdict,
        });
    }
    // An S3 prefix is read origin by origin: what was read is theirs.
    if spill.is_none() {
        fleet.covered.records = origins.iter().map(|o| o.verdict.covered.records).sum();
    }
    // A fleet pass that judged no origin proved nothing. One worker's share
    // may be empty while the others' are not (more workers than origins, or
    // partitions no origin hashes to): said, and the union still covers.
    let nothing = "no origin in scope: the copy holds no record of one and the anchor store keeps no head of one";
    match (origins.is_empty(), input.scope.shard) {
        (false, _) => {}
        (true, Some(shard)) => fleet.warnings.push(format!(
            "{nothing} in this worker's share (shard {shard}); the other workers judge the rest"
        )),
        (true, None) => fleet
            .findings
            .push(Finding::new(Kind::NothingChecked, None, nothing.to_owned())),
    }
    Ok(FleetVerdict { origins, fleet })
}

/// Reads a topic or files once, setting each record aside under its origin.
fn read_shared(
    input: &FleetInput<'_>,
    fleet: &mut Verdict<FleetCovered>,
    progress: &mut dyn FnMut(FleetProgress<'_>),
) -> Result<(Spill, SharedRead), Error> {
    let mut spill = Spill::new(input.spill_dir)?;
    let shape = input.source.shared_shape(input.scope.shard)?;
    // A consumer of the topic reads every partition: a pass over one could
    // only say "the part read is whole", which a fleet check never says.
    if let (Some(p), Some(count)) = (shape.pinned, shape.partitions)
        && count > 1
    {
        return Err(chainship_chain::permanent!(
            "the fleet pass reads every partition of the topic, but partition {p} is pinned (of {count}): unset it for --all-origins (a fleet is split between workers by --shard)"
        )
        .with_setting(chainship_chain::Setting::KafkaPartition));
    }
    let mut failed: Option<Error> = None;
    let (mut unnamed, mut records) = (0u64, 0u64);
    input.source.read_shared(&shape, &mut |line, partition, place| {
        if failed.is_some() {
            return;
        }
        records += 1;
        if records % 100_000 == 0 {
            progress(FleetProgress::Read(records));
        }
        let Some(origin) = origin_of(line) else {
            unnamed += 1;
            if unnamed <= 5 {
                fleet.findings.push(Finding::new(
                    Kind::Foreign,
                    None,
                    format!(
                        "{}: a line that names no usable origin, which a consumer of the copy reads",
                        place()
                    ),
                ));
            }
            return;
        };
        if !input.scope.has(&origin) {
            return;
        }
        let stray = partition.is_some() && partition != shape.home(&origin);
        if let Err(e) = spill.push(&origin, stray, line, partition, &place()) {
            failed = Some(e);
        }
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    if unnamed > 5 {
        fleet.findings.push(Finding::new(
            Kind::Foreign,
            None,
            format!("{} more line(s) that name no usable origin", unnamed - 5),
        ));
    }
    fleet.covered.records = records;
    Ok((spill, shape))
}

/// Whose record a line is: the origin it names, or the one its carried
/// record names. (A topic's key is the sink's own hint, never trusted.)
fn origin_of(line: &[u8]) -> Option<String> {
    let parsed = Record::parse(line);
    let named = match &parsed {
        Ok(r) => Some(r.origin.as_ref()),
        Err(e) => e.carried().map(|r| r.origin.as_ref()),
    };
    named.and_then(|o| parse_origin(o).ok())
}

/// The verdict of an origin the store keeps heads for and the copy lacks.
fn missing_copy(
    runtime: &tokio::runtime::Runtime,
    store: &AnchorStore,
    origin: &str,
    keys: &[VerifierKey],
    names: &OriginNames,
) -> CopyOutcome {
    let Some(newest) = names.newest_note.map(|k| k.seq) else {
        let size = names.newest_checkpoint.map_or(0, |k| k.seq);
        return CopyOutcome::refused(
            Some(origin.to_owned()),
            Kind::MissingCopy,
            format!(
                "the anchor store keeps checkpoint {size} of {origin:?} (and no head), but the copy holds no record of it"
            ),
        );
    };
    // The names prove nothing: the range is what a trusted head says.
    let trusted = runtime
        .block_on(pass::trusted_head_at(store, origin, keys, newest))
        .ok()
        .flatten();
    let mut verdict = CopyOutcome::refused(
        Some(origin.to_owned()),
        Kind::MissingCopy,
        match &trusted {
            Some((head, _)) => format!(
                "the anchor store keeps {} head(s) of {origin:?}, the newest trusted one at seq {}, but the copy holds no record of it",
                names.notes, head.seq
            ),
            None => format!(
                "the anchor store keeps {} head(s) of {origin:?} (none signed by a key named after it), but the copy holds no record of it",
                names.notes
            ),
        },
    );
    if let Some((head, _)) = trusted {
        verdict.ranges = Some(vec![InvalidRange {
            kind: RangeKind::Missing,
            from: 1,
            to: head.seq,
            anchored_by: None,
            open: false,
        }]);
    }
    verdict
}

/// The verdict a worker gives an origin it does not judge: its records on
/// this worker's partitions, none of which is its home.
fn strays_only(spill: Option<&Spill>, origin: &str) -> Result<CopyOutcome, Error> {
    let mut verdict = Verdict::new(chainship_verify::copy::CopyCovered {
        origin: Some(origin.to_owned()),
        ..Default::default()
    });
    if let Some(spill) = spill {
        let report = spill.read(origin, &mut |_, _| {})?;
        for stray in report.strays {
            verdict.findings.push(Finding::new(
                Kind::ForeignPartition,
                None,
                format!("{} record(s) of {origin:?} at {}", stray.records, stray.place),
            ));
        }
    }
    Ok(verdict)
}
