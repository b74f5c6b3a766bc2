//! One record's proof, checked offline (`check-proof`, and anyone holding a
//! `tlog-proof`): the checkpoint must be signed by a trusted key (and
//! cosigned by the witnesses' quorum, when asked), be of the record's
//! origin, the record must hash to its own hash, and the inclusion proof
//! must lead from that hash, at the record's index, to the checkpoint's root.

use std::fmt;

use chainship_chain::record::Record;
use chainship_tlog::merkle::verify_inclusion;
use chainship_tlog::proof::TlogProof;

use crate::finding::{Finding, Kind};
use crate::verdict::Verdict;
use chainship_anchor::checkpoint::Checkpoint;
use chainship_anchor::cosignature::WitnessPolicy;
use chainship_anchor::note::VerifierKey;

/// Why a proof does not prove its record: the finding's kind where one
/// applies (a bad signature, a foreign origin, an altered record), and the
/// reason in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotProven {
    pub kind: Option<Kind>,
    pub reason: String,
}

impl NotProven {
    pub fn new(kind: Option<Kind>, reason: impl fmt::Display) -> Self {
        NotProven {
            kind,
            reason: reason.to_string(),
        }
    }
}

impl NotProven {
    /// The reason as a finding at `seq`: of its kind, or `unproven`.
    pub fn finding(&self, seq: Option<u64>) -> Finding {
        Finding::new(self.kind.unwrap_or(Kind::Unproven), seq, self.reason.clone())
    }
}

/// A proof's check as the one verdict: what it proved, or one finding
/// saying why it proves nothing.
pub type ProofVerdict = Verdict<Option<Proven>>;

/// The verdict on record `seq`'s proof (`None`: a record that could not be read).
pub fn verdict(checked: Result<Proven, NotProven>, seq: Option<u64>) -> ProofVerdict {
    match checked {
        Ok(proven) => Verdict::new(Some(proven)),
        Err(why) => {
            let mut v = Verdict::new(None);
            v.findings.push(why.finding(seq));
            v
        }
    }
}

impl fmt::Display for NotProven {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            Some(kind) => write!(f, "{kind}: {}", self.reason),
            None => f.write_str(&self.reason),
        }
    }
}

/// What a proof proved: the record is an entry of this checkpoint, signed by these.
#[derive(Debug)]
pub struct Proven {
    pub size: u64,
    pub signers: Vec<String>,
}

/// Checks `proof` for `record` (see the module doc); the reason when it does not prove it.
pub fn check(
    proof: &TlogProof,
    record: &Record<'_>,
    keys: &[VerifierKey],
    witnesses: Option<&WitnessPolicy>,
) -> Result<Proven, NotProven> {
    let judged = crate::checkpoints::trust_checkpoint(proof.checkpoint.as_bytes(), keys, witnesses, Default::default())
        .map_err(|e| NotProven::new(None, format!("the proof's checkpoint: {}", e.message)))?;
    let read = judged.trusted().map_err(|d| NotProven::new(Some(d.kind), d.message))?;
    let cp = &read.checkpoint;
    prove_record(proof, record, cp)?;
    Ok(Proven {
        size: cp.size,
        signers: read.signers.clone(),
    })
}

/// The record half of [`check`]: the record is of `cp`'s origin, hashes to
/// its own hash, and the proof leads from it, at its index, to `cp`'s root.
/// For a checkpoint whose signatures were judged already (one bundle's
/// checkpoint, shared by every proof in it).
pub fn prove_record(proof: &TlogProof, record: &Record<'_>, cp: &Checkpoint) -> Result<(), NotProven> {
    prove_record_redacted(proof, record, cp, false)
}

/// [`prove_record`] of a record whose payload was withheld, when
/// `redacted` (a trusted statement covers its seq, hash and other fields:
/// the caller has checked): its stored hash stands for its content, and
/// only the inclusion of that hash is proven.
pub fn prove_record_redacted(
    proof: &TlogProof,
    record: &Record<'_>,
    cp: &Checkpoint,
    redacted: bool,
) -> Result<(), NotProven> {
    if cp.origin != record.origin {
        return Err(NotProven::new(
            Some(Kind::Foreign),
            format!(
                "the checkpoint is of origin {:?}, the record of {:?}",
                cp.origin, record.origin
            ),
        ));
    }
    let expected = match redacted {
        true => record
            .hash
            .as_bytes()
            .try_into()
            .map_err(|_| NotProven::new(Some(Kind::Altered), "the record's hash is not 64 hex"))?,
        false => record.expected_hash(),
    };
    if expected == [0; 64] {
        return Err(NotProven::new(
            Some(Kind::Altered),
            "the record's b64 list names a field it has not, or holds bad base64",
        ));
    }
    if expected[..] != *record.hash.as_bytes() {
        return Err(NotProven::new(
            Some(Kind::Altered),
            format!(
                "the record's fields and prev_hash hash to {}, not to its hash {}",
                String::from_utf8_lossy(&expected),
                record.hash
            ),
        ));
    }
    if record.seq.checked_sub(1) != Some(proof.index) {
        return Err(NotProven::new(
            None,
            format!(
                "the proof is for index {} (seq {}), not for seq {}",
                proof.index,
                u128::from(proof.index) + 1,
                record.seq,
            ),
        ));
    }
    let leaf = chainship_tlog::leaf_hash(&expected);
    if !verify_inclusion(proof.index, cp.size, &leaf, &proof.hashes, &cp.root) {
        return Err(NotProven::new(
            None,
            format!(
                "the inclusion proof does not lead from this record's hash to the root of checkpoint {}",
                cp.size
            ),
        ));
    }
    Ok(())
}
