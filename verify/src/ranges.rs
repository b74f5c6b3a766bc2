//! The exact invalid ranges past a first break or fork, for a database and
//! for a copy alike: the rows from the last trusted head below it are read
//! again in seq order and fed to one [`RangeWalk`], which tells the
//! [`RangeClassifier`] whether each row links to the row before it and
//! whether a kept head, or a leaf of the newest trusted checkpoint's tree,
//! vouches for its stored hash or contradicts it. One altered event is
//! then that event, not everything after it; a rewrite starts where its
//! first row does.
//!
//! A row links when its fields give its stored hash after the previous
//! row's stored hash, or after the hash the previous row's own fields give:
//! a row whose stored hash alone was changed is that row, and the next one
//! (whose hash commits to the unchanged fields) is intact.
//!
//! Leaves count only from a checkpoint whose level-0 tiles the store pass
//! showed give its signed root (so a tile planted to vouch for a rewritten
//! row would have been named `tiles-disagree` first).

use chainship_chain::event::EventRef;
use chainship_chain::record::Record;
use chainship_chain::{EventDb, HexHash, InvalidRange, RangeClassifier, RangeKind, Vouch};
use chainship_tlog::leaf_hash;
use chainship_tlog::merkle::Hash;
use chainship_tlog::tiles::{WIDTH, entries_path, parse_bundle, tile_path, tile_width};

use chainship_anchor::checkpoint::Checkpoint;
use chainship_anchor::store::{AnchorStore, StoreError};

/// Ranges named at most; past them the rest is one open-ended range.
pub const MAX_RANGES: usize = 1000;

/// One row of a chain as the walk reads it: a database row or a copy's record.
pub trait ChainRow {
    fn seq(&self) -> u64;
    /// The stored hash (the `hash` column, a record's `hash` field).
    fn stored(&self) -> &[u8];
    /// The hash the row's fields give after `prev`.
    fn hash_after(&self, prev: &[u8]) -> HexHash;
    /// What the row says its predecessor's hash is, when it says (a copy's
    /// record does): it must be the one it links to.
    fn prev_field(&self) -> Option<&[u8]> {
        None
    }
}

impl ChainRow for EventRef<'_> {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn stored(&self) -> &[u8] {
        self.hash
    }
    fn hash_after(&self, prev: &[u8]) -> HexHash {
        self.expected_hash(prev)
    }
}

impl ChainRow for Record<'_> {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn stored(&self) -> &[u8] {
        self.hash.as_bytes()
    }
    fn hash_after(&self, prev: &[u8]) -> HexHash {
        Record::hash_after(self, prev)
    }
    fn prev_field(&self) -> Option<&[u8]> {
        Some(self.prev_hash.as_bytes())
    }
}

/// What vouches for rows past the walk's start.
#[derive(Clone, Debug, Default)]
pub struct Anchors {
    /// The seqs of the kept heads (and matched checkpoints) the rows match, ascending.
    pub heads: Vec<u64>,
    /// The seqs of the kept heads that hold another hash than the rows, ascending.
    pub contradicted: Vec<u64>,
}

/// The walk over rows in seq order (see the module doc). Rows must come
/// in ascending seq, each once; a seq not fed is missing.
pub struct RangeWalk {
    classifier: RangeClassifier,
    /// The previous row: its seq, stored hash and the hash its fields give.
    prev: (u64, Vec<u8>, Option<HexHash>),
    /// Whether an anchor vouched for the previous row's stored hash.
    prev_anchored: bool,
    /// Whether the previous row could not be checked at all (its stored
    /// hash is no evidence for the row after it either).
    prev_unchecked: bool,
    anchors: Anchors,
    next_head: usize,
    next_contradicted: usize,
    last: u64,
}

impl RangeWalk {
    /// A walk that starts after row `after` (trusted: a kept head the rows
    /// matched, or seq 0 before the first row), whose stored hash is `after_hash`.
    pub fn new(after: u64, after_hash: Vec<u8>, mut anchors: Anchors) -> Self {
        anchors.heads.sort_unstable();
        anchors.contradicted.sort_unstable();
        RangeWalk {
            classifier: RangeClassifier::after(after),
            prev: (after, after_hash, None),
            prev_anchored: true,
            prev_unchecked: false,
            anchors,
            next_head: 0,
            next_contradicted: 0,
            last: after,
        }
    }

    /// Row `row`, with the newest trusted checkpoint's leaf at its seq if
    /// there is one. False once the ranges are too many to go on.
    pub fn row(&mut self, row: &dyn ChainRow, leaf: Option<&Hash>) -> bool {
        self.row_known(row, leaf, false, None)
    }

    /// [`RangeWalk::row`] for a row already known to be altered (a SIEM
    /// record whose searchable fields disagree with the record it carries),
    /// and with the hash the log vouches for at the seq before it
    /// (`vouched_prev`: the checkpoint's entry there, when its tiles are at
    /// hand). A database row names no predecessor, so past missing or
    /// invalid rows only that entry shows its fields are the ones hashed,
    /// as a copy's record shows it with the predecessor it names.
    pub fn row_known(
        &mut self,
        row: &dyn ChainRow,
        leaf: Option<&Hash>,
        altered: bool,
        vouched_prev: Option<&[u8]>,
    ) -> bool {
        let seq = row.seq();
        if seq <= self.last {
            // A database's second row at a seq is altered; a copy's duplicate
            // or late record has its own finding.
            if row.prev_field().is_none() && seq == self.last {
                self.classifier.second_row(seq);
            }
            return true;
        }
        let content = row.hash_after(&self.prev.1);
        let stored = row.stored();
        let follows = self.prev.0.checked_add(1) == Some(seq) && !altered;
        let after_stored = content[..] == *stored;
        let after_content = self
            .prev
            .2
            .filter(|c| c[..] != self.prev.1[..])
            .map(|c| (c, row.hash_after(&c)))
            .filter(|(_, h)| h[..] == *stored);
        let says = row.prev_field();
        let by_stored = after_stored && says.is_none_or(|p| p == self.prev.1.as_slice());
        let linked =
            follows && (by_stored || after_content.is_some_and(|(c, _)| says.is_none_or(|p| p == c.as_slice())));
        let by_head = self.take(seq, true);
        let against_head = self.take(seq, false);
        let vouch = match leaf.map(|l| *l == leaf_hash(stored)) {
            // Another head at the seq may be a forgery beside the true one.
            _ if by_head => Vouch::Anchor,
            Some(true) => Vouch::Anchor,
            Some(false) => Vouch::Contradicted,
            None if against_head => Vouch::Contradicted,
            None => Vouch::Nothing,
        };
        // What the row's own fields give, after its own predecessor as it
        // says, or as the log's entry before it says.
        let after_vouched = vouched_prev
            .filter(|_| says.is_none())
            .map(|p| row.hash_after(p))
            .filter(|h| h[..] == *stored);
        let own = match (says, after_vouched) {
            (Some(p), _) => row.hash_after(p),
            (None, Some(h)) => h,
            (None, None) => content,
        };
        // The predecessor is already named invalid (altered or rewritten up to it).
        let prev_named =
            self.prev_unchecked
                || self.classifier.ranges().last().is_some_and(|r| {
                    r.to == self.prev.0 && matches!(r.kind, RangeKind::Altered | RangeKind::Rewritten)
                });
        let gap = self.prev.0.checked_add(1).is_some_and(|next| seq > next);
        let shows_own = says.is_some() || after_stored || after_vouched.is_some();
        // Linked only through what the predecessor's fields give (its stored
        // hash alone was changed): not a rewrite of what follows.
        let past_changed_hash = linked && !by_stored && prev_named;
        // A database row past missing rows, or past a row whose stored hash
        // nothing vouches for, with no entry of the log to check it against:
        // its fields cannot be checked at all.
        let cannot_check = !linked
            && !altered
            && says.is_none()
            && vouched_prev.is_none()
            && vouch != Vouch::Contradicted
            && (gap || (prev_named && !self.prev_anchored));
        if past_changed_hash {
            self.classifier.resume(seq, vouch);
        } else if !linked && (gap || prev_named) && shows_own && !altered && own[..] == *stored {
            // Past missing rows, or after a predecessor named invalid, a
            // record that names its predecessor still shows its own fields
            // give its hash: it starts a stretch an anchor must vouch for.
            // So does a row past missing ones whose fields give its hash
            // after the row before them (it was written over that one), or
            // after the log's entry before it.
            // After a valid predecessor it is the break: altered, below.
            self.classifier.resume(seq, vouch);
        } else if cannot_check {
            self.classifier.unchecked(seq, vouch);
        } else {
            self.classifier.row(seq, linked, vouch);
        }
        self.prev_unchecked = cannot_check && !past_changed_hash;
        self.prev = (seq, stored.to_vec(), Some(own));
        self.prev_anchored = vouch == Vouch::Anchor;
        self.last = seq;
        self.classifier.ranges().len() <= MAX_RANGES
    }

    /// Whether the next head (or contradicted head) is at `seq`, passing those below it.
    fn take(&mut self, seq: u64, matched: bool) -> bool {
        let (list, at) = match matched {
            true => (&self.anchors.heads, &mut self.next_head),
            false => (&self.anchors.contradicted, &mut self.next_contradicted),
        };
        while list.get(*at).is_some_and(|s| *s < seq) {
            *at += 1;
        }
        let here = list.get(*at) == Some(&seq);
        if here {
            *at += 1;
        }
        here
    }

    /// The ranges, once the rows were fed (or the walk stopped at
    /// [`MAX_RANGES`]: the rest, through `through`, is one open-ended range),
    /// and the last row an anchor (a head or a checkpoint's leaf) vouched for.
    pub fn finish(self, through: u64) -> Walked {
        let anchored_through = self.classifier.anchored_through();
        let mut ranges = self.classifier.finish();
        if ranges.len() > MAX_RANGES {
            // The rest, unclassified: open from the first range not named.
            let from = ranges[MAX_RANGES].from;
            ranges.truncate(MAX_RANGES);
            ranges.push(InvalidRange {
                kind: RangeKind::Unvouched,
                from,
                to: through,
                anchored_by: None,
                open: true,
            });
        }
        Walked {
            ranges,
            anchored_through,
        }
    }
}

/// What a walk found: the exact ranges, and the last row an anchor vouched
/// for at its end (the unvouched tail starts after it).
#[derive(Clone, Debug, Default)]
pub struct Walked {
    pub ranges: Vec<InvalidRange>,
    pub anchored_through: Option<u64>,
}

/// What to classify in a database.
pub struct RangeInput<'a> {
    pub db: &'a EventDb,
    pub store: &'a AnchorStore,
    pub origin: &'a str,
    /// Start after this seq: the last kept head the database matched below
    /// the break (0: none).
    pub after: u64,
    /// The last seq to read (the database's head).
    pub through: u64,
    pub anchors: Anchors,
    /// The newest trusted checkpoint whose level-0 tiles give its root.
    pub leaves: Option<&'a Checkpoint>,
}

/// The database's invalid ranges from `after` on, read a tile at a time.
pub async fn exact_ranges(input: RangeInput<'_>) -> Result<Walked, StoreError> {
    let db_error = |e: chainship_chain::DbError| StoreError::permanent(e.to_string());
    let after_hash = match input.after {
        0 => Vec::new(),
        after => input.db.hash_at(after).map_err(db_error)?.unwrap_or_default(),
    };
    let mut walk = RangeWalk::new(input.after, after_hash, input.anchors);
    let mut pos = input.after;
    let mut going = true;
    // The entries of the tile before the current one, by its index.
    let mut before: Option<(u64, Option<Entries>)> = None;
    while going && pos < input.through {
        let index = pos / WIDTH as u64;
        let chunk_end = (index.saturating_add(1).saturating_mul(WIDTH as u64)).min(input.through);
        let (tile, entries, entries_before) = match input.leaves {
            Some(cp) => {
                let tile = level0_tile(input.store, input.origin, cp, index).await?;
                let entries = match &tile {
                    Some(t) => level0_entries(input.store, input.origin, cp, index, t).await?,
                    None => None,
                };
                let entries_before = match (index.checked_sub(1), before.take()) {
                    (Some(i), Some((at, kept))) if at == i => kept,
                    (Some(i), _) => match level0_tile(input.store, input.origin, cp, i).await? {
                        Some(t) => level0_entries(input.store, input.origin, cp, i, &t).await?,
                        None => None,
                    },
                    (None, _) => None,
                };
                (tile, entries, entries_before)
            }
            None => (None, None, None),
        };
        // The log's entry at `seq`, if it is in this tile or the one before.
        let entry_at = |seq: u64| -> Option<&[u8]> {
            let i = seq.checked_sub(1)?;
            let list = match i / WIDTH as u64 {
                t if t == index => entries.as_ref(),
                t if t + 1 == index => entries_before.as_ref(),
                _ => None,
            };
            list.and_then(|l| l.get(i as usize % WIDTH)?.as_deref())
        };
        let mut seen = false;
        input
            .db
            .scan(pos, chunk_end, &mut |e| {
                seen = true;
                going = walk.row_known(e, leaf(tile.as_deref(), e.seq), false, entry_at(e.seq - 1));
                going
            })
            .map_err(db_error)?;
        before = Some((index, entries));
        pos = chunk_end;
        if !seen && going {
            // No row in this tile's span: go on at the tile of the next row,
            // so a gap of any width costs one read, not one per tile.
            let mut next = None;
            input
                .db
                .scan(pos, input.through, &mut |e| {
                    next = Some(e.seq);
                    false
                })
                .map_err(db_error)?;
            match next {
                Some(seq) => pos = pos.max((seq - 1) / WIDTH as u64 * WIDTH as u64),
                None => break,
            }
        }
    }
    Ok(walk.finish(input.through))
}

/// The rule where only a checkpoint's root says the chain changed: a trusted
/// checkpoint of `size` whose root the chain's stored hashes do not give,
/// with no range at or below it, no anchor (`highest_anchor`, the highest
/// the walk had) at or after it that vouches for
/// the rows up to it (else the checkpoint is the store's fault), and no
/// leaves to say which row changed. The rows since the walk's start
/// (`after`) link up to it: unvouched, to the first range the walk found,
/// or open-ended to `through`. For a database and a copy alike.
pub fn unvouched_below_contradicted_root(
    ranges: &mut Vec<InvalidRange>,
    contradicted: Option<u64>,
    (after, through): (u64, u64),
    highest_anchor: Option<u64>,
    leaves: bool,
) {
    let Some(size) = contradicted else { return };
    if leaves || ranges.iter().any(|r| r.from <= size) || highest_anchor.is_some_and(|a| a >= size) || after >= through
    {
        return;
    }
    let next = ranges.first().map(|r| r.from);
    ranges.insert(
        0,
        InvalidRange {
            kind: RangeKind::Unvouched,
            from: after.saturating_add(1),
            to: next.map_or(through, |n| n - 1),
            anchored_by: next,
            open: next.is_none(),
        },
    );
}

/// The tail no anchor vouches for yet: the rows or records after the
/// highest anchor the data matched (`anchored`) and after every range,
/// through `end`. None when a range already runs open to the end.
pub fn unvouched_tail(anchored: u64, ranges: &[InvalidRange], end: Option<u64>) -> Option<(u64, u64)> {
    if ranges.iter().any(|r| r.open) {
        return None;
    }
    let after = ranges.iter().map(|r| r.to).fold(anchored, u64::max);
    let end = end?;
    (end > after).then(|| (after + 1, end))
}

/// The tail judged against `max` records allowed past the last anchor: a
/// warning within it; past it an `unvouched` finding, and its open range.
/// `what` names them (`row(s)`, `record(s)`).
pub fn judge_tail(
    (first, last): (u64, u64),
    max: u64,
    what: &str,
    findings: &mut Vec<crate::Finding>,
    warnings: &mut Vec<String>,
    ranges: &mut Option<Vec<InvalidRange>>,
) {
    let text = crate::verdict::unvouched_text(first, last, what);
    if last.saturating_sub(first).saturating_add(1) <= max {
        warnings.push(text);
        return;
    }
    let mut f = crate::Finding::new(
        crate::Kind::Unvouched,
        Some(first),
        format!("{text} (more than the {max} allowed)"),
    );
    f.remedy = Some(chainship_chain::Setting::MaxUnvouched);
    findings.push(f);
    ranges.get_or_insert_with(Vec::new).push(InvalidRange {
        kind: RangeKind::Unvouched,
        from: first,
        to: last,
        anchored_by: None,
        open: true,
    });
}

/// Where the data ends before what the store vouches for: when a `cut`
/// finding says so, the seqs from the data's `end` (0: none) to the highest
/// kept head or checkpoint (a cut finding's, or `highest_kept`), missing.
pub fn cut_range(findings: &[crate::Finding], end: u64, highest_kept: Option<u64>) -> Option<InvalidRange> {
    let cut = findings
        .iter()
        .filter(|f| f.kind == crate::Kind::Cut)
        .filter_map(|f| f.seq)
        .max()?;
    let to = cut.max(highest_kept.unwrap_or(0));
    (to > end).then(|| InvalidRange {
        kind: RangeKind::Missing,
        from: end + 1,
        to,
        anchored_by: None,
        open: false,
    })
}

/// The leaf at `seq` in its level-0 tile, if the tile is at hand.
pub fn leaf(tile: Option<&[Hash]>, seq: u64) -> Option<&Hash> {
    tile.and_then(|t| t.get((seq.checked_sub(1)? as usize) % WIDTH))
}

/// Level-0 tile `index` of `cp`'s tree, if the store holds it whole
/// (`None` too for a tile past the checkpoint's size).
pub async fn level0_tile(
    store: &AnchorStore,
    origin: &str,
    cp: &Checkpoint,
    index: u64,
) -> Result<Option<Vec<Hash>>, StoreError> {
    if index * (WIDTH as u64) >= cp.size {
        return Ok(None);
    }
    let width = tile_width(cp.size, 0, index);
    let Some(data) = store.get_object(origin, &tile_path(0, index, width)).await? else {
        return Ok(None);
    };
    if data.len() != width * 32 {
        return Ok(None);
    }
    Ok(Some(data.chunks(32).map(|c| c.try_into().expect("32 bytes")).collect()))
}

/// An entry bundle's entries by position, each `None` unless it is its leaf.
pub type Entries = Vec<Option<Vec<u8>>>;

/// The entries (event hashes) of entry bundle `index` of `cp`'s tree, each
/// checked against its leaf in `tile` (the level-0 tile the store pass showed
/// gives the signed root): `None` for an entry that is not its leaf, and for
/// the whole bundle when it is not there or not a bundle.
pub async fn level0_entries(
    store: &AnchorStore,
    origin: &str,
    cp: &Checkpoint,
    index: u64,
    tile: &[Hash],
) -> Result<Option<Entries>, StoreError> {
    let width = tile_width(cp.size, 0, index);
    let Some(data) = store.get_object(origin, &entries_path(index, width)).await? else {
        return Ok(None);
    };
    let Some(entries) = parse_bundle(&data) else {
        return Ok(None);
    };
    // Each entry stands on its own leaf: one damaged entry (or one too many)
    // does not take the others with it.
    Ok(Some(
        tile.iter()
            .enumerate()
            .map(|(i, l)| entries.get(i).filter(|e| leaf_hash(e) == *l).map(|e| e.to_vec()))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    //! The walk against rows built by hand: the same facts for a database
    //! row and a copy's record give the same ranges.

    use super::*;
    use chainship_chain::event_hash;

    /// A database row with its own fields.
    struct Row {
        seq: u64,
        payload: String,
        stored: Vec<u8>,
        prev_field: Option<Vec<u8>>,
    }

    impl ChainRow for Row {
        fn seq(&self) -> u64 {
            self.seq
        }
        fn stored(&self) -> &[u8] {
            &self.stored
        }
        fn hash_after(&self, prev: &[u8]) -> HexHash {
            event_hash(prev, self.seq, b"r", b"s", b"t", b"k", self.payload.as_bytes())
        }
        fn prev_field(&self) -> Option<&[u8]> {
            self.prev_field.as_deref()
        }
    }

    /// A whole chain 1..=n; as a copy, each row says its predecessor's hash.
    fn chain(n: u64, copy: bool) -> Vec<Row> {
        let mut prev = Vec::new();
        (1..=n)
            .map(|seq| {
                let payload = format!("{{\"n\":{seq}}}");
                let stored = event_hash(&prev, seq, b"r", b"s", b"t", b"k", payload.as_bytes()).to_vec();
                let row = Row {
                    seq,
                    payload,
                    stored: stored.clone(),
                    prev_field: copy.then(|| prev.clone()),
                };
                prev = stored;
                row
            })
            .collect()
    }

    /// The ranges of `rows` with kept heads at `heads` and, with `leaves`,
    /// the leaves of a checkpoint of the untouched chain of `n`.
    fn walk_with(rows: &[Row], heads: &[u64], leaves: bool) -> Vec<(RangeKind, u64, u64)> {
        let anchors = Anchors {
            heads: heads.to_vec(),
            contradicted: Vec::new(),
        };
        let tree: Vec<Hash> = chain(2000, false).iter().map(|r| leaf_hash(&r.stored)).collect();
        let mut w = RangeWalk::new(0, Vec::new(), anchors);
        for r in rows {
            w.row(r, leaves.then(|| &tree[r.seq as usize - 1]));
        }
        w.finish(2000).ranges.iter().map(|r| (r.kind, r.from, r.to)).collect()
    }

    fn walk(rows: &[Row], heads: &[u64], _through: u64) -> Vec<(RangeKind, u64, u64)> {
        walk_with(rows, heads, true)
    }

    #[test]
    fn with_heads_only_the_stretch_before_a_break_is_unvouched() {
        for copy in [false, true] {
            let mut rows = chain(1000, copy);
            rows[499].payload = "{\"edited\":true}".into();
            assert_eq!(
                walk_with(&rows, &[400, 600, 1000], false),
                [(RangeKind::Unvouched, 401, 499), (RangeKind::Altered, 500, 500)],
                "copy {copy}"
            );
        }
    }

    #[test]
    fn an_edited_row_is_that_row_in_a_database_and_in_a_copy() {
        for copy in [false, true] {
            let mut rows = chain(1000, copy);
            rows[499].payload = "{\"edited\":true}".into();
            assert_eq!(
                walk(&rows, &[400, 600, 1000], 1000),
                [(RangeKind::Altered, 500, 500)],
                "copy {copy}"
            );
        }
    }

    #[test]
    fn a_changed_stored_hash_is_that_row_alone() {
        for copy in [false, true] {
            let mut rows = chain(1000, copy);
            rows[499].stored = vec![b'0'; 64];
            assert_eq!(
                walk(&rows, &[400, 600, 1000], 1000),
                [(RangeKind::Altered, 500, 500)],
                "copy {copy}"
            );
        }
    }

    #[test]
    fn a_copy_record_whose_prev_field_was_changed_is_altered() {
        let mut rows = chain(1000, true);
        rows[499].prev_field = Some(vec![b'f'; 64]);
        assert_eq!(walk(&rows, &[400, 600, 1000], 1000), [(RangeKind::Altered, 500, 500)]);
    }

    /// A database row after deleted rows cannot be checked without them (or
    /// the log's entry before it): not vouched for, though the rows after it
    /// are; a copy's record names its predecessor's hash, so its own fields
    /// still show it intact.
    #[test]
    fn deleted_rows_are_missing_and_only_a_database_cannot_check_the_next() {
        let mut rows = chain(1000, false);
        rows.drain(699..720);
        assert_eq!(
            walk(&rows, &[600, 800, 1000], 1000),
            [(RangeKind::Missing, 700, 720), (RangeKind::Unvouched, 721, 721)]
        );
        let mut rows = chain(1000, true);
        rows.drain(699..720);
        assert_eq!(walk(&rows, &[600, 800, 1000], 1000), [(RangeKind::Missing, 700, 720)]);
        // With heads only, those before the gap cannot be told from a
        // rewrite ending there; those after it are vouched again by the next head.
        assert_eq!(
            walk_with(&rows, &[600, 800, 1000], false),
            [(RangeKind::Unvouched, 601, 699), (RangeKind::Missing, 700, 720)]
        );
        // And with no head after the gap, they are not vouched for.
        assert_eq!(
            walk_with(&rows, &[600], false),
            [
                (RangeKind::Unvouched, 601, 699),
                (RangeKind::Missing, 700, 720),
                (RangeKind::Unvouched, 721, 1000)
            ]
        );
    }

    /// Past a gap, a record whose fields do not give its hash is altered.
    #[test]
    fn an_edited_record_right_after_a_gap_is_altered() {
        let mut rows = chain(1000, true);
        rows[720].payload = "x".into();
        rows.drain(699..720);
        assert_eq!(
            walk(&rows, &[600, 800, 1000], 1000),
            [(RangeKind::Missing, 700, 720), (RangeKind::Altered, 721, 721)]
        );
    }

    #[test]
    fn a_duplicate_or_late_row_is_passed_over() {
        let rows = chain(1000, true);
        let mut w = RangeWalk::new(
            0,
            Vec::new(),
            Anchors {
                heads: vec![1000],
                contradicted: vec![],
            },
        );
        for r in &rows[..600] {
            w.row(r, None);
        }
        w.row(&rows[300], None);
        for r in &rows[600..] {
            w.row(r, None);
        }
        assert!(w.finish(1000).ranges.is_empty());
    }
}
