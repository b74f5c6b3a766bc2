//! Judging the transparency log kept in a store, from the store alone:
//! every kept checkpoint must be signed by a trusted key, reproduced by the
//! store's tiles, and consistent with the next larger one (an RFC 6962
//! consistency proof read from the tiles). Two checkpoints that are not
//! one tree are a `checkpoint-fork`, naming both sizes; tiles that do not
//! give a checkpoint's root are `tiles-disagree`.
//!
//! What the database (or a copy) says about the same sizes is checked by
//! the walk (`roots_at` in the chain crate): see [`compare_roots`].

use chainship_tlog::merkle::{Hash, consistency_proof, verify_consistency};

use crate::audit::{Finding, Kind};
use crate::checkpoint::{Checkpoint, read_checkpoint, size_from_checkpoint_name};
use crate::note::VerifierKey;
use crate::store::{AnchorStore, CHECKPOINTS_DIR, StoreError};
use crate::tile_reader::{TileError, TileReader};

/// A checkpoint a trusted key signed, and where it is kept.
#[derive(Clone, Debug)]
pub struct TrustedCheckpoint {
    pub checkpoint: Checkpoint,
    pub source: String,
    pub signers: Vec<String>,
}

/// The kept checkpoints, sorted out and checked against the tiles.
#[derive(Clone, Debug, Default)]
pub struct CheckpointAudit {
    /// Checkpoint notes kept for the origin.
    pub kept: usize,
    /// Trusted checkpoints, by size (one per size).
    pub trusted: Vec<TrustedCheckpoint>,
    /// Consistency proofs checked between consecutive checkpoints.
    pub consistent_pairs: usize,
    /// Tiles and bundles read by the full tile audit (0: not run).
    pub tiles_audited: u64,
    pub findings: Vec<Finding>,
}

impl CheckpointAudit {
    /// The trusted checkpoints' sizes, ascending.
    pub fn sizes(&self) -> Vec<u64> {
        self.trusted.iter().map(|t| t.checkpoint.size).collect()
    }
}

fn finding(kind: Kind, size: Option<u64>, message: String, source: Option<String>) -> Finding {
    Finding {
        kind,
        seq: size,
        message,
        expected: None,
        found: None,
        source,
    }
}

/// Reads a kept checkpoint note (kept as size `size_in_name`, at `source`):
/// it, when a trusted key signed it for `origin` at its place; else the
/// finding that says why not (unreadable, a bad signature, no trusted key,
/// the wrong origin or size).
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
    let source = format!("{}/{origin}/{}", store.describe(), crate::store::LATEST_CHECKPOINT);
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
    let Some(bytes) = store.get_object(origin, crate::store::LATEST_CHECKPOINT).await? else {
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
        // At the newest, or past it (a checkpoint kept without its head yet).
        _ => None,
    })
}

pub fn trusted_checkpoint(
    bytes: &[u8],
    keys: &[VerifierKey],
    origin: &str,
    size_in_name: u64,
    source: &str,
) -> Result<crate::checkpoint::ReadCheckpoint, Box<Finding>> {
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

/// Reads and judges every checkpoint kept for `origin`.
pub async fn audit_checkpoints(
    store: &dyn AnchorStore,
    origin: &str,
    keys: &[VerifierKey],
    every_tile: bool,
) -> Result<CheckpointAudit, StoreError> {
    let mut audit = CheckpointAudit::default();
    let names = store.list_names(origin, CHECKPOINTS_DIR).await?;
    for name in names {
        let Some(size_in_name) = size_from_checkpoint_name(&name) else {
            continue;
        };
        let path = format!("{CHECKPOINTS_DIR}/{name}");
        let Some(bytes) = store.get_object(origin, &path).await? else {
            continue;
        };
        audit.kept += 1;
        let source = format!("{}/{origin}/{path}", store.describe());
        let read = match trusted_checkpoint(&bytes, keys, origin, size_in_name, &source) {
            Ok(read) => read,
            Err(f) => {
                audit.findings.push(*f);
                continue;
            }
        };
        let size = read.checkpoint.size;
        match audit.trusted.iter().find(|t| t.checkpoint.size == size) {
            Some(other) if other.checkpoint.root != read.checkpoint.root => audit.findings.push(finding(
                Kind::CheckpointFork,
                Some(size),
                format!(
                    "two trusted checkpoints of size {size} with different roots ({} and {})",
                    other.checkpoint.root_b64(),
                    read.checkpoint.root_b64()
                ),
                Some(source),
            )),
            Some(_) => {}
            None => audit.trusted.push(TrustedCheckpoint {
                checkpoint: read.checkpoint,
                source,
                signers: read.signers,
            }),
        }
    }
    audit.trusted.sort_by_key(|t| t.checkpoint.size);
    check_tiles(store, origin, &mut audit).await?;
    if every_tile && let Some(newest) = audit.trusted.last() {
        let tiles = crate::tile_audit::audit_tiles(store, origin, &newest.checkpoint, 0).await?;
        audit.tiles_audited = tiles.objects;
        audit.findings.extend(tiles.findings);
        if tiles.more > 0 {
            audit.findings.push(finding(
                Kind::TilesDisagree,
                Some(newest.checkpoint.size),
                format!("and {} more tile(s) or bundle(s) like those above", tiles.more),
                None,
            ));
        }
    }
    Ok(audit)
}

/// Each checkpoint's root from its tiles, and each consecutive pair's
/// consistency proof from the larger one's tiles.
async fn check_tiles(store: &dyn AnchorStore, origin: &str, audit: &mut CheckpointAudit) -> Result<(), StoreError> {
    let mut reader = TileReader::new(store, origin);
    let mut previous: Option<&TrustedCheckpoint> = None;
    for t in &audit.trusted {
        let cp = &t.checkpoint;
        let root = reader.run(cp.size, |set| set.root()).await;
        match root {
            Ok(root) if root == cp.root => {}
            Ok(root) => audit.findings.push(tiles_disagree(
                cp,
                format!("its tiles give root {}", b64(&root)),
                &t.source,
            )),
            Err(TileError::Store(e)) => return Err(e),
            Err(e) => audit.findings.push(tiles_disagree(cp, e.to_string(), &t.source)),
        }
        if let Some(old) = previous {
            let (o, n) = (&old.checkpoint, cp);
            let proof = reader.run(n.size, |set| consistency_proof(o.size, n.size, set)).await;
            match proof {
                Ok(proof) if verify_consistency(o.size, n.size, &o.root, &n.root, &proof) => audit.consistent_pairs += 1,
                Ok(_) => audit.findings.push(finding(
                    Kind::CheckpointFork,
                    Some(n.size),
                    format!(
                        "checkpoints {} and {} are not one tree: no consistency proof between them (the larger is another history, e.g. a database restored from a backup and grown again)",
                        o.size, n.size
                    ),
                    Some(t.source.clone()),
                )),
                Err(TileError::Store(e)) => return Err(e),
                Err(e) => audit.findings.push(tiles_disagree(
                    n,
                    format!("no consistency proof from size {}: {e}", o.size),
                    &t.source,
                )),
            }
        }
        previous = Some(t);
    }
    Ok(())
}

fn tiles_disagree(cp: &Checkpoint, why: String, source: &str) -> Finding {
    finding(
        Kind::TilesDisagree,
        Some(cp.size),
        format!("checkpoint {} (root {}): {why}", cp.size, cp.root_b64()),
        Some(source.to_owned()),
    )
}

use chainship_tlog::hash_b64 as b64;

/// Compares the roots a walk computed (database or copy) with the trusted
/// checkpoints: a differing root is a `fork` at that size. Returns the
/// findings and how many checkpoints matched.
pub fn compare_roots(trusted: &[TrustedCheckpoint], roots: &[(u64, Hash)], what: &str) -> (Vec<Finding>, usize) {
    let mut findings = Vec::new();
    let mut matched = 0;
    for t in trusted {
        let cp = &t.checkpoint;
        match roots.iter().find(|(size, _)| *size == cp.size) {
            Some((_, root)) if *root == cp.root => matched += 1,
            Some((_, root)) => findings.push(Finding {
                kind: Kind::Fork,
                seq: Some(cp.size),
                message: format!(
                    "checkpoint {}: the {what}'s first {} hashes have root {}, the checkpoint {}",
                    cp.size,
                    cp.size,
                    b64(root),
                    cp.root_b64()
                ),
                expected: Some(cp.root_b64()),
                found: Some(b64(root)),
                source: Some(t.source.clone()),
            }),
            None => {}
        }
    }
    (findings, matched)
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

/// Checks the cosigned checkpoints (`cosigned/<size>`) against `policy`. A
/// cosigned checkpoint vouches for every smaller one (they are one tree:
/// the consistency proofs say so), so only checkpoints above the newest
/// cosigned one can be `uncosigned`: those whose head was published more
/// than `grace` ago (the witnesses had time to answer); younger ones are
/// reported as waiting. A cosignature line of a trusted witness that does
/// not verify is `bad-signature`.
pub async fn audit_cosignatures(
    store: &dyn AnchorStore,
    origin: &str,
    trusted: &[TrustedCheckpoint],
    policy: &crate::cosignature::WitnessPolicy,
    published: &dyn Fn(u64) -> Option<std::time::SystemTime>,
    grace: std::time::Duration,
) -> Result<CosignAudit, StoreError> {
    use crate::checkpoint::cosigned_path;
    let mut out = CosignAudit::default();
    if trusted.is_empty() {
        out.findings.push(finding(
            Kind::Uncosigned,
            None,
            format!("no trusted checkpoint of origin {origin:?} to check witness cosignatures on"),
            None,
        ));
        return Ok(out);
    }
    for t in trusted {
        let cp = &t.checkpoint;
        let path = cosigned_path(cp.size);
        let Some(bytes) = store.get_object(origin, &path).await? else {
            continue;
        };
        let source = format!("{}/{origin}/{path}", store.describe());
        if judge_cosigned(cp, &bytes, policy, &source, &mut out.findings) {
            out.cosigned += 1;
            out.newest_cosigned = Some(cp.size);
        }
    }
    let covered = out.newest_cosigned.unwrap_or(0);
    let above: Vec<Uncosigned> = trusted
        .iter()
        .filter(|t| t.checkpoint.size > covered)
        .map(|t| Uncosigned {
            size: t.checkpoint.size,
            published: published(t.checkpoint.size),
            source: t.source.clone(),
        })
        .collect();
    judge_uncosigned(&mut out, &above, policy, grace, std::time::SystemTime::now());
    Ok(out)
}

/// Judges the cosigned note kept for `cp`: a note that is not `cp`, or a
/// trusted witness's cosignature that does not verify, is `bad-signature`
/// (into `findings`). True when it carries the policy's quorum.
pub fn judge_cosigned(
    cp: &Checkpoint,
    bytes: &[u8],
    policy: &crate::cosignature::WitnessPolicy,
    source: &str,
    findings: &mut Vec<Finding>,
) -> bool {
    let note = match crate::note::SignedNote::parse(bytes) {
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
    let cosigned = crate::cosignature::check_cosignatures(&note, &policy.keys);
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
    cosigned.valid.len() >= policy.quorum
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
    policy: &crate::cosignature::WitnessPolicy,
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
                    policy.quorum,
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
                "{which}: fewer than {} cosignature(s) from the trusted witnesses, past --witness-grace; newest cosigned: checkpoint {newest}",
                policy.quorum
            ),
            Some(first.source.clone()),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::cosigned_path;
    use crate::cosignature::{WitnessPolicy, cosign, witness_key};
    use crate::keys::SignerKey;
    use crate::store::memory::MemoryStore;
    use std::time::{Duration, SystemTime};

    use crate::test_run as run;

    fn trusted(size: u64) -> TrustedCheckpoint {
        TrustedCheckpoint {
            checkpoint: Checkpoint {
                origin: "o".into(),
                size,
                root: [size as u8; 32],
            },
            source: format!("checkpoints/{size}"),
            signers: vec!["o".into()],
        }
    }

    /// A cosigned checkpoint covers the smaller ones; above it, only those
    /// whose head is older than the grace are `uncosigned`, younger ones wait.
    #[test]
    fn only_checkpoints_past_the_newest_cosigned_and_the_grace_are_uncosigned() {
        let store = MemoryStore::default();
        let log = SignerKey::generate("o").unwrap();
        let wkey = ed25519_dalek::SigningKey::from_bytes(&[4; 32]);
        let policy = WitnessPolicy {
            keys: vec![witness_key(&wkey, "w")],
            quorum: 1,
        };
        let all: Vec<TrustedCheckpoint> = [10, 20, 30, 40].map(trusted).to_vec();
        // 20 is cosigned; 30 was published an hour ago, 40 a minute ago.
        let note = all[1].checkpoint.sign(std::slice::from_ref(&log));
        let cosigned = format!("{note}{}", cosign(&wkey, "w", 1_700_000_000, &all[1].checkpoint.text()));
        store.plant_object("o", &cosigned_path(20), cosigned.as_bytes());
        let now = SystemTime::now();
        let published = |seq: u64| match seq {
            30 => Some(now - Duration::from_secs(3600)),
            40 => Some(now - Duration::from_secs(60)),
            _ => None,
        };
        let grace = Duration::from_secs(600);
        let out = run(audit_cosignatures(&store, "o", &all, &policy, &published, grace)).unwrap();
        assert_eq!((out.cosigned, out.newest_cosigned), (1, Some(20)));
        assert_eq!(out.findings.len(), 1, "{:?}", out.findings);
        assert_eq!(
            (out.findings[0].kind, out.findings[0].seq),
            (Kind::Uncosigned, Some(30))
        );
        assert_eq!(out.waiting.len(), 1, "40 still waits: {:?}", out.waiting);
        // A cosignature that does not verify is bad-signature, and covers nothing.
        let line = cosigned.lines().last().unwrap();
        let mut bytes = line.as_bytes().to_vec();
        let at = bytes.len() - 10;
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        let tampered = cosigned.replace(line, std::str::from_utf8(&bytes).unwrap());
        store.plant_object("o", &cosigned_path(20), tampered.as_bytes());
        let out = run(audit_cosignatures(&store, "o", &all, &policy, &published, grace)).unwrap();
        assert_eq!(out.newest_cosigned, None);
        assert!(
            out.findings
                .iter()
                .any(|f| f.kind == Kind::BadSignature && f.seq == Some(20)),
            "{:?}",
            out.findings
        );
        assert!(
            out.findings
                .iter()
                .any(|f| f.kind == Kind::Uncosigned && f.seq == Some(10)),
            "{:?}",
            out.findings
        );
        // Nothing cosigned, everything inside the grace: the quorum was met by
        // nothing, which the grace never excuses.
        let fresh = |_: u64| Some(SystemTime::now());
        let out = run(audit_cosignatures(&store, "o", &all, &policy, &fresh, grace)).unwrap();
        let uncosigned: Vec<_> = out.findings.iter().filter(|f| f.kind == Kind::Uncosigned).collect();
        assert_eq!(uncosigned.len(), 1, "{:?}", out.findings);
        assert!(
            uncosigned[0].message.contains("newest cosigned: none"),
            "{}",
            uncosigned[0].message
        );
        assert!(out.waiting.is_empty());
        // No checkpoint at all is never "cosigned".
        let out = run(audit_cosignatures(&store, "o", &[], &policy, &published, grace)).unwrap();
        assert_eq!(out.findings[0].kind, Kind::Uncosigned);
    }
}
