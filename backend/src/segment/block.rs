//! A data block: its decoding and the searches inside it.

use std::cmp::Ordering;
use std::path::Path;

use crate::error::{Error, Result};

use super::format::{key_cmp, le_u16, le_u32, BLOCK_TRAILER_LEN, ENTRY_HEADER_LEN, TOMBSTONE};

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
        let prefix = key_prefix(key);
        search_prefixed(&self.prefixes, prefix, |i| {
            match self.cmp_key(i, key, prefix) {
                Ordering::Less => true,
                Ordering::Equal => !inclusive,
                Ordering::Greater => false,
            }
        })
    }

    /// Where `key` is, or would be inserted (as `binary_search`), for a key that is probably
    /// at entry `expect` (the slasher reads keys in ascending order, so the one after the last
    /// it read): one or two comparisons of prefixes when it is there, or when it would be
    /// inserted there; [`search_prefixed`] otherwise.
    pub(crate) fn search_from(&self, key: &[u8], expect: usize) -> Result<usize, usize> {
        let prefix = key_prefix(key);
        if expect <= self.len() {
            let here = (expect < self.len()).then(|| self.cmp_key(expect, key, prefix));
            if here == Some(Ordering::Equal) {
                return Ok(expect);
            }
            if here != Some(Ordering::Less)
                && (expect == 0 || self.cmp_key(expect - 1, key, prefix).is_lt())
            {
                return Err(expect);
            }
        }
        let i = self.lower_bound(key, true);
        if i < self.len() && self.cmp_key(i, key, prefix).is_eq() {
            Ok(i)
        } else {
            Err(i)
        }
    }
}

/// The partition point of a sorted run of keys whose [`key_prefix`]es are `prefixes`: the
/// number of keys that come before a probe whose prefix is `prefix`. A key with a smaller prefix
/// comes before it and one with a larger prefix does not, so `before(i)` is asked only of the
/// keys whose prefix equals `prefix` (one or none among 8-byte keys), by bisection.
///
/// The search starts where `prefix` would be if the prefixes were spread evenly between the
/// first and the last, as the slasher's keys (validator and chunk indices) are, and steps out
/// from there: a lookup that misses the caller's hint reads two or three neighbouring prefixes
/// instead of a binary search's cache line per step (design.md §2).
pub(crate) fn search_prefixed(
    prefixes: &[u64],
    prefix: u64,
    before: impl Fn(usize) -> bool,
) -> usize {
    let guess = interpolate(prefixes, prefix);
    let mut lo = partition_near(prefixes, guess, |p| p < prefix);
    let mut hi = partition_near(prefixes, lo, |p| p <= prefix);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Where `prefix` would be in `prefixes` (ascending) if they were spread evenly between the
/// first and the last.
fn interpolate(prefixes: &[u64], prefix: u64) -> usize {
    let (Some(&first), Some(&last)) = (prefixes.first(), prefixes.last()) else {
        return 0;
    };
    if prefix <= first {
        return 0;
    }
    if prefix >= last {
        return prefixes.len() - 1;
    }
    // A guess only: f64's rounding moves it by a position or two at worst.
    let at = (prefix - first) as f64 / (last - first) as f64 * (prefixes.len() - 1) as f64;
    at as usize
}

/// The partition point of `pred` over `items` (true for a prefix of them, false after),
/// found by stepping out from `guess` in doubling steps, then bisecting the last step: a few
/// reads when the guess is close, about twice a binary search's when it is not.
pub(super) fn partition_near(items: &[u64], guess: usize, pred: impl Fn(u64) -> bool) -> usize {
    let n = items.len();
    let Some(guess) = n.checked_sub(1).map(|last| guess.min(last)) else {
        return 0;
    };
    let holds = |i: usize| items.get(i).is_some_and(|&x| pred(x));
    let (mut lo, mut hi);
    let mut step = 1usize;
    if holds(guess) {
        lo = guess + 1;
        loop {
            let j = guess.saturating_add(step);
            if j >= n {
                hi = n;
                break;
            }
            if holds(j) {
                lo = j + 1;
                step = step.saturating_mul(2);
            } else {
                hi = j;
                break;
            }
        }
    } else {
        hi = guess;
        loop {
            let Some(j) = guess.checked_sub(step) else {
                lo = 0;
                break;
            };
            if holds(j) {
                lo = j + 1;
                break;
            }
            hi = j;
            step = step.saturating_mul(2);
        }
    }
    lo + items
        .get(lo..hi)
        .map_or(0, |s| s.partition_point(|&x| pred(x)))
}
