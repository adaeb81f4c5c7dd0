//! A segment's key filter: a blocked Bloom filter kept in memory beside the block index, built
//! while the segment is written and never stored (design.md §2).
//!
//! A point lookup that the segment's last-block hint cannot answer asks the filter before it
//! searches the block index: "no" is certain, so a key that lives in an older segment, or
//! nowhere, costs one cache line here instead of an index search, a cache lookup and a block
//! search in every newer segment. Each key sets 8 bits, one in each 32-bit word of one 32-byte
//! block chosen by its hash, so a query touches one cache line. With 10 bits per key the
//! false-positive rate is about 1 %.

/// Bits of filter per key.
const BITS_PER_KEY: usize = 10;
/// Bits per filter block: 8 words of 32 bits.
const WORDS: usize = 8;

/// Odd multipliers, one per word: each picks a different bit from the same 32 hash bits.
const SALT: [u32; WORDS] = [
    0x47b6_137b,
    0x4497_4d91,
    0x8824_ad5b,
    0xa2b7_289d,
    0x7054_95c7,
    0x2df1_424b,
    0x9efc_4947,
    0x5c6b_fb31,
];

/// The 64-bit hash the filter is built and queried with: 8 bytes at a time, each mixed in by a
/// multiply and a shift, then a final avalanche (the constants of SplitMix64).
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    let mut h = 0x9e37_79b9_7f4a_7c15_u64 ^ key.len() as u64;
    for c in key.chunks(8) {
        // The last piece may be shorter: it is padded with zeros (the length is in `h`).
        let mut word = [0u8; 8];
        for (w, b) in word.iter_mut().zip(c) {
            *w = *b;
        }
        h = (h ^ u64::from_le_bytes(word)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 31;
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The filter of one segment.
#[derive(Clone)]
pub(crate) struct KeyFilter {
    blocks: Box<[[u32; WORDS]]>,
}

impl std::fmt::Debug for KeyFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KeyFilter({} blocks)", self.blocks.len())
    }
}

impl KeyFilter {
    /// A filter holding the keys whose [`key_hash`]es are given.
    pub(crate) fn from_hashes(hashes: &[u64]) -> KeyFilter {
        let bits = hashes.len().saturating_mul(BITS_PER_KEY);
        let n = bits.div_ceil(32 * WORDS).max(1);
        let mut blocks = vec![[0u32; WORDS]; n].into_boxed_slice();
        for &h in hashes {
            let (block, mask) = Self::locate(h, n);
            if let Some(b) = blocks.get_mut(block) {
                for (w, m) in b.iter_mut().zip(mask) {
                    *w |= m;
                }
            }
        }
        KeyFilter { blocks }
    }

    /// The block a hash falls in (from its high half, by multiply-shift rather than a
    /// division) and the bit it sets in each word (from its low half).
    fn locate(h: u64, n: usize) -> (usize, [u32; WORDS]) {
        let block = (((h >> 32) * n as u64) >> 32) as usize;
        let low = h as u32;
        (block, SALT.map(|s| 1u32 << (low.wrapping_mul(s) >> 27)))
    }

    /// False if the key with this hash is certainly not in the segment.
    pub(crate) fn may_contain(&self, h: u64) -> bool {
        let (block, mask) = Self::locate(h, self.blocks.len());
        self.blocks
            .get(block)
            .is_none_or(|b| b.iter().zip(mask).all(|(w, m)| w & m != 0))
    }

    /// Bytes of memory the filter holds.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.blocks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64) -> [u8; 16] {
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&(i / 7).to_be_bytes());
        k[8..].copy_from_slice(&i.to_be_bytes());
        k
    }

    #[test]
    fn every_key_put_in_is_found_and_few_others_are() {
        let hashes: Vec<u64> = (0..100_000u64).map(|i| key_hash(&key(2 * i))).collect();
        let filter = KeyFilter::from_hashes(&hashes);
        assert!(
            (0..100_000u64).all(|i| filter.may_contain(key_hash(&key(2 * i)))),
            "a filter must never deny a key it holds"
        );
        let false_positives = (0..100_000u64)
            .filter(|i| filter.may_contain(key_hash(&key(2 * i + 1))))
            .count();
        // About 1 % expected at 10 bits a key; a broken hash or mask gives far more.
        assert!(
            false_positives < 2_000,
            "{false_positives} of 100,000 absent keys passed the filter"
        );
        // 10 bits a key, rounded up to whole 32-byte blocks.
        assert!(
            (125_000..125_032).contains(&filter.bytes()),
            "{}",
            filter.bytes()
        );
    }

    #[test]
    fn keys_of_every_length_hash_apart() {
        // Keys that differ only in length, or only in their last byte, must not collide.
        let keys: [&[u8]; 6] = [b"", b"\0", b"\0\0", b"abcdefgh", b"abcdefgh\0", b"abcdefgi"];
        let hashes: Vec<u64> = keys.iter().map(|k| key_hash(k)).collect();
        for (i, a) in hashes.iter().enumerate() {
            for b in hashes.iter().skip(i + 1) {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn an_empty_filter_denies_everything() {
        let filter = KeyFilter::from_hashes(&[]);
        assert!(!filter.may_contain(key_hash(b"any")));
    }
}
