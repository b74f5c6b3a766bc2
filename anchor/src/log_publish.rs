//! Publishing the transparency log: tiles and entry bundles write-once,
//! then the signed checkpoint that needs them, then the `checkpoint`
//! pointer standard clients read.
//!
//! Everything here is deterministic for a given chain (tiles are hashes,
//! Ed25519 signatures are deterministic), so a restart that writes an
//! object again writes the same bytes; an object kept with other bytes
//! means the store holds another tree for this origin, an integrity
//! finding that is never retried.

use std::time::SystemTime;

use chainship_tlog::tiles::Tile;

use crate::checkpoint::{Checkpoint, checkpoint_beside_path, checkpoint_path, read_checkpoint};
use crate::note::VerifierKey;
use crate::signer::{Signers, verifiers};
use crate::store::{AnchorStore, LATEST_CHECKPOINT, PutOutcome, StoreError};

/// Whether a checkpoint of `size` covers the tile at `path` whole (so its
/// bytes are fixed by that checkpoint's tree): a tile of width `w` at level
/// `L`, index `i` holds nodes over leaves up to `(i·256 + w)·256^L`.
fn covered_by(path: &str, size: u64) -> bool {
    let Some(name) = chainship_tlog::tiles::parse_tile_path(path) else {
        return true;
    };
    let level = u32::from(name.level.unwrap_or(0));
    let nodes = name.index.saturating_mul(256).saturating_add(name.width as u64);
    let leaves = 256u64.checked_pow(level).map_or(u64::MAX, |w| nodes.saturating_mul(w));
    leaves <= size
}

/// Writes each tile unless kept; a kept tile must hold the same bytes.
///
/// `vouched` is the size of the newest checkpoint this publisher signed that
/// the store keeps (this process proved its tree is that one's before
/// writing). A kept tile that differs from ours where no such checkpoint
/// covers it vouches for nothing (junk planted ahead of the follower, or a
/// write torn before its checkpoint): it is replaced with ours, loudly,
/// instead of stopping the follower for good. Where a checkpoint covers it,
/// it is another tree's: `tiles-disagree`, never retried.
pub async fn put_tiles(store: &AnchorStore, origin: &str, tiles: &[Tile], vouched: u64) -> Result<(), StoreError> {
    let objects: Vec<(&str, &[u8])> = tiles.iter().map(|t| (t.path.as_str(), t.data.as_slice())).collect();
    let outcomes = store.put_objects_new(origin, &objects).await?;
    for (tile, outcome) in tiles.iter().zip(outcomes) {
        if let PutOutcome::AlreadyThere(kept) = &outcome
            && *kept != tile.data
            && !covered_by(&tile.path, vouched)
        {
            tracing::warn!(
                store = %store.describe(),
                %origin,
                tile = %tile.path,
                kept_bytes = kept.len(),
                vouched,
                "tile-replaced: the store kept bytes at this tile's path that no checkpoint covers and that are not this chain's (planted ahead of the follower, or torn); replaced with this chain's (someone may have write access to the store)"
            );
            store.put_object_replace(origin, &tile.path, &tile.data).await?;
            match store.get_object(origin, &tile.path).await? {
                Some(back) if back == tile.data => continue,
                _ => {
                    return Err(StoreError::integrity(format!(
                        "tiles-disagree: {} still keeps other bytes at {} for origin {origin:?} after this follower replaced them (no checkpoint covers it): the store does not let it be written; remove it",
                        store.describe(),
                        tile.path
                    )));
                }
            }
        }
        if let PutOutcome::AlreadyThere(kept) = outcome
            && kept != tile.data
        {
            // A tile of another length is no tile of this layout at all: planted.
            let what = if kept.len() == tile.data.len() {
                "other hashes than this chain's: the store holds another tree for this origin (a database restored from an older backup, or another log under the same origin), or someone wrote it"
            } else {
                "content that is not this tile (wrong length): planted or torn by someone with write access to the store"
            };
            return Err(StoreError::integrity(format!(
                "tiles-disagree: {} keeps {} for origin {origin:?} ({} bytes) with {what}; the follower stops rather than publish beside it (tlog clients read tiles at fixed paths): remove it if it is not this log's",
                store.describe(),
                tile.path,
                kept.len()
            )));
        }
    }
    Ok(())
}

/// Signs `cp` and keeps it at its size. A checkpoint already kept there
/// counts if this publisher's keys signed the same root; one they signed
/// with another root is `checkpoints-disagree`; a note they did not sign
/// does not hold the name hostage: ours goes beside it. Returns the signed
/// note (signing may be a token or agent round trip: done once).
pub async fn publish_checkpoint(store: &AnchorStore, keys: &Signers, cp: &Checkpoint) -> Result<String, StoreError> {
    let note = cp.sign(keys)?;
    let origin = cp.origin.as_str();
    let path = checkpoint_path(cp.size);
    if let PutOutcome::AlreadyThere(kept) = store.put_object_new(origin, &path, note.as_bytes()).await? {
        match read_checkpoint(&kept, &verifiers(keys)) {
            Ok(read)
                if !read.signers.is_empty() && read.checkpoint.origin == origin && read.checkpoint.size == cp.size =>
            {
                if read.checkpoint.root != cp.root {
                    return Err(StoreError::integrity(format!(
                        "checkpoints-disagree: {} keeps checkpoint {} of origin {origin:?} with root {}, signed by this follower's key; this chain's root at that size is {}",
                        store.describe(),
                        cp.size,
                        read.checkpoint.root_b64(),
                        cp.root_b64()
                    )));
                }
            }
            _ => {
                tracing::warn!(store = %store.describe(), size = cp.size, "a note this follower's key did not sign occupies the checkpoint's name; publishing beside it");
                let seconds = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                store
                    .put_object_new(origin, &checkpoint_beside_path(cp.size, seconds), note.as_bytes())
                    .await?;
            }
        }
    }
    advance_pointer(store, origin, &verifiers(keys), cp.size, &note).await?;
    Ok(note)
}

/// Points `checkpoint` (what tlog clients read first) at `note`, of `size`,
/// unless a checkpoint of this origin signed by `keys` is there that is
/// larger, or as large with as many signatures (a cosigned one): the pointer
/// only moves forward, and a plain checkpoint never replaces its cosigned twin.
pub async fn advance_pointer(
    store: &AnchorStore,
    origin: &str,
    keys: &[VerifierKey],
    size: u64,
    note: &str,
) -> Result<(), StoreError> {
    let signatures = crate::note::SignedNote::parse(note.as_bytes()).map_or(0, |n| n.signatures.len());
    let current = store.get_object(origin, LATEST_CHECKPOINT).await?;
    let replace = current
        .and_then(|b| read_checkpoint(&b, keys).ok())
        .filter(|r| !r.signers.is_empty() && r.checkpoint.origin == origin)
        .is_none_or(|r| (r.checkpoint.size, r.note.signatures.len()) < (size, signatures));
    if replace {
        store
            .put_object_replace(origin, LATEST_CHECKPOINT, note.as_bytes())
            .await?;
    }
    Ok(())
}

/// The newest checkpoint kept for `origin` that one of `keys` signed, and
/// its note as kept. Names sort by size: walks down from the top and stops
/// at the first that verifies (a planted note is passed over).
pub async fn newest_checkpoint(
    store: &AnchorStore,
    origin: &str,
    keys: &[VerifierKey],
) -> Result<Option<(Checkpoint, String)>, StoreError> {
    let mut names = store.list_names(origin, crate::store::CHECKPOINTS_DIR).await?;
    names.retain(|n| crate::checkpoint::size_from_checkpoint_name(n).is_some());
    names.sort_by_key(|n| crate::checkpoint::size_from_checkpoint_name(n));
    for name in names.iter().rev() {
        let path = format!("{}/{name}", crate::store::CHECKPOINTS_DIR);
        let Some(bytes) = store.get_object(origin, &path).await? else {
            continue;
        };
        if let Ok(read) = read_checkpoint(&bytes, keys)
            && !read.signers.is_empty()
            && read.checkpoint.origin == origin
        {
            return Ok(Some((read.checkpoint, read.note.to_text())));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signer::SignerKey;
    use crate::store::memory::MemoryStore;
    use chainship_chain::ErrorKind;
    use chainship_tlog::tiles::TileBuilder;

    use crate::test_run as run;

    fn tree(n: u64, salt: &str) -> (Vec<Tile>, Checkpoint) {
        let mut b = TileBuilder::default();
        let mut tiles = Vec::new();
        for i in 0..n {
            b.push(format!("{salt}{i:060x}").as_bytes(), &mut tiles);
        }
        tiles.extend(b.partial_tiles());
        let cp = Checkpoint {
            origin: "o".into(),
            size: n,
            root: b.root(),
        };
        (tiles, cp)
    }

    #[test]
    fn a_tile_planted_where_no_checkpoint_reaches_is_replaced_one_a_checkpoint_covers_is_not() {
        let store = MemoryStore::default();
        let (tiles, _) = tree(300, "aaaa");
        let partial = tiles.iter().find(|t| t.path == "tile/0/001.p/44").unwrap();
        store.plant_object("o", &partial.path, &[7u8; 44 * 32]);
        // The newest checkpoint kept is 256: the partial tile of 300 is past it.
        run(put_tiles(&store, "o", &tiles, 256)).unwrap();
        assert_eq!(
            run(store.get_object("o", &partial.path)).unwrap().as_deref(),
            Some(&partial.data[..])
        );
        // Covered by a checkpoint of 300, the same plant is another tree's.
        store.plant_object("o", &partial.path, &[7u8; 44 * 32]);
        let e = run(put_tiles(&store, "o", &tiles, 300)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Integrity, "{e}");
        assert!(covered_by("tile/1/000.p/1", 256) && !covered_by("tile/1/000.p/1", 255));
        assert!(covered_by("tile/entries/001.p/44", 300) && !covered_by("tile/0/001", 300));
    }

    #[test]
    fn republishing_is_idempotent_and_another_tree_is_an_integrity_finding() {
        let store = MemoryStore::default();
        let key = SignerKey::generate("o").unwrap();
        let mine = key.verifier();
        let keys = &[key.shared()];
        let (tiles, cp) = tree(300, "aaaa");
        run(put_tiles(&store, "o", &tiles, 300)).unwrap();
        run(publish_checkpoint(&store, keys, &cp)).unwrap();
        // A restart writes the same bytes again: fine.
        run(put_tiles(&store, "o", &tiles, 300)).unwrap();
        run(publish_checkpoint(&store, keys, &cp)).unwrap();
        let newest = run(newest_checkpoint(&store, "o", &[key.verifier()])).unwrap();
        assert_eq!(newest.map(|(c, _)| c), Some(cp));
        // Another chain under the same origin and key.
        let (other_tiles, other_cp) = tree(300, "bbbb");
        let e = run(put_tiles(&store, "o", &other_tiles, 300)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Integrity);
        assert!(e.message.starts_with("tiles-disagree: memory: keeps tile/"), "{e}");
        let e = run(publish_checkpoint(&store, keys, &other_cp)).unwrap_err();
        assert!(e.message.starts_with("checkpoints-disagree:"), "{e}");
        // A planted note at a checkpoint's name: ours goes beside it.
        let (_, cp400) = tree(400, "aaaa");
        store.plant_object("o", &checkpoint_path(400), b"planted");
        run(publish_checkpoint(&store, keys, &cp400)).unwrap();
        let names = run(store.list_names("o", "checkpoints")).unwrap();
        assert_eq!(names.len(), 3, "{names:?}");
        // The pointer holds the newest.
        let latest = run(store.get_object("o", LATEST_CHECKPOINT)).unwrap().unwrap();
        assert_eq!(
            read_checkpoint(&latest, &[key.verifier()]).unwrap().checkpoint.size,
            400
        );
        run(publish_checkpoint(&store, keys, &tree(200, "aaaa").1)).unwrap();
        let latest = run(store.get_object("o", LATEST_CHECKPOINT)).unwrap().unwrap();
        assert_eq!(
            read_checkpoint(&latest, &[key.verifier()]).unwrap().checkpoint.size,
            400,
            "never turned back"
        );
        // Its cosigned twin (one more signature line) replaces it; the plain one again does not.
        let extra = SignerKey::generate("w").unwrap();
        let pairs = [(key.name.as_str(), &key.key), ("w", &extra.key)];
        let cosigned = crate::note::SignedNote::sign(&cp400.text(), &pairs).to_text();
        run(advance_pointer(
            &store,
            "o",
            std::slice::from_ref(&mine),
            400,
            &cosigned,
        ))
        .unwrap();
        run(publish_checkpoint(&store, keys, &cp400)).unwrap();
        let latest = run(store.get_object("o", LATEST_CHECKPOINT)).unwrap().unwrap();
        assert_eq!(latest, cosigned.as_bytes(), "the cosigned pointer stays");
    }
}
