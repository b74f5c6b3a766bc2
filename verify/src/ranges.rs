//! The exact invalid ranges of a database past its first break or fork:
//! the rows from the last trusted head below it are read again, in
//! tile-sized chunks, and each is fed to [`RangeClassifier`] with whether
//! it links to the row before it and whether a kept head, or a leaf of the
//! newest trusted checkpoint's tree, vouches for its stored hash or
//! contradicts it. One altered event is then that event, not everything
//! after it; a rewrite starts where its first row does.
//!
//! Leaves count only from a checkpoint whose level-0 tiles the store pass
//! showed give its signed root (so a tile planted to vouch for a rewritten
//! row would have been named `tiles-disagree` first).

use chainship_chain::{EventDb, InvalidRange, RangeClassifier, Vouch};
use chainship_tlog::leaf_hash;
use chainship_tlog::merkle::Hash;
use chainship_tlog::tiles::{WIDTH, tile_path, tile_width};

use chainship_anchor::checkpoint::Checkpoint;
use chainship_anchor::store::{AnchorStore, StoreError};

/// Ranges named at most; past them the rest is one open-ended range.
pub const MAX_RANGES: usize = 1000;

/// What to classify.
pub struct RangeInput<'a> {
    pub db: &'a EventDb,
    pub store: &'a dyn AnchorStore,
    pub origin: &'a str,
    /// Start after this seq: the last kept head the database matched below
    /// the break (0: none).
    pub after: u64,
    /// The last seq to read (the database's head).
    pub through: u64,
    /// The seqs of the kept heads the database matches above `after`, ascending.
    pub heads: &'a [u64],
    /// The seqs of the kept heads that hold another hash than the database, ascending.
    pub contradicted: &'a [u64],
    /// The newest trusted checkpoint whose level-0 tiles give its root.
    pub leaves: Option<&'a Checkpoint>,
}

/// The invalid ranges from `after` on (see [`RangeClassifier`]).
pub async fn exact_ranges(input: &RangeInput<'_>) -> Result<Vec<InvalidRange>, StoreError> {
    let db_error = |e: chainship_chain::DbError| StoreError::permanent(e.to_string());
    let mut prev: (u64, Vec<u8>) = match input.after {
        0 => (0, Vec::new()),
        after => (after, input.db.hash_at(after).map_err(db_error)?.unwrap_or_default()),
    };
    let mut classifier = RangeClassifier::after(input.after);
    let mut heads = input.heads.iter().copied().peekable();
    let mut contradicted = input.contradicted.iter().copied().peekable();
    let mut pos = input.after;
    while pos < input.through {
        let index = pos / WIDTH as u64;
        let chunk_end = ((index + 1) * WIDTH as u64).min(input.through);
        let tile = match input.leaves {
            Some(cp) if index * (WIDTH as u64) < cp.size => level0_tile(input.store, input.origin, cp, index).await?,
            _ => None,
        };
        let mut too_many = false;
        input
            .db
            .scan(pos, chunk_end, &mut |e| {
                let linked = e.seq == prev.0 + 1 && e.expected_hash(&prev.1)[..] == *e.hash;
                while heads.next_if(|h| *h < e.seq).is_some() {}
                while contradicted.next_if(|h| *h < e.seq).is_some() {}
                let by_head = heads.next_if_eq(&e.seq).is_some();
                let against_head = contradicted.next_if_eq(&e.seq).is_some();
                let leaf = tile.as_ref().and_then(|t| t.get((e.seq - 1) as usize % WIDTH));
                let vouch = match leaf.map(|l| *l == leaf_hash(e.hash)) {
                    // Another head at the seq may be a forgery beside the true one.
                    _ if by_head => Vouch::Anchor,
                    Some(true) => Vouch::Anchor,
                    Some(false) => Vouch::Contradicted,
                    None if against_head => Vouch::Contradicted,
                    None => Vouch::Nothing,
                };
                classifier.row(e.seq, linked, vouch);
                prev = (e.seq, e.hash.to_vec());
                too_many = classifier.ranges().len() > MAX_RANGES;
                !too_many
            })
            .map_err(db_error)?;
        if too_many {
            break;
        }
        pos = chunk_end;
    }
    let mut ranges = classifier.finish();
    if ranges.len() > MAX_RANGES {
        // The rest, unclassified: open from the first range not named.
        let from = ranges[MAX_RANGES].from;
        ranges.truncate(MAX_RANGES);
        ranges.push(InvalidRange {
            kind: chainship_chain::RangeKind::Unvouched,
            from,
            to: input.through,
            anchored_by: None,
            open: true,
        });
    }
    Ok(ranges)
}

/// Level-0 tile `index` of `cp`'s tree, if the store holds it whole.
async fn level0_tile(
    store: &dyn AnchorStore,
    origin: &str,
    cp: &Checkpoint,
    index: u64,
) -> Result<Option<Vec<Hash>>, StoreError> {
    let width = tile_width(cp.size, 0, index);
    let Some(data) = store.get_object(origin, &tile_path(0, index, width)).await? else {
        return Ok(None);
    };
    if data.len() != width * 32 {
        return Ok(None);
    }
    Ok(Some(data.chunks(32).map(|c| c.try_into().expect("32 bytes")).collect()))
}
