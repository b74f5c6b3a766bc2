//! `chainship prove`: an offline proof that one event is in the signed
//! tree, in the C2SP `tlog-proof` format, read from the anchor store alone
//! (its checkpoints and tiles: neither the database nor a copy is needed).

use std::path::PathBuf;

use chainship_anchor::checkpoint::Checkpoint;
use chainship_anchor::checkpoint::{checkpoint_path, cosigned_path, read_checkpoint, size_from_checkpoint_name};
use chainship_anchor::note::SignedNote;
use chainship_anchor::store::{CHECKPOINTS_DIR, COSIGNED_DIR};
use chainship_anchor::tile_reader::{TileError, TileReader};
use chainship_anchor::{AnchorStore, VerifierKey};
use chainship_tlog::merkle::{Hash, RangeHashes, inclusion_proof, verify_inclusion};
use chainship_tlog::proof::TlogProof;
use clap::Args;

use crate::args::{AnchorStoreArgs, OriginArg, OutputArgs, TrustArgs};
use crate::exit::{CliError, CmdResult, OK};

/// Write a proof that one event is in a signed checkpoint (C2SP tlog-proof).
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship prove --anchor file:/mnt/anchors --origin prod-eu1/agentrt --seq 1200 > seq-1200.tlog-proof
  chainship prove --anchor s3://audit-anchors/heads --origin prod-eu1/agentrt --seq 1200 \\
      --checkpoint 3000 --trusted-key /etc/chainship/head.pub --out seq-1200-at-3000.tlog-proof

The proof holds the event's index (seq - 1), about log2(size) hashes and the signed
checkpoint, and no other event: hand it with the event's record to a third party,
who checks both with `chainship check-proof` (or any C2SP tlog client).
Without --checkpoint the largest kept checkpoint is used (with --trusted-key, the
largest one a trusted key signed).
Exit codes: 0 written, 1 the store's tiles do not prove the checkpoint, 2 usage or setup error
(no such checkpoint, seq beyond it, store unreadable).")]
#[command(mut_arg("anchor", |a| a.required(true)))]
#[command(mut_arg("origin", |a| a.required(true)))]
pub struct ProveArgs {
    #[command(flatten)]
    pub store: AnchorStoreArgs,
    #[command(flatten)]
    pub origin: OriginArg,
    /// The event to prove.
    #[arg(long, value_name = "SEQ", value_parser = clap::value_parser!(u64).range(1..))]
    pub seq: u64,
    /// Prove against the checkpoint of this tree size (default: the largest kept).
    #[arg(long, value_name = "SIZE")]
    pub checkpoint: Option<u64>,
    #[command(flatten)]
    pub trust: TrustArgs,
    /// Write the proof here instead of stdout (refused if it exists).
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &ProveArgs) -> CmdResult {
    let keys: Vec<VerifierKey> = if args.trust.trusted_keys.is_empty() {
        Vec::new()
    } else {
        args.trust.load()?
    };
    let store = args.store.open(args.store.url()?, None);
    let origin = args.origin.get()?;
    let proof = crate::report::runtime()?.block_on(build(store.as_ref(), origin, args, &keys))?;
    let text = proof.to_text();
    match &args.out {
        Some(path) => {
            write_new(path, text.as_bytes()).map_err(|e| CliError::usage(format!("--out {}: {e}", path.display())))?
        }
        // The text ends in the note's newline, which outln adds back.
        None if !args.output.json => outln!("{}", text.strip_suffix('\n').unwrap_or(&text)),
        None => {}
    }
    if args.output.json {
        outln!(
            "{}",
            serde_json::json!({
                "seq": args.seq,
                "index": proof.index,
                "proof_hashes": proof.hashes.len(),
                "bytes": text.len(),
                "out": args.out,
                "proof": args.out.is_none().then_some(&text),
            })
        );
    }
    Ok(OK)
}

/// Writes a new file, whole (synced), refusing to replace one.
fn write_new(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

async fn build(
    store: &dyn AnchorStore,
    origin: &str,
    args: &ProveArgs,
    keys: &[VerifierKey],
) -> Result<TlogProof, CliError> {
    let setup = |e: chainship_anchor::StoreError| CliError::from_kind(&e);
    let candidates = match args.checkpoint {
        Some(size) => {
            let path = checkpoint_path(size);
            let note = store.get_object(origin, &path).await.map_err(setup)?.ok_or_else(|| {
                CliError::usage(format!(
                    "--checkpoint {size}: {} keeps no checkpoint of that size for {origin:?}",
                    store.describe()
                ))
            })?;
            vec![(path, Some(note))]
        }
        None => checkpoint_paths(store, origin, args.seq)
            .await?
            .into_iter()
            .map(|p| (p, None))
            .collect(),
    };
    let mut last_failure = None;
    for (path, note) in candidates {
        let note = match note {
            Some(note) => note,
            None => match store.get_object(origin, &path).await.map_err(setup)? {
                // Without --checkpoint, a note that is not a usable checkpoint is passed over.
                Some(note) if usable(&note, origin, keys) => note,
                _ => continue,
            },
        };
        let read = read_checkpoint(&note, keys)
            .map_err(|e| CliError::usage(format!("{}/{origin}/{path}: {e}", store.describe())))?;
        if !keys.is_empty() && read.signers.is_empty() {
            return Err(CliError::usage(format!(
                "{}/{origin}/{path}: signed by no trusted key",
                store.describe()
            )));
        }
        let cp = &read.checkpoint;
        if cp.origin != origin {
            return Err(CliError::usage(format!(
                "{path}: holds a checkpoint of origin {:?}",
                cp.origin
            )));
        }
        if args.seq > cp.size {
            // Candidates go from the largest down: none further covers the seq.
            return Err(last_failure.unwrap_or_else(|| {
                CliError::usage(format!(
                    "--seq {}: beyond checkpoint {} (the newest event it covers is seq {}); prove it once a later checkpoint is published",
                    args.seq, cp.size, cp.size
                ))
            }));
        }
        match prove_in(store, origin, args.seq - 1, cp).await {
            Ok(hashes) => {
                return Ok(TlogProof {
                    extra: None,
                    index: args.seq - 1,
                    hashes,
                    checkpoint: with_cosignatures(store, origin, &read.note).await?,
                });
            }
            Err(e) if e.code == crate::exit::FAILED && args.checkpoint.is_none() => {
                // A checkpoint whose tiles cannot prove (missing, planted): say so, try the next.
                tracing::warn!("checkpoint {}: {}; trying the next smaller one", cp.size, e.message);
                last_failure = Some(e);
            }
            Err(e) => return Err(e),
        }
    }
    Err(last_failure.unwrap_or_else(|| {
        CliError::usage(format!(
            "{} keeps no checkpoint{} for origin {origin:?} (is the follower publishing checkpoints, and --origin right?)",
            store.describe(),
            if keys.is_empty() { "" } else { " signed by a trusted key" }
        ))
    }))
}

/// The inclusion proof of `index` in `cp`'s tree, from the store's tiles,
/// checked against the signed root before it is handed out.
async fn prove_in(store: &dyn AnchorStore, origin: &str, index: u64, cp: &Checkpoint) -> Result<Vec<Hash>, CliError> {
    let mut reader = TileReader::new(store, origin);
    let tiles_fail = |e: TileError| match e {
        TileError::Store(e) => CliError::from_kind(&e),
        other => CliError::failed(format!("tiles-disagree: checkpoint {}: {other}", cp.size)),
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
        return Err(CliError::failed(format!(
            "tiles-disagree: the tiles of {} do not lead to the root of checkpoint {}",
            store.describe(),
            cp.size
        )));
    }
    Ok(hashes)
}

/// The kept checkpoints' paths to try: those witnesses cosigned that cover
/// `seq` first (largest first: a third party's witness policy needs them),
/// then the rest, largest first.
async fn checkpoint_paths(store: &dyn AnchorStore, origin: &str, seq: u64) -> Result<Vec<String>, CliError> {
    let setup = |e: chainship_anchor::StoreError| CliError::from_kind(&e);
    let mut names = store.list_names(origin, CHECKPOINTS_DIR).await.map_err(setup)?;
    names.retain(|n| size_from_checkpoint_name(n).is_some());
    let cosigned: std::collections::HashSet<String> = store
        .list_names(origin, COSIGNED_DIR)
        .await
        .map_err(setup)?
        .into_iter()
        .collect();
    names.sort_by_key(|n| {
        let size = size_from_checkpoint_name(n).unwrap_or(0);
        let preferred = size >= seq && cosigned.contains(n);
        std::cmp::Reverse((preferred, size))
    });
    Ok(names.into_iter().map(|n| format!("{CHECKPOINTS_DIR}/{n}")).collect())
}

/// The checkpoint's note with the witnesses' cosignatures, when a cosigned
/// version of it is kept; else the note as it is.
async fn with_cosignatures(store: &dyn AnchorStore, origin: &str, note: &SignedNote) -> Result<String, CliError> {
    let Ok((cp, _)) = Checkpoint::parse_text(&note.text) else {
        return Ok(note.to_text());
    };
    let cosigned = store
        .get_object(origin, &cosigned_path(cp.size))
        .await
        .map_err(|e| CliError::from_kind(&e))?
        .and_then(|b| SignedNote::parse(&b).ok())
        .filter(|c| c.text == note.text && c.signatures.len() > note.signatures.len());
    Ok(cosigned.map_or_else(|| note.to_text(), |c| c.to_text()))
}

/// A checkpoint of `origin` (signed by a trusted key, when keys are given).
fn usable(note: &[u8], origin: &str, keys: &[VerifierKey]) -> bool {
    read_checkpoint(note, keys)
        .is_ok_and(|r| r.checkpoint.origin == origin && (keys.is_empty() || !r.signers.is_empty()))
}
