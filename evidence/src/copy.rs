//! The exported copy as evidence: a copy (`file:`, `s3://`, `kafka://`) is
//! read once, every record checked against the chain and the trusted heads
//! and checkpoints (the `verify-export` checks), and each checked record is
//! handed to the caller as it goes, so `verify-export`, `restore` and `diff`
//! stream the same read and judge the copy alike.

use std::sync::Arc;
use std::time::Duration;

use chainship_anchor::AnchorStore;
use chainship_anchor::checkpoint::Checkpoint;
use chainship_anchor::cosignature::WitnessPolicy;
use chainship_anchor::note::VerifierKey;
use chainship_chain::origin::parse_origin;
use chainship_chain::record::Record;
use chainship_chain::{Error, integrity, permanent};
use chainship_runs::Touched;
use chainship_runs::affected::{Affected, RecordEvent};
use chainship_sinks::{OnRecord, ReadReport, SinkConfig, read_records};
use chainship_tlog::merkle::Hash;
use chainship_verify::Kind;
use chainship_verify::copy::{self, CopyCheck, RangePlan, RecordWalk};
use chainship_verify::pass::{self, Against, StreamInput};
use chainship_verify::ranges;
use chainship_verify::redactions::Loaded;

pub use chainship_verify::copy::{CopyExpectations, CopyOutcome};

/// Where one origin's copy is read from.
#[derive(Clone, Copy)]
pub enum CopySource<'a> {
    /// A sink's copy, read by that sink's own reader (with the sink's
    /// connection settings applied).
    Sink(&'a SinkConfig),
    /// The origin's records a fleet pass took out of a shared copy.
    Spilled(&'a crate::fleet::Spill),
}

impl CopySource<'_> {
    /// Calls `each(line, place)` for every record line of `origin`, in the
    /// copy's order (see [`chainship_sinks::read_records`]).
    pub fn read(&self, origin: &str, each: &mut OnRecord<'_>) -> Result<ReadReport, Error> {
        match self {
            CopySource::Sink(cfg) => Ok(new_runtime()?.block_on(read_records(cfg, origin, each))?),
            CopySource::Spilled(spill) => spill.read(origin, each),
        }
    }
}

impl<'a> From<&'a SinkConfig> for CopySource<'a> {
    fn from(cfg: &'a SinkConfig) -> Self {
        CopySource::Sink(cfg)
    }
}

/// A copy and what it is checked against.
pub struct CopyInput<'a> {
    /// Where the copy is read from.
    pub source: CopySource<'a>,
    /// Whose copy: records of other origins are not this copy's.
    pub origin: &'a str,
    /// The keys whose signed heads and checkpoints are trusted.
    pub keys: &'a [VerifierKey],
    /// Witness cosignatures to hold checkpoints to, with the grace period.
    pub witness: Option<(&'a WitnessPolicy, Duration)>,
    /// Opens the anchor store; called once for each thread that reads it.
    pub open_store: &'a (dyn Fn() -> Arc<AnchorStore> + Sync),
    /// The keys that may authorize erasure: tombstones their statements cover pass.
    pub redaction_keys: &'a [VerifierKey],
}

/// Whose copy it is.
pub enum CopyOrigin {
    /// The origin to judge the copy as: the one given, or a file's first record's.
    Known(String),
    /// The copy is refused as it is: its first record names another origin
    /// than the one given, or one that cannot be used.
    Refused(Box<CopyOutcome>),
    /// The origin must be given: the copy is not a file, or a file with no
    /// record to take it from (with the error, when the file cannot be opened).
    Needed(Option<Error>),
}

/// The copy's origin: `given`, or the first record's for a file. A file's
/// first record must name `given` when there is one, and its origin (a path
/// in the anchor store) must be a usable one.
pub fn origin_of(source: &SinkConfig, given: Option<&str>) -> CopyOrigin {
    let first = first_record(source);
    match (given, first) {
        (Some(given), Some(first)) if first.origin != given => CopyOrigin::Refused(Box::new(CopyOutcome::refused(
            Some(given.to_owned()),
            Kind::Foreign,
            format!(
                "{} names origin {:?}, not the origin given ({given}): this is not {given}'s copy",
                first.place, first.origin
            ),
        ))),
        (Some(given), _) => CopyOrigin::Known(given.to_owned()),
        (None, Some(first)) => match parse_origin(&first.origin) {
            Ok(origin) => CopyOrigin::Known(origin),
            Err(why) => CopyOrigin::Refused(Box::new(CopyOutcome::refused(
                None,
                Kind::Foreign,
                format!("{} names an origin that cannot be used: {why}", first.place),
            ))),
        },
        (None, None) => CopyOrigin::Needed(match source {
            SinkConfig::File(path) => std::fs::File::open(path)
                .err()
                .map(|e| Error::from_io("cannot be opened", &e)),
            _ => None,
        }),
    }
}

/// The first record of a file copy: its origin, and where it is (for messages).
struct FirstRecord {
    origin: String,
    place: String,
}

/// Reads the first non-empty line of a file copy; `None` when there is no
/// readable record (reading the copy then says why).
fn first_record(source: &SinkConfig) -> Option<FirstRecord> {
    use std::io::BufRead;
    let SinkConfig::File(path) = source else { return None };
    let mut reader = std::io::BufReader::new(std::fs::File::open(path).ok()?);
    let mut line = Vec::new();
    for number in 1.. {
        line.clear();
        if reader.read_until(b'\n', &mut line).ok()? == 0 {
            return None;
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if text.is_empty() {
            continue;
        }
        let r = Record::parse(text).ok()?;
        return Some(FirstRecord {
            origin: r.origin.into_owned(),
            place: format!("{} line {number} (seq {})", path.display(), r.seq),
        });
    }
    None
}

/// Reads the copy once, checking it, and calls `each` with every record of
/// the origin that parses (in the copy's order, duplicates and all: the
/// caller keeps what it needs; the outcome says whether the copy can be
/// trusted, and up to where).
///
/// The store is judged by the same pass as `anchor verify`, on a thread of
/// its own, handing each head and checkpoint it trusts to the copy's check
/// as the copy reaches its seq ([`chainship_verify::copy`]).
pub fn read_checked(
    input: &CopyInput<'_>,
    expect: CopyExpectations,
    each: &mut dyn FnMut(&Record<'_>),
) -> Result<CopyOutcome, Error> {
    read_checked_with(input, expect, load_redactions(input)?, each)
}

/// The origin's redaction statements, read and judged once
/// ([`chainship_verify::redactions::load`]; nothing without a redaction key).
pub fn load_redactions(input: &CopyInput<'_>) -> Result<Loaded, Error> {
    new_runtime()?.block_on(chainship_verify::redactions::load(
        &(input.open_store)(),
        input.origin,
        input.redaction_keys,
    ))
}

/// [`read_checked`] with the statements read already (by a caller that
/// needs them before the copy is read: `restore`, `diff`, `evidence`).
pub fn read_checked_with(
    input: &CopyInput<'_>,
    expect: CopyExpectations,
    redactions: Loaded,
    each: &mut dyn FnMut(&Record<'_>),
) -> Result<CopyOutcome, Error> {
    let origin = input.origin;
    let runtime = new_runtime()?;
    let store = (input.open_store)();
    let (sender, vouchers) = copy::channel();
    let mut copy = CopyCheck::new(origin, &expect, vouchers).with_redactions(redactions);
    let (read, pass) = std::thread::scope(|scope| {
        let pass = scope.spawn(|| {
            let mut sender = sender;
            let store = (input.open_store)();
            let audit = StreamInput {
                store: store.as_ref(),
                origin,
                keys: input.keys,
                witness: input.witness,
                since: None,
                every_tile: true,
            };
            new_runtime()?.block_on(async {
                let listing = pass::list(&audit).await?;
                pass::audit(&audit, listing, Against::Copy(&mut sender)).await
            })
        });
        let read = input
            .source
            .read(origin, &mut |line, place| copy.feed_line(line, place, each));
        match &read {
            Ok(_) => copy.end_of_copy(),
            // The pass must not wait on a reader that stopped.
            Err(_) => copy.abandon(),
        }
        let pass = pass
            .join()
            .unwrap_or_else(|_| Err(permanent!("the store audit stopped unexpectedly")));
        (read, pass)
    });
    let read = read?;
    let audit = pass?;
    let strays: Vec<(u64, String)> = read.strays.iter().map(|s| (s.records, s.place.clone())).collect();
    let mut lookup = |seq: u64| {
        runtime
            .block_on(pass::trusted_head_at(store.as_ref(), origin, input.keys, seq))
            .ok()
            .flatten()
    };
    // A damaged copy is read again for its exact ranges, the level-0 tiles
    // fetched on a thread of their own (the walk runs inside the reader's callback).
    let outcome = std::thread::scope(|scope| {
        let (ask, asked) = std::sync::mpsc::sync_channel::<(Checkpoint, u64)>(0);
        let (give, given) = std::sync::mpsc::sync_channel::<Option<Vec<Hash>>>(0);
        scope.spawn(move || {
            let mut opened = None;
            for (cp, index) in asked {
                let (store, rt) = match &opened {
                    Some(o) => o,
                    None => match new_runtime() {
                        Ok(rt) => opened.insert(((input.open_store)(), rt)),
                        Err(_) => return,
                    },
                };
                let tile = rt
                    .block_on(ranges::level0_tile(store.as_ref(), origin, &cp, index))
                    .ok()
                    .flatten();
                if give.send(tile).is_err() {
                    return;
                }
            }
        });
        let mut rewalk = |plan: &RangePlan| {
            let mut walk = RecordWalk::new(plan);
            let mut tile = |cp: &Checkpoint, index: u64| {
                ask.send((cp.clone(), index)).ok()?;
                given.recv().ok().flatten()
            };
            input
                .source
                .read(origin, &mut |line, _| walk.feed_line(origin, line, &mut tile))?;
            walk.finish()
        };
        let outcome = copy.finish(
            audit,
            &expect,
            &strays,
            read.narrowed.as_slice(),
            &mut lookup,
            &mut rewalk,
        );
        drop(ask);
        outcome
    });
    Ok(outcome)
}

/// The copy use case (`verify-export`): the copy read and checked once
/// ([`read_checked`]), then, when it is damaged and `touched` is given, read
/// again for the runs and side effects of the seqs a consumer must not take
/// as they are ([`CopyOutcome::affected_ranges`]).
pub fn check_copy(
    input: &CopyInput<'_>,
    expect: CopyExpectations,
    touched: Option<Touched>,
) -> Result<CopyOutcome, Error> {
    let mut verdict = read_checked(input, expect, &mut |_| {})?;
    let ranges = verdict.affected_ranges();
    if let (false, Some(touched)) = (ranges.is_empty(), touched) {
        verdict.touched = Some(touched_in(input.source, input.origin, &ranges, touched)?);
    }
    Ok(verdict)
}

/// Reads the copy again for the runs and side effects of the seqs in
/// `ranges` (each `from..=to`, ascending): the exact invalid ranges, or one
/// range from the first bad seq to the end when they are not known.
pub fn touched_in(
    source: CopySource<'_>,
    origin: &str,
    ranges: &[(u64, u64)],
    mut touched: Touched,
) -> Result<Affected, Error> {
    let inside = |seq: u64| {
        let i = ranges.partition_point(|(_, to)| *to < seq);
        ranges.get(i).is_some_and(|(from, _)| *from <= seq)
    };
    // Every record a consumer may have taken at those seqs: a second copy
    // of a seq and a late one too, and the record a SIEM record with
    // changed searchable fields carries (its run is the one it names).
    source.read(origin, &mut |line, _| {
        let parsed = Record::parse(line);
        let r = match &parsed {
            Ok(r) => r,
            Err(e) => match e.carried() {
                Some(r) => r,
                None => return,
            },
        };
        if r.origin != origin || !inside(r.seq) {
            return;
        }
        if let Some(e) = RecordEvent::of(r) {
            touched.feed(&e.event(r.seq));
        }
    })?;
    Ok(Affected {
        from: ranges.first().map_or(0, |r| r.0),
        to: ranges.last().map_or(0, |r| r.1),
        ranges: ranges.to_vec(),
        touched,
        note: None,
    })
}

/// Reads a copy's records of `origin` in seq order for the run check,
/// without checking the chain (that is [`read_checked`]'s): each new seq's
/// event goes to `each`, and so does, as an `Err`, each line that is not a
/// record and each seq gap (the run check then saw only part of the
/// events). Duplicates and other origins' records are passed over.
pub async fn read_in_order(
    source: &SinkConfig,
    origin: &str,
    each: &mut dyn FnMut(Result<chainship_runs::RunEvent<'_>, Error>),
) -> Result<(), Error> {
    let mut last = 0u64;
    read_records(source, origin, &mut |line, place| {
        let r = match Record::parse(line) {
            Ok(r) => r,
            Err(e) => return each(Err(integrity!("{}: not a record: {e}", place()))),
        };
        if r.origin != origin || r.seq <= last {
            return;
        }
        if r.seq != last + 1 {
            each(Err(integrity!("{}: seq {} follows seq {last}", place(), r.seq)));
        }
        last = r.seq;
        if let Some(e) = RecordEvent::of(&r) {
            each(Ok(e.event(r.seq)));
        }
    })
    .await?;
    Ok(())
}

pub(crate) fn new_runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| permanent!("cannot start the async runtime: {e}"))
}
