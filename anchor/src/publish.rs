//! Publishing one head: sign it, write it to the store unless that seq is
//! there already, and accept an existing note only if it says the same;
//! and finding the highest head this publisher already kept.

use chainship_chain::{Error, integrity};
use std::time::SystemTime;

use chainship_chain::Head;

use crate::note::{SignedNote, VerifierKey};
use crate::signed_head::SignedHead;
use crate::signer::{Signers, verifiers};
use crate::store::{AnchorStore, PutOutcome, StoreError, head_name, heartbeat_name};

/// Signs and writes `head` for `origin`. A note already kept for that seq
/// (a restart re-publishing its cursor) counts as published only if this
/// follower's key signed it for the same head; one its key signed for
/// another hash is a contradiction (`heads-disagree`, never retried). A note
/// its key did not sign (planted, torn, another follower's) must not hold
/// the seq hostage: the head is written beside it, under a heartbeat name,
/// and `anchor verify` still reports the stranger. `with_checkpoint`: the
/// checkpoint of the head's size was published first (the note says so);
/// `previous`: the highest head kept before it, which the note names.
pub async fn publish_head(
    store: &AnchorStore,
    keys: &Signers,
    origin: &str,
    head: Head,
    with_checkpoint: bool,
    previous: Option<u64>,
) -> Result<(), StoreError> {
    let now = SystemTime::now();
    let signed = SignedHead::new(origin, head, now).after(previous);
    let note = match with_checkpoint {
        true => signed.with_checkpoint(),
        false => signed,
    }
    .sign(keys)?;
    let PutOutcome::AlreadyThere(bytes) = store.put_new(origin, &head_name(head.seq), note.as_bytes()).await? else {
        return Ok(());
    };
    match verified_by(&bytes, origin, head.seq, &verifiers(keys)) {
        Ok(kept) if kept == head => Ok(()),
        Ok(kept) => Err(StoreError::integrity(format!(
            "heads-disagree: {} already keeps head {kept} for origin {origin:?}, signed by this follower's key, not {head}",
            store.describe()
        ))),
        Err(why) => {
            tracing::warn!(
                store = %store.describe(),
                seq = head.seq,
                "a note this follower's key did not sign occupies the head's name ({why}); publishing beside it"
            );
            put_beside(store, origin, head.seq, now, &note).await
        }
    }
}

/// Writes `note` under the heartbeat name of `seq` at `at`. One already
/// there from the same second is as good as this one.
async fn put_beside(store: &AnchorStore, origin: &str, seq: u64, at: SystemTime, note: &str) -> Result<(), StoreError> {
    let seconds = at.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    store
        .put_new(origin, &heartbeat_name(seq, seconds), note.as_bytes())
        .await
        .map(|_| ())
}

/// Publishes `head` again as a heartbeat (a new `published` time, its own
/// write-once name): while the log is idle, this is what shows the
/// follower still vouches for it.
pub async fn publish_heartbeat(
    store: &AnchorStore,
    keys: &Signers,
    origin: &str,
    head: Head,
) -> Result<(), StoreError> {
    let now = SystemTime::now();
    let note = SignedHead::new(origin, head, now).sign(keys)?;
    put_beside(store, origin, head.seq, now, &note).await
}

/// The highest head kept for `origin` by a note that one of `keys` signed.
///
/// A name alone proves nothing: an empty or planted `18446744073709551615.head`
/// would otherwise stop a publisher that never goes below the highest kept
/// head. Walks down from the highest name, logging each note it has to pass
/// over, and stops at the first that verifies.
pub async fn highest_verified_head(
    store: &AnchorStore,
    origin: &str,
    keys: &[VerifierKey],
) -> Result<Option<Head>, StoreError> {
    for seq in store.head_seqs(origin).await?.into_iter().rev() {
        let Some(stored) = store.get_head(origin, seq).await? else {
            continue;
        };
        match verified_by(&stored.bytes, origin, seq, keys) {
            Ok(head) => return Ok(Some(head)),
            Err(why) => tracing::warn!(
                file = %stored.name,
                "ignoring a kept head not published by this follower's key: {why}"
            ),
        }
    }
    Ok(None)
}

/// Whether `bytes` is a head for `origin` at `seq` signed by one of `keys`.
fn verified_by(bytes: &[u8], origin: &str, seq: u64, keys: &[VerifierKey]) -> Result<Head, Error> {
    let note = SignedNote::parse(bytes).map_err(|e| integrity!("not a signed note ({e})"))?;
    if !keys.iter().any(|k| k.check(&note) == Some(true)) {
        return Err(integrity!("no valid signature by the signing key(s)"));
    }
    let head = SignedHead::parse_text(&note.text).map_err(|e| integrity!("not a chainship head ({e})"))?;
    if head.origin != origin || head.head.seq != seq {
        return Err(integrity!(
            "holds head {} of origin {:?}, not seq {seq} of {origin:?}",
            head.head,
            head.origin
        ));
    }
    Ok(head.head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signer::SignerKey;
    use crate::store::file::FileStore;

    use crate::test_run as run;

    fn head(seq: u64) -> Head {
        format!("{seq}:{}", "ab".repeat(32)).parse().unwrap()
    }

    #[test]
    fn only_heads_signed_for_this_origin_count_as_kept() {
        let dir = tempfile::TempDir::new().unwrap();
        let store = AnchorStore::new(FileStore::new(dir.path()));
        let (mine, other) = (
            SignerKey::generate("me").unwrap(),
            SignerKey::generate("other").unwrap(),
        );
        let verifiers = [mine.verifier()];
        assert_eq!(run(highest_verified_head(&store, "o", &verifiers)).unwrap(), None);
        run(publish_head(&store, &[mine.shared()], "o", head(5), false, None)).unwrap();
        // Above it: an empty head, garbage, another key's head, and my head
        // for another origin and seq copied in.
        let origin = dir.path().join("o");
        std::fs::write(origin.join("18446744073709551615.head"), b"").unwrap();
        std::fs::write(origin.join(crate::store::head_name(9)), b"garbage").unwrap();
        run(publish_head(&store, &[other.shared()], "o", head(8), false, None)).unwrap();
        run(publish_head(&store, &[mine.shared()], "p", head(7), false, None)).unwrap();
        std::fs::copy(
            dir.path().join("p").join(crate::store::head_name(7)),
            origin.join(crate::store::head_name(7)),
        )
        .unwrap();
        let note = SignedHead::new("o", head(6), SystemTime::now())
            .sign(&[mine.shared()])
            .unwrap();
        std::fs::write(origin.join(crate::store::head_name(10)), note).unwrap();
        assert_eq!(
            run(highest_verified_head(&store, "o", &verifiers))
                .unwrap()
                .map(|h| h.seq),
            Some(5)
        );
    }

    #[test]
    fn a_kept_head_that_contradicts_is_an_integrity_error_and_a_foreign_note_is_published_beside() {
        use crate::store::memory::MemoryStore;
        use chainship_chain::ErrorKind;
        let store = MemoryStore::default();
        let mine = SignerKey::generate("me").unwrap();
        let keys = &[mine.shared()];
        run(publish_head(&store, keys, "o", head(5), false, None)).unwrap();
        // The same head again: already kept, fine.
        run(publish_head(&store, keys, "o", head(5), false, None)).unwrap();
        // Another hash at seq 5, signed by this key: heads-disagree, never retried.
        let other: Head = format!("5:{}", "cd".repeat(32)).parse().unwrap();
        let e = run(publish_head(&store, keys, "o", other, false, None)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Integrity, "{e}");
        assert!(
            e.message.starts_with("heads-disagree: memory: already keeps head 5:"),
            "{e}"
        );
        // A note someone else planted at seq 6's name: this head goes beside it.
        store.plant("o", &crate::store::head_name(6), b"planted");
        run(publish_head(&store, keys, "o", head(6), false, None)).unwrap();
        let names: Vec<String> = run(store.list("o")).unwrap().into_iter().map(|n| n.name).collect();
        assert_eq!(
            names.len(),
            3,
            "5's head, the planted note, 6's head beside it: {names:?}"
        );
        // The squatted name is passed over, never taken as kept.
        assert_eq!(
            run(highest_verified_head(&store, "o", &[mine.verifier()]))
                .unwrap()
                .map(|h| h.seq),
            Some(5)
        );
    }
}
