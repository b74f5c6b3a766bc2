//! SHA-256 over a message fed in many short pieces: the event hash's
//! fourteen (seven netstrings, each a length prefix and its bytes).
//!
//! Why not `sha2::Sha256::update`: each call goes through the digest's block
//! buffer, and for pieces of a few bytes that bookkeeping and its copies were
//! 8% of a whole `verify` (issue 34's profile). Here the pieces gather in one
//! stack buffer of several blocks, which goes to `sha2`'s compression
//! function (its SHA-NI or software backend, picked at run time) in one call.
//! Only the message schedule is sha2's; the padding below is FIPS 180-4
//! §5.1.1, checked against `sha2::Sha256::digest` in the tests.

use sha2::block_api::compress256;

const BLOCK: usize = 64;
/// Blocks gathered before compressing: most events' netstrings fit.
const BLOCKS: usize = 4;
const CAP: usize = BLOCK * BLOCKS;
/// The most bytes [`Sha256Stream::put`] writes.
pub const SHORT: usize = 32;

/// FIPS 180-4 §5.3.3.
const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

pub struct Sha256Stream {
    state: [u32; 8],
    /// `CAP` bytes, plus room past them for what [`Sha256Stream::put`]
    /// writes and for [`Sha256Stream::finish`]'s padding.
    buf: [u8; CAP + BLOCK],
    /// Bytes of `buf` that hold the message.
    len: usize,
    /// Message bytes already compressed.
    compressed: u64,
}

impl Sha256Stream {
    pub fn new() -> Self {
        Sha256Stream {
            state: IV,
            buf: [0; CAP + BLOCK],
            len: 0,
            compressed: 0,
        }
    }

    /// Appends the bytes `put` writes at the start of the slice it is
    /// given, returning how many (at most [`SHORT`]): short pieces such as a
    /// netstring's `,<len>:` are written in place, with no copy.
    #[inline]
    pub fn put(&mut self, put: impl FnOnce(&mut [u8; SHORT]) -> usize) {
        // `len < CAP` always, so the slot lies inside `buf`.
        let slot = self.buf[self.len..self.len + SHORT]
            .as_mut_array()
            .expect("SHORT bytes");
        let written = put(slot);
        debug_assert!(written <= SHORT);
        self.len += written;
        if self.len >= CAP {
            let over = self.len - CAP;
            self.compress_buffer();
            self.buf.copy_within(CAP..CAP + over, 0);
            self.len = over;
        }
    }

    /// Appends `bytes`.
    pub fn write(&mut self, mut bytes: &[u8]) {
        loop {
            let room = CAP - self.len;
            if bytes.len() < room {
                self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
                self.len += bytes.len();
                return;
            }
            self.buf[self.len..CAP].copy_from_slice(&bytes[..room]);
            self.len = CAP;
            self.compress_buffer();
            bytes = &bytes[room..];
            // What is left in whole blocks is compressed where it lies.
            let (blocks, rest) = bytes.as_chunks::<BLOCK>();
            if !blocks.is_empty() {
                compress256(&mut self.state, blocks);
                self.compressed += (blocks.len() * BLOCK) as u64;
                bytes = rest;
            }
        }
    }

    /// The digest: FIPS 180-4 §5.1.1 padding (a 1 bit, zeros, the message
    /// length in bits as a big-endian u64 ending a block), then the state.
    pub fn finish(mut self) -> [u8; 32] {
        let bits = (self.compressed + self.len as u64) * 8;
        // Padded in place: at most the buffer plus one more block.
        let end = (self.len + 1 + 8).div_ceil(BLOCK) * BLOCK;
        self.buf[self.len] = 0x80;
        self.buf[self.len + 1..end - 8].fill(0);
        self.buf[end - 8..end].copy_from_slice(&bits.to_be_bytes());
        let (blocks, _) = self.buf[..end].as_chunks::<BLOCK>();
        compress256(&mut self.state, blocks);
        let mut out = [0u8; 32];
        for (word, chunk) in self.state.iter().zip(out.chunks_exact_mut(4)) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        out
    }

    fn compress_buffer(&mut self) {
        let (blocks, _) = self.buf[..CAP].as_chunks::<BLOCK>();
        compress256(&mut self.state, blocks);
        self.compressed += CAP as u64;
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sha2::{Digest, Sha256};

    fn streamed(pieces: &[(Vec<u8>, bool)]) -> [u8; 32] {
        let mut s = Sha256Stream::new();
        for (piece, short) in pieces {
            if *short && piece.len() <= SHORT {
                s.put(|slot| {
                    slot[..piece.len()].copy_from_slice(piece);
                    piece.len()
                });
            } else {
                s.write(piece);
            }
        }
        s.finish()
    }

    fn whole(pieces: &[(Vec<u8>, bool)]) -> [u8; 32] {
        let all: Vec<u8> = pieces.iter().flat_map(|(p, _)| p.iter().copied()).collect();
        Sha256::digest(&all).into()
    }

    #[test]
    fn every_length_around_the_block_and_buffer_edges_matches_sha2() {
        // Padding changes shape at 55/56 bytes into a block; the buffer
        // empties at CAP; pieces past CAP are compressed where they lie.
        for n in (0..200).chain(CAP - 70..CAP + 70).chain(3 * CAP - 10..3 * CAP + 10) {
            let msg: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
            assert_eq!(streamed(&[(msg.clone(), false)]), whole(&[(msg, false)]), "length {n}");
        }
    }

    #[test]
    fn fips_180_2_examples() {
        // FIPS 180-2 appendix B.1 and B.2: an implementation not ours.
        let abc = streamed(&[(b"abc".to_vec(), true)]);
        assert_eq!(
            hex::encode(abc),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let two_blocks = streamed(&[(
            b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".to_vec(),
            false,
        )]);
        assert_eq!(
            hex::encode(two_blocks),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
    }

    proptest! {
        #[test]
        fn any_split_into_pieces_matches_sha2(
            pieces in proptest::collection::vec(
                (proptest::collection::vec(any::<u8>(), 0..300), any::<bool>()),
                0..40,
            )
        ) {
            prop_assert_eq!(streamed(&pieces), whole(&pieces));
        }
    }
}
