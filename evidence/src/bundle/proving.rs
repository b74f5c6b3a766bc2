//! How a bundle proves its records: its C2SP tiles, read and proven to be
//! of the checkpoint's tree before any proof is computed from them, each
//! record's inclusion proof computed from them; and which form a bundle
//! has (the tiles, or one `tlog-proof` a record in bundles written before).

use chainship_anchor::checkpoint::Checkpoint;
use chainship_anchor::note::SignedNote;
use chainship_tlog::merkle::inclusion_proof;
use chainship_tlog::proof::TlogProof;
use chainship_tlog::tiles::{TileName, TileSet, parse_tile_path};
use chainship_verify::Kind;
use chainship_verify::proof::NotProven;

use super::check::{MAX_NAMED, not_proven};
use super::{BundleFiles, GAPS_PROOF, PROOFS_DIR, TILES_DIR};

/// How a bundle proves its records.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Form {
    /// The tiles the proofs are computed from (what `evidence` writes).
    Tiles,
    /// A `tlog-proof` a record, the gaps with a range proof (bundles before the tiles).
    PerRecord,
    /// Both: refused.
    Mixed,
}

impl Form {
    pub(super) fn of(files: &BundleFiles) -> Form {
        let tiles = files.names().any(|n| n.starts_with(&format!("{TILES_DIR}/")));
        let older = files
            .names()
            .any(|n| n.starts_with(&format!("{PROOFS_DIR}/")) || n == GAPS_PROOF);
        match (tiles, older) {
            (true, true) => Form::Mixed,
            (false, true) => Form::PerRecord,
            _ => Form::Tiles,
        }
    }
}

/// The bundle's hash tiles for the tree of `cp`, and what is wrong with
/// them: a tile of another width than the tree's, or one that does not
/// prove to be of the tree of `cp`'s root (then none is used: a proof
/// computed from them could only fail, or prove by luck).
pub(super) fn read_tiles(files: &BundleFiles, cp: &Checkpoint) -> (TileSet, Vec<NotProven>) {
    let mut tiles = TileSet::new(cp.size);
    let mut problems = Vec::new();
    for name in files.names().filter(|n| n.starts_with(&format!("{TILES_DIR}/"))) {
        let Some(TileName {
            level: Some(level),
            index,
            ..
        }) = parse_tile_path(name)
        else {
            continue; // files::known admits only hash tiles
        };
        let need = tiles.need(level, index);
        if need.path != name {
            problems.push(not_proven(
                Some(Kind::TilesDisagree),
                format!(
                    "{name} is no tile of checkpoint {}'s tree (its tile there is {})",
                    cp.size, need.path
                ),
            ));
            continue;
        }
        if let Err(e) = tiles.insert(&need, files.get(name).unwrap_or_default()) {
            problems.push(not_proven(Some(Kind::TilesDisagree), e));
        }
        if problems.len() > MAX_NAMED {
            break; // named enough: the bundle fails either way
        }
    }
    if let Err(e) = tiles.authenticate(&cp.root) {
        problems.push(not_proven(
            Some(Kind::TilesDisagree),
            format!("{e} (checkpoint {}): the bundle's tiles are not that tree's", cp.size),
        ));
        tiles = TileSet::new(cp.size);
    }
    (tiles, problems)
}

/// Record `seq`'s proof, computed from the bundle's tiles, as the
/// `tlog-proof` the per-record form would have carried.
pub(super) fn proof_from_tiles(
    tiles: &TileSet,
    seq: u64,
    cp: &Checkpoint,
    note: &SignedNote,
) -> Result<TlogProof, NotProven> {
    if seq == 0 || seq > cp.size {
        return Err(not_proven(
            None,
            format!("seq {seq} is no entry of checkpoint {}'s tree", cp.size),
        ));
    }
    let hashes = inclusion_proof(seq - 1, cp.size, &mut &*tiles).map_err(|need| {
        not_proven(
            None,
            format!(
                "the bundle lacks {}, which the proof of seq {seq} is computed from",
                need.path
            ),
        )
    })?;
    Ok(TlogProof {
        extra: None,
        index: seq - 1,
        hashes,
        checkpoint: note.to_text(),
    })
}
