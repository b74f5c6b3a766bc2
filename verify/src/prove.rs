//! One event's inclusion proof (`tlog-proof`), built from what the anchor
//! store keeps: a kept checkpoint that covers the event, the hashes from
//! its tiles, checked against the signed root before it is handed out, and
//! the witnesses' cosignatures when a cosigned version is kept. Checked
//! offline by [`crate::proof`].

use chainship_chain::{Error, ErrorKind, Setting, integrity, permanent};
use chainship_tlog::merkle::{Hash, RangeHashes, inclusion_proof, verify_inclusion};
use chainship_tlog::proof::TlogProof;

use chainship_anchor::checkpoint::{
    Checkpoint, ReadCheckpoint, checkpoint_path, cosigned_path, read_checkpoint, size_from_checkpoint_name,
};
use chainship_anchor::note::{SignedNote, VerifierKey};
use chainship_anchor::store::{AnchorStore, CHECKPOINTS_DIR, COSIGNED_DIR};
use chainship_anchor::tile_reader::{TileError, TileReader};

/// The proof that event `seq` of `origin` is in a kept checkpoint: in
/// checkpoint `checkpoint` when given, else in the first kept checkpoint
/// that covers it and whose tiles prove it (those witnesses cosigned first,
/// then the largest). With `keys`, only checkpoints signed by one of them.
pub async fn build(
    store: &AnchorStore,
    origin: &str,
    seq: u64,
    checkpoint: Option<u64>,
    keys: &[VerifierKey],
) -> Result<TlogProof, Error> {
    let candidates = match checkpoint {
        Some(size) => {
            let path = checkpoint_path(size);
            let note = store.get_object(origin, &path).await?.ok_or_else(|| {
                permanent!(
                    "checkpoint {size}: {} keeps no checkpoint of that size for {origin:?}",
                    store.describe()
                )
                .with_setting(Setting::ProofCheckpoint)
            })?;
            vec![(path, Some(note))]
        }
        None => checkpoint_paths(store, origin, seq)
            .await?
            .into_iter()
            .map(|p| (p, None))
            .collect(),
    };
    let mut last_failure = None;
    for (path, note) in candidates {
        let note = match note {
            Some(note) => note,
            None => match store.get_object(origin, &path).await? {
                // Without --checkpoint, a note that is not a usable checkpoint is passed over.
                Some(note) if usable(&note, origin, keys, kept_size(&path)) => note,
                _ => continue,
            },
        };
        let read = judge(&note, origin, keys, kept_size(&path))
            .map_err(|e| permanent!("{}/{origin}/{path}: {e}", store.describe()))?;
        let cp = &read.checkpoint;
        if seq > cp.size {
            // Candidates go from the largest down: none further covers the seq.
            return Err(last_failure.unwrap_or_else(|| {
                permanent!(
                    "seq {seq}: beyond checkpoint {} (the newest event it covers is seq {}); prove it once a later checkpoint is published",
                    cp.size,
                    cp.size
                )
                .with_setting(Setting::ProofSeq)
            }));
        }
        match prove_in(store, origin, seq - 1, cp).await {
            Ok(hashes) => {
                return Ok(TlogProof {
                    extra: None,
                    index: seq - 1,
                    hashes,
                    checkpoint: with_cosignatures(store, origin, &read.note).await?,
                });
            }
            Err(e) if e.kind == ErrorKind::Integrity && checkpoint.is_none() => {
                // A checkpoint whose tiles cannot prove (missing, planted): say so, try the next.
                tracing::warn!("checkpoint {}: {}; trying the next smaller one", cp.size, e.message);
                last_failure = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(last_failure.unwrap_or_else(|| {
        permanent!(
            "{} keeps no checkpoint{} for origin {origin:?} (is the follower publishing checkpoints, and the origin right?)",
            store.describe(),
            if keys.is_empty() { "" } else { " signed by a trusted key" }
        )
    }))
}

/// The inclusion proof of `index` in `cp`'s tree, from the store's tiles,
/// checked against the signed root before it is handed out.
async fn prove_in(store: &AnchorStore, origin: &str, index: u64, cp: &Checkpoint) -> Result<Vec<Hash>, Error> {
    let mut reader = TileReader::new(store, origin);
    let tiles_fail = |e: TileError| match e {
        TileError::Store(e) => e,
        other => integrity!("tiles-disagree: checkpoint {}: {other}", cp.size),
    };
    let hashes = reader
        .run(cp.size, |set| inclusion_proof(index, cp.size, set))
        .await
        .map_err(tiles_fail)?;
    let leaf = reader
        .run(cp.size, |set| RangeHashes::range_hash(set, index, index + 1))
        .await
        .map_err(tiles_fail)?;
    if !verify_inclusion(index, cp.size, &leaf, &hashes, &cp.root) {
        return Err(integrity!(
            "tiles-disagree: the tiles of {} do not lead to the root of checkpoint {}",
            store.describe(),
            cp.size
        ));
    }
    Ok(hashes)
}

/// The kept checkpoints' paths to try: those witnesses cosigned that cover
/// `seq` first (largest first: a third party's witness policy needs them),
/// then the rest, largest first.
async fn checkpoint_paths(store: &AnchorStore, origin: &str, seq: u64) -> Result<Vec<String>, Error> {
    let mut names = store.list_names(origin, CHECKPOINTS_DIR).await?;
    names.retain(|n| size_from_checkpoint_name(n).is_some());
    let cosigned: std::collections::HashSet<String> =
        store.list_names(origin, COSIGNED_DIR).await?.into_iter().collect();
    names.sort_by_key(|n| {
        let size = size_from_checkpoint_name(n).unwrap_or(0);
        let preferred = size >= seq && cosigned.contains(n);
        std::cmp::Reverse((preferred, size))
    });
    Ok(names.into_iter().map(|n| format!("{CHECKPOINTS_DIR}/{n}")).collect())
}

/// The checkpoint's note with the witnesses' cosignatures, when a cosigned
/// version of it is kept; else the note as it is.
async fn with_cosignatures(store: &AnchorStore, origin: &str, note: &SignedNote) -> Result<String, Error> {
    let Ok((cp, _)) = Checkpoint::parse_text(&note.text) else {
        return Ok(note.to_text());
    };
    let cosigned = store
        .get_object(origin, &cosigned_path(cp.size))
        .await?
        .and_then(|b| SignedNote::parse(&b).ok())
        .filter(|c| c.text == note.text && c.signatures.len() > note.signatures.len());
    Ok(cosigned.map_or_else(|| note.to_text(), |c| c.to_text()))
}

/// The size a checkpoint kept at `path` must have (its name says it).
fn kept_size(path: &str) -> Option<u64> {
    size_from_checkpoint_name(path.rsplit('/').next().unwrap_or(path))
}

/// A checkpoint of `origin` (of `size`, where its name says one) trusted
/// by the one rule ([`crate::checkpoints::trust_checkpoint`]); with no keys
/// given, any such checkpoint (whoever checks the proof judges its
/// signatures).
fn judge(note: &[u8], origin: &str, keys: &[VerifierKey], size: Option<u64>) -> Result<ReadCheckpoint, Error> {
    if keys.is_empty() {
        let read = read_checkpoint(note, keys)?;
        let cp = &read.checkpoint;
        return match cp.origin == origin && size.is_none_or(|s| s == cp.size) {
            true => Ok(read),
            false => Err(permanent!(
                "holds checkpoint {} of origin {:?}, not one of its name and origin",
                cp.size,
                cp.origin
            )),
        };
    }
    let expect = crate::checkpoints::Expect {
        origin: Some(origin),
        size,
    };
    crate::checkpoints::trust_checkpoint(note, keys, None, expect)?
        .trusted()
        .map_err(|d| permanent!("{}", d.message))
}

/// Whether [`judge`] takes the note.
fn usable(note: &[u8], origin: &str, keys: &[VerifierKey], size: Option<u64>) -> bool {
    judge(note, origin, keys, size).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::copy::tests::store_for;
    use crate::export::tests::chain;
    use crate::test_run as run;
    use chainship_anchor::signer::SignerKey;

    /// A checkpoint kept under another size's name (copied there by someone
    /// with write access) proves nothing at that size.
    #[test]
    fn a_checkpoint_is_taken_only_at_the_size_its_name_says() {
        let key = SignerKey::generate("o").unwrap();
        let keys = [key.verifier()];
        let store = store_for(&chain(500), &[400, 500], &key);
        assert!(run(build(&store, "o", 350, Some(500), &keys)).is_ok());
        let at_400 = run(store.get_object("o", &checkpoint_path(400))).unwrap().unwrap();
        store.plant_object("o", &checkpoint_path(500), &at_400);
        let e = run(build(&store, "o", 350, Some(500), &keys)).unwrap_err();
        assert!(e.message.contains("where size 500"), "{e}");
        // Without --checkpoint it is passed over for one kept at its own size.
        let proof = run(build(&store, "o", 350, None, &keys)).unwrap();
        assert!(proof.checkpoint.contains("\n400\n"), "{}", proof.checkpoint);
    }
}
