//! The memtable's key type: short keys stored inline in the B-tree node, longer ones boxed.
//!
//! Nearly every key the slasher writes is 8 to 16 bytes. Stored inline, a put allocates only
//! its value, and the B-tree's comparisons read keys from the node they search instead of
//! following one pointer per comparison.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::ops::Deref;

use crate::segment::key_cmp;

/// Longest key stored inline.
const INLINE: usize = 22;

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
            bytes[..key.len()].copy_from_slice(key);
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
    fn cmp(&self, other: &MemKey) -> Ordering {
        key_cmp(self, other)
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
}
