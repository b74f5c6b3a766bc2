//! A range proof: that entries `[start, end)` of a tree of `size` are
//! exactly the given leaves, in one proof (not one per entry). The proof is
//! the hashes of the subtrees that cover the rest of the tree, in the order
//! RFC 6962's `MTH` recursion meets them (left to right): the verifier
//! rebuilds the root from the leaves and those hashes.
//!
//! Evidence for one run uses it to account for every position between the
//! run's first and last event (`chainship evidence --with-gaps`).

use crate::merkle::{Hash, RangeHashes, node_hash, split_point};

/// The hashes that, with the leaves of `[start, end)`, give the root of
/// the tree of `size` (`start < end <= size`).
pub fn range_proof<R: RangeHashes>(start: u64, end: u64, size: u64, src: &mut R) -> Result<Vec<Hash>, R::Error> {
    fn walk<R: RangeHashes>(
        lo: u64,
        hi: u64,
        range: (u64, u64),
        src: &mut R,
        out: &mut Vec<Hash>,
    ) -> Result<(), R::Error> {
        if hi <= range.0 || lo >= range.1 {
            out.push(src.range_hash(lo, hi)?);
        } else if hi - lo > 1 && !(range.0 <= lo && hi <= range.1) {
            let k = split_point(hi - lo);
            walk(lo, lo + k, range, src, out)?;
            walk(lo + k, hi, range, src, out)?;
        }
        // A subtree inside the range is rebuilt from the leaves: nothing to send.
        Ok(())
    }
    assert!(
        start < end && end <= size,
        "range {start}..{end} outside a tree of {size}"
    );
    let mut out = Vec::new();
    walk(0, size, (start, end), src, &mut out)?;
    Ok(out)
}

/// Whether `leaves` (the leaf hashes of entries `start..start + leaves.len()`)
/// and `proof` give `root` for the tree of `size`.
pub fn verify_range(start: u64, size: u64, leaves: &[Hash], proof: &[Hash], root: &Hash) -> bool {
    fn walk(
        lo: u64,
        hi: u64,
        range: (u64, u64),
        leaves: &[Hash],
        proof: &mut std::slice::Iter<'_, Hash>,
    ) -> Option<Hash> {
        if hi <= range.0 || lo >= range.1 {
            return proof.next().copied();
        }
        if hi - lo == 1 {
            return leaves.get(usize::try_from(lo - range.0).ok()?).copied();
        }
        let k = split_point(hi - lo);
        let left = walk(lo, lo + k, range, leaves, proof)?;
        let right = walk(lo + k, hi, range, leaves, proof)?;
        Some(node_hash(&left, &right))
    }
    let end = start.saturating_add(leaves.len() as u64);
    if leaves.is_empty() || end > size {
        return false;
    }
    let mut rest = proof.iter();
    walk(0, size, (start, end), leaves, &mut rest).is_some_and(|r| r == *root) && rest.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merkle::{leaf_hash, root_of};
    use proptest::prelude::*;

    struct Leaves(Vec<Hash>);

    impl RangeHashes for Leaves {
        type Error = std::convert::Infallible;
        fn range_hash(&mut self, start: u64, end: u64) -> Result<Hash, Self::Error> {
            Ok(root_of(&self.0[start as usize..end as usize]))
        }
    }

    fn leaves(n: u64) -> Vec<Hash> {
        (0..n).map(|i| leaf_hash(format!("entry {i}").as_bytes())).collect()
    }

    proptest! {
        #[test]
        fn every_range_proves_and_nothing_else_does(size in 1u64..300, a in 0u64..300, len in 1u64..300, flip in 0usize..1000) {
            let start = a % size;
            let end = (start + len).min(size);
            let all = leaves(size);
            let root = root_of(&all);
            let proof = range_proof(start, end, size, &mut Leaves(all.clone())).unwrap();
            let range = &all[start as usize..end as usize];
            prop_assert!(verify_range(start, size, range, &proof, &root));
            // A changed leaf, a leaf left out, a shifted start or a changed proof hash fail.
            let mut changed = range.to_vec();
            let at = flip % changed.len();
            changed[at][0] ^= 1;
            prop_assert!(!verify_range(start, size, &changed, &proof, &root));
            if range.len() > 1 {
                prop_assert!(!verify_range(start, size, &range[1..], &proof, &root));
            }
            if end < size {
                prop_assert!(!verify_range(start + 1, size, range, &proof, &root));
            }
            if !proof.is_empty() {
                let mut bad = proof.clone();
                let at = flip % bad.len();
                bad[at][31] ^= 1;
                prop_assert!(!verify_range(start, size, range, &bad, &root));
                prop_assert!(!verify_range(start, size, range, &proof[1..], &root));
            }
        }
    }

    #[test]
    fn the_whole_tree_needs_no_proof() {
        let all = leaves(7);
        let proof = range_proof(0, 7, 7, &mut Leaves(all.clone())).unwrap();
        assert!(proof.is_empty());
        assert!(verify_range(0, 7, &all, &[], &root_of(&all)));
    }
}
