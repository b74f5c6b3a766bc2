//! Gathering one run's bundle: the checkpoint to prove against (the newest
//! the witnesses' quorum cosigned, when witnesses are trusted, else the
//! newest a trusted key signed), the run's records up to its size from the
//! database or a checked copy ([`Collector`], fed in seq order), the store's
//! tiles their proofs are computed from (and those that prove them), then
//! [`super::check`] on what was written:
//! what is handed out is what the checker accepts.

use std::io::Write;
use std::path::Path;

use chainship_anchor::AnchorStore;
use chainship_anchor::checkpoint::{checkpoint_path, cosigned_path, size_from_checkpoint_name};
use chainship_anchor::cosignature::WitnessPolicy;
use chainship_anchor::note::VerifierKey;
use chainship_anchor::store::{CHECKPOINTS_DIR, COSIGNED_DIR};
use chainship_anchor::tile_reader::{TileError, TileReader};
use chainship_chain::record::{Record, RecordFormat};
use chainship_chain::{Error, EventDb, EventRef, integrity, permanent};
use chainship_tlog::merkle::inclusion_proof;
use chainship_tlog::tiles::{WIDTH, with_proving_tiles};
use chainship_verify::checkpoints::{Expect, JudgedCheckpoint, trust_checkpoint};

use super::check::{CheckInput, EvidenceReport, check};
use super::{BundleFiles, CHECKPOINT, GAPS, HEAD, NEWEST, RECORDS, REDACTIONS_DIR};

/// The checkpoint a bundle is proven against, and the signed head at its size.
#[derive(Debug, Clone)]
pub struct Chosen {
    pub size: u64,
    /// The checkpoint note, with the witnesses' cosignatures when kept.
    pub note: String,
    pub head: String,
}

/// The newest usable checkpoint of `origin` (see the module doc).
pub async fn choose_checkpoint(
    store: &AnchorStore,
    origin: &str,
    keys: &[VerifierKey],
    witnesses: Option<&WitnessPolicy>,
) -> Result<Chosen, Error> {
    // With witnesses only cosigned checkpoints can do; without, any kept one.
    let dir = if witnesses.is_some() {
        COSIGNED_DIR
    } else {
        CHECKPOINTS_DIR
    };
    let mut sizes: Vec<u64> = store
        .list_names(origin, dir)
        .await?
        .iter()
        .filter_map(|n| size_from_checkpoint_name(n))
        .collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    for size in sizes {
        let cosigned = store.get_object(origin, &cosigned_path(size)).await?;
        let note = match cosigned {
            Some(note) => note,
            None => match store.get_object(origin, &checkpoint_path(size)).await? {
                Some(note) => note,
                None => continue,
            },
        };
        let expect = Expect {
            origin: Some(origin),
            size: Some(size),
        };
        let read = match trust_checkpoint(&note, keys, witnesses, expect).map(JudgedCheckpoint::trusted) {
            Ok(Ok(read)) => read,
            Ok(Err(why)) => {
                passed_over(size, why.kind == chainship_verify::Kind::Uncosigned, &why.message);
                continue;
            }
            Err(why) => {
                passed_over(size, false, &why.message);
                continue;
            }
        };
        let Some(head) = store.get_head(origin, size).await? else {
            passed_over(size, false, "no signed head at its size is kept");
            continue;
        };
        return Ok(Chosen {
            size,
            note: read.note.to_text(),
            head: String::from_utf8_lossy(&head.bytes).into_owned(),
        });
    }
    Err(permanent!(
        "{} keeps no checkpoint of {origin:?} signed by a trusted key{}",
        store.describe(),
        if witnesses.is_some() {
            " and cosigned by the witnesses' quorum"
        } else {
            ""
        }
    ))
}

/// A checkpoint not used, and why, said: a newer one refused is worth a
/// look (anchor verify names it); the newest wait for their witnesses as a
/// rule (`waiting`: no warning for that).
fn passed_over(size: u64, waiting: bool, why: &str) {
    let message = format!("checkpoint {size} not used: {why}; trying the next smaller one");
    match waiting {
        true => tracing::info!(size, "{message}"),
        false => tracing::warn!(size, "{message}"),
    }
}

/// The run's records up to the checkpoint's size, fed every record of the
/// log in seq order (from the database, or a checked copy).
pub struct Collector {
    run_id: Vec<u8>,
    size: u64,
    with_gaps: bool,
    last_seq: u64,
    records: Vec<Record<'static>>,
    /// The other events from the run's first to the checkpoint, as ranges of seqs.
    gaps: Vec<(u64, u64)>,
    newest: Option<Record<'static>>,
    /// Events of the run past the checkpoint: not provable yet.
    pub later: u64,
    /// The first event that is not the log the checkpoint holds: a seq left
    /// out, or fields that do not hash to the stored hash or do not link.
    problem: Option<(u64, String)>,
    prev_hash: String,
    /// The seqs trusted statements redact: their records go into the
    /// bundle as tombstones, whatever the source still holds.
    redactions: Option<std::sync::Arc<chainship_chain::redaction::Redactions>>,
    /// Fed every event of the log (a walk), so seqs left out and links are
    /// checked too; else only the run's events and the checkpoint's
    /// newest ([`read_run`]), each held to its own stored hash.
    whole_log: bool,
}

impl Collector {
    pub fn new(run_id: &str, size: u64, with_gaps: bool) -> Collector {
        Collector {
            run_id: run_id.as_bytes().to_vec(),
            size,
            with_gaps,
            last_seq: 0,
            records: Vec::new(),
            gaps: Vec::new(),
            newest: None,
            later: 0,
            problem: None,
            prev_hash: String::new(),
            redactions: None,
            whole_log: true,
        }
    }

    /// The same collector, fed only the run's events and the event at the
    /// checkpoint's size ([`read_run`]), in seq order.
    pub fn run_only(mut self) -> Self {
        self.whole_log = false;
        self
    }

    /// The checkpoint size it collects up to.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The same collector, taking the redactions trusted statements cover.
    pub fn with_redactions(
        mut self,
        redactions: Option<std::sync::Arc<chainship_chain::redaction::Redactions>>,
    ) -> Self {
        self.redactions = redactions;
        self
    }

    /// The next record of the log. A seq seen already is passed over (a
    /// copy's duplicates are its check's to name).
    pub fn take(&mut self, r: &Record<'_>) {
        if r.seq <= self.last_seq {
            return;
        }
        // A redacted event: its tombstone, whether the source holds the
        // payload still (a Kafka original) or not (a blanked row, a tombstone).
        let covered = self
            .redactions
            .as_ref()
            .and_then(|red| red.get(r.seq))
            .filter(|c| c.hash[..] == *r.hash.as_bytes() && c.fields == r.fields_digest())
            // Withheld, not rewritten: the event whole, its clean tombstone, or a blanked row.
            .filter(|_| {
                r.expected_hash()[..] == *r.hash.as_bytes()
                    || r.is_clean_tombstone()
                    || (!r.is_tombstone()
                        && r.field_bytes("payload_json")
                            .is_some_and(|p| chainship_chain::redaction::is_blanked(r.seq, &p)))
            });
        let tomb;
        let r = match covered {
            Some(c) => {
                tomb = r.tombstone(&c.statement);
                &tomb
            }
            None => r,
        };
        // Every event up to the checkpoint is checked as it passes, whoever's
        // it is: a hash handed out for another run's event must be its own.
        if self.problem.is_none() && r.seq <= self.size {
            let walked = self.whole_log && self.last_seq > 0;
            let why = if walked && r.seq != self.last_seq + 1 {
                Some(format!("seqs {}..={} are missing", self.last_seq + 1, r.seq - 1))
            } else if covered.is_none() && r.expected_hash()[..] != *r.hash.as_bytes() {
                Some("its fields do not hash to its stored hash (altered)".to_owned())
            } else if walked && r.prev_hash != self.prev_hash {
                Some("it does not link to the event before it".to_owned())
            } else {
                None
            };
            self.problem = why.map(|w| (r.seq, w));
            self.prev_hash.clear();
            self.prev_hash.push_str(&r.hash);
        }
        self.last_seq = r.seq;
        let of_run = r.field_bytes("run_id").is_some_and(|b| *b == self.run_id[..]);
        if r.seq > self.size {
            self.later += u64::from(of_run);
            return;
        }
        if r.seq == self.size {
            self.newest = Some(r.clone().into_owned());
        }
        if of_run {
            self.records.push(r.clone().into_owned());
        } else if self.with_gaps && !self.records.is_empty() {
            match self.gaps.last_mut() {
                Some((_, last)) if *last + 1 == r.seq => *last = r.seq,
                _ => self.gaps.push((r.seq, r.seq)),
            }
        }
    }

    /// How many events of the run were gathered.
    pub fn records(&self) -> usize {
        self.records.len()
    }

    /// The seqs of the run's events gathered, and of the newest event.
    pub fn seqs(&self) -> impl Iterator<Item = u64> + '_ {
        self.records.iter().chain(self.newest.as_ref()).map(|r| r.seq)
    }

    /// The highest seq seen.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }
}

/// What a bundle is built with.
pub struct BuildInput<'a> {
    pub store: &'a AnchorStore,
    pub origin: &'a str,
    pub format: RecordFormat,
    pub check: CheckInput<'a>,
}

/// Writes the bundle into `dir` (a new directory), then checks it; the
/// report is [`check`]'s on the files written.
pub async fn write(
    dir: &Path,
    collected: Collector,
    chosen: &Chosen,
    input: &BuildInput<'_>,
) -> Result<EvidenceReport, Error> {
    let Collector {
        records,
        gaps,
        newest,
        with_gaps,
        problem,
        ..
    } = collected;
    if let Some((seq, why)) = problem {
        return Err(integrity!(
            "seq {seq}: {why}: the source is not the log checkpoint {} holds (anchor verify or verify-export names the damage)",
            chosen.size
        ));
    }
    let Some(newest) = newest else {
        return Err(integrity!(
            "seq {} (the checkpoint's size) was not read: the source ends before the checkpoint",
            chosen.size
        ));
    };
    if records.is_empty() {
        return Err(permanent!(
            "no event of the run up to seq {} (is the run id right?)",
            chosen.size
        ));
    }
    let last = records.last().map_or(0, |r| r.seq);
    let io = |e: std::io::Error| Error::from_io(format!("{}", dir.display()), &e);
    std::fs::create_dir(dir).map_err(io)?;
    // Not synced file by file (a proof a file: thousands of syncs); a bundle
    // cut short by a crash is a partial directory no reader takes, made again.
    let put = |name: &str, bytes: &[u8]| -> Result<(), Error> {
        let mut file = std::fs::File::create(dir.join(name)).map_err(io)?;
        file.write_all(bytes).map_err(io)
    };

    let mut lines = Vec::new();
    let mut scratch = Vec::new();
    for r in &records {
        input.format.write(r, &mut lines, &mut scratch);
        lines.push(b'\n');
    }
    put(RECORDS, &lines)?;
    lines.clear();
    input.format.write(&newest, &mut lines, &mut scratch);
    lines.push(b'\n');
    put(NEWEST, &lines)?;
    put(CHECKPOINT, chosen.note.as_bytes())?;
    put(HEAD, chosen.head.as_bytes())?;
    // Each tombstone's statement, as the store keeps it (check judges it).
    for r in records
        .iter()
        .chain(std::iter::once(&newest))
        .filter(|r| r.is_tombstone())
    {
        let path = chainship_anchor::redaction::statement_path(r.seq);
        let statement = input
            .store
            .get_object(input.origin, &path)
            .await?
            .ok_or_else(|| integrity!("seq {}: its redaction statement {path} is no longer kept", r.seq))?;
        if !dir.join(REDACTIONS_DIR).exists() {
            std::fs::create_dir(dir.join(REDACTIONS_DIR)).map_err(io)?;
        }
        put(&path, &statement)?;
    }

    // The tiles every record's proof (and the newest's) is computed from,
    // with those that prove them: one walk over the store's tiles, which
    // the proofs share above the run's own level-0 tiles. With the gaps,
    // every level-0 tile from the run's first event to the checkpoint: each
    // position there is then shown in the tree.
    let mut seqs: Vec<u64> = records.iter().map(|r| r.seq).collect();
    if last != chosen.size {
        seqs.push(chosen.size);
    }
    let span = with_gaps.then(|| (records[0].seq - 1) / WIDTH as u64..=(chosen.size - 1) / WIDTH as u64);
    let mut reader = TileReader::new(input.store, input.origin);
    let tiles_fail = |e: TileError| match e {
        TileError::Store(e) => e,
        other => integrity!("tiles-disagree: checkpoint {}: {other}", chosen.size),
    };
    let mut proven = 0;
    let tiles = reader
        .run(chosen.size, |set| {
            while let Some(seq) = seqs.get(proven) {
                inclusion_proof(seq - 1, chosen.size, &mut *set)?;
                proven += 1;
            }
            let spanned = span.clone().into_iter().flatten().map(|index| (0, index));
            let mut tiles = Vec::new();
            for (level, index) in with_proving_tiles(chosen.size, set.held().into_iter().chain(spanned)) {
                let need = set.need(level, index);
                let hashes = set.hashes(level, index).ok_or_else(|| need.clone())?;
                tiles.push((need.path, hashes.concat()));
            }
            Ok(tiles)
        })
        .await
        .map_err(tiles_fail)?;
    for (path, bytes) in tiles {
        if let Some(parent) = Path::new(&path).parent() {
            std::fs::create_dir_all(dir.join(parent)).map_err(io)?;
        }
        put(&path, &bytes)?;
    }
    if with_gaps {
        // The other events' seqs; their entries are in the tiles.
        let text: String = gaps
            .iter()
            .map(|(a, b)| match a == b {
                true => format!("{a}\n"),
                false => format!("{a}-{b}\n"),
            })
            .collect();
        put(GAPS, text.as_bytes())?;
    }

    let report = check(&BundleFiles::read(dir)?, &input.check)?;
    for (name, bytes) in super::renderings(&report) {
        put(name, &bytes)?;
    }
    Ok(report)
}

/// Feeds `collected` every event of `db` in seq order, each as the record
/// the sinks export (with the stored hash of the row before it).
pub fn read_database(db: &EventDb, origin: &str, collected: &mut Collector) -> Result<(), Error> {
    let mut prev: Vec<u8> = Vec::new();
    let mut not_text = None;
    let mut last_seq = 0;
    db.scan(0, u64::MAX, &mut |e| {
        // A database holds each seq once (a copy's duplicates are passed
        // over by the collector; a second row of a seq here is damage).
        if e.seq == last_seq {
            not_text = Some(format!("seq {}: the database holds it twice", e.seq));
            return false;
        }
        last_seq = e.seq;
        match Record::from_event(origin, e, &prev) {
            Ok(r) => collected.take(&r),
            Err(bad) => {
                not_text = Some(bad.to_string());
                return false;
            }
        }
        prev.clear();
        prev.extend_from_slice(e.hash);
        true
    })
    .map_err(|e| {
        use chainship_chain::HasKind;
        Error::new(e.kind(), &e)
    })?;
    match not_text {
        Some(bad) => Err(integrity!("{bad}")),
        None => Ok(()),
    }
}

/// Feeds `collected` ([`Collector::run_only`]) the run's events and the
/// event at the checkpoint's size, each with the stored hash of the event
/// before it, read by seq: what the run's proofs need, and nothing of the
/// rest of the log. Each record must hash to its stored hash (which
/// commits to the hash before it); the store's tiles then prove that hash
/// at its seq under the trusted checkpoint. What only a walk sees (damage
/// to other events, an event of the run deleted with its seq) is
/// [`read_database`]'s.
pub fn read_run(db: &EventDb, origin: &str, run: &str, collected: &mut Collector) -> Result<(), Error> {
    use chainship_chain::HasKind;
    let db_error = |e: chainship_chain::DbError| Error::new(e.kind(), &e);
    let mut events = chainship_chain::EventBatch::new();
    db.run_events(run, &mut events).map_err(db_error)?;
    let size = collected.size();
    if !events.iter().any(|e| e.seq == size) {
        // The one event after size - 1: the newest when it is at `size`
        // (else none is, and the bundle is refused for it).
        db.read_page(size.saturating_sub(1), 1, usize::MAX, &mut events)
            .map_err(db_error)?;
    }
    let mut order: Vec<EventRef<'_>> = events.iter().collect();
    order.sort_by_key(|e| e.seq);
    let run_seqs: Vec<u64> = order
        .iter()
        .filter(|e| e.seq <= size && e.run_id == run.as_bytes())
        .map(|e| e.seq)
        .collect();
    if let (Some(first), Some(last)) = (run_seqs.first(), run_seqs.last())
        && let Some((seq, why)) = check_span(db, run, &run_seqs, *first, last.saturating_add(1).min(size))?
    {
        return Err(integrity!(
            "seq {seq}: {why}: the source is not the log checkpoint {size} holds (anchor verify names the damage)"
        ));
    }
    let mut not_text = None;
    for e in order {
        let prev = match e.seq {
            1 => Vec::new(),
            seq => db.hash_at(seq - 1).map_err(db_error)?.ok_or_else(|| {
                integrity!(
                    "seq {seq}: the event before it (seq {}) is missing from the database",
                    seq - 1
                )
            })?,
        };
        match Record::from_event(origin, &e, &prev) {
            Ok(r) => collected.take(&r),
            Err(bad) => {
                not_text = Some(bad);
                break;
            }
        }
    }
    match not_text {
        Some(bad) => Err(integrity!("{bad}")),
        None => Ok(()),
    }
}

/// Every event from the row before `first` through `last` must be there
/// once, hash to its stored hash after the one before it and link to it:
/// within the run's stretch of the log, an event of the run relabelled to
/// another run, or deleted with its seq, cannot leave the bundle unseen (a
/// relabelled row no longer hashes; a deleted one leaves its seq out). The
/// row after the run's last is included by the caller. Every row of the
/// run there must also be one the run's query returned (`run_seqs`,
/// ascending): an index that lies cannot hide one. Cost: the run's
/// stretch, not the log. `Some((seq, why))` names the first event that fails.
fn check_span(
    db: &EventDb,
    run: &str,
    run_seqs: &[u64],
    first: u64,
    last: u64,
) -> Result<Option<(u64, String)>, Error> {
    use chainship_chain::HasKind;
    let db_error = |e: chainship_chain::DbError| Error::new(e.kind(), &e);
    let from = first.saturating_sub(1).max(1);
    let mut prev: Vec<u8> = match from {
        1 => Vec::new(),
        seq => match db.hash_at(seq - 1).map_err(db_error)? {
            Some(hash) => hash,
            None => return Ok(Some((seq, format!("seqs {}..={} are missing", seq - 1, seq - 1)))),
        },
    };
    let mut expected = from;
    let mut problem = None;
    db.scan(from - 1, last, &mut |e| {
        let why = if e.seq != expected {
            match e.seq < expected {
                true => "the database holds it twice".to_owned(),
                false => format!("seqs {expected}..={} are missing", e.seq - 1),
            }
        } else if e.expected_hash(&prev)[..] != *e.hash {
            "its fields do not hash to its stored hash (altered)".to_owned()
        } else if e.run_id == run.as_bytes() && run_seqs.binary_search(&e.seq).is_err() {
            "an event of the run that the database's run index does not return (the index disagrees with the table; --walk reads without it)".to_owned()
        } else {
            prev.clear();
            prev.extend_from_slice(e.hash);
            expected += 1;
            return true;
        };
        problem = Some((e.seq, why));
        false
    })
    .map_err(db_error)?;
    Ok(match problem {
        None if expected <= last => Some((expected, format!("seqs {expected}..={last} are missing"))),
        problem => problem,
    })
}

/// Puts the bundle built in `partial` at `out`: renamed (a directory), or
/// written as one tar file (`out` ends in `.tar`); `partial` is removed
/// either way.
pub fn place(partial: &Path, out: &Path) -> Result<(), Error> {
    let placed = if out.extension().is_some_and(|e| e == "tar") {
        super::files::write_tar(partial, out)
    } else {
        std::fs::rename(partial, out).map_err(|e| Error::from_io(out.display(), &e))
    };
    let _ = std::fs::remove_dir_all(partial);
    placed
}

/// Where a bundle for `out` is built: beside it, under a name no reader takes for a bundle.
pub fn partial_path(out: &Path) -> std::path::PathBuf {
    let name = out
        .file_name()
        .map_or("bundle".into(), |n| n.to_string_lossy().into_owned());
    out.with_file_name(format!(".{name}.partial-{}", std::process::id()))
}
