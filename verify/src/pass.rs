//! `anchor verify` at any scale: every kept head and checkpoint judged in
//! one pass in seq order, fetched a chunk at a time.
//!
//! Only names are listed up front (sixteen bytes each, [`NameKey`]); a note
//! is read, checked and dropped, so memory follows the chunk and a few
//! numbers per head, not the notes a store has gathered over years. Each
//! head is judged against the database by a [`Judge`] (the walk's verdict
//! and a lookup). Each checkpoint's root is compared with the newest
//! checkpoint's tree, swept once from its level-0 tiles: a checkpoint whose
//! root the sweep reproduces at its size is a prefix of the newest tree,
//! which is what a consistency proof to it would show, for all of them in
//! one read. Only where the sweep disagrees are the checkpoint's own tiles
//! and a consistency proof from the previous one read, to name the fault.
//!
//! With [`Since`] (`--state`), only what was published after a previous
//! clean run is listed and read, and the sweep goes on from the tree's
//! right edge kept then.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

use chainship_chain::{Head, HeadCheck};
use chainship_tlog::merkle::{CompactRange, Hash, consistency_proof, verify_consistency};
use chainship_tlog::tiles::{WIDTH, entries_path, parse_bundle, tile_path, tile_width};
use chainship_tlog::{hash_b64, leaf_hash};

use crate::checkpoints::{
    CosignAudit, Uncosigned, judge_cosigned, judge_uncosigned, trusted_checkpoint, trusted_checkpoints,
};
use crate::finding::{self, FUTURE_SKEW, Finding, Kind, TrustedHead};
use crate::went_backwards::WentBackwards;
use chainship_anchor::checkpoint::{Checkpoint, cosigned_path};
use chainship_anchor::cosignature::WitnessPolicy;
use chainship_anchor::note::VerifierKey;
use chainship_anchor::store::{
    AnchorStore, Below, CHECKPOINTS_DIR, COSIGNED_DIR, Junk, NameKey, StoreError, StoredNote,
};
use chainship_anchor::tile_reader::{TileError, TileReader};

/// Notes fetched and judged at once (read as the store reads many).
const CHUNK: usize = 1024;

/// What the database says about kept heads and checkpoints.
pub trait Judge {
    /// The head against the database: matched, another hash, past its end,
    /// or past a break.
    fn judge(&mut self, head: &Head) -> Result<HeadCheck, StoreError>;
    /// The last seq the database holds intact from seq 1 (its tree's size).
    fn tree_end(&self) -> u64;
    /// The root of the database's first `size` stored hashes (`size` at
    /// most [`Judge::tree_end`]).
    fn root_at(&mut self, size: u64) -> Result<Option<Hash>, StoreError>;
    /// Where the database ends, when it ends before `seq` with no break
    /// before it (`Some(None)`: it is empty): what a head at `seq` would call a cut.
    fn ends_before(&self, seq: u64) -> Option<Option<u64>>;
}

/// Where trusted heads and checkpoints go when the truth they are judged
/// against is a copy read alongside the pass (`verify-export`, `restore`,
/// `diff`): each is handed on in seq order as the pass trusts it, so the
/// copy's check holds only those near its own position.
pub trait TrustedSink {
    /// A trusted head (one per seq: the first the pass trusted there).
    fn head(&mut self, head: Head);
    /// A trusted checkpoint (one per size), after the pass judged its tree.
    fn checkpoint(&mut self, size: u64, root: Hash);
}

/// What the kept heads and checkpoints are judged against.
pub enum Against<'a> {
    /// The database, through its walk.
    Database(&'a mut dyn Judge),
    /// A copy read alongside: trusted heads and checkpoints are handed on.
    Copy(&'a mut dyn TrustedSink),
    /// Nothing but the store itself (`anchor verify --no-db`).
    Store,
}

/// What a previous clean run verified (`--state`).
#[derive(Clone, Debug)]
pub struct Since {
    pub head: Head,
    pub head_published: Option<SystemTime>,
    /// The newest trusted checkpoint then: its size, root and the tree's
    /// right edge at that size.
    pub checkpoint: Option<(u64, Hash, CompactRange)>,
    pub newest_cosigned: Option<u64>,
    /// How many notes were kept below the head, and checkpoints below the
    /// checkpoint, when the store could tell (a directory): a count that
    /// changed means something was added or removed below them since.
    pub notes_below: Option<Below>,
    pub checkpoints_below: Option<Below>,
    /// The state file, for messages.
    pub source: String,
}

/// What to audit.
pub struct StreamInput<'a> {
    pub store: &'a AnchorStore,
    pub origin: &'a str,
    pub keys: &'a [VerifierKey],
    /// Witness cosignatures to hold checkpoints to, with the grace period.
    pub witness: Option<(&'a WitnessPolicy, Duration)>,
    pub since: Option<&'a Since>,
    /// Read every tile and bundle (from the state's size on, with `since`).
    pub every_tile: bool,
}

/// The names to audit, listed before the database is walked (the walk
/// must reach the highest).
pub struct Listing {
    heads: Vec<NameKey>,
    checkpoints: Vec<NameKey>,
    cosigned: Vec<NameKey>,
    /// How many notes and checkpoints the store keeps below the listing's
    /// start, when it can tell.
    heads_below: Option<Below>,
    checkpoints_below: Option<Below>,
    /// Names that are no part of the layout (said as a warning).
    junk: Junk,
}

impl Listing {
    /// The highest seq any kept note or checkpoint names.
    pub fn highest_seq(&self) -> u64 {
        let last = |keys: &[NameKey]| keys.last().map_or(0, |k| k.seq);
        last(&self.heads).max(last(&self.checkpoints))
    }
}

/// Lists what `input` asks for: everything, or since the state's head and checkpoint.
pub async fn list(input: &StreamInput<'_>) -> Result<Listing, StoreError> {
    let (head_from, cp_from) = match input.since {
        None => (0, 0),
        Some(s) => {
            let cp = s.checkpoint.as_ref().map_or(0, |(size, _, _)| *size);
            // Checkpoints above the newest cosigned one are read again (the
            // witnesses may answer later), so the uncosigned rule still holds.
            let cp = match (input.witness, s.newest_cosigned) {
                (Some(_), Some(c)) => cp.min(c),
                (Some(_), None) => 0,
                (None, _) => cp,
            };
            (s.head.seq, cp)
        }
    };
    let store = input.store;
    let heads = store.note_keys(input.origin, head_from).await?;
    let checkpoints = store.log_keys(input.origin, CHECKPOINTS_DIR, cp_from).await?;
    let mut junk = heads.junk;
    junk.extend(checkpoints.junk);
    let cosigned = match input.witness {
        Some(_) => {
            let listed = store.log_keys(input.origin, COSIGNED_DIR, cp_from).await?;
            junk.extend(listed.junk);
            listed.keys
        }
        None => Vec::new(),
    };
    Ok(Listing {
        heads: heads.keys,
        checkpoints: checkpoints.keys,
        cosigned,
        heads_below: heads.below,
        checkpoints_below: checkpoints.below,
        junk,
    })
}

/// What the audit found.
#[derive(Debug, Default)]
pub struct StreamAudit {
    /// Head and heartbeat notes read.
    pub heads_kept: usize,
    /// Notes a trusted key signed, for this origin, at their place.
    pub heads_trusted: usize,
    /// Distinct trusted heads judged against the database (without one: trusted).
    pub heads_checked: usize,
    /// Heads at or past the chain's break.
    pub after_break: usize,
    /// The highest head the database matched (without a database: the
    /// highest trusted head below every finding, see [`StreamAudit::finish_no_db`]).
    pub last_trusted: Option<Head>,
    pub last_trusted_published: Option<SystemTime>,
    /// The newest publication time of a trusted head, and that head.
    pub newest_published: Option<(SystemTime, Head)>,
    /// A trusted head published in the future (the first), as a `stale` finding.
    pub published_in_future: Option<Finding>,
    pub checkpoints_kept: usize,
    pub checkpoints_trusted: usize,
    /// Checkpoints shown to be one tree with the newest (or, pairwise, with the previous).
    pub consistent: usize,
    pub tiles_audited: u64,
    /// The newest trusted checkpoint and the tree's right edge at its size.
    pub largest: Option<Checkpoint>,
    pub edge: Option<CompactRange>,
    /// With a database: how many trusted checkpoints its tree matches.
    pub matched_database: usize,
    pub cosign: Option<CosignAudit>,
    /// The newest trusted checkpoint has no head yet: a publication in
    /// flight, or interrupted (the follower writes it when it starts again).
    pub newest_headless: Option<u64>,
    /// Sizes of partial tiles kept above the newest checkpoint.
    pub partial_above: Vec<u64>,
    /// With a database: the trusted checkpoint sizes its tree matches
    /// (each vouches for the database's hash at its size, as a head would).
    pub checkpoints_matched: Vec<u64>,
    /// With a database: the trusted checkpoint sizes whose root its tree does not give.
    pub roots_contradicted: Vec<u64>,
    pub findings: Vec<Finding>,
    /// Findings past [`MAX_FINDINGS`], counted.
    pub more_findings: u64,
    /// Names in the store that are no part of its layout, ignored.
    pub junk: Junk,
    origin: String,
    /// Without a database: the seqs of the trusted heads, to find the
    /// highest below every finding.
    trusted_seqs: Vec<u64>,
}

/// What a note's own signatures and contents say, judged on every core as
/// its chunk arrives: Ed25519 is most of a pass's time, and the notes are
/// independent. The pass itself still takes them one by one, in seq order,
/// so its findings come in the same order whatever the cores.
enum Prejudged {
    Head(finding::HeadSet),
    Checkpoint(Result<chainship_anchor::checkpoint::ReadCheckpoint, Box<Finding>>),
    Nothing,
}

/// Judges each note of `chunk` on its own ([`Prejudged`]), on up to every core.
fn prejudge(
    chunk: &[(NameKey, Option<StoredNote>)],
    dir: Option<&str>,
    origin: &str,
    keys: &[VerifierKey],
) -> Vec<Prejudged> {
    // A part's signatures are verified together, in batches.
    let judge = |part: &[(NameKey, Option<StoredNote>)]| -> Vec<Prejudged> {
        let kept: Vec<(NameKey, &StoredNote)> = part.iter().filter_map(|(k, n)| Some((*k, n.as_ref()?))).collect();
        let judged: Vec<Prejudged> = match dir {
            None => {
                let notes: Vec<&StoredNote> = kept.iter().map(|(_, n)| *n).collect();
                finding::check_each(&notes, origin, keys)
                    .into_iter()
                    .map(Prejudged::Head)
                    .collect()
            }
            Some(_) => {
                let notes: Vec<(&[u8], u64, &str)> = kept
                    .iter()
                    .map(|(k, n)| (&n.bytes[..], k.seq, n.name.as_str()))
                    .collect();
                trusted_checkpoints(&notes, keys, origin)
                    .into_iter()
                    .map(Prejudged::Checkpoint)
                    .collect()
            }
        };
        let mut judged = judged.into_iter();
        part.iter()
            .map(|(_, note)| match note {
                None => Prejudged::Nothing,
                Some(_) => judged.next().unwrap_or(Prejudged::Nothing),
            })
            .collect()
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 || chunk.len() < 16 {
        return judge(chunk);
    }
    let part = chunk.len().div_ceil(cores);
    std::thread::scope(|scope| {
        let parts: Vec<_> = chunk
            .chunks(part)
            .map(|notes| scope.spawn(move || judge(notes)))
            .collect();
        parts
            .into_iter()
            .flat_map(|p| p.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// One source of notes in seq order: the names listed, and a chunk read ahead.
struct Feed {
    keys: Vec<NameKey>,
    next: usize,
    fetched: VecDeque<(NameKey, Option<StoredNote>)>,
    judged: VecDeque<Prejudged>,
    /// The chunk after `fetched`, read while `fetched` was judged.
    ahead: Option<Vec<(NameKey, Option<StoredNote>)>>,
    /// `None`: head notes; `Some(dir)`: checkpoints in `dir`.
    dir: Option<&'static str>,
}

impl Feed {
    fn new(keys: Vec<NameKey>, dir: Option<&'static str>) -> Feed {
        Feed {
            keys,
            next: 0,
            fetched: VecDeque::new(),
            judged: VecDeque::new(),
            ahead: None,
            dir,
        }
    }

    fn peek_seq(&self) -> Option<u64> {
        self.keys.get(self.next).map(|k| k.seq)
    }

    async fn pop(
        &mut self,
        store: &AnchorStore,
        origin: &str,
    ) -> Result<Option<(NameKey, Option<StoredNote>)>, StoreError> {
        Ok(self.pop_judged(store, origin, None).await?.map(|(k, n, _)| (k, n)))
    }

    /// The next note, judged on its own already when `keys` are given (a chunk at a time, on every core).
    async fn pop_judged(
        &mut self,
        store: &AnchorStore,
        origin: &str,
        keys: Option<&[VerifierKey]>,
    ) -> Result<Option<(NameKey, Option<StoredNote>, Prejudged)>, StoreError> {
        if self.next >= self.keys.len() {
            return Ok(None);
        }
        // Names already judged are let go, so the listing shrinks as the pass goes.
        if self.next >= 1 << 16 && self.fetched.is_empty() {
            self.keys.drain(..self.next);
            self.keys.shrink_to_fit();
            self.next = 0;
        }
        if self.fetched.is_empty() {
            let end = (self.next + CHUNK).min(self.keys.len());
            let dir = self.dir;
            let chunk = match self.ahead.take() {
                Some(chunk) => chunk,
                None => fetch(store, origin, dir, &self.keys[self.next..end]).await?,
            };
            // The following chunk is read while this one is judged: the
            // store's I/O runs on the blocking pool as the cores verify
            // (the read is started first, then the judging blocks).
            let following = &self.keys[end..(end + CHUNK).min(self.keys.len())];
            let (ahead, judged) = futures::join!(
                async {
                    match following.is_empty() {
                        true => Ok(None),
                        false => fetch(store, origin, dir, following).await.map(Some),
                    }
                },
                async { keys.map(|keys| prejudge(&chunk, dir, origin, keys)) },
            );
            self.ahead = ahead?;
            self.judged.extend(judged.into_iter().flatten());
            self.fetched.extend(chunk);
        }
        self.next += 1;
        let judged = self.judged.pop_front().unwrap_or(Prejudged::Nothing);
        Ok(self.fetched.pop_front().map(|(k, n)| (k, n, judged)))
    }
}

/// The notes under `keys`: heads, or with `dir` the checkpoints kept there.
async fn fetch(
    store: &AnchorStore,
    origin: &str,
    dir: Option<&str>,
    keys: &[NameKey],
) -> Result<Vec<(NameKey, Option<StoredNote>)>, StoreError> {
    let notes = match dir {
        None => store.get_notes(origin, keys).await?,
        Some(dir) => {
            let paths: Vec<String> = keys.iter().map(|k| format!("{dir}/{}", k.log_name())).collect();
            let read = store.get_objects(origin, &paths).await?;
            read.into_iter()
                .zip(keys.iter().zip(paths))
                .map(|(bytes, (key, path))| {
                    bytes.map(|bytes| StoredNote {
                        name: format!("{}/{origin}/{path}", store.describe()),
                        seq_in_name: Some(key.seq),
                        bytes,
                    })
                })
                .collect()
        }
    };
    Ok(keys.iter().copied().zip(notes).collect())
}

/// The newest checkpoint's tree, rebuilt leaf by leaf from its level-0
/// tiles as the pass reaches each smaller checkpoint's size (one tile held).
struct TreeSweep {
    tree: CompactRange,
    newest: u64,
    tile: Option<(u64, Vec<Hash>)>,
    last_leaf: Option<Hash>,
}

impl TreeSweep {
    async fn advance_to(&mut self, store: &AnchorStore, origin: &str, size: u64) -> Result<(), TileError> {
        while self.tree.size() < size.min(self.newest) {
            let at = self.tree.size();
            let index = at / WIDTH as u64;
            if self.tile.as_ref().is_none_or(|(i, _)| *i != index) {
                let width = tile_width(self.newest, 0, index);
                let path = tile_path(0, index, width);
                let data = store
                    .get_object(origin, &path)
                    .await
                    .map_err(TileError::Store)?
                    .ok_or_else(|| TileError::Missing(path.clone()))?;
                if data.len() != width * 32 {
                    return Err(TileError::Malformed(format!(
                        "{path} holds {} bytes, not {width} hashes",
                        data.len()
                    )));
                }
                let hashes = data.chunks(32).map(|c| c.try_into().expect("32 bytes")).collect();
                self.tile = Some((index, hashes));
            }
            let (_, hashes) = self.tile.as_ref().expect("just read");
            let leaf = hashes[(at % WIDTH as u64) as usize];
            self.tree.push_leaf(leaf);
            self.last_leaf = Some(leaf);
        }
        Ok(())
    }
}

/// The last trusted checkpoint, for the next one's checks.
#[derive(Clone, Debug)]
struct Previous {
    size: u64,
    root: Hash,
    source: String,
    /// Shown one tree with the newest (or the previous one).
    consistent: bool,
}

/// The pass itself: its state between notes.
struct Pass<'a> {
    input: &'a StreamInput<'a>,
    judge: Option<&'a mut dyn Judge>,
    sink: Option<&'a mut dyn TrustedSink>,
    out: StreamAudit,
    sweep: Option<TreeSweep>,
    reader: TileReader<'a>,
    prev_cp: Option<Previous>,
    first_cp: Option<u64>,
    /// The database's tree matched up to this trusted checkpoint (size, root, source, consistent so far).
    db_candidate: Option<(u64, Hash, String, usize)>,
    /// The first trusted head at the current seq, and its source.
    at_seq: Option<(Head, String)>,
    last_judged: Option<Head>,
    /// The went-backwards rule, fed every trusted note's publication.
    backwards: WentBackwards,
    cosigned: Feed,
    candidates: Vec<Uncosigned>,
    cosign: Option<CosignAudit>,
    /// The largest checkpoint size the witness rule has seen.
    witnessed_up_to: Option<u64>,
    /// The tile audit found the newest tree's own tiles damaged.
    tiles_damaged: bool,
    /// The last trusted checkpoint, until the head of its size is read.
    headless: Option<(u64, String)>,
    /// Sizes that kept partial tiles were written for, not yet met by a checkpoint.
    partial_sizes: VecDeque<(u64, String)>,
    /// Consistent trusted checkpoints within the database's tree, to count
    /// as matched once the largest is compared with it.
    checkpoints_in_db: Vec<u64>,
    /// The distinct seqs of the trusted heads read so far, the newest
    /// [`PREVIOUS_WINDOW`] of them, and the lowest: what a head's
    /// `previous` line is checked against.
    trusted_recent: VecDeque<u64>,
    lowest_trusted: Option<u64>,
    now: SystemTime,
}

/// How many trusted heads back a `previous` line is checked (a follower
/// names the head just before its own; a bound keeps the pass's memory flat).
const PREVIOUS_WINDOW: usize = 65_536;

/// Audits every listed head and checkpoint in seq order (see the module doc).
pub async fn audit<'a>(
    input: &'a StreamInput<'a>,
    mut listing: Listing,
    against: Against<'a>,
) -> Result<StreamAudit, StoreError> {
    let (judge, sink) = match against {
        Against::Database(judge) => (Some(judge), None),
        Against::Copy(sink) => (None, Some(sink)),
        Against::Store => (None, None),
    };
    let (store, origin) = (input.store, input.origin);
    let mut out = StreamAudit {
        junk: std::mem::take(&mut listing.junk),
        origin: origin.to_owned(),
        ..StreamAudit::default()
    };
    let newest = newest_checkpoint(input, &listing.checkpoints).await?;
    let since_cp = input.since.and_then(|s| s.checkpoint.clone());
    let sweep = newest.as_ref().map(|cp| {
        let start = since_cp
            .as_ref()
            .filter(|(size, _, _)| *size <= cp.size)
            .map_or_else(CompactRange::default, |(_, _, edge)| edge.clone());
        TreeSweep {
            tree: start,
            newest: cp.size,
            tile: None,
            last_leaf: None,
        }
    });
    out.largest = newest.clone();
    let mut pass = Pass {
        input,
        judge,
        sink,
        out,
        sweep,
        reader: TileReader::new(store, origin),
        prev_cp: since_cp.as_ref().map(|(size, root, _)| Previous {
            size: *size,
            root: *root,
            source: input
                .since
                .map_or(String::new(), |s| format!("the state file {}", s.source)),
            consistent: true,
        }),
        first_cp: since_cp.as_ref().map(|(size, _, _)| *size),
        db_candidate: None,
        at_seq: input.since.map(|s| (s.head, format!("the state file {}", s.source))),
        last_judged: None,
        backwards: WentBackwards::default(),
        cosigned: Feed::new(Vec::new(), Some(COSIGNED_DIR)),
        candidates: Vec::new(),
        cosign: input.witness.map(|_| CosignAudit::default()),
        witnessed_up_to: None,
        tiles_damaged: false,
        headless: None,
        partial_sizes: VecDeque::new(),
        checkpoints_in_db: Vec::new(),
        trusted_recent: VecDeque::new(),
        lowest_trusted: None,
        now: SystemTime::now(),
    };
    if let Some(since) = input.since {
        pass.since_still_kept(since, &listing);
    }
    let checkpoint_keys = &listing.checkpoints;
    pass.cosigned = Feed::new(listing.cosigned, Some(COSIGNED_DIR));
    // The tiles first: where they are damaged, a consistency proof read from
    // them cannot tell a fork from the damage.
    if input.every_tile
        && let Some(newest) = pass.out.largest.clone()
    {
        let from = since_cp.as_ref().map_or(0, |(size, _, _)| *size);
        let sizes: Vec<u64> = checkpoint_keys.iter().map(|k| k.seq).collect();
        let tiles = crate::tiles::audit_tiles(store, origin, &newest, from, &sizes).await?;
        pass.out.tiles_audited = tiles.objects;
        pass.out.junk.extend(tiles.junk);
        pass.tiles_damaged = tiles.newest_damaged;
        pass.out.partial_above = tiles.partial_above.clone();
        pass.partial_sizes = tiles
            .partial_sizes
            .iter()
            .map(|size| (*size, tile_path(0, size / WIDTH as u64, (size % WIDTH as u64) as usize)))
            .collect();
        for f in tiles.findings {
            pass.out.note(f);
        }
        if tiles.more > 0 {
            pass.out.note(Finding::new(
                Kind::TilesDisagree,
                Some(newest.size),
                format!("and {} more tile(s) or bundle(s) like those above", tiles.more),
            ));
        }
    }
    // The pointer is judged against the newest checkpoint once its head is
    // kept too (the follower writes the checkpoint, the pointer, then the head).
    let newest_has_head = newest
        .as_ref()
        .is_some_and(|cp| listing.heads.iter().any(|k| k.seq == cp.size));
    let none_kept = listing.checkpoints.is_empty();
    let mut heads = Feed::new(listing.heads, None);
    let mut checkpoints = Feed::new(listing.checkpoints, Some(CHECKPOINTS_DIR));
    loop {
        // A checkpoint before the heads of its seq: the head is then checked
        // to be its tree's last entry, and to have it.
        let take_checkpoint = match (heads.peek_seq(), checkpoints.peek_seq()) {
            (None, None) => break,
            (h, c) => c.is_some_and(|c| h.is_none_or(|h| c <= h)),
        };
        if take_checkpoint {
            match checkpoints.pop_judged(store, origin, Some(input.keys)).await? {
                Some((key, Some(note), Prejudged::Checkpoint(read))) => pass.checkpoint(key, note, read).await?,
                Some((key, _, _)) => pass.unreadable(&format!("{CHECKPOINTS_DIR}/{}", key.log_name()), key.seq),
                None => {}
            }
        } else {
            match heads.pop_judged(store, origin, Some(input.keys)).await? {
                Some((_, Some(note), Prejudged::Head(set))) => pass.head_note(note, set)?,
                Some((key, _, _)) => pass.unreadable(&key.note_name(), key.seq),
                None => {}
            }
        }
    }
    if let Some(newest) = newest.as_ref().filter(|_| newest_has_head)
        && let Some(f) = crate::checkpoints::audit_pointer(store, origin, input.keys, newest).await?
    {
        pass.out.note(f);
    }
    // A pointer and no checkpoint kept at all: checkpoints were published, and are gone.
    if none_kept
        && since_cp.is_none()
        && let Some(f) = crate::checkpoints::pointer_without_checkpoints(store, origin, input.keys).await?
    {
        pass.out.note(f);
    }
    pass.finish().await
}

/// The largest checkpoint a trusted key signed for this origin at its place.
async fn newest_checkpoint(input: &StreamInput<'_>, keys: &[NameKey]) -> Result<Option<Checkpoint>, StoreError> {
    for key in keys.iter().rev() {
        let fetched = fetch(
            input.store,
            input.origin,
            Some(CHECKPOINTS_DIR),
            std::slice::from_ref(key),
        )
        .await?;
        let Some((_, Some(note))) = fetched.into_iter().next() else {
            continue;
        };
        if let Ok(read) = trusted_checkpoint(&note.bytes, input.keys, input.origin, key.seq, &note.name) {
            return Ok(Some(read.checkpoint));
        }
    }
    Ok(None)
}

/// How the names below a point changed, in words.
fn changed_names(then: Below, now: Below) -> String {
    if then.count == now.count {
        format!(
            "{} then and now, but other names (one removed and another put in its place)",
            now.count
        )
    } else {
        format!("{} then, {} now (added or removed)", then.count, now.count)
    }
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis().min(u128::from(u64::MAX)) as u64)
}

impl Pass<'_> {
    /// What the previous clean run verified must still be kept: a store
    /// that lost it was rolled back or pruned.
    fn since_still_kept(&mut self, since: &Since, listing: &Listing) {
        let state = format!("the state file {}", since.source);
        if !listing.heads.iter().any(|k| k.seq == since.head.seq) {
            self.out.note(Finding::new(Kind::HeadsDisagree, Some(since.head.seq), format!(
                    "head {} verified by the previous run ({state}) is no longer kept in the store: the store was rolled back or pruned",
                    since.head
                )).at(Some(state.clone())));
        }
        // Below the state nothing is read, but a directory names what is
        // there: one more (a fork planted below the head), one fewer, or one
        // swapped for another (same count, other names) is named.
        if let (Some(then), Some(now)) = (since.notes_below, listing.heads_below)
            && then != now
        {
            self.out.note(Finding::new(Kind::HeadsDisagree, Some(since.head.seq), format!(
                    "the notes kept below head {} are not those the previous run verified ({state}): {}; verify once without the state file to judge them",
                    since.head,
                    changed_names(then, now)
                )).at(Some(state.clone())));
        }
        if let (Some((size, _, _)), Some(then), Some(below_start)) =
            (&since.checkpoint, since.checkpoints_below, listing.checkpoints_below)
        {
            // The listing starts at the state's head; checkpoints between it and
            // the state's size count as below the size too.
            let mut now = below_start;
            for k in listing.checkpoints.iter().filter(|k| k.seq < *size) {
                now.add(&k.log_name());
            }
            if then != now {
                let kind = if now.count > then.count {
                    Kind::CheckpointFork
                } else {
                    Kind::CheckpointMissing
                };
                self.out.note(Finding::new(kind, Some(*size), format!(
                        "the checkpoints kept below size {size} are not those the previous run verified ({state}): {}; verify once without the state file to judge them",
                        changed_names(then, now)
                    )).at(Some(state.clone())));
            }
        }
        if let Some((size, _, _)) = &since.checkpoint
            && !listing.checkpoints.iter().any(|k| k.seq == *size)
        {
            self.out.note(Finding::new(Kind::CheckpointMissing, Some(*size), format!(
                    "checkpoint {size} verified by the previous run ({state}) is no longer kept in the store: the store was rolled back or pruned"
                )).at(Some(state)));
        }
    }

    /// A head's `previous` line names a head kept when it was published:
    /// that head must still be kept, unless it is below every kept one (the
    /// oldest go by retention) or below the state's head (an incremental
    /// run did not list them). Heads come in seq order, so it was read already.
    fn previous_kept(&mut self, t: &TrustedHead) {
        let seq = t.signed.head.seq;
        if let Some(p) = t.signed.previous {
            let below_all = self.lowest_trusted.is_none_or(|low| p < low);
            let below_state = self.input.since.is_some_and(|s| p <= s.head.seq);
            // Older than the window: not checked (the bound on memory).
            let out_of_window = self.trusted_recent.len() == PREVIOUS_WINDOW && self.trusted_recent.front() > Some(&p);
            let seen = self.trusted_recent.binary_search(&p).is_ok();
            if !below_all && !below_state && !out_of_window && !seen {
                self.out.note(Finding::new(Kind::HeadMissing, Some(p), format!(
                        "head {} says the head kept before it was at seq {p}; the store keeps no trusted head at {p}: a publication deleted (its head, and its checkpoint if it had one)",
                        t.signed.head
                    )).at(Some(t.source.clone())));
            }
        }
        if self.trusted_recent.back() != Some(&seq) {
            if self.trusted_recent.len() == PREVIOUS_WINDOW {
                self.trusted_recent.pop_front();
            }
            self.trusted_recent.push_back(seq);
        }
        self.lowest_trusted.get_or_insert(seq);
    }

    /// A kept note, with what its own signatures and contents said (`set`, from [`prejudge`]).
    fn head_note(&mut self, note: StoredNote, set: finding::HeadSet) -> Result<(), StoreError> {
        self.out.heads_kept += 1;
        // Any note at the seq (a forged one is named on its own) is not a deleted head.
        if let Some(seq) = note.seq_in_name {
            self.head_of_checkpoint(seq);
        }
        let key = note
            .name
            .rsplit('/')
            .next()
            .and_then(NameKey::from_note_name)
            .unwrap_or(NameKey { seq: 0, beside: 0 });
        for f in set.findings {
            self.out.note(f);
        }
        for t in set.trusted {
            self.trusted_head(&t, key)?;
        }
        Ok(())
    }

    fn trusted_head(&mut self, t: &TrustedHead, key: NameKey) -> Result<(), StoreError> {
        let head = t.signed.head;
        self.out.heads_trusted += 1;
        match &self.at_seq {
            Some((first, source)) if first.seq == head.seq => {
                if first.hash != head.hash {
                    self.out.note(Finding {
                        kind: Kind::HeadsDisagree,
                        seq: Some(head.seq),
                        message: format!("two heads for seq {}: {source} and {}", head.seq, t.source),
                        expected: Some(first.hash_str().to_owned()),
                        found: Some(head.hash_str().to_owned()),
                        source: Some(t.source.clone()),
                        remedy: None,
                    });
                }
            }
            _ => self.at_seq = Some((head, t.source.clone())),
        }
        self.previous_kept(t);
        let published = t.signed.published_time();
        if let Some(p) = published {
            if p > self.now + FUTURE_SKEW && self.out.published_in_future.is_none() {
                self.out.published_in_future = Some(finding::published_in_future(t));
            }
            if self.out.newest_published.is_none_or(|(n, _)| p >= n) {
                self.out.newest_published = Some((p, head));
            }
            self.backwards.note(head.seq, millis(p), key);
        }
        if let Some(c) = self.candidates.last_mut()
            && c.size == head.seq
            && c.published.is_none()
        {
            c.published = published;
        }
        // A head and its heartbeats are one head to judge.
        if self.last_judged == Some(head) {
            return Ok(());
        }
        self.last_judged = Some(head);
        self.out.heads_checked += 1;
        match self.judge.as_mut() {
            Some(judge) => match judge.judge(&head)? {
                HeadCheck::Matched => {
                    self.out.last_trusted = Some(head);
                    self.out.last_trusted_published = published;
                }
                HeadCheck::AfterBreak => self.out.after_break += 1,
                check => self
                    .out
                    .findings
                    .extend(finding::head_finding(&head, &check, Some(t.source.clone()), None)),
            },
            None => match self.sink.as_mut() {
                Some(sink) => sink.head(head),
                None => self.out.trusted_seqs.push(head.seq),
            },
        }
        // Once checkpoints began, every head has its own; and a head signed
        // saying it was published after its checkpoint has one, whatever else
        // the store lost.
        let began = self.first_cp.filter(|first| head.seq >= *first);
        if began.is_some() || t.signed.with_checkpoint {
            let last_cp = self.prev_cp.as_ref().map(|p| p.size);
            if last_cp != Some(head.seq) {
                let why = match began {
                    _ if t.signed.with_checkpoint => {
                        "though it was signed saying it was published after that checkpoint: deleted".to_owned()
                    }
                    Some(first) => {
                        format!("(checkpoints start at {first}): deleted, or published without checkpoints")
                    }
                    None => "(deleted)".to_owned(),
                };
                self.out.note(
                    Finding::new(
                        Kind::CheckpointMissing,
                        Some(head.seq),
                        format!("head {head} has no checkpoint of size {} {why}", head.seq),
                    )
                    .at(Some(t.source.clone())),
                );
            } else if let Some(sweep) = &self.sweep
                && sweep.tree.size() == head.seq
                && self.prev_cp.as_ref().is_some_and(|p| p.consistent)
                && sweep.last_leaf.is_some_and(|leaf| leaf != leaf_hash(&head.hash))
            {
                let source = self.prev_cp.as_ref().map(|p| p.source.clone());
                self.out.note(Finding {
                    kind: Kind::HeadsDisagree,
                    seq: Some(head.seq),
                    message: format!("head {head} is not the last entry of checkpoint {}'s tree", head.seq),
                    expected: Some(head.hash_str().to_owned()),
                    found: None,
                    source,
                    remedy: None,
                });
            }
        }
        Ok(())
    }

    /// A kept checkpoint, with what its signatures said (`read`, from [`prejudge`]).
    async fn checkpoint(
        &mut self,
        key: NameKey,
        note: StoredNote,
        read: Result<chainship_anchor::checkpoint::ReadCheckpoint, Box<Finding>>,
    ) -> Result<(), StoreError> {
        let source = note.name.clone();
        self.out.checkpoints_kept += 1;
        self.partial_tiles_up_to(key.seq);
        let read = match read {
            Ok(read) => read,
            Err(f) => {
                self.out.note(*f);
                return Ok(());
            }
        };
        let size = read.checkpoint.size;
        let cp = read.checkpoint;
        if let Some(prev) = self.prev_cp.as_ref().filter(|p| p.size == size) {
            if prev.root == cp.root {
                // The same checkpoint kept twice (beside a squatted name), or the
                // state's own: judged already, but maybe not yet for the witnesses.
                return self.witnessed(&cp, source).await;
            }
            let message = format!(
                "two trusted checkpoints of size {size} with different roots ({} from {} and {})",
                hash_b64(&prev.root),
                prev.source,
                cp.root_b64()
            );
            self.out
                .findings
                .push(Finding::new(Kind::CheckpointFork, Some(size), message).at(Some(source)));
            return Ok(());
        }
        // Below the state's checkpoint: verified before, read again only
        // for the witnesses' sake.
        let below_state = self
            .input
            .since
            .and_then(|s| s.checkpoint.as_ref())
            .is_some_and(|(s, _, _)| size < *s);
        if !below_state {
            self.out.checkpoints_trusted += 1;
            let consistent = self.judge_root(&cp, &source).await?;
            // One the newest tree does not vouch for is compared with the
            // database on its own (as a copy's check compares every one).
            if !consistent && self.compare_with_database(size, cp.root, &source)? {
                self.out.checkpoints_matched.push(size);
            }
            // Without a database or copy, a checkpoint shown one tree with the
            // newest vouches for its size as a head would.
            if consistent && self.judge.is_none() && self.sink.is_none() {
                self.out.trusted_seqs.push(size);
            }
            if let Some(judge) = self.judge.as_ref()
                && size <= judge.tree_end()
            {
                let so_far = self.db_candidate.as_ref().map_or(0, |c| c.3) + usize::from(consistent);
                self.db_candidate = Some((size, cp.root, source.clone(), so_far));
                if consistent {
                    self.checkpoints_in_db.push(size);
                }
            }
            self.flush_headless();
            self.headless = Some((size, source.clone()));
            if let Some(sink) = self.sink.as_mut() {
                sink.checkpoint(size, cp.root);
            }
            self.prev_cp = Some(Previous {
                size,
                root: cp.root,
                source: source.clone(),
                consistent,
            });
            self.first_cp.get_or_insert(size);
        }
        self.witnessed(&cp, source).await
    }

    /// The largest checkpoint of the newest tree below `size` whose root the
    /// database's tree gives (a prefix of one tree matches up to where they
    /// part, so a binary search: a few notes read again, none held).
    async fn largest_matching_below(&mut self, size: u64) -> Result<Option<u64>, StoreError> {
        let sizes: Vec<u64> = self.checkpoints_in_db.iter().copied().filter(|s| *s < size).collect();
        let (mut lo, mut hi, mut best) = (0usize, sizes.len(), None);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let at = sizes[mid];
            let path = chainship_anchor::checkpoint::checkpoint_path(at);
            let root = match self.input.store.get_object(self.input.origin, &path).await? {
                Some(bytes) => trusted_checkpoint(&bytes, self.input.keys, self.input.origin, at, &path)
                    .ok()
                    .map(|r| r.checkpoint.root),
                None => None,
            };
            let judge = self.judge.as_mut().filter(|j| at <= j.tree_end());
            let matches = match (root, judge) {
                (Some(root), Some(judge)) => judge.root_at(at)? == Some(root),
                _ => false,
            };
            if matches {
                best = Some(at);
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(best)
    }

    /// A trusted checkpoint's root against the database's first `size`
    /// hashes: another root is a `fork`. True when they match.
    fn compare_with_database(&mut self, size: u64, root: Hash, source: &str) -> Result<bool, StoreError> {
        let Some(judge) = self.judge.as_mut().filter(|j| size <= j.tree_end()) else {
            return Ok(false);
        };
        Ok(match judge.root_at(size)? {
            Some(db_root) if db_root == root => true,
            Some(db_root) => {
                self.out.roots_contradicted.push(size);
                self.out.note(Finding {
                    kind: Kind::Fork,
                    seq: Some(size),
                    message: format!(
                        "checkpoint {size}: the database's first {size} hashes have root {}, the checkpoint {}",
                        hash_b64(&db_root),
                        hash_b64(&root)
                    ),
                    expected: Some(hash_b64(&root)),
                    found: Some(hash_b64(&db_root)),
                    source: Some(source.to_owned()),
                    remedy: None,
                });
                false
            }
            None => false,
        })
    }

    /// The checkpoint's root against the newest tree, or (where that
    /// disagrees, or cannot be read) against its own tiles and the
    /// previous checkpoint. True when shown one tree with them.
    async fn judge_root(&mut self, cp: &Checkpoint, source: &str) -> Result<bool, StoreError> {
        let (store, origin) = (self.input.store, self.input.origin);
        if let Some(sweep) = self.sweep.as_mut().filter(|s| cp.size <= s.newest) {
            match sweep.advance_to(store, origin, cp.size).await {
                Ok(()) if sweep.tree.root() == cp.root => {
                    if cp.size < sweep.newest {
                        self.out.consistent += 1;
                    }
                    if cp.size == sweep.newest {
                        self.out.edge = Some(sweep.tree.clone());
                    }
                    return Ok(true);
                }
                Ok(()) => {}
                Err(TileError::Store(e)) => return Err(e),
                // The newest tree lacks a tile: the tile audit names it; go on pairwise.
                Err(_) => self.sweep = None,
            }
        }
        self.pairwise(cp, source).await
    }

    /// The old way, for a checkpoint the sweep could not vouch for: its root
    /// from its own tiles, and a consistency proof from the previous one.
    async fn pairwise(&mut self, cp: &Checkpoint, source: &str) -> Result<bool, StoreError> {
        let tiles_disagree = |why: String| {
            Finding::new(
                Kind::TilesDisagree,
                Some(cp.size),
                format!("checkpoint {} (root {}): {why}", cp.size, cp.root_b64()),
            )
            .at(Some(source.to_owned()))
        };
        // Both are judged: tiles that do not give the root, and whether it
        // is one tree with the previous checkpoint at all.
        let own_root_ok = match self.reader.run(cp.size, |set| set.root()).await {
            Ok(root) if root == cp.root => true,
            Ok(root) => {
                let message = format!("its tiles give root {}", hash_b64(&root));
                self.out.note(tiles_disagree(message));
                false
            }
            Err(TileError::Store(e)) => return Err(e),
            Err(e) => {
                self.out.note(tiles_disagree(e.to_string()));
                false
            }
        };
        // Its own tiles give its root, yet the level-0 tiles swept do not:
        // those disagree with the rest (the tile audit names which), and the
        // signer is not to blame. Pairwise from here on.
        let level0_disagree = |out: &mut StreamAudit| {
            out.note(tiles_disagree(
                "the level-0 tiles do not give this root, though its other tiles do".into(),
            ))
        };
        let Some(prev) = self.prev_cp.clone().filter(|p| p.size < cp.size) else {
            if own_root_ok && self.sweep.take().is_some() {
                level0_disagree(&mut self.out);
            }
            return Ok(own_root_ok);
        };
        let proof = self
            .reader
            .run(cp.size, |set| consistency_proof(prev.size, cp.size, set))
            .await;
        match proof {
            Ok(proof) if verify_consistency(prev.size, cp.size, &prev.root, &cp.root, &proof) => {
                self.out.consistent += 1;
                if own_root_ok && self.sweep.take().is_some() {
                    level0_disagree(&mut self.out);
                }
                Ok(own_root_ok)
            }
            Ok(_) if self.tiles_damaged => {
                let message = format!(
                    "no consistency proof from size {} in the store's tiles, which are damaged (see the tile findings): a fork cannot be told from the damage",
                    prev.size
                );
                self.out.note(tiles_disagree(message));
                Ok(false)
            }
            Ok(_) => {
                self.out.note(Finding::new(Kind::CheckpointFork, Some(cp.size), format!(
                        "checkpoints {} and {} are not one tree: no consistency proof between them (the larger is another history, e.g. a database restored from a backup and grown again)",
                        prev.size, cp.size
                    )).at(Some(source.to_owned())));
                Ok(false)
            }
            Err(TileError::Store(e)) => Err(e),
            Err(e) => {
                let message = format!("no consistency proof from size {}: {e}", prev.size);
                self.out.note(tiles_disagree(message));
                Ok(false)
            }
        }
    }

    /// The witness rule: a cosigned checkpoint vouches for every smaller
    /// one; those above the newest cosigned one are candidates for `uncosigned`.
    async fn witnessed(&mut self, cp: &Checkpoint, source: String) -> Result<(), StoreError> {
        let (Some((policy, _)), Some(cosign)) = (self.input.witness, self.cosign.as_mut()) else {
            return Ok(());
        };
        // One size is one checkpoint for the witnesses, however often it is kept.
        if self.witnessed_up_to.is_some_and(|w| w >= cp.size) {
            return Ok(());
        }
        self.witnessed_up_to = Some(cp.size);
        let (store, origin) = (self.input.store, self.input.origin);
        while self.cosigned.peek_seq().is_some_and(|s| s < cp.size) {
            self.cosigned.pop(store, origin).await?;
        }
        let mut quorum = false;
        while self.cosigned.peek_seq() == Some(cp.size) {
            let Some((_, Some(note))) = self.cosigned.pop(store, origin).await? else {
                continue;
            };
            let source = format!("{}/{origin}/{}", store.describe(), cosigned_path(cp.size));
            quorum |= judge_cosigned(cp, &note.bytes, policy, &source, &mut cosign.findings);
        }
        if quorum {
            cosign.cosigned += 1;
            cosign.newest_cosigned = Some(cp.size);
            self.candidates.clear();
        } else {
            // Below the state's head, its head was not read again: it was
            // published no later than the state's head.
            let published = self
                .input
                .since
                .filter(|s| cp.size < s.head.seq)
                .and_then(|s| s.head_published);
            self.candidates.push(Uncosigned {
                size: cp.size,
                published,
                source,
            });
        }
        Ok(())
    }

    /// A name the store lists that cannot be read as an object (a directory
    /// in its place, or removed while the audit read): never passed over.
    fn unreadable(&mut self, name: &str, seq: u64) {
        let source = format!("{}/{}/{name}", self.input.store.describe(), self.input.origin);
        self.out.note(Finding::new(Kind::BadSignature, Some(seq), format!("{source} is listed but cannot be read as a note (a directory in its place, or removed while this audit read)")).at(Some(source.clone())));
    }

    /// A head at `seq`: the checkpoint waiting for its head has it, or
    /// (the head is past it) never will.
    fn head_of_checkpoint(&mut self, seq: u64) {
        match &self.headless {
            Some((size, _)) if *size == seq => self.headless = None,
            Some((size, _)) if *size < seq => self.flush_headless(),
            _ => {}
        }
    }

    /// A checkpoint with no head still vouches for its size: a database
    /// that ends before it was cut, as it would be before a head there.
    fn headless_beyond_database(&mut self, size: u64, source: &str) {
        if let Some(end) = self.judge.as_ref().and_then(|j| j.ends_before(size)) {
            self.out.note(Finding::new(Kind::Cut, Some(size), format!(
                    "checkpoint {size} (kept without its head) vouches for seq {size}, but the database ends at seq {}",
                    end.unwrap_or(0)
                )).at(Some(source.to_owned())));
        }
    }

    /// The checkpoint waiting for its head did not get it.
    fn flush_headless(&mut self) {
        if let Some((size, source)) = self.headless.take() {
            self.headless_beyond_database(size, &source);
            self.out.note(Finding::new(Kind::HeadMissing, Some(size), format!(
                    "checkpoint {size} is kept without its head: the follower writes the head of seq {size} right after it, so the head was deleted"
                )).at(Some(source)));
        }
    }

    /// Checkpoint names reached `seq`: a partial tile written for a smaller
    /// size no checkpoint name has is what a deleted checkpoint leaves.
    fn partial_tiles_up_to(&mut self, seq: u64) {
        while let Some((size, path)) = self.partial_sizes.front().cloned() {
            if size > seq {
                break;
            }
            self.partial_sizes.pop_front();
            if size < seq {
                let source = format!("{}/{}/{path}", self.input.store.describe(), self.input.origin);
                self.out.note(Finding::new(Kind::CheckpointMissing, Some(size), format!(
                        "{path} is a partial tile of a tree of size {size}, which the follower writes only with the checkpoint of that size; no checkpoint {size} is kept: deleted"
                    )).at(Some(source)));
            }
        }
    }

    async fn finish(mut self) -> Result<StreamAudit, StoreError> {
        let origin = self.input.origin;
        for f in std::mem::take(&mut self.backwards.findings) {
            self.out.note(f);
        }
        if self.out.more_findings > 0 {
            let first = self.out.findings.iter().filter_map(|f| f.seq).min();
            self.out.findings.push(Finding::new(
                Kind::BadSignature,
                first,
                format!(
                    "and {} more finding(s) about the store's notes, not listed (at most {MAX_FINDINGS} are kept)",
                    self.out.more_findings
                ),
            ));
        }
        if let Some((size, root, source, consistent)) = self.db_candidate.take() {
            let matched_at = match self.compare_with_database(size, root, &source)? {
                true => {
                    self.out.matched_database = consistent;
                    Some(size)
                }
                // The database left the tree below `size`: the largest smaller
                // checkpoint it still matches, as a copy's check finds it.
                false => self.largest_matching_below(size).await?,
            };
            if let Some(at) = matched_at {
                // One tree with the database at `at`: so are the smaller ones of the newest tree.
                let matched = self.checkpoints_in_db.iter().filter(|s| **s <= at);
                self.out.checkpoints_matched.extend(matched);
                self.out.checkpoints_matched.sort_unstable();
                self.out.checkpoints_matched.dedup();
            }
        }
        match self.headless.take() {
            Some((size, source)) if self.out.largest.as_ref().is_some_and(|l| l.size == size) => {
                self.out.newest_headless = Some(size);
                self.headless_beyond_database(size, &source);
            }
            pending => {
                self.headless = pending;
                self.flush_headless();
            }
        }
        self.partial_tiles_up_to(u64::MAX);
        if let (Some(mut cosign), Some((policy, grace))) = (self.cosign.take(), self.input.witness) {
            if self.out.checkpoints_trusted == 0 && self.prev_cp.is_none() {
                cosign.findings.push(Finding::new(
                    Kind::Uncosigned,
                    None,
                    format!("no trusted checkpoint of origin {origin:?} to check witness cosignatures on"),
                ));
            } else {
                if cosign.newest_cosigned.is_none() {
                    cosign.newest_cosigned = self.input.since.and_then(|s| s.newest_cosigned);
                }
                judge_uncosigned(&mut cosign, &self.candidates, policy, grace, self.now);
            }
            self.out.cosign = Some(cosign);
        }
        Ok(self.out)
    }
}

/// Findings kept at most; the rest are counted (a store planted with a
/// million junk notes must not cost a million findings of memory).
pub const MAX_FINDINGS: usize = 10_000;

impl StreamAudit {
    /// The highest seq a trusted head or checkpoint of the pass vouches for
    /// (the largest checkpoint, or the newest head).
    pub fn highest_trusted_seq(&self) -> Option<u64> {
        let head = self.newest_published.as_ref().map(|(_, h)| h.seq);
        let checkpoint = self.largest.as_ref().map(|c| c.size);
        head.max(checkpoint)
    }

    /// Keeps a finding, up to [`MAX_FINDINGS`].
    fn note(&mut self, f: Finding) {
        if self.findings.len() < MAX_FINDINGS {
            self.findings.push(f);
        } else {
            self.more_findings += 1;
        }
    }

    /// What the pass saw that is not (yet) a finding: checkpoints waiting
    /// for witnesses, the newest checkpoint waiting for its head.
    pub fn store_warnings(&self) -> Vec<String> {
        let mut warnings: Vec<String> = self.cosign.iter().flat_map(|c| c.waiting.iter().cloned()).collect();
        if let Some(first) = self.partial_above.first() {
            warnings.push(format!(
                "partial tiles of a tree of size {first}{} are kept with no checkpoint of that size: a publication in flight, or the newest checkpoint deleted with its head (a verifier without memory cannot tell; one with a state file can)",
                match self.partial_above.len() {
                    1 => String::new(),
                    n => format!(" (and {} larger)", n - 1),
                }
            ));
        }
        warnings.extend(self.junk.warning(&format!("origin {}", self.origin)));
        if let Some(size) = self.newest_headless {
            warnings.push(format!(
                "the newest checkpoint ({size}) has no head yet: a publication in progress, or interrupted (the follower publishes the head when it starts again)"
            ));
        }
        warnings
    }

    /// Without a database: the highest trusted head below every finding, read again for its hash.
    pub async fn finish_no_db(
        &mut self,
        store: &AnchorStore,
        origin: &str,
        keys: &[VerifierKey],
    ) -> Result<(), StoreError> {
        let lowest = self
            .findings
            .iter()
            .filter(|f| f.kind.ends_trust())
            .filter_map(|f| f.seq)
            .min();
        let mut below: Vec<u64> = self
            .trusted_seqs
            .iter()
            .copied()
            .filter(|s| lowest.is_none_or(|l| *s < l))
            .collect();
        below.dedup();
        // The highest that can still be read: a head note, or for a
        // checkpoint without one, its last entry in the newest tree's bundle.
        for &seq in below.iter().rev().take(16) {
            if let Some((head, published)) = trusted_head_at(store, origin, keys, seq).await? {
                self.last_trusted = Some(head);
                self.last_trusted_published = published;
                return Ok(());
            }
            if let Some(head) = self.entry_head(store, origin, seq).await? {
                self.last_trusted = Some(head);
                self.last_trusted_published = None;
                return Ok(());
            }
        }
        Ok(())
    }
}

impl StreamAudit {
    /// The head at `seq` as the newest checkpoint's tree holds it: the
    /// entry in its bundle, when that hashes to the tree's leaf (the tile
    /// audit checked every bundle against the tiles the root is built from).
    async fn entry_head(&self, store: &AnchorStore, origin: &str, seq: u64) -> Result<Option<Head>, StoreError> {
        let (Some(newest), Some(index)) = (self.largest.as_ref(), seq.checked_sub(1)) else {
            return Ok(None);
        };
        if seq > newest.size {
            return Ok(None);
        }
        let tile = index / WIDTH as u64;
        let width = tile_width(newest.size, 0, tile);
        let (Some(bundle), Some(leaves)) = (
            store.get_object(origin, &entries_path(tile, width)).await?,
            store.get_object(origin, &tile_path(0, tile, width)).await?,
        ) else {
            return Ok(None);
        };
        let at = (index % WIDTH as u64) as usize;
        let entry = parse_bundle(&bundle).and_then(|e| e.get(at).map(|e| e.to_vec()));
        let leaf = leaves.get(at * 32..at * 32 + 32);
        Ok(match (entry, leaf) {
            (Some(entry), Some(leaf)) if leaf_hash(&entry)[..] == *leaf => Head::from_stored(seq, &entry),
            _ => None,
        })
    }
}

/// The head a trusted key signed at `seq`, read again from the store, with
/// when it was published (for a last trusted head known only by its seq).
pub async fn trusted_head_at(
    store: &AnchorStore,
    origin: &str,
    keys: &[VerifierKey],
    seq: u64,
) -> Result<Option<(Head, Option<SystemTime>)>, StoreError> {
    for key in store
        .note_keys(origin, seq)
        .await?
        .keys
        .into_iter()
        .take_while(|k| k.seq == seq)
    {
        if let Some(note) = store.get_note(origin, key).await?
            && let Some(t) = finding::check_alone(&note, origin, keys).trusted.pop()
        {
            return Ok(Some((t.signed.head, t.signed.published_time())));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chainship_anchor::note::SignedNote;
    use chainship_anchor::signed_head::SignedHead;
    use ed25519_dalek::SigningKey;

    /// Judged on every core, each note gets the verdict it gets alone, in the same order.
    #[test]
    fn prejudging_on_every_core_gives_each_note_its_own_verdict_in_order() {
        let origin = "test/agentrt";
        let (good, forger) = (SigningKey::from_bytes(&[3; 32]), SigningKey::from_bytes(&[4; 32]));
        let keys = [VerifierKey::new(origin, good.verifying_key())];
        let chunk: Vec<(NameKey, Option<StoredNote>)> = (1..=300u64)
            .map(|seq| {
                let head = SignedHead::new(origin, Head::new(seq, [b'a'; 64]), SystemTime::UNIX_EPOCH);
                let signer = if seq % 7 == 0 { &forger } else { &good };
                let mut bytes = SignedNote::sign(&head.text(), &[(origin, signer)])
                    .to_text()
                    .into_bytes();
                if seq % 11 == 0 {
                    bytes = b"not a note".to_vec();
                }
                let name = format!("store/{seq}");
                let key = NameKey { seq, beside: 0 };
                (
                    key,
                    (seq % 13 != 0).then_some(StoredNote {
                        name,
                        seq_in_name: Some(seq),
                        bytes,
                    }),
                )
            })
            .collect();
        let alone: Vec<String> = chunk
            .iter()
            .map(|(_, n)| match n {
                Some(n) => format!("{:?}", finding::check_alone(n, origin, &keys)),
                None => "nothing".into(),
            })
            .collect();
        let together: Vec<String> = prejudge(&chunk, None, origin, &keys)
            .into_iter()
            .map(|p| match p {
                Prejudged::Head(set) => format!("{set:?}"),
                _ => "nothing".into(),
            })
            .collect();
        assert_eq!(alone, together);
        assert!(
            alone
                .iter()
                .any(|v| v.contains("BadSignature") || v.contains("UntrustedKey"))
        );
    }

    /// A chunk of good notes, then the note at every position in turn
    /// spoiled: the batched judgement of the chunk must give each note the
    /// verdict it gets with its signatures checked alone, and name exactly
    /// the spoiled one (issue 52: batch and single judgements agree).
    #[test]
    fn one_bad_signature_at_every_position_of_a_batch_is_judged_as_alone() {
        let origin = "test/agentrt";
        let signer = SigningKey::from_bytes(&[3; 32]);
        let keys = [VerifierKey::new(origin, signer.verifying_key())];
        let checkpoint_text = |seq: u64| {
            chainship_anchor::checkpoint::Checkpoint {
                origin: origin.into(),
                size: seq,
                root: [seq as u8; 32],
            }
            .text()
        };
        let head_text = |seq: u64| SignedHead::new(origin, Head::new(seq, [b'a'; 64]), SystemTime::UNIX_EPOCH).text();
        for (dir, text) in [
            (None, &head_text as &dyn Fn(u64) -> String),
            (Some("checkpoints"), &checkpoint_text),
        ] {
            let notes: Vec<String> = (1..=140u64)
                .map(|seq| SignedNote::sign(&text(seq), &[(origin, &signer)]).to_text())
                .collect();
            for bad in 0..notes.len() {
                let chunk: Vec<(NameKey, Option<StoredNote>)> = notes
                    .iter()
                    .enumerate()
                    .map(|(i, note)| {
                        let seq = i as u64 + 1;
                        // The text edited under its signature: the forger's usual move.
                        let bytes = match i == bad {
                            true => note.replacen(&format!("{seq}\n"), &format!("{}\n", seq + 1000), 1),
                            false => note.clone(),
                        };
                        let stored = StoredNote {
                            name: format!("store/{seq}"),
                            seq_in_name: Some(seq),
                            bytes: bytes.into_bytes(),
                        };
                        (NameKey { seq, beside: 0 }, Some(stored))
                    })
                    .collect();
                let alone: Vec<String> = chunk
                    .iter()
                    .map(|(key, n)| {
                        let n = n.as_ref().expect("a note");
                        match dir {
                            None => format!("{:?}", finding::check_alone(n, origin, &keys)),
                            Some(_) => format!("{:?}", trusted_checkpoint(&n.bytes, &keys, origin, key.seq, &n.name)),
                        }
                    })
                    .collect();
                let together: Vec<String> = prejudge(&chunk, dir, origin, &keys)
                    .into_iter()
                    .map(|p| match p {
                        Prejudged::Head(set) => format!("{set:?}"),
                        Prejudged::Checkpoint(read) => format!("{read:?}"),
                        Prejudged::Nothing => "nothing".into(),
                    })
                    .collect();
                assert_eq!(alone, together, "{dir:?}, bad at {bad}");
                let refused: Vec<usize> = (0..together.len())
                    .filter(|i| together[*i].contains("BadSignature"))
                    .collect();
                assert_eq!(refused, vec![bad], "{dir:?}");
            }
        }
    }
}
