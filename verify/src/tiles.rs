//! Every kept tile and entry bundle, checked against the newest trusted
//! checkpoint: the store must be able to serve every entry and every proof
//! of that tree, and hold nothing that contradicts it.
//!
//! The newest checkpoint's root is reproduced from its partial tiles by
//! [`crate::checkpoints`]; here each of its full tiles must hash to the
//! entry its parent row holds (so every tile is bound to the signed root),
//! each entry bundle's entries must hash to its level-0 tile, and every
//! other tile or bundle kept (a smaller checkpoint's partial tiles, a full
//! tile reaching past the newest checkpoint) must agree with the newest
//! tree as far as it reaches. Objects wholly past the newest checkpoint
//! cannot be judged (a crash between tiles and checkpoint leaves them) and
//! are left alone. One pass, in index order, holding a tile and its parent.

use std::collections::BTreeMap;

use chainship_tlog::merkle::{Hash, leaf_hash, root_of};
use chainship_tlog::tiles::{TileName, WIDTH, entries_path, parse_bundle, parse_tile_path, tile_path, tile_width};

use crate::finding::{Finding, Kind};
use chainship_anchor::checkpoint::Checkpoint;
use chainship_anchor::store::{AnchorStore, StoreError};

/// The kept tiles and bundles by (level, index) (level `None`: bundles),
/// each with its path and width.
type KeptTiles = BTreeMap<(Option<u8>, u64), Vec<(String, usize)>>;

/// Findings past this many are counted, not listed.
const MAX_LISTED: usize = 20;

#[derive(Debug, Default)]
pub struct TileAudit {
    /// Tiles and bundles read.
    pub objects: u64,
    pub findings: Vec<Finding>,
    /// Findings beyond [`MAX_LISTED`].
    pub more: usize,
    /// A tile or bundle of the newest tree itself is missing or contradicts
    /// it (damage), as opposed to another tile disagreeing with a sound tree
    /// (another history's, e.g. a planted fork's).
    pub newest_damaged: bool,
    /// The sizes that kept level-0 partial tiles were written for, at or
    /// below the newest checkpoint (from `from` on), ascending: the follower
    /// writes one only with a checkpoint of exactly that size, so each must
    /// have its checkpoint (see [`crate::pass`]).
    pub partial_sizes: Vec<u64>,
    /// Sizes of kept level-0 partial tiles above the newest checkpoint: a
    /// publication in flight, or the newest checkpoint deleted.
    pub partial_above: Vec<u64>,
    /// Paths under `tile/` out of the tile grammar, ignored (said as a warning).
    pub junk: chainship_anchor::store::Junk,
}

impl TileAudit {
    fn disagree(&mut self, cp: &Checkpoint, path: &str, why: String) {
        if self.findings.len() >= MAX_LISTED {
            self.more += 1;
            return;
        }
        self.findings.push(Finding {
            kind: Kind::TilesDisagree,
            seq: Some(cp.size),
            message: format!("{path}: {why} (checked against checkpoint {})", cp.size),
            expected: None,
            found: None,
            source: Some(path.to_owned()),
            remedy: None,
        });
    }
}

fn hashes(data: &[u8]) -> Vec<Hash> {
    data.chunks(32).map(|c| c.try_into().expect("32 bytes")).collect()
}

/// Checks every tile and bundle kept for `origin` against `newest`; with
/// `from` above 0, only those holding entries at or above `from` (a
/// previous run checked the rest against a checkpoint of that size, one
/// tree with `newest`).
pub async fn audit_tiles(
    store: &AnchorStore,
    origin: &str,
    newest: &Checkpoint,
    from: u64,
    checkpoint_sizes: &[u64],
) -> Result<TileAudit, StoreError> {
    let m = newest.size;
    let mut audit = TileAudit::default();
    // Every kept object, by (level, index): the newest tree's tile and the others.
    let mut kept = KeptTiles::new();
    for path in store.list_paths(origin, "tile").await? {
        match parse_tile_path(&path) {
            Some(TileName { level, index, width }) => kept.entry((level, index)).or_default().push((path, width)),
            None => audit.junk.add(format!("{origin}/{path}")),
        }
    }
    let level0_partials = || {
        kept.iter()
            .filter(|((level, _), _)| *level == Some(0))
            .flat_map(|((_, index), paths)| {
                paths
                    .iter()
                    .filter(|(_, width)| *width < WIDTH)
                    .map(move |(_, width)| index.saturating_mul(WIDTH as u64).saturating_add(*width as u64))
            })
    };
    audit.partial_above = level0_partials().filter(|size| *size > m).collect();
    audit.partial_above.sort_unstable();
    audit.partial_above.dedup();
    audit.partial_sizes = kept
        .iter()
        .filter(|((level, _), _)| *level == Some(0))
        .flat_map(|((_, index), paths)| {
            paths
                .iter()
                .filter(|(_, width)| *width < WIDTH)
                .map(move |(_, width)| index.saturating_mul(WIDTH as u64).saturating_add(*width as u64))
        })
        .filter(|size| *size <= m && *size >= from)
        .collect();
    audit.partial_sizes.sort_unstable();
    audit.partial_sizes.dedup();
    // Each smaller checkpoint's partial tiles and bundle, until the full
    // one at their place is kept (C2SP tlog-tiles: a log MUST serve them,
    // and MAY delete them only then): proofs against it need them.
    for &size in checkpoint_sizes.iter().filter(|s| **s >= from && **s < m) {
        for (level, index, width) in partial_places(size) {
            let has = |lvl: Option<u8>, w: usize| {
                kept.get(&(lvl, index))
                    .is_some_and(|v| v.iter().any(|(_, kw)| *kw == w))
            };
            let places = [
                (Some(level), tile_path(level, index, width)),
                (None, entries_path(index, width)),
            ];
            for (lvl, path) in places.into_iter().filter(|(lvl, _)| lvl.is_some() || level == 0) {
                if !has(lvl, width) && !has(lvl, WIDTH) {
                    audit.disagree(
                        newest,
                        &path,
                        format!("checkpoint {size} needs this partial tile (its full tile is not kept yet); the store lacks it"),
                    );
                }
            }
        }
    }
    let levels = (0u8..64)
        .take_while(|l| m.checked_shr(8 * u32::from(*l)).unwrap_or(0) > 0)
        .count() as u8;
    // Top level down, so each full tile's parent row was judged first.
    for level in (0..levels).rev() {
        let count = (m >> (8 * u32::from(level))).div_ceil(WIDTH as u64); // level < 8
        let mut parent: Option<(u64, Vec<Hash>)> = None;
        // A tile of this level covers 256^(level+1) entries.
        let first = from.checked_shr(8 * (u32::from(level) + 1)).unwrap_or(0);
        // Below `from` (a run with --state) the tiles were read before; they
        // must still be there, whole, for every proof a client asks for.
        for index in 0..first.min(count) {
            let path = tile_path(level, index, tile_width(m, level, index));
            let present = kept
                .get(&(Some(level), index))
                .is_some_and(|v| v.iter().any(|(p, _)| *p == path));
            let bundle = entries_path(index, WIDTH);
            let bundle_present = level > 0
                || kept
                    .get(&(None, index))
                    .is_some_and(|v| v.iter().any(|(p, _)| *p == bundle));
            for (missing, what) in [(!present, &path), (!bundle_present, &bundle)] {
                if missing {
                    audit.newest_damaged = true;
                    audit.disagree(
                        newest,
                        what,
                        "the newest checkpoint's tree needs this object; the store lacks it".into(),
                    );
                }
            }
        }
        for index in first..count {
            let width = tile_width(m, level, index);
            let path = tile_path(level, index, width);
            let Some(data) = store.get_object(origin, &path).await? else {
                audit.newest_damaged = true;
                audit.disagree(
                    newest,
                    &path,
                    "the newest checkpoint's tree needs this tile; the store lacks it".into(),
                );
                continue;
            };
            audit.objects += 1;
            if data.len() != width * 32 {
                audit.newest_damaged = true;
                audit.disagree(newest, &path, format!("{} bytes, not {width} hashes", data.len()));
                continue;
            }
            let row = hashes(&data);
            if width == WIDTH {
                let parent_index = index / WIDTH as u64;
                if parent.as_ref().is_none_or(|(i, _)| *i != parent_index) {
                    let parent_width = tile_width(m, level + 1, parent_index);
                    let parent_path = tile_path(level + 1, parent_index, parent_width);
                    let parent_data = store.get_object(origin, &parent_path).await?;
                    parent = parent_data
                        .filter(|d| d.len() == parent_width * 32)
                        .map(|d| (parent_index, hashes(&d)));
                }
                // A missing or malformed parent was named at its own level.
                if let Some((_, up)) = &parent
                    && up.get((index % WIDTH as u64) as usize) != Some(&root_of(&row))
                {
                    audit.newest_damaged = true;
                    audit.disagree(
                        newest,
                        &path,
                        "its hashes do not lead to its parent tile's entry for it".into(),
                    );
                }
            }
            for (other, other_width) in kept.get(&(Some(level), index)).into_iter().flatten() {
                if *other == path {
                    continue;
                }
                check_prefix(store, origin, newest, &mut audit, other, *other_width, &row).await?;
            }
            if level == 0 {
                check_bundles(store, origin, newest, &mut audit, index, &row, &kept).await?;
            }
        }
    }
    Ok(audit)
}

/// The partial tiles a tree of `size` has: (level, index, width) for each
/// level whose rightmost tile is not full.
fn partial_places(size: u64) -> Vec<(u8, u64, usize)> {
    (0u8..8)
        .map(|level| (level, size.checked_shr(8 * u32::from(level)).unwrap_or(0)))
        .take_while(|(_, row)| *row > 0)
        .filter(|(_, row)| row % WIDTH as u64 != 0)
        .map(|(level, row)| (level, row / WIDTH as u64, (row % WIDTH as u64) as usize))
        .collect()
}

/// Another kept tile of the same place must agree with the newest tree's as far as both reach.
async fn check_prefix(
    store: &AnchorStore,
    origin: &str,
    newest: &Checkpoint,
    audit: &mut TileAudit,
    path: &str,
    width: usize,
    row: &[Hash],
) -> Result<(), StoreError> {
    let Some(data) = store.get_object(origin, path).await? else {
        return Ok(());
    };
    audit.objects += 1;
    if data.len() != width * 32 {
        audit.disagree(
            newest,
            path,
            format!("{} bytes, not {width} hashes: not a tile", data.len()),
        );
        return Ok(());
    }
    let theirs = hashes(&data);
    let n = theirs.len().min(row.len());
    if theirs[..n] != row[..n] {
        audit.disagree(
            newest,
            path,
            "disagrees with the newest checkpoint's tile of the same place: another tree".into(),
        );
    }
    Ok(())
}

/// The bundles of level-0 tile `index`: the newest tree's must be there,
/// and every bundle's entries must hash to the tile's leaves.
async fn check_bundles(
    store: &AnchorStore,
    origin: &str,
    newest: &Checkpoint,
    audit: &mut TileAudit,
    index: u64,
    row: &[Hash],
    kept: &KeptTiles,
) -> Result<(), StoreError> {
    let needed = entries_path(index, row.len());
    if !kept
        .get(&(None, index))
        .is_some_and(|v| v.iter().any(|(p, _)| *p == needed))
    {
        audit.newest_damaged = true;
        audit.disagree(
            newest,
            &needed,
            "the newest checkpoint's tree needs this entry bundle; the store lacks it".into(),
        );
    }
    for (path, width) in kept.get(&(None, index)).into_iter().flatten() {
        let Some(data) = store.get_object(origin, path).await? else {
            continue;
        };
        audit.objects += 1;
        let Some(entries) = parse_bundle(&data).filter(|e| e.len() == *width) else {
            audit.disagree(newest, path, format!("not an entry bundle of {width} entries"));
            continue;
        };
        let n = entries.len().min(row.len());
        if entries[..n].iter().zip(&row[..n]).any(|(e, h)| leaf_hash(e) != *h) {
            audit.newest_damaged |= *path == needed;
            audit.disagree(newest, path, "its entries do not hash to the tree's leaves".into());
        }
    }
    Ok(())
}
