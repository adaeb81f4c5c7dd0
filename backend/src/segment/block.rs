//! A data block: its decoding and the searches inside it.

use std::cmp::Ordering;
use std::path::Path;

use crate::error::{Error, Result};

use super::format::{
    get_varint, key_cmp, le_u16, le_u32, put_varint, BLOCK_TARGET_BYTES, BLOCK_TRAILER_LEN,
    ENTRY_HEADER_LEN, TOMBSTONE,
};

/// One decoded data block: its entries' bytes, laid out as [`Layout`] says.
#[derive(Debug)]
pub(crate) struct Block {
    data: Box<[u8]>,
    layout: Layout,
}

/// How a decoded block holds its entries in memory (design.md §1).
#[derive(Debug)]
enum Layout {
    /// Any entries: `data` holds each as `key_len u16 | value_len u32 | key | value`
    /// (value_len [`TOMBSTONE`] for a deletion), back to back.
    Listed {
        /// Where each entry starts in `data`.
        offsets: Box<[u32]>,
        /// Each key's first 8 bytes, zero-padded, as a big-endian integer ([`key_prefix`]):
        /// the binary search compares these, in one compact array, and reads a key from
        /// `data` only when two prefixes are equal.
        prefixes: Box<[u64]>,
        /// Each key's length: with the prefixes, it orders two keys of up to 8 bytes without
        /// reading either ([`Block::cmp_key`]).
        key_lens: Box<[u16]>,
    },
    /// Entries that are all values (no deletion), every key `key_len` <= 8 bytes long and
    /// every value of one length: `data` holds only the keys and values, key then value, back
    /// to back, and a search reads the keys in place. The slasher's `current_epochs` and
    /// `attesters_max_targets` entries (8-byte keys and values) take 16 bytes each this way,
    /// instead of 36 listed: the blocks the slasher reads in every batch fit the cache of a
    /// small memory limit 2.25 times as well (docs/runs/profiles.md §7.9).
    Fixed {
        key_len: usize,
        /// `key_len` plus the value's length.
        stride: usize,
        /// How many entries (kept, so that no lookup divides).
        count: usize,
    },
}

/// Positions of ascending [`key_prefix`]es, for [`search_prefixed`]: an array of them, or the
/// keys of a fixed-layout block read in place.
pub(crate) trait Prefixes {
    fn count(&self) -> usize;
    fn at(&self, i: usize) -> Option<u64>;
}

impl Prefixes for [u64] {
    fn count(&self) -> usize {
        self.len()
    }
    fn at(&self, i: usize) -> Option<u64> {
        self.get(i).copied()
    }
}

/// The `count` keys of a [`Layout::Fixed`] block, `stride` bytes apart from the start of
/// `data`.
struct InPlace<'a> {
    data: &'a [u8],
    stride: usize,
    key_len: usize,
    count: usize,
}

impl Prefixes for InPlace<'_> {
    fn count(&self) -> usize {
        self.count
    }
    fn at(&self, i: usize) -> Option<u64> {
        let start = i.checked_mul(self.stride)?;
        Some(key_prefix(self.data.get(start..start + self.key_len)?))
    }
}

/// The key and value (`None` for a deletion) of the in-memory entry at `off` of `block`.
fn entry_at(block: &[u8], off: usize) -> (&[u8], Option<&[u8]>) {
    let klen = le_u16(block, off).unwrap_or(0) as usize;
    let key_start = off + ENTRY_HEADER_LEN;
    let key = block.get(key_start..key_start + klen).unwrap_or(&[]);
    let value = match le_u32(block, off + 2).unwrap_or(TOMBSTONE) {
        TOMBSTONE => None,
        vlen => block.get(key_start + klen..key_start + klen + vlen as usize),
    };
    (key, value)
}

/// The 8 bytes of `src` from `start` as a big-endian integer, if it has them.
#[inline]
fn word_at(src: &[u8], start: usize) -> Option<u64> {
    let bytes: [u8; 8] = src.get(start..start.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_be_bytes(bytes))
}

/// The first `n` bytes of a big-endian word as a mask (`n` <= 8).
#[inline]
fn high_bytes(n: usize) -> u64 {
    match n {
        0 => 0,
        8.. => u64::MAX,
        _ => u64::MAX << (64 - 8 * n),
    }
}

/// A key or value of `len` <= 8 bytes as a zero-padded big-endian word: the first `shared`
/// bytes of `prev` (the one before it, as a word), then the first bytes of `suffix_word` (the 8
/// bytes of the block from where its suffix starts; what lies past the suffix is masked off).
#[inline]
fn splice(prev: u64, shared: usize, suffix_word: u64, len: usize) -> u64 {
    let moved = suffix_word.checked_shr(8 * shared as u32).unwrap_or(0);
    (prev & high_bytes(shared)) | (moved & high_bytes(len) & !high_bytes(shared))
}

/// Appends the first `n` (<= 8) bytes of the big-endian `word`: one 8-byte store, then the
/// length cut back, instead of a call to `memcpy` for a piece of a few bytes.
#[inline]
fn push_word(out: &mut Vec<u8>, word: u64, n: usize) {
    let end = out.len() + n;
    out.extend_from_slice(&word.to_be_bytes());
    out.truncate(end);
}

/// How many bytes `a` and `b` begin with in common.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The first 8 bytes of `key`, zero-padded, as a big-endian integer. If two keys' prefixes
/// differ, they order as the prefixes do (a shorter key's padding byte is 0, the least byte,
/// and a key that is a prefix of another sorts first); equal prefixes need a full compare.
pub(crate) fn key_prefix(key: &[u8]) -> u64 {
    if let Some(word) = key.get(..8).and_then(|k| <[u8; 8]>::try_from(k).ok()) {
        return u64::from_be_bytes(word);
    }
    let mut w = [0u8; 8];
    for (dst, src) in w.iter_mut().zip(key) {
        *dst = *src;
    }
    u64::from_be_bytes(w)
}

impl Block {
    /// A block in the in-memory form of format 1 and the builder (`data`, entries at
    /// `offsets`): fixed if its entries allow it ([`Block::fixed`]), else listed.
    pub(super) fn new(data: Box<[u8]>, offsets: Box<[u32]>) -> Block {
        if let Some(fixed) = Block::fixed(&data, &offsets) {
            return fixed;
        }
        let keys = || offsets.iter().map(|&off| entry_at(&data, off as usize).0);
        let prefixes = keys().map(key_prefix).collect();
        let key_lens = keys().map(|k| k.len() as u16).collect();
        Block {
            layout: Layout::Listed {
                offsets,
                prefixes,
                key_lens,
            },
            data,
        }
    }

    /// The [`Layout::Fixed`] form of the entries at `offsets` of the listed `data`, if they
    /// are all values with keys of one length up to 8 bytes and values of one length.
    fn fixed(data: &[u8], offsets: &[u32]) -> Option<Block> {
        let entries = || offsets.iter().map(|&off| entry_at(data, off as usize));
        let (key, value) = entries().next()?;
        let (key_len, value_len) = (key.len(), value?.len());
        // A zero-length key and value would make a stride of 0; such a block has one entry.
        if key_len > 8
            || key_len + value_len == 0
            || entries().any(|(k, v)| k.len() != key_len || v.map(<[u8]>::len) != Some(value_len))
        {
            return None;
        }
        let stride = key_len + value_len;
        let mut out = Vec::with_capacity(offsets.len() * stride);
        for (k, v) in entries() {
            out.extend_from_slice(k);
            out.extend_from_slice(v.unwrap_or_default());
        }
        Some(Block {
            data: out.into_boxed_slice(),
            layout: Layout::Fixed {
                key_len,
                stride,
                count: offsets.len(),
            },
        })
    }

    /// Parse and verify a block of a format-`version` segment read from `path` at `offset`.
    ///
    /// Format 1 stores the entries as a block holds them in memory (`key_len u16 | value_len
    /// u32 | key | value`, value_len [`TOMBSTONE`] for a deletion), then an offset u32 per entry.
    /// Format 2 stores each entry as what it adds to the one before it in the block:
    /// `shared | suffix_len | tag | [value_shared] | key suffix | value suffix`, the four
    /// numbers LEB128 varints. The key is the previous key's first `shared` bytes and the
    /// suffix; `tag` 0 is a deletion, otherwise the value is the previous value's first
    /// `value_shared` bytes (a deletion's value is empty, and so is the one before a block's
    /// first entry) and `tag - 1` bytes of suffix. Both end with the entry count u32 and a
    /// CRC-32 of everything before it. The slasher's `attesters` entries (7-byte keys of
    /// neighbouring validators, 6-byte ids) take 10 to 12 bytes instead of 23.
    pub(super) fn decode(data: Vec<u8>, version: u32, path: &Path, offset: u64) -> Result<Block> {
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
                region: "block".into(),
                offset,
                len: len as u64,
                expected: stored,
                got,
            });
        }
        let n = le_u32(&data, len - 8).ok_or_else(|| bad("no count"))? as usize;
        if version == 1 {
            Self::decode_v1(data, n, bad)
        } else {
            match Self::decode_v2_fixed(&data, n) {
                Some(block) => Ok(block),
                None => Self::decode_v2(&data, n, bad),
            }
        }
    }

    fn decode_v1(mut data: Vec<u8>, n: usize, bad: impl Fn(&str) -> Error) -> Result<Block> {
        let offsets_start = (data.len() - BLOCK_TRAILER_LEN)
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
        data.truncate(offsets_start);
        Ok(Block::new(
            data.into_boxed_slice(),
            offsets.into_boxed_slice(),
        ))
    }

    /// Expands a format-2 block straight into the [`Layout::Fixed`] form, if its entries allow
    /// it (see [`Block::fixed`]); `None` if they do not, or at anything amiss, which
    /// [`Block::decode_v2`] then decodes or refuses by name. Keys, and values of up to 8
    /// bytes, are spliced as words from the previous one and the suffix ([`splice`]).
    fn decode_v2_fixed(data: &[u8], n: usize) -> Option<Block> {
        let body = data.get(..data.len() - BLOCK_TRAILER_LEN)?;
        let mut at = 0usize;
        let varint = |at: &mut usize| get_varint(body, at).map(|v| v as usize);
        // The first entry gives the shape: it shares nothing.
        let (key_len, value_len) = {
            let mut peek = 0usize;
            let (shared, suffix, tag) =
                (varint(&mut peek)?, varint(&mut peek)?, varint(&mut peek)?);
            let value_shared = varint(&mut peek)?;
            (shared == 0 && value_shared == 0 && tag != 0).then(|| (suffix, tag - 1))?
        };
        let stride = key_len + value_len;
        // The listed form's bound on what a block may expand to (see `decode_v2`): every
        // entry after the first starts below the target. It also bounds what a damaged count
        // could make this reserve.
        let last_start = n.checked_sub(1)?.checked_mul(ENTRY_HEADER_LEN + stride)?;
        if key_len > 8 || stride == 0 || last_start >= BLOCK_TARGET_BYTES {
            return None;
        }
        let mut out = Vec::with_capacity(n * stride);
        let (mut key_word, mut value_word) = (0u64, 0u64);
        for i in 0..n {
            let shared = varint(&mut at)?;
            let suffix = varint(&mut at)?;
            let tag = varint(&mut at)?;
            if tag == 0 {
                return None;
            }
            let value_shared = varint(&mut at)?;
            let vsuffix = tag - 1;
            // (The first entry, read again, shares nothing: see above.)
            if shared + suffix != key_len || value_shared + vsuffix != value_len {
                return None;
            }
            let value_at = at.checked_add(suffix)?;
            let end = value_at.checked_add(vsuffix)?;
            if end > body.len() {
                return None;
            }
            // `data` has the trailer's 8 bytes after the body: a word can always be read.
            key_word = splice(key_word, shared, word_at(data, at)?, key_len);
            push_word(&mut out, key_word, key_len);
            if value_len <= 8 {
                value_word = splice(
                    value_word,
                    value_shared,
                    word_at(data, value_at)?,
                    value_len,
                );
                push_word(&mut out, value_word, value_len);
            } else {
                // The previous value ends where this key starts.
                if let Some(prev) = (i > 0).then(|| out.len().checked_sub(stride)).flatten() {
                    out.extend_from_within(prev..prev + value_shared);
                }
                out.extend_from_slice(body.get(value_at..end)?);
            }
            at = end;
        }
        (at == body.len()).then(|| Block {
            data: out.into_boxed_slice(),
            layout: Layout::Fixed {
                key_len,
                stride,
                count: n,
            },
        })
    }

    /// Expands a format-2 block into the in-memory form. What a damaged block can expand to is
    /// bounded: every entry after the first must start below [`BLOCK_TARGET_BYTES`] (where the
    /// builder closes a block), so the whole is at most that, plus one key, one shared value
    /// from below that bound, and the block's own bytes.
    fn decode_v2(data: &[u8], n: usize, bad: impl Fn(&str) -> Error) -> Result<Block> {
        let body = data.get(..data.len() - BLOCK_TRAILER_LEN).unwrap_or(&[]);
        // An entry takes at least 3 bytes (three one-byte varints): a damaged count cannot
        // reserve more than the block could hold.
        let cap = n.min(body.len() / 3);
        let mut offsets = Vec::with_capacity(cap);
        let mut prefixes = Vec::with_capacity(cap);
        let mut key_lens = Vec::with_capacity(cap);
        // A block of small entries expands to just past the target; one large entry, to
        // about its own size.
        let mut out = Vec::with_capacity(
            body.len()
                .saturating_mul(4)
                .min(BLOCK_TARGET_BYTES + 1024)
                .max(body.len() + 64),
        );
        let (mut key, mut value) = (0..0, 0..0);
        let mut at = 0usize;
        for i in 0..n {
            if i > 0 && out.len() >= BLOCK_TARGET_BYTES {
                return Err(bad("entries past the block's size"));
            }
            let mut varint = || get_varint(body, &mut at).ok_or_else(|| bad("entry header"));
            let shared = varint()? as usize;
            let suffix = varint()? as usize;
            let tag = varint()?;
            let value_shared = if tag == 0 { 0 } else { varint()? as usize };
            if shared > key.len() || value_shared > value.len() {
                return Err(bad("shares more than the entry before it holds"));
            }
            let klen = u16::try_from(shared + suffix).map_err(|_| bad("key too long"))?;
            let vsuffix = tag.saturating_sub(1) as usize;
            let vlen = match tag {
                0 => TOMBSTONE,
                _ => u32::try_from(value_shared + vsuffix)
                    .ok()
                    .filter(|&l| l != TOMBSTONE)
                    .ok_or_else(|| bad("value too long"))?,
            };
            let key_end = at
                .checked_add(suffix)
                .ok_or_else(|| bad("entry overruns block"))?;
            let value_end = key_end
                .checked_add(vsuffix)
                .ok_or_else(|| bad("entry overruns block"))?;
            let (Some(key_suffix), Some(value_suffix)) =
                (body.get(at..key_end), body.get(key_end..value_end))
            else {
                return Err(bad("entry overruns block"));
            };
            at = value_end;
            offsets.push(u32::try_from(out.len()).map_err(|_| bad("block too large"))?);
            out.extend_from_slice(&klen.to_le_bytes());
            out.extend_from_slice(&vlen.to_le_bytes());
            let key_start = out.len();
            out.extend_from_within(key.start..key.start + shared);
            out.extend_from_slice(key_suffix);
            key = key_start..out.len();
            prefixes.push(key_prefix(out.get(key.clone()).unwrap_or(&[])));
            key_lens.push(klen);
            let value_start = out.len();
            if tag != 0 {
                out.extend_from_within(value.start..value.start + value_shared);
                out.extend_from_slice(value_suffix);
            }
            value = value_start..out.len();
        }
        if at != body.len() {
            return Err(bad("trailing bytes after entries"));
        }
        // A block of the fixed form's shape was expanded by `decode_v2_fixed` already.
        Ok(Block {
            data: out.into_boxed_slice(),
            layout: Layout::Listed {
                offsets: offsets.into_boxed_slice(),
                prefixes: prefixes.into_boxed_slice(),
                key_lens: key_lens.into_boxed_slice(),
            },
        })
    }

    /// Appends entry (`key`, `value`) in format 2 to `out`, the format-2 bytes of a block whose
    /// in-memory form so far is `block` with its last entry at `last` (`None`: the first).
    pub(super) fn encode_v2(
        out: &mut Vec<u8>,
        block: &[u8],
        last: Option<u32>,
        key: &[u8],
        value: Option<&[u8]>,
    ) {
        let (prev_key, prev_value) = match last {
            Some(off) => entry_at(block, off as usize),
            None => (&[][..], None),
        };
        // A deletion's value, and the one before a block's first entry, share nothing.
        let prev_value = prev_value.unwrap_or_default();
        let shared = common_prefix(prev_key, key);
        put_varint(out, shared as u32);
        put_varint(out, (key.len() - shared) as u32);
        let value_shared = match value {
            None => {
                put_varint(out, 0);
                0
            }
            Some(v) => {
                let value_shared = common_prefix(prev_value, v);
                put_varint(out, (v.len() - value_shared + 1) as u32);
                put_varint(out, value_shared as u32);
                value_shared
            }
        };
        out.extend_from_slice(key.get(shared..).unwrap_or(&[]));
        if let Some(v) = value {
            out.extend_from_slice(v.get(value_shared..).unwrap_or(&[]));
        }
    }

    /// Bytes held in memory (for the cache's accounting).
    pub(crate) fn weight(&self) -> usize {
        match &self.layout {
            Layout::Listed { offsets, .. } => self.data.len() + 14 * offsets.len() + 64,
            Layout::Fixed { .. } => self.data.len() + 64,
        }
    }

    /// Whether it is held in the [`Layout::Fixed`] form (tests).
    #[cfg(test)]
    pub(crate) fn is_fixed(&self) -> bool {
        matches!(self.layout, Layout::Fixed { .. })
    }

    pub(crate) fn len(&self) -> usize {
        match &self.layout {
            Layout::Listed { offsets, .. } => offsets.len(),
            Layout::Fixed { count, .. } => *count,
        }
    }

    // Offsets were validated by `decode` (or produced by the builder), so slicing cannot fail;
    // `get` keeps clippy's no-indexing rule honest anyway.
    pub(crate) fn key(&self, i: usize) -> &[u8] {
        match &self.layout {
            Layout::Listed { offsets, .. } => {
                let off = offsets.get(i).copied().unwrap_or(0) as usize;
                entry_at(&self.data, off).0
            }
            Layout::Fixed {
                key_len, stride, ..
            } => {
                let start = i * stride;
                self.data.get(start..start + key_len).unwrap_or(&[])
            }
        }
    }

    /// The value of entry `i`, `None` for a tombstone.
    pub(crate) fn value(&self, i: usize) -> Option<&[u8]> {
        match &self.layout {
            Layout::Listed { offsets, .. } => {
                let off = offsets.get(i).copied().unwrap_or(0) as usize;
                entry_at(&self.data, off).1
            }
            Layout::Fixed {
                key_len, stride, ..
            } => {
                let start = i * stride;
                self.data.get(start + key_len..start + stride)
            }
        }
    }

    /// How entry `i`'s key orders against `key`, whose [`key_prefix`] is `prefix`. Reads the
    /// entry only if the prefixes are equal and a key is longer than 8 bytes: up to 8 bytes,
    /// keys with equal prefixes differ only by trailing zero bytes, so the shorter is less.
    /// A merge compares every entry of its older segments this way, and an entry a newer
    /// source overwrites is never read (design.md §2).
    pub(crate) fn cmp_key(&self, i: usize, key: &[u8], prefix: u64) -> Ordering {
        let (own_prefix, own_len) = match &self.layout {
            Layout::Listed {
                prefixes, key_lens, ..
            } => (
                prefixes.get(i).copied(),
                key_lens.get(i).map(|&l| usize::from(l)),
            ),
            Layout::Fixed {
                key_len, stride, ..
            } => {
                let start = i * stride;
                let key = self.data.get(start..start + key_len);
                (key.map(key_prefix), Some(*key_len))
            }
        };
        match own_prefix.map(|p| p.cmp(&prefix)) {
            Some(Ordering::Equal) => match own_len {
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
        let before = |i| match self.cmp_key(i, key, prefix) {
            Ordering::Less => true,
            Ordering::Equal => !inclusive,
            Ordering::Greater => false,
        };
        match &self.layout {
            Layout::Listed { prefixes, .. } => search_prefixed(&**prefixes, prefix, before),
            Layout::Fixed {
                key_len,
                stride,
                count,
            } => {
                let keys = InPlace {
                    data: &self.data,
                    stride: *stride,
                    key_len: *key_len,
                    count: *count,
                };
                search_prefixed(&keys, prefix, before)
            }
        }
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
pub(crate) fn search_prefixed<P: Prefixes + ?Sized>(
    prefixes: &P,
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
fn interpolate<P: Prefixes + ?Sized>(prefixes: &P, prefix: u64) -> usize {
    let n = prefixes.count();
    let (Some(first), Some(last)) = (
        prefixes.at(0),
        n.checked_sub(1).and_then(|l| prefixes.at(l)),
    ) else {
        return 0;
    };
    if prefix <= first {
        return 0;
    }
    if prefix >= last {
        return n - 1;
    }
    // A guess only: f64's rounding moves it by a position or two at worst.
    let at = (prefix - first) as f64 / (last - first) as f64 * (n - 1) as f64;
    at as usize
}

/// The partition point of `pred` over `items` (true for a prefix of them, false after),
/// found by stepping out from `guess` in doubling steps, then bisecting the last step: a few
/// reads when the guess is close, about twice a binary search's when it is not.
pub(super) fn partition_near<P: Prefixes + ?Sized>(
    items: &P,
    guess: usize,
    pred: impl Fn(u64) -> bool,
) -> usize {
    let n = items.count();
    let Some(guess) = n.checked_sub(1).map(|last| guess.min(last)) else {
        return 0;
    };
    let holds = |i: usize| items.at(i).is_some_and(&pred);
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
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if holds(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}
