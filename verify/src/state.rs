//! The state file of `anchor verify --state FILE`: what the last clean run verified (the
//! newest head the database matched, the newest checkpoint with the tree's
//! right edge at its size, the newest cosigned one), so the next run lists
//! and reads only what was published since. The database is still walked
//! whole every time: an old event altered must still be found.
//!
//! The file belongs to the auditor (it is only as trustworthy as the place
//! it is kept), is JSON, and is replaced atomically after a run with no
//! finding; a run with findings leaves it as it was.

use std::path::Path;
use std::time::SystemTime;

use crate::pass::{Since, StreamAudit};
use chainship_anchor::store::{AnchorStore, Below, CHECKPOINTS_DIR};
use chainship_chain::Head;
use chainship_tlog::merkle::{CompactRange, Hash};
use serde_json::{Value, json};

use chainship_chain::{Error, permanent};

const FORMAT: &str = "chainship-anchor-verify-state/1";

/// Reads `path` for `origin` and `store`: `None` when there is no such file
/// yet (the first run is a full one). Anything else that is not a state of
/// this origin and store is a setup error naming the file.
pub fn load(path: &Path, origin: &str, store: &str) -> Result<Option<Since>, Error> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(permanent!("{}: {e}", path.display())),
    };
    let bad = |why: &str| permanent!("{}: {why}", path.display());
    let doc: Value = serde_json::from_str(&text).map_err(|e| bad(&format!("not a state file ({e})")))?;
    if doc["format"] != FORMAT {
        return Err(bad(&format!("not a state file (format is not {FORMAT})")));
    }
    if doc["origin"] != origin {
        return Err(bad(&format!(
            "it is the state of origin {}, not {origin}: one state file per origin and store",
            doc["origin"]
        )));
    }
    if doc["store"] != store {
        return Err(bad(&format!(
            "it is the state of store {}, not {store}: one state file per origin and store",
            doc["store"]
        )));
    }
    let head: Head = format!(
        "{}:{}",
        doc["head"]["seq"].as_u64().ok_or_else(|| bad("no head seq"))?,
        doc["head"]["hash"].as_str().ok_or_else(|| bad("no head hash"))?
    )
    .parse()
    .map_err(|e| bad(&format!("head: {e}")))?;
    let head_published = match doc["head"]["published"].as_str() {
        Some(t) => Some(humantime::parse_rfc3339(t).map_err(|_| bad("head published is not RFC 3339"))?),
        None => None,
    };
    let checkpoint = match &doc["checkpoint"] {
        Value::Null => None,
        cp => {
            let size = cp["size"].as_u64().ok_or_else(|| bad("no checkpoint size"))?;
            let root = hash(&cp["root"]).ok_or_else(|| bad("checkpoint root is not a base64 hash"))?;
            let edge: Vec<Hash> = cp["edge"]
                .as_array()
                .ok_or_else(|| bad("no checkpoint edge"))?
                .iter()
                .map(hash)
                .collect::<Option<_>>()
                .ok_or_else(|| bad("checkpoint edge is not base64 hashes"))?;
            let edge = CompactRange::from_parts(size, edge)
                .filter(|e| e.root() == root)
                .ok_or_else(|| bad("the checkpoint edge does not give its root: damaged"))?;
            Some((size, root, edge))
        }
    };
    let newest_cosigned = doc["newest_cosigned"].as_u64();
    // The names below, as a count and a digest (a state file without the
    // digest was written by an older chainship: its names are not judged).
    let below = |name: &str| -> Result<Option<Below>, Error> {
        let count = match &doc[name] {
            Value::Null => return Ok(None),
            v => v.as_u64().ok_or_else(|| bad(&format!("{name} is not a count")))?,
        };
        let digest = match &doc[format!("{name}_digest")] {
            Value::Null => return Ok(None),
            v => v
                .as_str()
                .and_then(|d| u64::from_str_radix(d, 16).ok())
                .ok_or_else(|| bad(&format!("{name}_digest is not a hex digest")))?,
        };
        Ok(Some(Below { count, digest }))
    };
    let (notes_below, checkpoints_below) = (below("notes_below")?, below("checkpoints_below")?);
    Ok(Some(Since {
        head,
        head_published,
        checkpoint,
        newest_cosigned,
        notes_below,
        checkpoints_below,
        source: path.display().to_string(),
    }))
}

fn hash(v: &Value) -> Option<Hash> {
    use base64::Engine;
    let bytes = base64::engine::general_purpose::STANDARD.decode(v.as_str()?).ok()?;
    bytes.try_into().ok()
}

/// What a clean run verified, to be saved.
pub struct Verified<'a> {
    pub origin: &'a str,
    pub store: &'a str,
    pub head: Head,
    pub head_published: Option<SystemTime>,
    pub checkpoint: Option<(u64, Hash, &'a CompactRange)>,
    pub newest_cosigned: Option<u64>,
    /// Notes kept below the head, checkpoints below the checkpoint (when the store can tell).
    pub notes_below: Option<Below>,
    pub checkpoints_below: Option<Below>,
}

/// Replaces the state file atomically.
pub fn save(path: &Path, v: &Verified<'_>) -> Result<(), Error> {
    let b64 = chainship_tlog::hash_b64;
    let doc = json!({
        "format": FORMAT,
        "origin": v.origin,
        "store": v.store,
        "head": {
            "seq": v.head.seq,
            "hash": v.head.hash_str(),
            "published": v.head_published.map(|t| humantime::format_rfc3339(t).to_string()),
        },
        "checkpoint": v.checkpoint.map(|(size, root, edge)| json!({
            "size": size,
            "root": b64(&root),
            "edge": edge.hashes().iter().map(b64).collect::<Vec<_>>(),
        })),
        "newest_cosigned": v.newest_cosigned,
        "notes_below": v.notes_below.map(|b| b.count),
        "notes_below_digest": v.notes_below.map(|b| format!("{:016x}", b.digest)),
        "checkpoints_below": v.checkpoints_below.map(|b| b.count),
        "checkpoints_below_digest": v.checkpoints_below.map(|b| format!("{:016x}", b.digest)),
        "verified_at": humantime::format_rfc3339(SystemTime::now()).to_string(),
    });
    chainship_chain::atomic_file::replace_per_process(path, format!("{doc:#}\n").as_bytes(), 0o666).map_err(|e| {
        permanent!(
            "{}: cannot write it: {}",
            path.display(),
            chainship_chain::access::explain(path, &e)
        )
    })
}

/// After a run with no finding: saves what it verified, the trusted head
/// (and when it was published), the checkpoint the next run goes on from
/// (the newest, when its tree's edge was rebuilt, else the one the state
/// had) and what lies below them now, so the next run notices a note added
/// there.
pub async fn save_after(
    path: &Path,
    store: &AnchorStore,
    origin: &str,
    (head, head_published): (Head, Option<SystemTime>),
    audit: &StreamAudit,
    since: Option<&Since>,
) -> Result<(), Error> {
    let checkpoint = match (&audit.largest, &audit.edge) {
        (Some(cp), Some(edge)) => Some((cp.size, cp.root, edge)),
        _ => since.and_then(|s| s.checkpoint.as_ref().map(|(size, root, edge)| (*size, *root, edge))),
    };
    let notes_below = store.note_keys(origin, head.seq).await?.below;
    let checkpoints_below = match checkpoint {
        Some((size, _, _)) => store.log_keys(origin, CHECKPOINTS_DIR, size).await?.below,
        None => None,
    };
    save(
        path,
        &Verified {
            origin,
            store: &store.describe(),
            head,
            head_published,
            checkpoint,
            newest_cosigned: audit.cosign.as_ref().and_then(|c| c.newest_cosigned),
            notes_below,
            checkpoints_below,
        },
    )
}
