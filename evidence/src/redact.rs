//! Redacting one event (`chainship redact`): a secret or personal data was
//! logged in seq N's payload and must leave every copy while the log stays
//! evidence.
//!
//! 1. The event is read from the copy (`--from`) or the database (`--db`,
//!    read-only): its hash and the digest of its other fields
//!    (`chainship_chain::redaction::fields_digest`) are what the statement
//!    names. A record that does not hash to its own hash is not the logged
//!    event: refused.
//! 2. Its hash must be vouched for by the store: a trusted checkpoint whose
//!    tiles prove it as leaf N-1, or a trusted head at N. A redaction never
//!    vouches for anything itself.
//! 3. The statement (`chainship_anchor::redaction`) is signed by the
//!    redaction key and written write-once at `redactions/<N>`. Run again, the
//!    same statement already kept (same hash and fields, signed by this key)
//!    is used as it is, so a copy left half done can be finished.
//! 4. With a copy, the record is replaced there by its tombstone
//!    (`chainship_sinks::tombstone`).
//!
//! Nothing of the payload is ever written, logged or returned.

use std::path::Path;
use std::time::SystemTime;

use chainship_anchor::AnchorStore;
use chainship_anchor::checkpoint::Checkpoint;
use chainship_anchor::note::{SignedNote, VerifierKey};
use chainship_anchor::redaction::{self, Statement, check_reason, statement_path};
use chainship_anchor::signer::{Signers, verifiers};
use chainship_anchor::store::PutOutcome;
use chainship_chain::record::Record;
use chainship_chain::{Error, EventBatch, EventDb, HexHash, OpenOptions, integrity, permanent};
use chainship_sinks::SinkConfig;
use chainship_sinks::tombstone::{self, Placed};
use chainship_tlog::merkle::{leaf_hash, verify_inclusion};

/// Where the event is read from.
pub enum EventSource<'a> {
    /// The copy, whose record is also replaced by its tombstone.
    Copy(&'a SinkConfig),
    /// The audit database, read-only (the runtime blanks the payload itself).
    Database(&'a Path, &'a OpenOptions),
}

/// What to redact, and with what.
pub struct RedactRequest<'a> {
    pub store: &'a AnchorStore,
    pub origin: &'a str,
    pub seq: u64,
    pub reason: &'a str,
    /// The keys trusted for heads and checkpoints (what vouches for the hash).
    pub keys: &'a [VerifierKey],
    /// The redaction key (never a head key: the caller refuses that).
    pub signers: &'a Signers,
    pub source: EventSource<'a>,
    pub now: SystemTime,
}

/// What was done.
#[derive(Debug)]
pub struct Redaction {
    pub statement: Statement,
    /// The statement's path under the origin.
    pub path: String,
    /// The same statement was kept already (a second run).
    pub reused: bool,
    /// What vouches for the hash: `checkpoint SIZE` or `head SEQ`.
    pub vouched_by: String,
    /// What was done to the copy, when one was given and still held the payload.
    pub placed: Option<Placed>,
}

/// Redacts (see the module doc).
pub async fn redact(req: &RedactRequest<'_>) -> Result<Redaction, Error> {
    check_reason(req.reason)?;
    let event = match req.source {
        EventSource::Copy(cfg) => from_copy(cfg, req.origin, req.seq).await?,
        EventSource::Database(path, open) => from_database(path, open, req.origin, req.seq)?,
    };
    let hash: HexHash = event
        .hash
        .as_bytes()
        .try_into()
        .map_err(|_| integrity!("seq {}: its hash is not 64 hex", req.seq))?;
    let vouched_by = vouch(req.store, req.origin, req.seq, &hash, req.keys).await?;
    // A tombstone's fields are only taken where its statement is kept
    // already (a second run): anyone who can write to the copy can write one.
    if event.is_clean_tombstone()
        && req
            .store
            .get_object(req.origin, &statement_path(req.seq))
            .await?
            .is_none()
    {
        return Err(integrity!(
            "seq {}: the copy holds only a tombstone, and no statement is kept for it: redact from the database (--db) or a copy that still holds the event",
            req.seq
        ));
    }
    let statement = Statement {
        origin: req.origin.to_owned(),
        seq: req.seq,
        hash,
        fields: event.fields_digest(),
        redacted: humantime::format_rfc3339_seconds(req.now).to_string(),
        reason: req.reason.to_owned(),
    };
    let path = statement_path(req.seq);
    let (statement, reused) = keep(req, statement).await?;
    let placed = match (&req.source, event.is_clean_tombstone()) {
        (EventSource::Copy(cfg), false) => {
            let mut line = Vec::new();
            event.own_tombstone().write_json(&mut line);
            Some(tombstone::put(cfg, req.origin, req.seq, &event.hash, &line).await?)
        }
        _ => None,
    };
    Ok(Redaction {
        statement,
        path,
        reused,
        vouched_by,
        placed,
    })
}

/// The copy's record of `seq`: the first that hashes to its own hash; a
/// tombstone when the copy holds nothing else of the seq (a second run).
async fn from_copy(cfg: &SinkConfig, origin: &str, seq: u64) -> Result<Record<'static>, Error> {
    let (mut whole, mut tomb, mut other_hash) = (None::<Record<'static>>, None::<Record<'static>>, false);
    chainship_sinks::read_records(cfg, origin, &mut |line, _| {
        if Record::seq_of(line) != Some(seq) {
            return;
        }
        let Ok(r) = Record::parse(line) else { return };
        if r.origin != origin {
            return;
        }
        if r.expected_hash()[..] == *r.hash.as_bytes() {
            match &whole {
                Some(w) if w.hash != r.hash => other_hash = true,
                Some(_) => {}
                None => whole = Some(r.into_owned()),
            }
        } else if r.is_clean_tombstone() {
            tomb.get_or_insert_with(|| r.clone().into_owned());
        }
    })
    .await?;
    if other_hash {
        return Err(integrity!(
            "{cfg}: holds seq {seq} twice with different hashes: run verify-export, and redact once the copy is sound"
        ));
    }
    whole.or(tomb).ok_or_else(|| {
        integrity!("{cfg}: holds no record of origin {origin:?} at seq {seq} that hashes to its own hash")
    })
}

/// The database's event at `seq`, as a record (its predecessor's stored hash as `prev_hash`).
fn from_database(path: &Path, open: &OpenOptions, origin: &str, seq: u64) -> Result<Record<'static>, Error> {
    let db = EventDb::open(path, open)?;
    let mut page = EventBatch::new();
    db.read_page(seq - 1, 1, usize::MAX, &mut page)?;
    let event = page
        .iter()
        .next()
        .filter(|e| e.seq == seq)
        .ok_or_else(|| permanent!("{}: holds no event at seq {seq}", path.display()))?;
    let prev = match seq {
        1 => Vec::new(),
        _ => db.hash_at(seq - 1)?.unwrap_or_default(),
    };
    let record = Record::from_event(origin, &event, &prev).map_err(|e| integrity!("{e}"))?;
    if record.expected_hash()[..] != *record.hash.as_bytes() {
        // Its other fields can no longer be shown to be the hashed ones.
        return Err(integrity!(
            "{}: seq {seq} does not hash to its stored hash (blanked already, or altered): redact before the payload is blanked, or from a copy that still holds it",
            path.display()
        ));
    }
    Ok(record.into_owned())
}

/// What vouches for `hash` at `seq`: a trusted checkpoint whose tiles prove
/// it, or a trusted head at `seq`.
async fn vouch(
    store: &AnchorStore,
    origin: &str,
    seq: u64,
    hash: &HexHash,
    keys: &[VerifierKey],
) -> Result<String, Error> {
    if let Ok(proof) = chainship_verify::prove::build(store, origin, seq, None, keys).await
        && let Ok(note) = SignedNote::parse(proof.checkpoint.as_bytes())
        && let Ok((cp, _)) = Checkpoint::parse_text(&note.text)
        && verify_inclusion(proof.index, cp.size, &leaf_hash(hash), &proof.hashes, &cp.root)
    {
        return Ok(format!("checkpoint {}", cp.size));
    }
    match chainship_verify::pass::trusted_head_at(store, origin, keys, seq).await {
        Ok(Some((head, _))) if head.hash == *hash => Ok(format!("head {seq}")),
        Ok(_) => Err(integrity!(
            "seq {seq}: its hash {} is vouched for by no trusted checkpoint or head in {}: redact only what the store vouches for (after the next checkpoint, or check the copy with verify-export)",
            String::from_utf8_lossy(hash),
            store.describe()
        )),
        Err(e) => Err(e),
    }
}

/// Writes the statement write-once; a statement already kept is used when
/// it is this one (same origin, seq, hash and fields, signed by this key).
async fn keep(req: &RedactRequest<'_>, statement: Statement) -> Result<(Statement, bool), Error> {
    let note = statement.sign(req.signers)?;
    match redaction::put(req.store, req.origin, req.seq, &note).await? {
        PutOutcome::Created => Ok((statement, false)),
        PutOutcome::AlreadyThere(kept) => {
            let ours = verifiers(req.signers);
            let same = SignedNote::parse(&kept)
                .ok()
                .filter(|n| ours.iter().any(|k| k.check(n) == Some(true)))
                .and_then(|n| Statement::parse_text(&n.text).ok())
                .filter(|k| {
                    k.origin == statement.origin
                        && k.seq == statement.seq
                        && k.hash == statement.hash
                        && k.fields == statement.fields
                });
            same.map(|k| (k, true)).ok_or_else(|| {
                permanent!(
                    "{}/{}/{}: a statement for seq {} is already kept, and it is not this key's for this event: remove it only after checking who wrote it",
                    req.store.describe(),
                    req.origin,
                    statement_path(req.seq),
                    req.seq
                )
            })
        }
    }
}
