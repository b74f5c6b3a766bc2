//! A fleet's anchor store at a glance (`anchor status --all-origins`):
//! for every origin, its newest trusted head and how old it is, its newest
//! checkpoint and whether its witnesses' quorum cosigned one, from one
//! listing of the whole store (never one per origin) and a few reads per
//! origin. Each origin's answer is a [`Verdict`]: `stale` past `max_age`,
//! `untrusted-key` when no key named after the origin signed its newest
//! note, `uncosigned` when the witnesses' quorum is not met.

use std::time::{Duration, SystemTime};

use chainship_anchor::AnchorStore;
use chainship_anchor::cosignature::WitnessPolicy;
use chainship_anchor::note::{SignedNote, VerifierKey};
use chainship_anchor::store::{COSIGNED_DIR, Junk, OriginNames, StoreError};
use chainship_chain::Head;

use crate::checkpoints::cosignatures;
use crate::finding::{self, Finding, Kind, keys_named_for};
use crate::verdict::Verdict;

/// What one origin's status covered.
#[derive(Debug, Clone, Default)]
pub struct OriginStatus {
    pub origin: String,
    /// Heads and heartbeats kept (by name).
    pub notes: u64,
    /// The newest head a key named after the origin signed, and when.
    pub newest_head: Option<Head>,
    pub published: Option<SystemTime>,
    /// The newest kept checkpoint's size, and the newest cosigned one's.
    pub newest_checkpoint: Option<u64>,
    pub newest_cosigned: Option<u64>,
    /// Whether the newest cosigned checkpoint meets the witness policy's
    /// quorum (`None` without a policy).
    pub quorum_met: Option<bool>,
}

/// What the status is judged against.
pub struct StatusInput<'a> {
    pub store: &'a AnchorStore,
    /// Every trusted key; an origin trusts those named after it.
    pub keys: &'a [VerifierKey],
    pub policy: Option<&'a WitnessPolicy>,
    /// Only origins starting with this.
    pub prefix: Option<&'a str>,
    pub max_age: Option<Duration>,
    pub now: SystemTime,
}

/// Every origin's status (see the module doc), by origin name, and the
/// names the store keeps under no origin.
pub async fn fleet_status(input: &StatusInput<'_>) -> Result<(Vec<Verdict<OriginStatus>>, Junk), StoreError> {
    let (origins, junk) = input.store.origins().await?;
    let mut out = Vec::new();
    for (origin, names) in origins {
        if input.prefix.is_some_and(|p| !origin.starts_with(p)) || !names.publishes() {
            continue;
        }
        out.push(origin_status(input, origin, &names).await?);
    }
    Ok((out, junk))
}

async fn origin_status(
    input: &StatusInput<'_>,
    origin: String,
    names: &OriginNames,
) -> Result<Verdict<OriginStatus>, StoreError> {
    let keys = keys_named_for(input.keys, &origin);
    let store = input.store;
    let mut v = Verdict::new(OriginStatus {
        origin: origin.clone(),
        notes: names.notes,
        newest_checkpoint: names.newest_checkpoint.map(|k| k.seq),
        newest_cosigned: names.newest_cosigned.map(|k| k.seq),
        ..OriginStatus::default()
    });
    // The newest note by name (a heartbeat says the follower is alive);
    // else a plain head of that seq.
    let mut newest = None;
    if names.newest_note.is_none()
        && let Some(cp) = names.newest_checkpoint
    {
        v.findings.push(Finding::new(
            Kind::HeadMissing,
            Some(cp.seq),
            format!("{origin}: the store keeps checkpoint {} but no head at all (deleted, or a first publication cut short)", cp.seq),
        ));
    }
    if let Some(key) = names.newest_note {
        if let Some(note) = store.get_note(&origin, key).await? {
            newest = finding::check_alone(&note, &origin, &keys)
                .trusted
                .pop()
                .map(|t| (t.signed.head, t.signed.published_time()));
        }
        if newest.is_none() {
            newest = crate::pass::trusted_head_at(store, &origin, &keys, key.seq).await?;
        }
        if newest.is_none() {
            v.findings.push(Finding::new(
                Kind::UntrustedKey,
                Some(key.seq),
                format!(
                    "{origin}: its newest note (seq {}) is signed by no trusted key named {origin:?}",
                    key.seq
                ),
            ));
        }
    }
    if let Some((head, published)) = newest {
        v.covered.newest_head = Some(head);
        v.covered.published = published;
        v.last_trusted = Some(head);
        v.last_trusted_published = published;
        if let Some(max_age) = input.max_age {
            let ahead = published.and_then(|p| p.duration_since(input.now).ok());
            let stale = match (published, ahead) {
                (Some(_), Some(ahead)) if ahead > finding::FUTURE_SKEW => Some(Finding::new(
                    Kind::Stale,
                    Some(head.seq),
                    format!(
                        "{origin}: its newest head ({head}) was published {} in the future: a clock ahead or a forged time; freshness cannot rely on it",
                        humantime::format_duration(Duration::from_secs(ahead.as_secs()))
                    ),
                )),
                (Some(p), _) => finding::stale_finding(Some((p, &head)), max_age, input.now),
                (None, _) => finding::stale_finding(None, max_age, input.now),
            };
            v.findings.extend(stale);
        }
    }
    if let Some(policy) = input.policy {
        let cosigned = match names.newest_cosigned {
            Some(key) => {
                store
                    .get_object(&origin, &format!("{COSIGNED_DIR}/{}", key.log_name()))
                    .await?
            }
            None => None,
        };
        let met = cosigned
            .and_then(|bytes| SignedNote::parse(&bytes).ok())
            .map(|note| cosignatures(&note, policy).met);
        v.covered.quorum_met = Some(met == Some(true));
        if met != Some(true) && names.newest_checkpoint.is_some() {
            v.findings.push(Finding::new(
                Kind::Uncosigned,
                names.newest_cosigned.map(|k| k.seq),
                match names.newest_cosigned {
                    Some(k) => format!(
                        "{origin}: its newest cosigned checkpoint ({}) does not carry its witnesses' quorum: {}",
                        k.seq,
                        policy.shortfall()
                    ),
                    None => format!("{origin}: no checkpoint carries its witnesses' cosignatures"),
                },
            ));
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chainship_anchor::signed_head::SignedHead;
    use chainship_anchor::store::head_name;
    use chainship_anchor::store::memory::MemoryStore;
    use ed25519_dalek::SigningKey;

    /// A head of `origin` at `seq`, signed by `key` under the name `key_name`.
    fn note(key: &SigningKey, key_name: &str, origin: &str, seq: u64, at: SystemTime) -> Vec<u8> {
        let head = SignedHead::new(origin, Head::new(seq, [b'a'; 64]), at);
        SignedNote::sign(&head.text(), &[(key_name, key)])
            .to_text()
            .into_bytes()
    }

    #[test]
    fn every_origin_is_named_with_its_newest_head_and_a_foreign_key_is_not_trusted() {
        let store = MemoryStore::default();
        let (a, b) = (SigningKey::from_bytes(&[3; 32]), SigningKey::from_bytes(&[4; 32]));
        // team/b's own key is named otherwise, and given for it by origin=.
        let keys = [
            VerifierKey::new("team/a", a.verifying_key()),
            VerifierKey {
                only_origin: Some("team/b".into()),
                ..VerifierKey::new("team/b-heads", b.verifying_key())
            },
        ];
        let old = SystemTime::now() - Duration::from_secs(3600);
        for seq in [10, 20] {
            store.plant("team/a", &head_name(seq), &note(&a, "team/a", "team/a", seq, old));
        }
        // team/b's head signed with team/a's key: a mix-up, never trusted as team/b's.
        store.plant("team/b", &head_name(5), &note(&a, "team/a", "team/b", 5, old));
        let input = StatusInput {
            store: &store,
            keys: &keys,
            policy: None,
            prefix: None,
            max_age: Some(Duration::from_secs(60)),
            now: SystemTime::now(),
        };
        let (status, _) = crate::test_run(fleet_status(&input)).unwrap();
        assert_eq!(status.len(), 2);
        let first = &status[0];
        assert_eq!(first.covered.origin, "team/a");
        assert_eq!(first.covered.newest_head.map(|h| h.seq), Some(20));
        assert_eq!(first.findings.iter().map(|f| f.kind).collect::<Vec<_>>(), [Kind::Stale]);
        let second = &status[1];
        assert_eq!(second.covered.newest_head, None);
        assert_eq!(second.findings[0].kind, Kind::UntrustedKey);
        store.plant(
            "team/b",
            &head_name(6),
            &note(&b, "team/b-heads", "team/b", 6, SystemTime::now()),
        );
        let (status, _) = crate::test_run(fleet_status(&input)).unwrap();
        assert_eq!(
            status[1].covered.newest_head.map(|h| h.seq),
            Some(6),
            "{:?}",
            status[1].findings
        );
        let fresh = StatusInput {
            max_age: Some(Duration::from_secs(7200)),
            prefix: Some("team/a"),
            ..input
        };
        let (status, _) = crate::test_run(fleet_status(&fresh)).unwrap();
        assert_eq!(status.len(), 1);
        assert!(status[0].passed(), "{:?}", status[0].findings);
        // A head "published" far ahead makes no origin fresh.
        let ahead = SystemTime::now() + Duration::from_secs(86_400);
        store.plant("team/a", &head_name(30), &note(&a, "team/a", "team/a", 30, ahead));
        let (status, _) = crate::test_run(fleet_status(&fresh)).unwrap();
        assert_eq!(status[0].findings[0].kind, Kind::Stale, "{:?}", status[0].findings);
        assert!(status[0].findings[0].message.contains("in the future"));
    }
}
