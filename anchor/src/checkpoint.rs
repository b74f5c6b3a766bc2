//! The signed checkpoint: the Merkle companion of a head, in the C2SP
//! `tlog-checkpoint` format (<https://c2sp.org/tlog-checkpoint>), a signed
//! note whose text is
//!
//! ```text
//! prod-eu1/agentrt
//! 1200
//! Qm9vdCBoYXNoIG9mIHRoZSBmaXJzdCAxMjAwIGV2ZW50cz8=
//! ```
//!
//! the origin (chainship's `--origin`, verbatim), the tree size (the seq
//! of the head it accompanies: entry `i` is the hash of seq `i + 1`) and
//! the RFC 6962 root, base64. No extension lines (witnesses refuse them).
//!
//! Kept write-once at `checkpoints/<size, 20 digits>` beside the heads; a
//! name someone else's note occupies gets ours beside it as
//! `checkpoints/<size>.<unix seconds>` (as for heads), and the newest is
//! also copied to `checkpoint`, where standard tlog clients look first.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use chainship_chain::{Error, integrity};
use chainship_tlog::Hash;

use crate::note::{SignedNote, VerifierKey};
use crate::signer::Signers;
use crate::store::{CHECKPOINTS_DIR, COSIGNED_DIR, StoreError};

/// A checkpoint's body (C2SP tlog-checkpoint): the origin, the tree size
/// and the root hash, signed as a note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    pub origin: String,
    pub size: u64,
    pub root: Hash,
}

impl Checkpoint {
    /// The body as signed: origin, size and base64 root, one per line.
    pub fn text(&self) -> String {
        format!("{}\n{}\n{}\n", self.origin, self.size, B64.encode(self.root))
    }

    /// The signed note (fails when a signer cannot sign).
    pub fn sign(&self, signers: &Signers) -> Result<String, StoreError> {
        Ok(crate::signer::sign_note(&self.text(), signers)?.to_text())
    }

    /// Parses a checkpoint's note text; extension lines are kept out of
    /// [`Checkpoint`] (a cosigned checkpoint may carry them) but counted.
    pub fn parse_text(text: &str) -> Result<(Checkpoint, usize), Error> {
        let mut lines = text.lines();
        let origin = lines
            .next()
            .filter(|o| !o.is_empty())
            .ok_or_else(|| integrity!("no origin line"))?;
        let size = lines
            .next()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (*s == "0" || !s.starts_with('0')))
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or_else(|| integrity!("the second line is not a tree size"))?;
        let root = lines
            .next()
            .and_then(|r| B64.decode(r).ok())
            .and_then(|r| Hash::try_from(r).ok())
            .ok_or_else(|| integrity!("the third line is not a base64 SHA-256 root"))?;
        let extensions = lines.count();
        Ok((
            Checkpoint {
                origin: origin.to_owned(),
                size,
                root,
            },
            extensions,
        ))
    }

    /// The root hash in base64, as the body writes it.
    pub fn root_b64(&self) -> String {
        B64.encode(self.root)
    }
}

/// A checkpoint note that parsed, and the trusted keys whose signatures on
/// it verify (those trusted for its size).
#[derive(Clone, Debug)]
pub struct ReadCheckpoint {
    pub checkpoint: Checkpoint,
    pub note: SignedNote,
    pub signers: Vec<String>,
    /// A trusted key's signature line that does not verify.
    pub bad_signature: bool,
}

/// Reads a checkpoint note and checks it with `keys`.
pub fn read_checkpoint(bytes: &[u8], keys: &[VerifierKey]) -> Result<ReadCheckpoint, Error> {
    let note = SignedNote::parse(bytes).map_err(|e| integrity!("{e}"))?;
    let checks: Vec<Option<bool>> = keys.iter().map(|k| k.check(&note)).collect();
    read_checked(note, keys, &checks)
}

/// [`read_checkpoint`] of many notes, their signatures verified in
/// batches ([`crate::note::check_many`]): the same answers, faster.
pub fn read_checkpoints(notes: &[&[u8]], keys: &[VerifierKey]) -> Vec<Result<ReadCheckpoint, Error>> {
    let parsed: Vec<_> = notes.iter().map(|bytes| SignedNote::parse(bytes)).collect();
    let readable: Vec<&SignedNote> = parsed.iter().filter_map(|p| p.as_ref().ok()).collect();
    let mut checks = crate::note::check_many(&readable, keys).into_iter();
    parsed
        .into_iter()
        .map(|note| {
            let note = note.map_err(|e| integrity!("{e}"))?;
            read_checked(note, keys, &checks.next().unwrap_or_default())
        })
        .collect()
}

/// A parsed checkpoint note, given what each key said of its signatures.
fn read_checked(note: SignedNote, keys: &[VerifierKey], checks: &[Option<bool>]) -> Result<ReadCheckpoint, Error> {
    let (checkpoint, _) = Checkpoint::parse_text(&note.text).map_err(|e| integrity!("not a checkpoint: {e}"))?;
    let mut signers = Vec::new();
    let mut bad_signature = false;
    for (key, check) in keys.iter().zip(checks) {
        match check {
            Some(true) if key.trusted_for(&checkpoint.origin, checkpoint.size) => signers.push(key.name.clone()),
            Some(false) => bad_signature = true,
            _ => {}
        }
    }
    Ok(ReadCheckpoint {
        checkpoint,
        note,
        signers,
        bad_signature,
    })
}

/// `checkpoints/<size, 20 digits>`.
pub fn checkpoint_path(size: u64) -> String {
    format!("{CHECKPOINTS_DIR}/{size:020}")
}

/// `cosigned/<size, 20 digits>`: the checkpoint with a quorum of witness
/// cosignatures, kept beside the plain one once the witnesses answered.
pub fn cosigned_path(size: u64) -> String {
    format!("{COSIGNED_DIR}/{size:020}")
}

/// Where a checkpoint goes when its name is taken by a note this
/// publisher did not sign.
pub fn checkpoint_beside_path(size: u64, unix_seconds: u64) -> String {
    format!("{CHECKPOINTS_DIR}/{size:020}.{unix_seconds:020}")
}

/// The size a kept checkpoint's name says it holds: the one name parser
/// ([`crate::store::NameKey::from_log_name`]) every reader of the store uses.
pub fn size_from_checkpoint_name(name: &str) -> Option<u64> {
    crate::store::NameKey::from_log_name(name).map(|k| k.seq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signer::SignerKey;

    #[test]
    fn text_is_the_c2sp_form_and_round_trips() {
        let cp = Checkpoint {
            origin: "prod/agentrt".into(),
            size: 1200,
            root: [7; 32],
        };
        assert_eq!(
            cp.text(),
            "prod/agentrt\n1200\nBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n"
        );
        assert_eq!(Checkpoint::parse_text(&cp.text()).unwrap(), (cp.clone(), 0));
        let key = SignerKey::generate("prod/agentrt").unwrap();
        let read = read_checkpoint(cp.sign(&[key.shared()]).unwrap().as_bytes(), &[key.verifier()]).unwrap();
        assert_eq!(read.checkpoint, cp);
        assert_eq!(read.signers, ["prod/agentrt"]);
        assert!(Checkpoint::parse_text("o\n012\nAAAA\n").is_err());
        assert_eq!(size_from_checkpoint_name("00000000000000001200"), Some(1200));
        assert_eq!(
            size_from_checkpoint_name(&checkpoint_beside_path(5, 9)["checkpoints/".len()..]),
            Some(5)
        );
        assert_eq!(size_from_checkpoint_name("12"), None);
        // A name beside the plain one at time 0 claims the plain name's place.
        assert_eq!(
            size_from_checkpoint_name("00000000000000000005.00000000000000000000"),
            None
        );
    }
}
