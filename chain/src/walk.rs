//! One walk over the database that checks the chain and, on the way, every
//! head kept elsewhere. `chainship verify` and `chainship anchor verify`
//! both use it; they differ only in where their heads come from.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use chainship_tlog::{CompactRange, Hash, leaf_hash};

use crate::check::{ChainBreak, ChainCheck, Damage};
use crate::db::{DbError, EventDb};
use crate::event::EventRef;
use crate::head::Head;
use crate::read_ahead::{ReadAhead, ReadPlan};

/// What to walk.
#[derive(Clone, Debug, Default)]
pub struct WalkPlan {
    /// First seq to check (1 = from the start). The event before it is
    /// trusted as stored.
    pub from: u64,
    /// Last seq to check; `None` = the head the database had when the walk began.
    pub to: Option<u64>,
    /// Heads to check on the way, any order.
    pub heads: Vec<Head>,
    /// Tree sizes (ascending) whose RFC 6962 root of the stored hashes the
    /// walk reports (checkpoints to compare); only for a walk from seq 1.
    pub roots_at: Vec<u64>,
    /// Walk at least to this seq, when the table reaches it (the highest
    /// kept head, checked after the walk by [`WalkReport::tree`]'s caller).
    pub reach: Option<u64>,
    /// Keep the tree's groups ([`WalkReport::tree`]) for roots asked later;
    /// only for a walk from seq 1.
    pub tree: bool,
    /// Threads checking seq segments at once; 0 = the cores available.
    pub jobs: usize,
    /// The fewest events worth a segment of their own; 0 = 16,384 (below
    /// that a thread costs more than it saves). Tests set it low.
    pub segment_events: u64,
    /// Rows whose payload may no longer hash, where a trusted redaction
    /// statement names their seq, hash and other fields.
    pub redactions: Option<std::sync::Arc<crate::redaction::Redactions>>,
}

/// How one kept head compares with the database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeadCheck {
    /// The walk reached the head's seq with no break, and the hash matches.
    Matched,
    /// The event at the head's seq has another hash (a fork or a rewrite).
    Differs { found: String },
    /// The chain broke before the walk reached this head.
    AfterBreak,
    /// The database ends before the head's seq (cut, or restored from an older copy).
    Beyond { db_end: Option<u64> },
    /// The head is below the walked range (`--from`) and was checked by lookup.
    BeforeRange { matched: bool },
}

/// The outcome of a walk.
#[derive(Clone, Debug)]
pub struct WalkReport {
    /// The database's head when the walk began.
    pub db_head: Option<(u64, String)>,
    /// The highest row's seq is not an integer, so there is no head to show.
    pub db_head_unreadable: bool,
    /// How many events were checked.
    pub checked: u64,
    pub first_seq: Option<u64>,
    /// The last event that checked out.
    pub last_good: Option<Head>,
    pub chain_break: Option<ChainBreak>,
    /// A row that cannot be an event (a field not text, a seq not an
    /// integer): the walk stops there, as at a break.
    pub damage: Option<Damage>,
    /// A row whose seq no walk from seq 1 reaches (`NULL`, `0`, `-5`),
    /// described; looked for only when the walk starts at seq 1.
    pub unreachable_seq: Option<String>,
    /// The seq the walk was asked to reach (`--to`), when it did not.
    pub to_not_reached: Option<u64>,
    /// The database's head when the walk began, when a walk to it (no
    /// `--to`) ended below it with no break: rows the table's order does not
    /// reach (a damaged b-tree), never an intact chain.
    pub head_not_reached: Option<u64>,
    /// Every head asked about, sorted by seq, with its result.
    pub heads: Vec<(Head, HeadCheck)>,
    /// The root of the first N stored hashes, for each `roots_at` size the
    /// walk reached with the chain intact.
    pub roots: Vec<(u64, chainship_tlog::Hash)>,
    /// With [`WalkPlan::tree`]: the tree of the stored hashes up to the
    /// last good event, for roots at any size.
    pub tree: Option<TreeGroups>,
    /// The seqs accepted as redacted ([`WalkPlan::redactions`]), ascending.
    pub redacted: Vec<u64>,
}

/// The tree of the stored hashes a walk checked, kept as the roots of its
/// whole 256-entry groups (32 bytes per 256 events): the root at any size
/// up to the last good event costs those and a few rows read back.
#[derive(Clone, Debug, Default)]
pub struct TreeGroups {
    groups: Vec<Hash>,
    end: u64,
}

impl TreeGroups {
    /// The last entry the tree holds (the last good event's seq).
    pub fn end(&self) -> u64 {
        self.end
    }

    /// The RFC 6962 root of the first `size` stored hashes of `db` (the
    /// database walked); `None` past [`TreeGroups::end`].
    pub fn root_at(&self, db: &EventDb, size: u64) -> Result<Option<Hash>, DbError> {
        Ok(roots_at(db, &[size], self.end, &self.groups)?
            .pop()
            .map(|(_, root)| root))
    }
}

impl WalkReport {
    /// The verdict of a walk: intact, and something was checked. A walk
    /// over no event vouches for nothing (an empty table, a range past the
    /// head), so it never passes.
    pub fn passed(&self) -> bool {
        self.ok() && self.checked > 0
    }

    /// True when the chain is intact over the range and every head matched.
    pub fn ok(&self) -> bool {
        self.chain_break.is_none()
            && self.damage.is_none()
            && self.unreachable_seq.is_none()
            && self.to_not_reached.is_none()
            && self.head_not_reached.is_none()
            && self
                .heads
                .iter()
                .all(|(_, c)| matches!(c, HeadCheck::Matched | HeadCheck::BeforeRange { matched: true }))
    }

    /// The highest kept head that the database still matches.
    pub fn last_trusted_head(&self) -> Option<Head> {
        self.heads
            .iter()
            .filter(|(_, c)| matches!(c, HeadCheck::Matched | HeadCheck::BeforeRange { matched: true }))
            .map(|(h, _)| *h)
            .max_by_key(|h| h.seq)
    }
}

/// Walks `db` as `plan` says. `progress` is called now and then with the
/// number of events checked so far.
///
/// An event's check needs only its own fields and the stored hash and seq
/// of the row before it, so the range is cut into seq segments checked at
/// once, by `plan.jobs` threads each with its own read-only connection; the
/// segment that breaks lowest decides the report, which is the one a single
/// walk gives.
pub fn walk_chain(db: EventDb, plan: &WalkPlan, progress: &mut dyn FnMut(u64)) -> Result<WalkReport, DbError> {
    let mut from = plan.from.max(1);
    let row_before = |from: u64| {
        if from > 1 {
            db.last_row_in(1, from - 1)
        } else {
            Ok(None)
        }
    };
    // The event before `from` is trusted as stored (the last row below it:
    // one missing leaves a gap its successor shows), but only where it can
    // be: a single row whose hash is a hash. Otherwise the walk starts at
    // that row and names what is wrong there as a walk from seq 1 would (a
    // field not text is damage, a stored hash not 64 lower-case hex never
    // checks out, a second row of a seq is a break), whatever it links to.
    let mut before = row_before(from)?;
    if let Some((seq, hash)) = &before
        && (!crate::hash::is_hex_hash(hash) || db.rows_at(*seq)? > 1)
    {
        from = *seq;
        before = row_before(from)?;
    }
    let start = before
        .map_or_else(ChainCheck::from_start, |(seq, hash)| ChainCheck::resume(seq, &hash))
        .with_redactions(plan.redactions.clone());
    // A walk by `seq > after` never sees rows with seq NULL, 0 or below.
    let unreachable_seq = if from == 1 { db.first_unreachable_seq()? } else { None };
    let (db_head, head_readable) = match db.head() {
        Ok(head) => (
            head.filter(|(seq, _)| *seq > 0)
                .map(|(seq, hash)| (seq, String::from_utf8_lossy(&hash).into_owned())),
            true,
        ),
        // The highest row's seq is not an integer (text and blobs sort above
        // every number): walk to the end, where the reader names the row.
        Err(DbError::Read {
            source: rusqlite::Error::InvalidColumnType(..) | rusqlite::Error::FromSqlConversionFailure(..),
            ..
        }) => (None, false),
        Err(e) => return Err(e),
    };
    let through = plan.to.or(db_head.as_ref().map(|(s, _)| *s));
    let through = if head_readable {
        Some(through.unwrap_or(0))
    } else {
        through
    };

    let mut heads: Vec<(Head, HeadCheck)> = Vec::with_capacity(plan.heads.len());
    let mut pending: Vec<Head> = Vec::new();
    for head in sorted(&plan.heads) {
        if head.seq < from {
            let matched = db.hash_at(head.seq)?.is_some_and(|h| h == head.hash);
            heads.push((head, HeadCheck::BeforeRange { matched }));
        } else {
            pending.push(head);
        }
    }
    // The walk must reach the highest head even past `through`, but never
    // past the highest seq SQLite can hold (a kept name can say anything).
    let through = through.map(|t| t.max(pending.last().map_or(0, |h| h.seq)).min(MAX_SEQ));
    let through = through.map(|t| t.max(plan.reach.unwrap_or(0)).min(MAX_SEQ));
    let want_roots = from == 1 && (plan.tree || !plan.roots_at.is_empty());
    let segments = segments(from - 1, through, plan, want_roots);

    let last = segments.len() - 1;
    let threads = jobs(plan).min(segments.len());
    let segment_heads: Vec<Vec<Head>> = segments
        .iter()
        .enumerate()
        .map(|(i, range)| {
            let inside = |h: &&Head| h.seq > range.after && (i == last || range.through.is_none_or(|t| h.seq <= t));
            pending.iter().filter(inside).copied().collect()
        })
        .collect();
    let checked = AtomicU64::new(0);
    // Segments are taken in seq order by whichever thread is free, so a
    // thread whose segments check slower (larger events) holds up no other.
    let next_segment = AtomicUsize::new(0);
    // Each thread drops its sender when it ends (also by panic): the wait
    // below wakes then, not at its next progress tick.
    let (ended_tx, ended) = std::sync::mpsc::channel::<()>();
    let mut outcomes: Vec<(usize, Result<Segment, DbError>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let (segments, segment_heads) = (&segments, &segment_heads);
                let (path, options) = (db.path().to_owned(), db.options().clone());
                let (start, checked, next_segment) = (&start, &checked, &next_segment);
                let single = last == 0;
                let ended_tx = ended_tx.clone();
                std::thread::Builder::new()
                    .name(format!("chain-walk-{i}"))
                    .spawn_scoped(scope, move || {
                        let _ended = ended_tx;
                        let mut done = Vec::new();
                        let mut db = None;
                        loop {
                            let k = next_segment.fetch_add(1, Ordering::Relaxed);
                            let Some(range) = segments.get(k) else { break };
                            let db = match &mut db {
                                Some(db) => db,
                                None => match EventDb::open(&path, &options) {
                                    Ok(opened) => db.insert(opened),
                                    Err(e) => {
                                        done.push((k, Err(e)));
                                        continue;
                                    }
                                },
                            };
                            let heads = segment_heads[k].clone();
                            let segment = walk_segment(db, *range, from, start, heads, want_roots, single, checked);
                            done.push((k, segment));
                        }
                        done
                    })
                    .expect("spawning a walk thread")
            })
            .collect();
        drop(ended_tx);
        loop {
            progress(checked.load(Ordering::Relaxed));
            // Disconnected: every thread has ended.
            if let Err(std::sync::mpsc::RecvTimeoutError::Disconnected) = ended.recv_timeout(Duration::from_millis(50))
            {
                break;
            }
        }
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    outcomes.sort_by_key(|(k, _)| *k);
    let outcomes = outcomes.into_iter().map(|(_, outcome)| outcome);

    // Segments in seq order: the first that stops (a break, damage) decides;
    // what lies above it is past the break, as for a single walk.
    let mut report = WalkReport {
        db_head,
        db_head_unreadable: !head_readable,
        checked: 0,
        first_seq: None,
        last_good: start.last_good(),
        chain_break: None,
        damage: None,
        unreachable_seq,
        to_not_reached: None,
        head_not_reached: None,
        heads,
        roots: Vec::new(),
        tree: None,
        redacted: Vec::new(),
    };
    let mut groups = Vec::new();
    let mut last_seen = None;
    let mut unreached: Vec<Head> = Vec::new();
    let mut stopped = false;
    for (outcome, heads_above) in outcomes.zip(segment_heads) {
        if stopped {
            // Above the break: its heads are past it, whatever was found there.
            unreached.extend(heads_above);
            continue;
        }
        let segment = outcome?;
        report.checked += segment.checked;
        report.first_seq = report.first_seq.or(segment.first_seq);
        last_seen = segment.last_seen.or(last_seen);
        report.last_good = segment.last_good;
        report.heads.extend(segment.heads);
        report.redacted.extend(segment.redacted);
        unreached.extend(segment.unreached);
        groups.extend(segment.groups);
        if segment.chain_break.is_some() || segment.damage.is_some() {
            report.chain_break = segment.chain_break;
            report.damage = segment.damage;
            stopped = true;
        } else if let Some(e) = segment.start_error {
            // Its first row could not be read, and no lower segment broke
            // there first: a real read error.
            return Err(e);
        }
    }
    progress(report.checked);
    for head in unreached {
        let result = if stopped {
            HeadCheck::AfterBreak
        } else {
            HeadCheck::Beyond {
                db_end: last_seen.or(from.checked_sub(1).filter(|s| *s > 0)),
            }
        };
        report.heads.push((head, result));
    }
    report.heads.sort_by_key(|(h, _)| h.seq);
    report.to_not_reached = plan.to.filter(|to| !stopped && last_seen.is_none_or(|s| s < *to));
    report.head_not_reached = report
        .db_head
        .as_ref()
        .map(|(seq, _)| *seq)
        .filter(|head| plan.to.is_none() && !stopped && *head >= from && last_seen.is_none_or(|s| s < *head));
    if want_roots {
        let end = report.last_good.map_or(0, |h| h.seq);
        report.roots = roots_at(&db, &plan.roots_at, end, &groups)?;
        if plan.tree {
            report.tree = Some(TreeGroups { groups, end });
        }
    }
    Ok(report)
}

/// The highest seq a row can hold (SQLite's integers are signed 64-bit).
const MAX_SEQ: u64 = i64::MAX as u64;

/// Entries per tree group a segment hashes on its own (a tile's width):
/// segments start on a group boundary when roots are asked for, so the
/// groups of all segments, in order, are the tree's level-8 nodes.
const GROUP_HEIGHT: u32 = 8;
const GROUP: u64 = 1 << GROUP_HEIGHT;
const PAGE_EVENTS: usize = 8192;

/// One seq range of a walk: the events with seq in `(after, through]`.
#[derive(Clone, Copy, Debug)]
struct SegmentRange {
    after: u64,
    /// `None`: to the end of the table (its head was unreadable).
    through: Option<u64>,
}

/// What one segment's walk found.
#[derive(Default)]
struct Segment {
    checked: u64,
    first_seq: Option<u64>,
    last_seen: Option<u64>,
    last_good: Option<Head>,
    chain_break: Option<ChainBreak>,
    damage: Option<Damage>,
    /// The row a segment starts after could not be read; a lower segment
    /// reading the same row names it, or it is a read error.
    start_error: Option<DbError>,
    /// Heads the walk reached, with their result.
    heads: Vec<(Head, HeadCheck)>,
    /// Heads at seqs the walk did not reach (past a break or the end).
    unreached: Vec<Head>,
    /// The root of each whole group of entries the segment checked.
    groups: Vec<Hash>,
    /// Seqs accepted as redacted.
    redacted: Vec<u64>,
}

/// Segments per thread: enough that threads finishing at different times
/// wait little for the last (events differ in size, cores in speed). With 8
/// of at least 65,536 events, a 1M-event walk on 2 cores waited ~30 ms (a
/// tenth of it) for the last segment; 32 of at least 16,384 cut that to a
/// few (each segment costs one seek).
const SEGMENTS_PER_JOB: u64 = 32;

/// The threads a walk uses.
fn jobs(plan: &WalkPlan) -> usize {
    match plan.jobs {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// Cuts `(after, through]` into segments: one for a single thread (which
/// then reads ahead on a second), else up to [`SEGMENTS_PER_JOB`] per
/// thread, none smaller than `plan.segment_events`.
fn segments(after: u64, through: Option<u64>, plan: &WalkPlan, align_to_groups: bool) -> Vec<SegmentRange> {
    let Some(through) = through.filter(|t| *t > after) else {
        return vec![SegmentRange { after, through }];
    };
    let jobs = jobs(plan) as u64;
    let least = match plan.segment_events {
        0 => 16_384,
        n => n,
    };
    let total = through - after;
    let most = if jobs == 1 {
        1
    } else {
        jobs.saturating_mul(SEGMENTS_PER_JOB)
    };
    let count = (total / least).clamp(1, most);
    let align = if align_to_groups { GROUP } else { 1 };
    // Saturating: a kept name near u64::MAX must not wrap the range to nothing.
    let len = total.div_ceil(count).div_ceil(align).saturating_mul(align);
    (0..count)
        .map(|k| after.saturating_add(k.saturating_mul(len)))
        .filter(|start| *start < through)
        .map(|start| SegmentRange {
            after: start,
            through: Some(start.saturating_add(len).min(through)),
        })
        .collect()
}

/// Walks one segment. `first_start` is where the whole walk starts; a
/// later segment starts after the last row at or below its `after`, just
/// as a single walk would reach it.
#[allow(clippy::too_many_arguments)]
fn walk_segment(
    db: &EventDb,
    range: SegmentRange,
    from: u64,
    first_start: &ChainCheck,
    heads: Vec<Head>,
    want_groups: bool,
    read_ahead: bool,
    checked: &AtomicU64,
) -> Result<Segment, DbError> {
    let mut out = Segment::default();
    // Where this segment starts: after the last row below it, or where the
    // whole walk starts.
    let resumed = if range.after + 1 == from {
        None
    } else {
        match db.last_row_in(from, range.after) {
            Ok(found) => found
                .map(|(seq, hash)| ChainCheck::resume(seq, &hash).with_redactions(first_start.redactions().cloned())),
            Err(e) => {
                out.start_error = Some(e);
                out.unreached = heads;
                return Ok(out);
            }
        }
    };
    let check = resumed.unwrap_or_else(|| first_start.clone());
    let mut walker = SegmentWalker {
        check,
        heads: heads.iter().peekable(),
        group: want_groups.then(CompactRange::default),
        out,
    };
    let mut reported = 0;
    let mut report = |walker: &SegmentWalker<'_>| {
        let now = walker.check.checked();
        checked.fetch_add(now - reported, Ordering::Relaxed);
        reported = now;
    };
    let error = if read_ahead {
        // The only segment: a second thread reads ahead, so reading and hashing overlap.
        let reader = ReadAhead::spawn(
            EventDb::open(db.path(), db.options())?,
            ReadPlan::new(range.after, range.through),
        );
        let mut error = None;
        'pages: while let Some(page) = reader.next_page() {
            let page = match page {
                Ok(page) => page,
                Err(e) => {
                    error = Some(e);
                    break;
                }
            };
            for event in page.iter() {
                if !walker.step(&event) {
                    break 'pages;
                }
            }
            report(&walker);
            reader.give_back(page);
        }
        error
    } else {
        // One of several: rows are checked straight from SQLite's, on this thread.
        let mut after = range.after;
        loop {
            let mut going = true;
            let visited = db.visit_rows(after, PAGE_EVENTS, &mut |event| {
                if range.through.is_some_and(|t| event.seq > t) || !walker.step(event) {
                    going = false;
                } else {
                    after = event.seq;
                }
                going
            });
            report(&walker);
            match visited {
                Err(e) => break Some(e),
                Ok(n) if n < PAGE_EVENTS || !going => break None,
                Ok(_) => {}
            }
        }
    };
    report(&walker);
    let mut out = walker.finish();
    if let Some(e) = error {
        // Rows read before the damaged one were checked already.
        out.damage = damage_in_range(e, range.through, out.last_good)?;
    }
    Ok(out)
}

/// One segment's walk, an event at a time.
struct SegmentWalker<'h> {
    check: ChainCheck,
    heads: std::iter::Peekable<std::slice::Iter<'h, Head>>,
    /// The group being hashed, when roots are asked for.
    group: Option<CompactRange>,
    out: Segment,
}

impl SegmentWalker<'_> {
    /// Checks the next event; false once the chain breaks there.
    fn step(&mut self, event: &EventRef<'_>) -> bool {
        let out = &mut self.out;
        out.first_seq.get_or_insert(event.seq);
        out.last_seen = Some(event.seq);
        if let Err(b) = self.check.check(event) {
            out.chain_break = Some(*b);
            return false;
        }
        if let Some(group) = self.group.as_mut() {
            group.push_leaf(leaf_hash(event.hash));
            if group.size() == GROUP {
                out.groups.push(group.root());
                *group = CompactRange::default();
            }
        }
        while let Some(head) = self.heads.next_if(|h| h.seq == event.seq) {
            let result = if head.hash[..] == *event.hash {
                HeadCheck::Matched
            } else {
                HeadCheck::Differs {
                    found: String::from_utf8_lossy(event.hash).into_owned(),
                }
            };
            out.heads.push((*head, result));
        }
        true
    }

    fn finish(self) -> Segment {
        let mut out = self.out;
        out.checked = self.check.checked();
        out.last_good = self.check.last_good();
        out.redacted = self.check.redacted().to_vec();
        out.unreached = self.heads.copied().collect();
        out
    }
}

/// The RFC 6962 root of the first `size` stored hashes for each of `sizes`
/// up to `end` (the last event that checked out): the segments' groups as
/// level-8 subtrees, then the few entries after the last whole group.
fn roots_at(db: &EventDb, sizes: &[u64], end: u64, groups: &[Hash]) -> Result<Vec<(u64, Hash)>, DbError> {
    let mut sizes = sizes.to_vec();
    sizes.sort_unstable();
    let mut tree = CompactRange::default();
    let mut used = 0;
    let mut roots = Vec::new();
    for size in sizes.into_iter().filter(|s| (1..=end).contains(s)) {
        let whole = ((size / GROUP) as usize).min(groups.len());
        while used < whole {
            tree.push_subtree(GROUP_HEIGHT, groups[used]);
            used += 1;
        }
        let mut edge = tree.clone();
        for hash in db.hashes_between(edge.size(), size)? {
            edge.push_leaf(leaf_hash(&hash));
        }
        if edge.size() == size {
            roots.push((size, edge.root()));
        }
    }
    Ok(roots)
}

/// A damaged row as a finding, when it lies in the walked range; any other
/// error stays an error. A damaged row past `through` (read in the same page
/// as the range's last events) is outside the walk and ends it quietly.
fn damage_in_range(e: DbError, through: Option<u64>, last_good: Option<Head>) -> Result<Option<Damage>, DbError> {
    let damage = match e {
        DbError::BadField { seq, column, found, .. } => Damage {
            seq: Some(seq),
            column,
            found: found.to_owned(),
            after: seq.saturating_sub(1),
            last_good,
        },
        DbError::BadSeq {
            column, found, after, ..
        } => Damage {
            seq: None,
            column,
            found,
            after,
            last_good,
        },
        e => return Err(e),
    };
    Ok(through.is_none_or(|t| damage.position() <= t).then_some(damage))
}

fn sorted(heads: &[Head]) -> Vec<Head> {
    let mut heads = heads.to_vec();
    heads.sort_by_key(|h| h.seq);
    heads
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept name near u64::MAX (anyone can plant one) stretches the walk's
    /// range: its segments must still cover it, never wrap to nothing.
    #[test]
    fn segments_near_the_top_of_the_seq_range_still_cover_it() {
        for jobs in [1, 2, 5] {
            let plan = WalkPlan {
                jobs,
                ..WalkPlan::default()
            };
            for align in [false, true] {
                let through = u64::MAX - 3;
                let segs = segments(0, Some(through), &plan, align);
                assert_eq!(segs.first().map(|s| s.after), Some(0), "jobs {jobs}");
                assert_eq!(segs.last().and_then(|s| s.through), Some(through), "jobs {jobs}");
                for w in segs.windows(2) {
                    assert_eq!(w[0].through, Some(w[1].after), "jobs {jobs}: {segs:?}");
                }
            }
        }
    }
}
