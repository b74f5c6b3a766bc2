//! The rules for one kept checkpoint, its pointer and its cosignatures,
//! used by the one pass over the store ([`crate::pass`]): a
//! checkpoint must be signed by a trusted key for this origin at its place;
//! the `checkpoint` pointer must be the newest; a cosigned checkpoint must
//! carry the witnesses' quorum, and those above the newest cosigned one
//! are `uncosigned` once past the grace.

use crate::finding::{Finding, Kind};
use chainship_anchor::checkpoint::{Checkpoint, read_checkpoint};
use chainship_anchor::note::VerifierKey;
use chainship_anchor::store::{AnchorStore, StoreError};

/// A checkpoint a trusted key signed, and where it is kept.
#[derive(Clone, Debug)]
pub struct TrustedCheckpoint {
    pub checkpoint: Checkpoint,
    pub source: String,
    pub signers: Vec<String>,
}

fn finding(kind: Kind, size: Option<u64>, message: String, source: Option<String>) -> Finding {
    Finding {
        kind,
        seq: size,
        message,
        expected: None,
        found: None,
        source,
        remedy: None,
    }
}

/// The `checkpoint` pointer, which tlog clients read first, judged against
/// the newest trusted checkpoint kept (`newest`, whose head is kept): it must
/// be there, be a checkpoint of this origin a trusted key signed, and be
/// that checkpoint (a cosigned twin counts). A rolled-back, replaced or
/// deleted pointer shows clients an older or no log.
pub async fn audit_pointer(
    store: &dyn AnchorStore,
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
        Some(finding(
            Kind::CheckpointMissing,
            Some(newest.size),
            format!(
                "the checkpoint pointer {why}; the newest kept checkpoint is {}",
                newest.size
            ),
            Some(source.clone()),
        ))
    };
    let Some(bytes) = store
        .get_object(origin, chainship_anchor::store::LATEST_CHECKPOINT)
        .await?
    else {
        return Ok(missing("is missing (tlog clients read it first)".to_owned()));
    };
    let read = match read_checkpoint(&bytes, keys) {
        Ok(r) if !r.signers.is_empty() && !r.bad_signature && r.checkpoint.origin == origin => r,
        _ => {
            return Ok(missing(
                "is not a checkpoint of this origin signed by a trusted key".to_owned(),
            ));
        }
    };
    let cp = read.checkpoint;
    Ok(match cp.size.cmp(&newest.size) {
        std::cmp::Ordering::Less => missing(format!("names checkpoint {}: rolled back", cp.size)),
        std::cmp::Ordering::Equal if cp.root != newest.root => Some(finding(
            Kind::CheckpointFork,
            Some(cp.size),
            format!(
                "the checkpoint pointer names size {} with root {}, the kept checkpoint {}",
                cp.size,
                cp.root_b64(),
                newest.root_b64()
            ),
            Some(source),
        )),
        std::cmp::Ordering::Equal => None,
        // Past it: fine only while that checkpoint is kept (published since
        // the listing); one the store no longer keeps was deleted.
        std::cmp::Ordering::Greater => {
            let kept = store
                .get_object(origin, &chainship_anchor::checkpoint::checkpoint_path(cp.size))
                .await?
                .is_some();
            (!kept).then(|| {
                finding(
                    Kind::CheckpointMissing,
                    Some(cp.size),
                    format!(
                        "the checkpoint pointer names checkpoint {}, which the store does not keep: deleted (the newest kept checkpoint is {})",
                        cp.size, newest.size
                    ),
                    Some(source.clone()),
                )
            })
        }
    })
}

/// Reads a kept checkpoint note (kept as size `size_in_name`, at `source`):
/// it, when a trusted key signed it for `origin` at its place; else the
/// finding that says why not (unreadable, a bad signature, no trusted key,
/// the wrong origin or size).
pub fn trusted_checkpoint(
    bytes: &[u8],
    keys: &[VerifierKey],
    origin: &str,
    size_in_name: u64,
    source: &str,
) -> Result<chainship_anchor::checkpoint::ReadCheckpoint, Box<Finding>> {
    let refuse = |kind, size, message| Err(Box::new(finding(kind, Some(size), message, Some(source.to_owned()))));
    let read = match read_checkpoint(bytes, keys) {
        Ok(read) => read,
        Err(why) => {
            let message = format!("checkpoint {size_in_name}: unreadable ({why})");
            return refuse(Kind::BadSignature, size_in_name, message);
        }
    };
    let size = read.checkpoint.size;
    if read.bad_signature {
        let message = format!("checkpoint {size}: a trusted key's signature does not verify");
        return refuse(Kind::BadSignature, size, message);
    }
    if read.signers.is_empty() {
        let message = format!("checkpoint {size}: signed by no trusted key (for this size)");
        return refuse(Kind::UntrustedKey, size, message);
    }
    if read.checkpoint.origin != origin || size != size_in_name {
        let message = format!(
            "checkpoint kept as size {size_in_name} holds size {size} of origin {:?}",
            read.checkpoint.origin
        );
        return refuse(Kind::HeadsDisagree, size, message);
    }
    Ok(read)
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
    policy: &chainship_anchor::cosignature::WitnessPolicy,
    source: &str,
    findings: &mut Vec<Finding>,
) -> bool {
    let note = match chainship_anchor::note::SignedNote::parse(bytes) {
        Ok(n) if n.text == cp.text() => n,
        _ => {
            findings.push(finding(
                Kind::BadSignature,
                Some(cp.size),
                format!("cosigned checkpoint {}: not the checkpoint of that size", cp.size),
                Some(source.to_owned()),
            ));
            return false;
        }
    };
    let cosigned = chainship_anchor::cosignature::check_cosignatures(&note, &policy.keys);
    if !cosigned.bad.is_empty() {
        findings.push(finding(
            Kind::BadSignature,
            Some(cp.size),
            format!(
                "cosigned checkpoint {}: a cosignature that does not verify, from {}",
                cp.size,
                cosigned.bad.join(", ")
            ),
            Some(source.to_owned()),
        ));
    }
    policy.met(&cosigned.valid)
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
            out.findings.push(finding(
                Kind::Uncosigned,
                Some(first.size),
                format!(
                    "no checkpoint meets the witness quorum of {} (checkpoints {} to {}, {} of them); newest cosigned: none",
                    policy.describe(),
                    first.size,
                    last.size,
                    above.len()
                ),
                Some(first.source.clone()),
            ));
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
        out.findings.push(finding(
            Kind::Uncosigned,
            Some(a),
            format!(
                "{which}: {}, past the witness grace; newest cosigned: checkpoint {newest}",
                policy.shortfall()
            ),
            Some(first.source.clone()),
        ));
    }
}
