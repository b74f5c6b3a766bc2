//! Publishing one head: sign it, write it to the store unless that seq is
//! there already, and accept an existing note only if it says the same.

use std::time::SystemTime;

use chainship_chain::Head;

use crate::keys::SignerKey;
use crate::note::SignedNote;
use crate::signed_head::SignedHead;
use crate::store::{AnchorStore, PutOutcome, StoreError};

/// Signs and writes `head` for `origin`. A note already kept for that seq
/// (a restart re-publishing its cursor) counts as published only if it
/// holds the same origin, seq and hash.
pub async fn publish_head(
    store: &dyn AnchorStore,
    keys: &[SignerKey],
    origin: &str,
    head: Head,
) -> Result<(), StoreError> {
    let note = SignedHead::new(origin, head, SystemTime::now()).sign(keys);
    match store.put_new(origin, head.seq, note.as_bytes()).await? {
        PutOutcome::Created => Ok(()),
        PutOutcome::AlreadyThere(bytes) => {
            let kept = SignedNote::parse(&bytes)
                .ok()
                .and_then(|n| SignedHead::parse_text(&n.text).ok());
            match kept {
                Some(k) if k.origin == origin && k.head == head => Ok(()),
                Some(k) => Err(StoreError::permanent(format!(
                    "heads-disagree: {} already keeps head {} for origin {:?} at seq {}, not {head}",
                    store.describe(),
                    k.head,
                    k.origin,
                    head.seq
                ))),
                None => Err(StoreError::permanent(format!(
                    "{} already keeps an unreadable note at seq {}",
                    store.describe(),
                    head.seq
                ))),
            }
        }
    }
}
