//! The memtable's key type: short keys stored inline in the B-tree node, longer ones boxed.
//!
//! Nearly every key the slasher writes is 8 to 16 bytes. Stored inline, a put allocates only
//! its value, and the B-tree's comparisons read keys from the node they search instead of
//! following one pointer per comparison.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::ops::Deref;

use crate::segment::{key_cmp, key_prefix};

/// Longest key stored inline.
pub(crate) const INLINE: usize = 22;

/// A memtable key: ordered, compared and borrowed exactly as the `[u8]` it holds.
#[derive(Clone)]
pub(crate) enum MemKey {
    /// Up to [`INLINE`] bytes, in place.
    Inline { len: u8, bytes: [u8; INLINE] },
    /// Longer keys.
    Heap(Box<[u8]>),
}

impl From<&[u8]> for MemKey {
    fn from(key: &[u8]) -> MemKey {
        if key.len() <= INLINE {
            let mut bytes = [0u8; INLINE];
            for (dst, src) in bytes.iter_mut().zip(key) {
                *dst = *src;
            }
            MemKey::Inline {
                len: key.len() as u8,
                bytes,
            }
        } else {
            MemKey::Heap(key.into())
        }
    }
}

impl Deref for MemKey {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            MemKey::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or(&[]),
            MemKey::Heap(b) => b,
        }
    }
}

impl Borrow<[u8]> for MemKey {
    fn borrow(&self) -> &[u8] {
        self
    }
}

impl PartialEq for MemKey {
    fn eq(&self, other: &MemKey) -> bool {
        **self == **other
    }
}

impl Eq for MemKey {}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &MemKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MemKey {
    /// Two inline keys compare as their zero-padded bytes, then their lengths: where they
    /// differ within the shorter key that is the byte order; if the shorter is a prefix of the
    /// longer, the longer is greater either at its first nonzero extra byte or, if its extra
    /// bytes are all zero, by length. The first 8 bytes are compared as one big-endian
    /// integer, which settles nearly every comparison of the slasher's 8-byte keys.
    #[inline]
    fn cmp(&self, other: &MemKey) -> Ordering {
        match (self, other) {
            (MemKey::Inline { len: la, bytes: a }, MemKey::Inline { len: lb, bytes: b }) => {
                key_prefix(a)
                    .cmp(&key_prefix(b))
                    .then_with(|| a[8..].cmp(&b[8..]))
                    .then(la.cmp(lb))
            }
            _ => key_cmp(self, other),
        }
    }
}

impl std::fmt::Debug for MemKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn orders_and_finds_like_byte_slices() {
        let keys: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![1, 2, 3],
            (0..22).collect(),
            (0..23).collect(),
            (0..40).collect(),
            vec![0xff; 8],
            vec![0xff; 30],
        ];
        let mut map = BTreeMap::new();
        for (i, k) in keys.iter().enumerate() {
            map.insert(MemKey::from(k.as_slice()), i);
        }
        let mut sorted = keys.clone();
        sorted.sort();
        let got: Vec<Vec<u8>> = map.keys().map(|k| k.to_vec()).collect();
        assert_eq!(got, sorted);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(map.get(k.as_slice()), Some(&i));
        }
        assert_eq!(map.get([9u8, 9].as_slice()), None);
    }

    #[test]
    fn compares_like_byte_slices_across_lengths_and_zero_bytes() {
        // Every key of length 0..=10 over the bytes {0, 1, 255} up to length 3, then padded
        // variants: prefixes, trailing zeros, and the inline/boxed boundary.
        let mut keys: Vec<Vec<u8>> = vec![vec![]];
        for len in 1..=3 {
            let mut next = Vec::new();
            for k in keys.iter().filter(|k| k.len() == len - 1) {
                for b in [0u8, 1, 255] {
                    let mut k = k.clone();
                    k.push(b);
                    next.push(k);
                }
            }
            keys.extend(next);
        }
        for base in [vec![7u8; 8], vec![7u8; 21], vec![7u8; 22], vec![7u8; 23]] {
            for tail in [vec![], vec![0], vec![0, 0], vec![1], vec![0, 255]] {
                let mut k = base.clone();
                k.extend(&tail);
                keys.push(k);
            }
        }
        for a in &keys {
            for b in &keys {
                let (ma, mb) = (MemKey::from(a.as_slice()), MemKey::from(b.as_slice()));
                assert_eq!(ma.cmp(&mb), a.cmp(b), "{a:?} vs {b:?}");
                assert_eq!(ma == mb, a == b);
            }
        }
    }
}
