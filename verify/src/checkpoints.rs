//! The rules for one checkpoint, its pointer and its cosignatures. The one
//! rule for trusting a checkpoint note ([`trust_checkpoint`]: a trusted
//! key's signature that verifies, none that does not, the origin and size
//! expected, and with a witness policy its quorum of cosignatures, none
//! that fails) is used by every reader: the one pass over the store
//! ([`crate::pass`]), a proof ([`crate::proof`]) and an evidence bundle,
//! built and checked. In the store the `checkpoint` pointer must be the
//! newest, and checkpoints above the newest cosigned one are `uncosigned`
//! once past the grace.

use crate::finding::{Finding, Kind};
use chainship_anchor::checkpoint::{Checkpoint, ReadCheckpoint, read_checkpoint};
use chainship_anchor::cosignature::{WitnessPolicy, check_cosignatures};
use chainship_anchor::note::{SignedNote, VerifierKey};
use chainship_anchor::store::{AnchorStore, StoreError};

/// Why a checkpoint is not trusted: the finding's kind and why, in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Distrust {
    pub kind: Kind,
    pub message: String,
}

/// What a checkpoint must be, where the reader knows: of this origin, of this size.
#[derive(Clone, Copy, Debug, Default)]
pub struct Expect<'a> {
    pub origin: Option<&'a str>,
    pub size: Option<u64>,
}

/// The cosignatures of a policy's witnesses on one note.
#[derive(Clone, Debug, Default)]
pub struct Cosignatures {
    /// Witnesses whose cosignature verifies.
    pub valid: Vec<String>,
    /// Witnesses with a cosignature line that does not verify (forged or damaged).
    pub bad: Vec<String>,
    /// Whether the valid ones meet the policy's quorum.
    pub met: bool,
}

impl Cosignatures {
    /// The quorum rule: a cosignature that does not verify is a bad
    /// signature whatever the others; too few valid ones are uncosigned.
    pub fn distrust(&self, size: u64, policy: &WitnessPolicy) -> Option<Distrust> {
        if !self.bad.is_empty() {
            return Some(Distrust {
                kind: Kind::BadSignature,
                message: format!(
                    "the cosignature of {} on checkpoint {size} does not verify",
                    self.bad.join(", ")
                ),
            });
        }
        (!self.met).then(|| Distrust {
            kind: Kind::Uncosigned,
            message: format!(
                "checkpoint {size} carries {} valid cosignature(s): {}",
                self.valid.len(),
                policy.shortfall()
            ),
        })
    }
}

/// The cosignatures of `policy`'s witnesses on `note`.
pub fn cosignatures(note: &SignedNote, policy: &WitnessPolicy) -> Cosignatures {
    let c = check_cosignatures(note, &policy.keys);
    Cosignatures {
        met: policy.met(&c.valid),
        valid: c.valid,
        bad: c.bad,
    }
}

/// A checkpoint note read and judged by [`trust_checkpoint`].
#[derive(Clone, Debug)]
pub struct JudgedCheckpoint {
    pub read: ReadCheckpoint,
    /// With a witness policy: its witnesses' cosignatures.
    pub cosignatures: Option<Cosignatures>,
    /// Why it is not trusted; `None` when it is.
    pub distrust: Option<Distrust>,
}

impl JudgedCheckpoint {
    /// The checkpoint, when it is trusted.
    pub fn trusted(self) -> Result<ReadCheckpoint, Distrust> {
        match self.distrust {
            None => Ok(self.read),
            Some(d) => Err(d),
        }
    }
}

/// The one rule for trusting a checkpoint note: a trusted key signed it
/// and every trusted key's signature on it verifies, it is of the origin
/// and size expected, and with a `policy`, its witnesses' quorum cosigned
/// it with no cosignature that fails. `Err` when the bytes are no
/// checkpoint note at all.
pub fn trust_checkpoint(
    note: &[u8],
    keys: &[VerifierKey],
    policy: Option<&WitnessPolicy>,
    expect: Expect<'_>,
) -> Result<JudgedCheckpoint, chainship_chain::Error> {
    Ok(trust_read(read_checkpoint(note, keys)?, policy, expect))
}

/// [`trust_checkpoint`] of a note read already.
fn trust_read(read: ReadCheckpoint, policy: Option<&WitnessPolicy>, expect: Expect<'_>) -> JudgedCheckpoint {
    let cp = &read.checkpoint;
    let size = cp.size;
    let cosignatures = policy.map(|p| cosignatures(&read.note, p));
    let distrust = if read.bad_signature {
        Some(Distrust {
            kind: Kind::BadSignature,
            message: format!("a trusted key's signature on checkpoint {size} does not verify"),
        })
    } else if read.signers.is_empty() {
        Some(Distrust {
            kind: Kind::UntrustedKey,
            message: format!("checkpoint {size} is signed by no trusted key (for that size)"),
        })
    } else if expect.origin.is_some_and(|o| o != cp.origin) || expect.size.is_some_and(|s| s != size) {
        let mut wanted = Vec::new();
        if let Some(s) = expect.size {
            wanted.push(format!("size {s}"));
        }
        if let Some(o) = expect.origin {
            wanted.push(format!("origin {o:?}"));
        }
        Some(Distrust {
            kind: Kind::HeadsDisagree,
            message: format!(
                "checkpoint of size {size} of origin {:?} where {} was expected",
                cp.origin,
                wanted.join(" of ")
            ),
        })
    } else {
        policy.and_then(|p| cosignatures.as_ref().and_then(|c| c.distrust(size, p)))
    };
    JudgedCheckpoint {
        read,
        cosignatures,
        distrust,
    }
}

/// A checkpoint a trusted key signed, and where it is kept.
#[derive(Clone, Debug)]
pub struct TrustedCheckpoint {
    pub checkpoint: Checkpoint,
    pub source: String,
    pub signers: Vec<String>,
}

/// The `checkpoint` pointer, which tlog clients read first, judged against
/// the newest trusted checkpoint kept (`newest`, whose head is kept): it must
/// be there, be a checkpoint of this origin a trusted key signed, and be
/// that checkpoint (a cosigned twin counts). A rolled-back, replaced or
/// deleted pointer shows clients an older or no log.
pub async fn audit_pointer(
    store: &AnchorStore,
    origin: &str,
    keys: &[VerifierKey],
    newest: &Checkpoint,
) -> Result<Option<Finding>, StoreError> {
    let source = format!(
        "{}/{origin}/{}",
        store.describe(),
        chainship_anchor::store::LATEST_CHECKPOINT
    );
    let missing = |why: String| {
        Some(
            Finding::new(
                Kind::CheckpointMissing,
                Some(newest.size),
                format!(
                    "the checkpoint pointer {why}; the newest kept checkpoint is {}",
                    newest.size
                ),
            )
            .at(Some(source.clone())),
        )
    };
    let Some(bytes) = store
        .get_object(origin, chainship_anchor::store::LATEST_CHECKPOINT)
        .await?
    else {
        return Ok(missing("is missing (tlog clients read it first)".to_owned()));
    };
    let expect = Expect {
        origin: Some(origin),
        size: None,
    };
    let read = match trust_checkpoint(&bytes, keys, None, expect).map(JudgedCheckpoint::trusted) {
        Ok(Ok(r)) => r,
        _ => {
            return Ok(missing(
                "is not a checkpoint of this origin signed by a trusted key".to_owned(),
            ));
        }
    };
    let cp = read.checkpoint;
    Ok(match cp.size.cmp(&newest.size) {
        std::cmp::Ordering::Less => missing(format!("names checkpoint {}: rolled back", cp.size)),
        std::cmp::Ordering::Equal if cp.root != newest.root => Some(
            Finding::new(
                Kind::CheckpointFork,
                Some(cp.size),
                format!(
                    "the checkpoint pointer names size {} with root {}, the kept checkpoint {}",
                    cp.size,
                    cp.root_b64(),
                    newest.root_b64()
                ),
            )
            .at(Some(source)),
        ),
        std::cmp::Ordering::Equal => None,
        // Past it: fine only while that checkpoint is kept (published since
        // the listing); one the store no longer keeps was deleted.
        std::cmp::Ordering::Greater => {
            let kept = store
                .get_object(origin, &chainship_anchor::checkpoint::checkpoint_path(cp.size))
                .await?
                .is_some();
            (!kept).then(|| {
                Finding::new(Kind::CheckpointMissing, Some(cp.size), format!(
                        "the checkpoint pointer names checkpoint {}, which the store does not keep: deleted (the newest kept checkpoint is {})",
                        cp.size, newest.size
                    )).at(Some(source.clone()))
            })
        }
    })
}

/// The `checkpoint` pointer where the store keeps no checkpoint at all:
/// only the follower writes it, after the checkpoint it names, so a pointer
/// there means the kept checkpoints were deleted (a finding at the size a
/// trusted pointer names, else at none); so do tiles without a pointer. No
/// pointer and no tile: a store of heads only.
pub async fn pointer_without_checkpoints(
    store: &AnchorStore,
    origin: &str,
    keys: &[VerifierKey],
) -> Result<Option<Finding>, StoreError> {
    let source = |what: &str| Some(format!("{}/{origin}/{what}", store.describe()));
    let Some(bytes) = store
        .get_object(origin, chainship_anchor::store::LATEST_CHECKPOINT)
        .await?
    else {
        // Tiles are written only beside checkpoints: kept alone, they show some were.
        let tiles = store.list_paths(origin, "tile").await?;
        return Ok((!tiles.is_empty()).then(|| {
            Finding::new(
                Kind::CheckpointMissing,
                None,
                "the store keeps tiles but no checkpoint and no checkpoint pointer: the kept checkpoints were deleted, or the first publication was cut short (the follower's next start finishes it)",
            )
            .at(source("tile"))
        }));
    };
    let expect = Expect {
        origin: Some(origin),
        size: None,
    };
    let size = match trust_checkpoint(&bytes, keys, None, expect).map(JudgedCheckpoint::trusted) {
        Ok(Ok(read)) => Some(read.checkpoint.size),
        _ => None,
    };
    let named = size.map_or("a checkpoint no trusted key signed".to_owned(), |s| {
        format!("checkpoint {s}")
    });
    Ok(Some(
        Finding::new(
            Kind::CheckpointMissing,
            size,
            format!("the checkpoint pointer names {named}, but the store keeps no checkpoint: the kept checkpoints were deleted"),
        )
        .at(source(chainship_anchor::store::LATEST_CHECKPOINT)),
    ))
}

/// Reads a kept checkpoint note (kept as size `size_in_name`, at `source`):
/// it, when [`trust_checkpoint`] trusts it for `origin` at its place; else
/// the finding that says why not (unreadable, a bad signature, no trusted
/// key, the wrong origin or size). Its witnesses are judged apart, on the
/// cosigned note kept beside it ([`judge_cosigned`]).
pub fn trusted_checkpoint(
    bytes: &[u8],
    keys: &[VerifierKey],
    origin: &str,
    size_in_name: u64,
    source: &str,
) -> Result<ReadCheckpoint, Box<Finding>> {
    trusted_read(read_checkpoint(bytes, keys), origin, size_in_name, source)
}

/// [`trusted_checkpoint`] of many kept checkpoints (bytes, size in name,
/// where kept), their signatures verified in batches.
pub fn trusted_checkpoints(
    notes: &[(&[u8], u64, &str)],
    keys: &[VerifierKey],
    origin: &str,
) -> Vec<Result<ReadCheckpoint, Box<Finding>>> {
    let bytes: Vec<&[u8]> = notes.iter().map(|(b, _, _)| *b).collect();
    chainship_anchor::checkpoint::read_checkpoints(&bytes, keys)
        .into_iter()
        .zip(notes)
        .map(|(read, (_, size, source))| trusted_read(read, origin, *size, source))
        .collect()
}

/// [`trusted_checkpoint`] of a note read already.
fn trusted_read(
    read: Result<ReadCheckpoint, chainship_chain::Error>,
    origin: &str,
    size_in_name: u64,
    source: &str,
) -> Result<ReadCheckpoint, Box<Finding>> {
    let expect = Expect {
        origin: Some(origin),
        size: Some(size_in_name),
    };
    let refuse = |kind, message| Box::new(Finding::new(kind, Some(size_in_name), message).at(Some(source.to_owned())));
    let judged = read.map(|read| trust_read(read, None, expect)).map_err(|why| {
        refuse(
            Kind::BadSignature,
            format!("checkpoint {size_in_name}: unreadable ({})", why.message),
        )
    })?;
    judged.trusted().map_err(|d| match d.kind {
        Kind::HeadsDisagree => refuse(d.kind, format!("checkpoint kept as size {size_in_name}: {}", d.message)),
        _ => refuse(d.kind, d.message),
    })
}

/// What the witness check found: findings, how many checkpoints carry the
/// quorum, the newest that does, and recent ones still waiting (warnings).
#[derive(Clone, Debug, Default)]
pub struct CosignAudit {
    pub findings: Vec<Finding>,
    pub cosigned: usize,
    pub newest_cosigned: Option<u64>,
    pub waiting: Vec<String>,
}

/// Judges the cosigned note kept for `cp`: a note that is not `cp`, or a
/// trusted witness's cosignature that does not verify, is `bad-signature`
/// (into `findings`). True when it carries the policy's quorum.
pub fn judge_cosigned(
    cp: &Checkpoint,
    bytes: &[u8],
    policy: &WitnessPolicy,
    source: &str,
    findings: &mut Vec<Finding>,
) -> bool {
    let note = match chainship_anchor::note::SignedNote::parse(bytes) {
        Ok(n) if n.text == cp.text() => n,
        _ => {
            findings.push(
                Finding::new(
                    Kind::BadSignature,
                    Some(cp.size),
                    format!("cosigned checkpoint {}: not the checkpoint of that size", cp.size),
                )
                .at(Some(source.to_owned())),
            );
            return false;
        }
    };
    let cosigned = cosignatures(&note, policy);
    if !cosigned.bad.is_empty() {
        findings.push(
            Finding::new(
                Kind::BadSignature,
                Some(cp.size),
                format!(
                    "cosigned checkpoint {}: a cosignature that does not verify, from {}",
                    cp.size,
                    cosigned.bad.join(", ")
                ),
            )
            .at(Some(source.to_owned())),
        );
    }
    cosigned.met
}

/// A trusted checkpoint above the newest cosigned one.
pub struct Uncosigned {
    pub size: u64,
    /// When its head was published, if known.
    pub published: Option<std::time::SystemTime>,
    pub source: String,
}

/// Checkpoints above the newest cosigned one whose head is older than
/// `grace` are `uncosigned` (one finding for the range); younger ones wait.
pub fn judge_uncosigned(
    out: &mut CosignAudit,
    above: &[Uncosigned],
    policy: &chainship_anchor::cosignature::WitnessPolicy,
    grace: std::time::Duration,
    now: std::time::SystemTime,
) {
    // A quorum met by no checkpoint at all vouches for nothing: the grace
    // only lets the newest checkpoints wait behind an older cosigned one.
    if out.newest_cosigned.is_none() {
        if let (Some(first), Some(last)) = (above.first(), above.last()) {
            out.findings.push(Finding::new(Kind::Uncosigned, Some(first.size), format!(
                    "no checkpoint meets the witness quorum of {} (checkpoints {} to {}, {} of them); newest cosigned: none",
                    policy.describe(),
                    first.size,
                    last.size,
                    above.len()
                )).at(Some(first.source.clone())));
        }
        return;
    }
    let (waiting, overdue): (Vec<&Uncosigned>, Vec<&Uncosigned>) = above.iter().partition(|c| {
        c.published
            .and_then(|at| now.duration_since(at).ok())
            .is_some_and(|age| age < grace)
    });
    for c in &waiting {
        out.waiting.push(format!(
            "checkpoint {} is not cosigned yet (published less than {} ago)",
            c.size,
            humantime::format_duration(grace)
        ));
    }
    if let (Some(first), Some(last)) = (overdue.first(), overdue.last()) {
        let (a, b) = (first.size, last.size);
        let which = if a == b {
            format!("checkpoint {a}")
        } else {
            format!("checkpoints {a} to {b} ({} of them)", overdue.len())
        };
        let newest = out.newest_cosigned.map_or("none".to_owned(), |c| c.to_string());
        out.findings.push(
            Finding::new(
                Kind::Uncosigned,
                Some(a),
                format!(
                    "{which}: {}, past the witness grace; newest cosigned: checkpoint {newest}",
                    policy.shortfall()
                ),
            )
            .at(Some(first.source.clone())),
        );
    }
}

#[cfg(test)]
mod tests {
    //! The one checkpoint rule, each way a note can fail it.

    use super::*;
    use base64::Engine;
    use chainship_anchor::cosignature::witness_key;
    use chainship_anchor::signer::SignerKey;

    fn note(key: &SignerKey, origin: &str, size: u64) -> String {
        let cp = Checkpoint {
            origin: origin.into(),
            size,
            root: [7; 32],
        };
        cp.sign(&[key.shared()]).unwrap()
    }

    fn kind(judged: JudgedCheckpoint) -> Option<Kind> {
        judged.distrust.map(|d| d.kind)
    }

    #[test]
    fn a_checkpoint_is_trusted_only_as_the_one_rule_says() {
        let key = SignerKey::generate("o").unwrap();
        let keys = [key.verifier()];
        let good = note(&key, "o", 5);
        let expect = Expect {
            origin: Some("o"),
            size: Some(5),
        };
        fn judge(
            bytes: &str,
            keys: &[VerifierKey],
            policy: Option<&WitnessPolicy>,
            expect: Expect<'_>,
        ) -> JudgedCheckpoint {
            trust_checkpoint(bytes.as_bytes(), keys, policy, expect).unwrap()
        }
        assert_eq!(kind(judge(&good, &keys, None, expect)), None);
        assert_eq!(kind(judge(&good, &keys, None, Expect::default())), None);
        // Another key, another origin, another size.
        let other = SignerKey::generate("o").unwrap();
        assert_eq!(
            kind(judge(&good, &[other.verifier()], None, expect)),
            Some(Kind::UntrustedKey)
        );
        let wrong = Expect {
            origin: Some("p"),
            ..expect
        };
        assert_eq!(kind(judge(&good, &keys, None, wrong)), Some(Kind::HeadsDisagree));
        let wrong = Expect {
            size: Some(6),
            ..expect
        };
        assert_eq!(kind(judge(&good, &keys, None, wrong)), Some(Kind::HeadsDisagree));
        // The root changed under the signature.
        let edited = good.replacen("\n5\n", "\n6\n", 1);
        let wrong = Expect {
            size: Some(6),
            ..expect
        };
        assert_eq!(kind(judge(&edited, &keys, None, wrong)), Some(Kind::BadSignature));
        assert!(trust_checkpoint(b"not a note", &keys, None, expect).is_err());
        // A forged line of the trusted key after its good one: whatever the order, bad.
        let line = good.lines().last().unwrap();
        let (head, blob) = line.rsplit_once(' ').unwrap();
        let mut bytes = base64::engine::general_purpose::STANDARD.decode(blob).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        let forged_line = format!("{head} {}\n", base64::engine::general_purpose::STANDARD.encode(&bytes));
        let twice = format!("{good}{forged_line}");
        assert_eq!(kind(judge(&twice, &keys, None, expect)), Some(Kind::BadSignature));
        let first = good.replace(&format!("{line}\n"), &format!("{forged_line}{line}\n"));
        assert_eq!(kind(judge(&first, &keys, None, expect)), Some(Kind::BadSignature));

        // Witnesses: none cosigned, then one whose cosignature does not verify.
        let w = ed25519_dalek::SigningKey::from_bytes(&[3; 32]);
        let witness = witness_key(&w, "witness.example/w");
        let policy = WitnessPolicy {
            keys: vec![witness.clone()],
            quorum: 1,
            rule: None,
        };
        let judged = judge(&good, &keys, Some(&policy), expect);
        assert_eq!(judged.cosignatures.as_ref().map(|c| c.met), Some(false));
        assert_eq!(kind(judged), Some(Kind::Uncosigned));
        let mut blob = witness.id.to_vec();
        blob.extend_from_slice(&1_700_000_000u64.to_be_bytes());
        blob.extend_from_slice(&[0; 64]);
        let forged = format!(
            "{good}\u{2014} {} {}\n",
            witness.name,
            base64::engine::general_purpose::STANDARD.encode(blob)
        );
        let judged = judge(&forged, &keys, Some(&policy), expect);
        assert_eq!(judged.cosignatures.as_ref().map(|c| c.bad.len()), Some(1));
        assert_eq!(kind(judged), Some(Kind::BadSignature));
        // With no quorum asked, the witnesses decide nothing.
        let none = WitnessPolicy { quorum: 0, ..policy };
        assert_eq!(kind(judge(&good, &keys, Some(&none), expect)), None);
    }
}
