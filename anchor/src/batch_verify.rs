//! Ed25519 signatures checked many at a time, judged as if one at a time.
//!
//! A pass over years of kept heads spends most of its time in Ed25519:
//! one verification per head and per checkpoint. ed25519-dalek's
//! `verify_batch` checks a group of signatures with one multi-scalar
//! multiplication, in well under half the time of checking each. It must
//! still give [`VerifyingKey::verify_strict`]'s answer for every signature,
//! so:
//! - what `verify_strict` treats specially is never put in a group, but
//!   checked alone: a weak or mixed-order key, a signature scalar that is
//!   not canonical, an `R` that does not decode, is not encoded
//!   canonically, or is of small order;
//! - a group that fails is checked one signature at a time, so the bad one
//!   is named (and a planted bad signature costs its group's single checks,
//!   never more than checking everything alone would).
//!
//! One difference remains, and only the holder of a trusted key can make
//! use of it: a signature whose `R` carries a small torsion component
//! fails `verify_strict` (which compares `R` exactly) but passes a batch
//! when its random coefficient happens to cancel the torsion. Such a
//! signature can only be made with the secret key, whose holder can sign
//! anything validly anyway; telling it apart costs a full scalar
//! multiplication, as much as the check the batch saves.

use curve25519_dalek::scalar::Scalar;
use ed25519_dalek::{Signature, VerifyingKey};

/// One signature to check: `signature` by `key` over `message`.
#[derive(Clone, Copy)]
pub struct Job<'a> {
    pub key: &'a VerifyingKey,
    pub message: &'a [u8],
    pub signature: &'a [u8],
}

/// Signatures per `verify_batch` call: large enough for most of the
/// gain, small enough that a group with a bad signature (checked one by
/// one) costs little.
const GROUP: usize = 128;

/// Whether each job's signature verifies, exactly as
/// `key.verify_strict(message, signature)` says (see the module's note on
/// torsion), with the signatures checked in batches.
pub fn verify_all(jobs: &[Job<'_>]) -> Vec<bool> {
    let mut verdicts = vec![false; jobs.len()];
    let mut sound_keys: Vec<([u8; 32], bool)> = Vec::new();
    let mut group: Vec<(usize, Signature)> = Vec::with_capacity(GROUP);
    for (i, job) in jobs.iter().enumerate() {
        match batchable(job, &mut sound_keys) {
            Some(signature) => {
                group.push((i, signature));
                if group.len() == GROUP {
                    check_group(jobs, &group, &mut verdicts);
                    group.clear();
                }
            }
            None => verdicts[i] = verify_one(job),
        }
    }
    check_group(jobs, &group, &mut verdicts);
    verdicts
}

/// The single check the batch stands for.
pub fn verify_one(job: &Job<'_>) -> bool {
    Signature::from_slice(job.signature).is_ok_and(|sig| job.key.verify_strict(job.message, &sig).is_ok())
}

/// The signature, when a batch would judge it as `verify_strict` does.
fn batchable(job: &Job<'_>, sound_keys: &mut Vec<([u8; 32], bool)>) -> Option<Signature> {
    if !key_is_sound(job.key, sound_keys) {
        return None;
    }
    let signature = Signature::from_slice(job.signature).ok()?;
    if Scalar::from_canonical_bytes(*signature.s_bytes()).is_none().into() {
        return None;
    }
    // Decided on the bytes, with no field arithmetic: decoding `R` costs a
    // square root, as much as a fifth of what the batch spends per signature.
    let mut y = *signature.r_bytes();
    y[31] &= 0x7f;
    (is_canonical_field_element(&y) && !SMALL_ORDER_Y.contains(&y)).then_some(signature)
}

/// `y < 2^255 - 19`, for `y` little-endian with the top bit clear: a
/// canonical encoding (`verify_strict` compares `R`'s bytes with a
/// canonical encoding, so it refuses any other).
fn is_canonical_field_element(y: &[u8; 32]) -> bool {
    // 2^255 - 19 is 0xed, then 30 bytes of 0xff, then 0x7f.
    !(y[0] >= 0xed && y[1..31].iter().all(|b| *b == 0xff) && y[31] == 0x7f)
}

/// The `y` coordinates (sign bit cleared) of the eight points of small
/// order: an `R` with one of them is one of those points (or no point),
/// which `verify_strict` refuses. The sign bit of a point with `x = 0`
/// (`y = ±1`) is covered too: both signs are listed by `y` alone.
static SMALL_ORDER_Y: std::sync::LazyLock<Vec<[u8; 32]>> = std::sync::LazyLock::new(|| {
    curve25519_dalek::constants::EIGHT_TORSION
        .iter()
        .map(|point| {
            let mut y = point.compress().to_bytes();
            y[31] &= 0x7f;
            y
        })
        .collect()
});

/// A key of prime order only: `verify_strict` refuses small-order keys,
/// and a key with a torsion component would let a batch's random
/// coefficients hide it. Judged once per key (there are few).
fn key_is_sound(key: &VerifyingKey, known: &mut Vec<([u8; 32], bool)>) -> bool {
    let bytes = key.to_bytes();
    if let Some((_, sound)) = known.iter().find(|(k, _)| *k == bytes) {
        return *sound;
    }
    let sound = !key.is_weak() && key.to_edwards().is_torsion_free();
    known.push((bytes, sound));
    sound
}

/// Checks a group at once; when it fails, each of its signatures alone.
fn check_group(jobs: &[Job<'_>], group: &[(usize, Signature)], verdicts: &mut [bool]) {
    // Too few for a batch to gain anything.
    if group.len() < 3 {
        for (i, _) in group {
            verdicts[*i] = verify_one(&jobs[*i]);
        }
        return;
    }
    let messages: Vec<&[u8]> = group.iter().map(|(i, _)| jobs[*i].message).collect();
    let signatures: Vec<Signature> = group.iter().map(|(_, s)| *s).collect();
    let keys: Vec<VerifyingKey> = group.iter().map(|(i, _)| *jobs[*i].key).collect();
    let all_good = ed25519_dalek::verify_batch(&messages, &signatures, &keys).is_ok();
    for (i, _) in group {
        verdicts[*i] = all_good || verify_one(&jobs[*i]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signer, SigningKey};

    fn key(seed: u8) -> SigningKey {
        SigningKey::from_bytes(&[seed; 32])
    }

    /// Messages, keys and signatures: `n` good ones by two keys.
    fn good(n: usize) -> (Vec<Vec<u8>>, Vec<VerifyingKey>, Vec<Vec<u8>>) {
        let signers = [key(1), key(2)];
        let mut messages = Vec::new();
        let mut keys = Vec::new();
        let mut signatures = Vec::new();
        for i in 0..n {
            let signer = &signers[i % 2];
            let message = format!("head {i}\n").into_bytes();
            signatures.push(signer.sign(&message).to_bytes().to_vec());
            keys.push(signer.verifying_key());
            messages.push(message);
        }
        (messages, keys, signatures)
    }

    fn jobs<'a>(m: &'a [Vec<u8>], k: &'a [VerifyingKey], s: &'a [Vec<u8>]) -> Vec<Job<'a>> {
        (0..m.len())
            .map(|i| Job {
                key: &k[i],
                message: &m[i],
                signature: &s[i],
            })
            .collect()
    }

    fn singly(jobs: &[Job<'_>]) -> Vec<bool> {
        jobs.iter().map(verify_one).collect()
    }

    #[test]
    fn good_signatures_pass_in_batches_of_every_size() {
        for n in [0, 1, 2, GROUP - 1, GROUP, GROUP + 1, 3 * GROUP + 5] {
            let (m, k, s) = good(n);
            assert_eq!(verify_all(&jobs(&m, &k, &s)), vec![true; n], "{n} signatures");
        }
    }

    /// The batch names exactly the bad signature, wherever it stands in
    /// its group and whatever is wrong with it, as single checks do.
    #[test]
    fn one_bad_signature_at_every_position_is_named_as_single_checks_name_it() {
        let n = GROUP + 3;
        let (m, k, s) = good(n);
        type Spoil = fn(&mut Vec<u8>, &mut Vec<u8>, &mut VerifyingKey);
        let spoils: [(&str, Spoil); 8] = [
            ("text edited", |m, _, _| m[0] ^= 1),
            ("signature bit flipped", |_, s, _| s[5] ^= 0x40),
            ("s bit flipped", |_, s, _| s[40] ^= 1),
            ("s not canonical", |_, s, _| s[63] |= 0xf0),
            ("R of small order", |_, s, _| {
                s[..32].copy_from_slice(&[0; 32]);
                s[0] = 1;
            }),
            ("R not on the curve", |_, s, _| s[..32].copy_from_slice(&[0xff; 32])),
            ("signature truncated", |_, s, _| s.truncate(63)),
            ("another key's signature", |_, _, k| *k = key(9).verifying_key()),
        ];
        for (what, spoil) in spoils {
            for at in 0..n {
                let (mut m, mut k, mut s) = (m.clone(), k.clone(), s.clone());
                spoil(&mut m[at], &mut s[at], &mut k[at]);
                let jobs = jobs(&m, &k, &s);
                let batched = verify_all(&jobs);
                // Only the job at `at` changed from the all-good set.
                let mut singly = vec![true; n];
                singly[at] = verify_one(&jobs[at]);
                assert_eq!(batched, singly, "{what} at {at}");
                assert!(!batched[at], "{what} at {at} passed");
                assert_eq!(batched.iter().filter(|ok| !**ok).count(), 1, "{what} at {at}");
            }
        }
    }

    /// Every small-order point as `R`, under either sign bit, and every
    /// non-canonical `y`: refused, as single checks refuse them, and the
    /// rest of the group still judged.
    #[test]
    fn small_order_and_non_canonical_r_are_judged_as_single_checks_judge_them() {
        let mut odd_rs: Vec<[u8; 32]> = Vec::new();
        for point in curve25519_dalek::constants::EIGHT_TORSION {
            let r = point.compress().to_bytes();
            odd_rs.push(r);
            let mut flipped = r;
            flipped[31] ^= 0x80;
            odd_rs.push(flipped);
        }
        for extra in 0u8..19 {
            // 2^255 - 19 + extra: y >= p, read modulo p by a lax decoder.
            let mut y = [0xff; 32];
            y[31] = 0x7f;
            y[0] = 0xed + extra;
            odd_rs.push(y);
        }
        assert_eq!(SMALL_ORDER_Y.iter().collect::<std::collections::BTreeSet<_>>().len(), 5);
        let (m, k, s) = good(GROUP + 7);
        for (n, r) in odd_rs.iter().enumerate() {
            let mut s = s.clone();
            let at = n % s.len();
            s[at][..32].copy_from_slice(r);
            let jobs = jobs(&m, &k, &s);
            let batched = verify_all(&jobs);
            assert_eq!(batched, singly(&jobs), "R {r:02x?}");
            assert_eq!(batched.iter().filter(|ok| !**ok).count(), 1, "R {r:02x?}");
        }
    }

    #[test]
    fn a_weak_key_is_refused_as_verify_strict_refuses_it() {
        // The identity point: a small-order key, for which any "signature"
        // with R = identity and s = 0 satisfies the plain equation.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        let weak = VerifyingKey::from_bytes(&identity).expect("a point");
        let mut signature = vec![0u8; 64];
        signature[0] = 1;
        let (m, mut k, mut s) = good(GROUP);
        k[3] = weak;
        s[3] = signature;
        let jobs = jobs(&m, &k, &s);
        let batched = verify_all(&jobs);
        assert_eq!(batched, singly(&jobs));
        assert!(!batched[3]);
    }
}
