//! RFC 6962 (section 2.1) Merkle tree hashes and proofs, with the
//! verification algorithms of RFC 9162 (sections 2.1.3.2 and 2.1.4.2).

use sha2::{Digest, Sha256};

pub type Hash = [u8; 32];

/// `SHA-256(0x00 || entry)`.
pub fn leaf_hash(entry: &[u8]) -> Hash {
    let mut sha = Sha256::new();
    sha.update([0u8]);
    sha.update(entry);
    sha.finalize().into()
}

/// `SHA-256(0x01 || left || right)`.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut sha = Sha256::new();
    sha.update([1u8]);
    sha.update(left);
    sha.update(right);
    sha.finalize().into()
}

/// The root of the empty tree: `SHA-256("")`.
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// The largest power of two below `n` (n >= 2): where RFC 6962 splits.
pub fn split_point(n: u64) -> u64 {
    debug_assert!(n >= 2);
    1 << (63 - (n - 1).leading_zeros())
}

/// The Merkle tree hash over already-hashed nodes of one height (leaf
/// hashes, or the subtree hashes of a tile row).
pub fn root_of(hashes: &[Hash]) -> Hash {
    match hashes.len() {
        0 => empty_root(),
        1 => hashes[0],
        n => {
            let k = split_point(n as u64) as usize;
            node_hash(&root_of(&hashes[..k]), &root_of(&hashes[k..]))
        }
    }
}

/// The right edge of a growing tree: one hash per perfect subtree (one
/// per set bit of the size), enough to extend it and compute its root.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactRange {
    size: u64,
    /// Perfect subtree hashes, largest (leftmost) first.
    stack: Vec<Hash>,
}

impl CompactRange {
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends the leaf hash of the next entry.
    pub fn push_leaf(&mut self, leaf: Hash) {
        self.push_subtree(0, leaf);
    }

    /// Appends a perfect subtree of `2^height` entries given by its hash
    /// (e.g. the root of a full tile). The size must be a multiple of
    /// `2^height`, as a subtree's place in the tree always is.
    pub fn push_subtree(&mut self, height: u32, subtree: Hash) {
        let width = 1u64 << height;
        assert!(
            self.size.is_multiple_of(width),
            "a subtree of {width} entries cannot start at {}",
            self.size
        );
        let mut hash = subtree;
        let mut size = self.size >> height;
        // Each trailing one bit of the old size closes a perfect subtree.
        while size & 1 == 1 {
            let left = self.stack.pop().expect("one hash per set bit");
            hash = node_hash(&left, &hash);
            size >>= 1;
        }
        self.stack.push(hash);
        self.size += width;
    }

    /// The perfect subtree hashes, largest (leftmost) first: with the size,
    /// all a later process needs to go on ([`CompactRange::from_parts`]).
    pub fn hashes(&self) -> &[Hash] {
        &self.stack
    }

    /// The range of `size` entries whose perfect subtrees are `hashes`
    /// (largest first); `None` unless there is one hash per set bit.
    pub fn from_parts(size: u64, hashes: Vec<Hash>) -> Option<CompactRange> {
        (hashes.len() == size.count_ones() as usize).then_some(CompactRange { size, stack: hashes })
    }

    pub fn root(&self) -> Hash {
        let mut hashes = self.stack.iter().rev();
        let Some(last) = hashes.next() else {
            return empty_root();
        };
        hashes.fold(*last, |acc, left| node_hash(left, &acc))
    }
}

/// Where proofs get the hash of a range of entries: `MTH(D[start:end])`.
pub trait RangeHashes {
    type Error;
    fn range_hash(&mut self, start: u64, end: u64) -> Result<Hash, Self::Error>;
}

/// The inclusion proof (RFC 6962 `PATH`) of entry `index` in the tree of
/// `size`, from the leaf's sibling up to the root's child.
pub fn inclusion_proof<R: RangeHashes>(index: u64, size: u64, src: &mut R) -> Result<Vec<Hash>, R::Error> {
    fn path<R: RangeHashes>(m: u64, start: u64, end: u64, src: &mut R, out: &mut Vec<Hash>) -> Result<(), R::Error> {
        let n = end - start;
        if n <= 1 {
            return Ok(());
        }
        let k = split_point(n);
        if m < k {
            path(m, start, start + k, src, out)?;
            out.push(src.range_hash(start + k, end)?);
        } else {
            path(m - k, start + k, end, src, out)?;
            out.push(src.range_hash(start, start + k)?);
        }
        Ok(())
    }
    assert!(index < size, "index {index} outside a tree of {size}");
    let mut out = Vec::new();
    path(index, 0, size, src, &mut out)?;
    Ok(out)
}

/// The consistency proof (RFC 6962 `PROOF`) between trees of `old` and
/// `new` entries (0 < old <= new).
pub fn consistency_proof<R: RangeHashes>(old: u64, new: u64, src: &mut R) -> Result<Vec<Hash>, R::Error> {
    fn sub<R: RangeHashes>(
        m: u64,
        start: u64,
        end: u64,
        whole: bool,
        src: &mut R,
        out: &mut Vec<Hash>,
    ) -> Result<(), R::Error> {
        let n = end - start;
        if m == n {
            if !whole {
                out.push(src.range_hash(start, end)?);
            }
            return Ok(());
        }
        let k = split_point(n);
        if m <= k {
            sub(m, start, start + k, whole, src, out)?;
            out.push(src.range_hash(start + k, end)?);
        } else {
            sub(m - k, start + k, end, false, src, out)?;
            out.push(src.range_hash(start, start + k)?);
        }
        Ok(())
    }
    assert!(0 < old && old <= new, "consistency from {old} to {new}");
    let mut out = Vec::new();
    sub(old, 0, new, true, src, &mut out)?;
    Ok(out)
}

/// RFC 9162 2.1.3.2: whether `proof` shows `leaf` at `index` in the tree
/// of `size` with `root`.
pub fn verify_inclusion(index: u64, size: u64, leaf: &Hash, proof: &[Hash], root: &Hash) -> bool {
    if index >= size {
        return false;
    }
    let (mut f, mut s) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if s == 0 {
            return false;
        }
        if f & 1 == 1 || f == s {
            r = node_hash(p, &r);
            if f & 1 == 0 {
                while f & 1 == 0 && f != 0 {
                    f >>= 1;
                    s >>= 1;
                }
            }
        } else {
            r = node_hash(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    s == 0 && r == *root
}

/// RFC 9162 2.1.4.2: whether `proof` shows the tree of `old` entries with
/// `old_root` is a prefix of the tree of `new` entries with `new_root`.
pub fn verify_consistency(old: u64, new: u64, old_root: &Hash, new_root: &Hash, proof: &[Hash]) -> bool {
    if old == 0 || old > new {
        return false;
    }
    if old == new {
        return proof.is_empty() && old_root == new_root;
    }
    let mut path: Vec<Hash> = Vec::with_capacity(proof.len() + 1);
    if old.is_power_of_two() {
        path.push(*old_root);
    }
    path.extend_from_slice(proof);
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    let (mut f, mut s) = (old - 1, new - 1);
    while f & 1 == 1 {
        f >>= 1;
        s >>= 1;
    }
    let (mut fr, mut sr) = (*first, *first);
    for c in rest {
        if s == 0 {
            return false;
        }
        if f & 1 == 1 || f == s {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        f >>= 1;
        s >>= 1;
    }
    fr == *old_root && sr == *new_root && s == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Leaves a test can compute every range of directly.
    struct Leaves(Vec<Hash>);

    impl RangeHashes for Leaves {
        type Error = std::convert::Infallible;
        fn range_hash(&mut self, start: u64, end: u64) -> Result<Hash, Self::Error> {
            Ok(root_of(&self.0[start as usize..end as usize]))
        }
    }

    fn leaves(n: u64) -> Leaves {
        Leaves((0..n).map(|i| leaf_hash(format!("{i:064x}").as_bytes())).collect())
    }

    #[test]
    fn rfc6962_reference_roots() {
        // The RFC 6962 test vectors (certificate-transparency-go's merkle tests):
        // leaves "", 0x00, 0x10, 0x2021, 0x3031, 0x40414243...
        let data: [&[u8]; 8] = [
            b"",
            &[0x00],
            &[0x10],
            &[0x20, 0x21],
            &[0x30, 0x31],
            &[0x40, 0x41, 0x42, 0x43],
            &[0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57],
            &[
                0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f,
            ],
        ];
        let roots = [
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
            "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
            "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
            "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
            "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
            "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
        ];
        let hashes: Vec<Hash> = data.iter().map(|d| leaf_hash(d)).collect();
        let mut range = CompactRange::default();
        for (i, h) in hashes.iter().enumerate() {
            range.push_leaf(*h);
            assert_eq!(hex::encode(root_of(&hashes[..=i])), roots[i], "size {}", i + 1);
            assert_eq!(hex::encode(range.root()), roots[i], "compact range, size {}", i + 1);
        }
        assert_eq!(
            hex::encode(empty_root()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    proptest! {
        #[test]
        fn subtrees_of_16_then_leaves_give_the_same_root(size in 0u64..600) {
            let src = leaves(size);
            let mut range = CompactRange::default();
            let whole = size / 16 * 16;
            for chunk in src.0[..whole as usize].chunks(16) {
                range.push_subtree(4, root_of(chunk));
            }
            for leaf in &src.0[whole as usize..] {
                range.push_leaf(*leaf);
            }
            prop_assert_eq!(range.size(), size);
            prop_assert_eq!(range.root(), root_of(&src.0));
        }

        #[test]
        fn every_inclusion_proof_verifies_and_a_wrong_one_does_not(size in 1u64..600, pick in 0u64..600) {
            let index = pick % size;
            let mut src = leaves(size);
            let root = root_of(&src.0);
            let leaf = src.0[index as usize];
            let proof = inclusion_proof(index, size, &mut src).unwrap();
            prop_assert!(verify_inclusion(index, size, &leaf, &proof, &root));
            prop_assert!(!verify_inclusion(index, size, &leaf_hash(b"other"), &proof, &root));
            if size > 1 {
                prop_assert!(!verify_inclusion((index + 1) % size, size, &leaf, &proof, &root));
                prop_assert!(!verify_inclusion(index, size, &leaf, &proof[..proof.len() - 1], &root));
            }
        }

        #[test]
        fn every_consistency_proof_verifies_and_a_fork_does_not(new in 1u64..600, pick in 1u64..600) {
            let old = 1 + pick % new;
            let mut src = leaves(new);
            let new_root = root_of(&src.0);
            let old_root = root_of(&src.0[..old as usize]);
            let proof = consistency_proof(old, new, &mut src).unwrap();
            prop_assert!(verify_consistency(old, new, &old_root, &new_root, &proof));
            // A different old tree of the same size is not a prefix.
            let mut forked = src.0[..old as usize].to_vec();
            forked[0] = leaf_hash(b"rewritten");
            prop_assert!(!verify_consistency(old, new, &root_of(&forked), &new_root, &proof));
            if !proof.is_empty() {
                prop_assert!(!verify_consistency(old, new, &old_root, &new_root, &proof[1..]));
            }
        }
    }
}
