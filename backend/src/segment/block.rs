//! A data block: its decoding and the searches inside it.

use super::*;

/// One decoded data block: its bytes and the offsets of its entries.
#[derive(Debug)]
pub(crate) struct Block {
    data: Box<[u8]>,
    offsets: Box<[u32]>,
    /// Each key's first 8 bytes, zero-padded, as a big-endian integer ([`key_prefix`]): the
    /// binary search compares these, in one compact array, and reads a key from `data` only
    /// when two prefixes are equal (for the slasher's 8-byte keys, only on a hit).
    prefixes: Box<[u64]>,
    /// Each key's length: with the prefixes, it orders two keys of up to 8 bytes without
    /// reading either ([`Block::cmp_key`]).
    key_lens: Box<[u16]>,
}

/// The first 8 bytes of `key`, zero-padded, as a big-endian integer. If two keys' prefixes
/// differ, they order as the prefixes do (a shorter key's padding byte is 0, the least byte,
/// and a key that is a prefix of another sorts first); equal prefixes need a full compare.
pub(crate) fn key_prefix(key: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    for (dst, src) in w.iter_mut().zip(key) {
        *dst = *src;
    }
    u64::from_be_bytes(w)
}

impl Block {
    pub(super) fn new(data: Box<[u8]>, offsets: Box<[u32]>) -> Block {
        let mut block = Block {
            data,
            offsets,
            prefixes: Box::default(),
            key_lens: Box::default(),
        };
        // One pass over the keys for both arrays: every block built or read comes through here.
        let (prefixes, key_lens): (Vec<u64>, Vec<u16>) = (0..block.len())
            .map(|i| {
                let key = block.key(i);
                (key_prefix(key), key.len() as u16)
            })
            .unzip();
        block.prefixes = prefixes.into_boxed_slice();
        block.key_lens = key_lens.into_boxed_slice();
        block
    }

    /// Parse and verify a block read from `path` at `offset`.
    pub(super) fn decode(data: Vec<u8>, path: &Path, offset: u64) -> Result<Block> {
        let bad = |reason: &str| Error::corrupted(path, format!("block at {offset}: {reason}"));
        let len = data.len();
        if len < BLOCK_TRAILER_LEN {
            return Err(bad("shorter than its trailer"));
        }
        let stored = le_u32(&data, len - 4).ok_or_else(|| bad("no crc"))?;
        let got = crc32fast::hash(data.get(..len - 4).ok_or_else(|| bad("no crc"))?);
        if stored != got {
            return Err(Error::ChecksumMismatch {
                path: path.into(),
                offset,
                expected: stored,
                got,
            });
        }
        let n = le_u32(&data, len - 8).ok_or_else(|| bad("no count"))? as usize;
        let offsets_start = (len - BLOCK_TRAILER_LEN)
            .checked_sub(n.checked_mul(4).ok_or_else(|| bad("count overflows"))?)
            .ok_or_else(|| bad("count larger than block"))?;
        let mut offsets = Vec::with_capacity(n);
        let mut prev_end = 0usize;
        for i in 0..n {
            let off = le_u32(&data, offsets_start + 4 * i).ok_or_else(|| bad("offset"))? as usize;
            if off != prev_end {
                return Err(bad("entries not contiguous"));
            }
            let klen = le_u16(&data, off).ok_or_else(|| bad("entry header"))? as usize;
            let vlen = le_u32(&data, off + 2).ok_or_else(|| bad("entry header"))?;
            let vlen = if vlen == TOMBSTONE { 0 } else { vlen as usize };
            prev_end = off + ENTRY_HEADER_LEN + klen + vlen;
            if prev_end > offsets_start {
                return Err(bad("entry overruns block"));
            }
            offsets.push(off as u32);
        }
        if prev_end != offsets_start {
            return Err(bad("trailing bytes after entries"));
        }
        let mut data = data;
        data.truncate(offsets_start);
        Ok(Block::new(
            data.into_boxed_slice(),
            offsets.into_boxed_slice(),
        ))
    }

    /// The entries' bytes: the block as written, before its trailer.
    pub(super) fn entry_bytes(&self) -> &[u8] {
        &self.data
    }

    /// Bytes held in memory (for the cache's accounting).
    pub(crate) fn weight(&self) -> usize {
        self.data.len() + 14 * self.offsets.len() + 64
    }

    pub(crate) fn len(&self) -> usize {
        self.offsets.len()
    }

    // Offsets were validated by `decode` (or produced by the builder), so slicing cannot fail;
    // `get` keeps clippy's no-indexing rule honest anyway.
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        let off = self.offsets.get(i).copied().unwrap_or(0) as usize;
        let klen = le_u16(&self.data, off).unwrap_or(0) as usize;
        self.data
            .get(off + ENTRY_HEADER_LEN..off + ENTRY_HEADER_LEN + klen)
            .unwrap_or(&[])
    }

    /// The value of entry `i`, `None` for a tombstone.
    pub(crate) fn value(&self, i: usize) -> Option<&[u8]> {
        let off = self.offsets.get(i).copied().unwrap_or(0) as usize;
        let klen = le_u16(&self.data, off).unwrap_or(0) as usize;
        let vlen = le_u32(&self.data, off + 2).unwrap_or(TOMBSTONE);
        if vlen == TOMBSTONE {
            return None;
        }
        let start = off + ENTRY_HEADER_LEN + klen;
        self.data.get(start..start + vlen as usize)
    }

    /// How entry `i`'s key orders against `key`, whose [`key_prefix`] is `prefix`. Reads the
    /// entry only if the prefixes are equal and a key is longer than 8 bytes: up to 8 bytes,
    /// keys with equal prefixes differ only by trailing zero bytes, so the shorter is less.
    /// A merge compares every entry of its older segments this way, and an entry a newer
    /// source overwrites is never read (design.md §2).
    pub(crate) fn cmp_key(&self, i: usize, key: &[u8], prefix: u64) -> Ordering {
        match self.prefixes.get(i).map(|p| p.cmp(&prefix)) {
            Some(Ordering::Equal) => match self.key_lens.get(i).map(|&l| usize::from(l)) {
                Some(len) if len <= 8 && key.len() <= 8 => len.cmp(&key.len()),
                _ => key_cmp(self.key(i), key),
            },
            Some(o) => o,
            None => key_cmp(self.key(i), key),
        }
    }

    /// Index of the first entry with key >= `key` (or > `key` if `!inclusive`).
    pub(crate) fn lower_bound(&self, key: &[u8], inclusive: bool) -> usize {
        let (mut lo, mut hi) = (0usize, self.len());
        let prefix = key_prefix(key);
        while lo < hi {
            let mid = (lo + hi) / 2;
            let ord = match self.prefixes.get(mid).map(|p| p.cmp(&prefix)) {
                Some(Ordering::Equal) | None => key_cmp(self.key(mid), key),
                Some(o) => o,
            };
            let before = match ord {
                Ordering::Less => true,
                Ordering::Equal => !inclusive,
                Ordering::Greater => false,
            };
            if before {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Where `key` is, or would be inserted (as `binary_search`), for a key that is probably
    /// at entry `expect` (the slasher reads keys in ascending order, so the one after the last
    /// it read): one or two comparisons when it is there, or when it would be inserted there;
    /// a binary search otherwise.
    pub(crate) fn search_from(&self, key: &[u8], expect: usize) -> Result<usize, usize> {
        if expect < self.len() {
            match key_cmp(self.key(expect), key) {
                Ordering::Equal => return Ok(expect),
                Ordering::Greater if expect == 0 || key_cmp(self.key(expect - 1), key).is_lt() => {
                    return Err(expect)
                }
                _ => {}
            }
        }
        let i = self.lower_bound(key, true);
        if i < self.len() && self.key(i) == key {
            Ok(i)
        } else {
            Err(i)
        }
    }
}
