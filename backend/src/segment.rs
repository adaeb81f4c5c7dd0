//! Immutable sorted segment files: one sorted run of one table.
//!
//! ```text
//! Segment file
//! OFFSET        SIZE        DESCRIPTION
//! 0             ...         data blocks, back to back (layout below)
//! index_offset  index_len   block index: per block
//!                             offset u64 | len u32 | first_key_len u16 | first_key
//! file_len-44   44          footer:
//!                             magic "BTRSEG01" (8) | format version u32 | block_count u32 |
//!                             entry_count u64 | index_offset u64 | index_len u32 |
//!                             index crc32 u32 | footer crc32 u32 (of the 40 bytes before it)
//!
//! Data block (len bytes, about BLOCK_TARGET_BYTES; one oversized entry makes a bigger block)
//! OFFSET        SIZE        DESCRIPTION
//! 0             ...         entries: key_len u16 | value_len u32 | key | value
//!                             value_len = TOMBSTONE (u32::MAX): a deletion, no value bytes
//! len-8-4n      4n          entry offsets u32, relative to the block start, ascending
//! len-8         4           entry count n u32
//! len-4         4           crc32 of bytes [0, len-4)
//! ```
//! All integers little-endian. Keys inside a segment are strictly ascending, byte-wise.

use std::cmp::Ordering;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::cache::BlockCache;
use crate::error::{Error, Result};

/// Current segment format version.
pub(crate) const SEGMENT_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"BTRSEG01";
const FOOTER_MAGIC_OFFSET: usize = 0;
const FOOTER_VERSION_OFFSET: usize = FOOTER_MAGIC_OFFSET + 8;
const FOOTER_BLOCK_COUNT_OFFSET: usize = FOOTER_VERSION_OFFSET + 4;
const FOOTER_ENTRY_COUNT_OFFSET: usize = FOOTER_BLOCK_COUNT_OFFSET + 4;
const FOOTER_INDEX_OFFSET_OFFSET: usize = FOOTER_ENTRY_COUNT_OFFSET + 8;
const FOOTER_INDEX_LEN_OFFSET: usize = FOOTER_INDEX_OFFSET_OFFSET + 8;
const FOOTER_INDEX_CRC_OFFSET: usize = FOOTER_INDEX_LEN_OFFSET + 4;
const FOOTER_CRC_OFFSET: usize = FOOTER_INDEX_CRC_OFFSET + 4;
/// Size of the footer.
pub(crate) const FOOTER_LEN: usize = FOOTER_CRC_OFFSET + 4;

/// Entry header: key_len u16 + value_len u32.
const ENTRY_HEADER_LEN: usize = 6;
/// Block trailer: count u32 + crc u32.
const BLOCK_TRAILER_LEN: usize = 8;
/// Marker value length of a deletion.
const TOMBSTONE: u32 = u32::MAX;
/// Close a block once it holds at least this many bytes.
const BLOCK_TARGET_BYTES: usize = 16 * 1024;

/// Byte-wise lexicographic comparison (shorter prefix first), as `<[u8]>::cmp`, with a fast
/// path: the first 8 bytes compared as one big-endian integer, which orders them the same way
/// and avoids a `memcmp` call for the short keys the slasher uses (6–16 bytes).
#[inline]
pub(crate) fn key_cmp(a: &[u8], b: &[u8]) -> Ordering {
    if let (Some(x), Some(y)) = (a.first_chunk::<8>(), b.first_chunk::<8>()) {
        match u64::from_be_bytes(*x).cmp(&u64::from_be_bytes(*y)) {
            Ordering::Equal => a.get(8..).cmp(&b.get(8..)),
            other => other,
        }
    } else {
        a.cmp(b)
    }
}

/// Little-endian integers at a byte offset; `None` past the end (shared with the manifest).
pub(crate) fn le_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
pub(crate) fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
pub(crate) fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// One decoded data block: its bytes and the offsets of its entries.
#[derive(Debug)]
pub(crate) struct Block {
    data: Box<[u8]>,
    offsets: Box<[u32]>,
    /// Each key's first 8 bytes, zero-padded, as a big-endian integer ([`key_prefix`]): the
    /// binary search compares these, in one compact array, and reads a key from `data` only
    /// when two prefixes are equal (for the slasher's 8-byte keys, only on a hit).
    prefixes: Box<[u64]>,
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
    fn new(data: Box<[u8]>, offsets: Box<[u32]>) -> Block {
        let mut block = Block {
            data,
            offsets,
            prefixes: Box::default(),
        };
        block.prefixes = (0..block.len()).map(|i| key_prefix(block.key(i))).collect();
        block
    }

    /// Parse and verify a block read from `path` at `offset`.
    fn decode(data: Vec<u8>, path: &Path, offset: u64) -> Result<Block> {
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

    /// Bytes held in memory (for the cache's accounting).
    pub(crate) fn weight(&self) -> usize {
        self.data.len() + 12 * self.offsets.len() + 64
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

/// Location of one block inside a segment file.
#[derive(Debug)]
struct BlockLoc {
    offset: u64,
    len: u32,
    first_key: Box<[u8]>,
}

/// An open, immutable segment: its index in memory, its blocks read on demand through the
/// shared block cache.
#[derive(Debug)]
pub(crate) struct Segment {
    /// Sequence number; unique in the database, also the file name.
    pub(crate) seq: u64,
    path: PathBuf,
    file: File,
    pub(crate) file_len: u64,
    pub(crate) entries: u64,
    pub(crate) min_key: Box<[u8]>,
    pub(crate) max_key: Box<[u8]>,
    blocks: Vec<BlockLoc>,
    cache: Arc<BlockCache>,
    /// The block the last point lookup used. The slasher reads keys in ascending runs, so the
    /// next lookup usually lands in the same block and skips the index search and the shared
    /// cache. Readers in other threads share the segment, so the hint has its own mutex; a
    /// lookup holds it only for the search inside the hinted block and the value's copy.
    last_block: Mutex<Option<BlockHint>>,
}

/// Where the last point lookup in a segment ended.
#[derive(Debug)]
struct BlockHint {
    block: usize,
    data: Arc<Block>,
    /// Where the next lookup's key probably is: just after the last key found, or where the
    /// last missing key would have been.
    expect: usize,
}

/// A position inside a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pos {
    pub(crate) block: usize,
    pub(crate) entry: usize,
}

/// File name of segment `seq`.
pub(crate) fn file_name(seq: u64) -> String {
    format!("{seq:016x}.seg")
}

impl Segment {
    /// Open a segment file and check it against what the manifest says about it.
    pub(crate) fn open(
        path: PathBuf,
        seq: u64,
        expect_len: u64,
        expect_entries: u64,
        cache: Arc<BlockCache>,
    ) -> Result<Segment> {
        // Never through a symlink: a segment is always a file this database wrote.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => Error::foreign(&path, "it is a symlink"),
                _ => Error::io("open segment", &path, e),
            })?;
        let file_len = file
            .metadata()
            .map_err(|e| Error::io("stat segment", &path, e))?
            .len();
        if file_len != expect_len {
            return Err(Error::corrupted(
                &path,
                format!("length {file_len}, manifest says {expect_len} (truncated?)"),
            ));
        }
        if file_len < FOOTER_LEN as u64 {
            return Err(Error::corrupted(&path, "shorter than the segment footer"));
        }
        let mut footer = [0u8; FOOTER_LEN];
        let footer_at = file_len - FOOTER_LEN as u64;
        file.read_exact_at(&mut footer, footer_at)
            .map_err(|e| Error::io("read segment footer", &path, e))?;
        let stored = le_u32(&footer, FOOTER_CRC_OFFSET).unwrap_or(0);
        let got = crc32fast::hash(&footer[..FOOTER_CRC_OFFSET]);
        if stored != got {
            return Err(Error::ChecksumMismatch {
                path,
                offset: footer_at,
                expected: stored,
                got,
            });
        }
        if &footer[..8] != MAGIC {
            return Err(Error::corrupted(&path, "bad segment magic"));
        }
        let version = le_u32(&footer, FOOTER_VERSION_OFFSET).unwrap_or(0);
        if version != SEGMENT_VERSION {
            return Err(Error::UnsupportedFormatVersion {
                path,
                found: version,
                supported: SEGMENT_VERSION,
            });
        }
        let block_count = le_u32(&footer, FOOTER_BLOCK_COUNT_OFFSET).unwrap_or(0) as usize;
        let entries = le_u64(&footer, FOOTER_ENTRY_COUNT_OFFSET).unwrap_or(0);
        let index_offset = le_u64(&footer, FOOTER_INDEX_OFFSET_OFFSET).unwrap_or(0);
        let index_len = le_u32(&footer, FOOTER_INDEX_LEN_OFFSET).unwrap_or(0) as usize;
        let index_crc = le_u32(&footer, FOOTER_INDEX_CRC_OFFSET).unwrap_or(0);
        if entries != expect_entries {
            return Err(Error::corrupted(
                &path,
                format!("{entries} entries, manifest says {expect_entries}"),
            ));
        }
        if index_offset.checked_add(index_len as u64) != Some(footer_at) {
            return Err(Error::corrupted(&path, "index does not end at the footer"));
        }
        let mut index = vec![0u8; index_len];
        file.read_exact_at(&mut index, index_offset)
            .map_err(|e| Error::io("read segment index", &path, e))?;
        let got = crc32fast::hash(&index);
        if got != index_crc {
            return Err(Error::ChecksumMismatch {
                path,
                offset: index_offset,
                expected: index_crc,
                got,
            });
        }
        // The footer's count is not trusted for the allocation: each index entry takes at
        // least 14 bytes of the (checksummed, file-backed) index.
        let mut blocks = Vec::with_capacity(block_count.min(index.len() / 14));
        let mut at = 0usize;
        let mut next_offset = 0u64;
        for _ in 0..block_count {
            let bad = || Error::corrupted(&path, "truncated block index");
            let offset = le_u64(&index, at).ok_or_else(bad)?;
            let len = le_u32(&index, at + 8).ok_or_else(bad)?;
            let klen = le_u16(&index, at + 12).ok_or_else(bad)? as usize;
            let first_key = index.get(at + 14..at + 14 + klen).ok_or_else(bad)?;
            at += 14 + klen;
            if offset != next_offset {
                return Err(Error::corrupted(&path, "blocks are not contiguous"));
            }
            next_offset = offset + u64::from(len);
            blocks.push(BlockLoc {
                offset,
                len,
                first_key: first_key.into(),
            });
        }
        if at != index.len() || next_offset != index_offset {
            return Err(Error::corrupted(
                &path,
                "block index does not cover the data",
            ));
        }
        if blocks.is_empty() != (entries == 0) {
            return Err(Error::corrupted(
                &path,
                format!("{entries} entries in {} blocks", blocks.len()),
            ));
        }
        let mut seg = Segment {
            seq,
            path,
            file,
            file_len,
            entries,
            min_key: Box::default(),
            max_key: Box::default(),
            blocks,
            cache,
            last_block: Mutex::new(None),
        };
        if let Some(first) = seg.blocks.first() {
            seg.min_key = first.first_key.clone();
            let last = seg.block(seg.blocks.len() - 1)?;
            seg.max_key = last.key(last.len().saturating_sub(1)).into();
        }
        Ok(seg)
    }

    /// Load block `i` (from the cache, or from disk into the cache).
    pub(crate) fn block(&self, i: usize) -> Result<Arc<Block>> {
        if let Some(b) = self.cache.get(self.seq, i) {
            return Ok(b);
        }
        let loc = self
            .blocks
            .get(i)
            .ok_or_else(|| Error::corrupted(&self.path, format!("no block {i}")))?;
        let mut data = vec![0u8; loc.len as usize];
        self.file
            .read_exact_at(&mut data, loc.offset)
            .map_err(|e| Error::io("read segment block", &self.path, e))?;
        let block = Arc::new(Block::decode(data, &self.path, loc.offset)?);
        self.cache.insert(self.seq, i, block.clone());
        Ok(block)
    }

    pub(crate) fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// The block that would hold `key`, if any block could.
    fn block_for(&self, key: &[u8]) -> Option<usize> {
        let n = self
            .blocks
            .partition_point(|b| key_cmp(&b.first_key, key).is_le());
        n.checked_sub(1)
    }

    /// Whether `key` is within this segment's key range.
    pub(crate) fn may_contain(&self, key: &[u8]) -> bool {
        self.entries > 0
            && key_cmp(key, &self.min_key).is_ge()
            && key_cmp(key, &self.max_key).is_le()
    }

    /// Point lookup: `f` gets the value (`None` for a tombstone) while the block is at hand;
    /// `None` means the key is not in this segment.
    pub(crate) fn get_with<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<Option<R>> {
        if !self.may_contain(key) {
            return Ok(None);
        }
        {
            let mut hint = self.last_block.lock();
            if let Some(h) = hint.as_mut() {
                let next_first = self.blocks.get(h.block + 1).map(|b| &*b.first_key);
                let in_block = self
                    .blocks
                    .get(h.block)
                    .is_some_and(|b| key_cmp(&b.first_key, key).is_le())
                    && next_first.is_none_or(|n| key_cmp(key, n).is_lt());
                if in_block {
                    let found = h.data.search_from(key, h.expect);
                    h.expect = found.map_or_else(|i| i, |i| i + 1);
                    return Ok(found.ok().map(|i| f(h.data.value(i))));
                }
            }
        }
        let Some(bi) = self.block_for(key) else {
            return Ok(None);
        };
        let block = self.block(bi)?;
        let found = block.search_from(key, 0);
        let value = found.ok().map(|i| f(block.value(i)));
        *self.last_block.lock() = Some(BlockHint {
            block: bi,
            data: block,
            expect: found.map_or_else(|i| i, |i| i + 1),
        });
        Ok(value)
    }

    /// The first position whose key is >= `key` (> if `!inclusive`); `None` past the end.
    pub(crate) fn seek_ge(&self, key: &[u8], inclusive: bool) -> Result<Option<Pos>> {
        if self.entries == 0 {
            return Ok(None);
        }
        let mut bi = self.block_for(key).unwrap_or(0);
        loop {
            let block = self.block(bi)?;
            let e = block.lower_bound(key, inclusive);
            if e < block.len() {
                return Ok(Some(Pos {
                    block: bi,
                    entry: e,
                }));
            }
            bi += 1;
            if bi >= self.blocks.len() {
                return Ok(None);
            }
        }
    }

    /// The last position whose key is < `key` (or the last entry if `key` is `None`).
    pub(crate) fn seek_lt(&self, key: Option<&[u8]>) -> Result<Option<Pos>> {
        if self.entries == 0 {
            return Ok(None);
        }
        let Some(key) = key else {
            let Some(bi) = self.blocks.len().checked_sub(1) else {
                return Ok(None);
            };
            let n = self.block(bi)?.len();
            return Ok(n.checked_sub(1).map(|e| Pos {
                block: bi,
                entry: e,
            }));
        };
        let Some(mut bi) = self.block_for(key) else {
            return Ok(None);
        };
        loop {
            let block = self.block(bi)?;
            let e = block.lower_bound(key, true);
            if e > 0 {
                return Ok(Some(Pos {
                    block: bi,
                    entry: e - 1,
                }));
            }
            match bi.checked_sub(1) {
                Some(prev) => bi = prev,
                None => return Ok(None),
            }
        }
    }

    /// Iterate every entry in key order (used by merges).
    pub(crate) fn iter(self: &Arc<Self>) -> SegmentIter {
        SegmentIter {
            seg: self.clone(),
            block: None,
            block_index: 0,
            entry: 0,
        }
    }
}

/// A key and its value (`None` for a tombstone), borrowed from a block.
pub(crate) type Entry<'a> = (&'a [u8], Option<&'a [u8]>);

/// Sequential iterator over a segment's entries, tombstones included.
#[derive(Debug)]
pub(crate) struct SegmentIter {
    seg: Arc<Segment>,
    block: Option<Arc<Block>>,
    block_index: usize,
    entry: usize,
}

impl SegmentIter {
    /// The current entry without advancing: (key, value or tombstone).
    pub(crate) fn peek(&mut self) -> Result<Option<Entry<'_>>> {
        loop {
            if self.block.is_none() {
                if self.block_index >= self.seg.block_count() {
                    return Ok(None);
                }
                self.block = Some(self.seg.block(self.block_index)?);
                self.entry = 0;
            }
            let len = self.block.as_ref().map_or(0, |b| b.len());
            if self.entry < len {
                break;
            }
            self.block = None;
            self.block_index += 1;
        }
        Ok(self
            .block
            .as_ref()
            .map(|b| (b.key(self.entry), b.value(self.entry))))
    }

    /// The current entry if [`SegmentIter::peek`] has loaded its block; `None` at the end or
    /// before the first peek.
    pub(crate) fn current(&self) -> Option<Entry<'_>> {
        let b = self.block.as_ref()?;
        (self.entry < b.len()).then(|| (b.key(self.entry), b.value(self.entry)))
    }

    /// Move past the current entry.
    pub(crate) fn advance(&mut self) {
        self.entry += 1;
    }

    /// Move to the first entry whose key is >= `key` (> if `!inclusive`), or to the start if
    /// `key` is `None`.
    pub(crate) fn seek(&mut self, key: Option<&[u8]>, inclusive: bool) -> Result<()> {
        let pos = match key {
            None => Some(Pos { block: 0, entry: 0 }),
            Some(k) => self.seg.seek_ge(k, inclusive)?,
        };
        match pos {
            Some(p) => {
                if self.block_index != p.block {
                    self.block = None;
                }
                self.block_index = p.block;
                // peek loads the block (and resets `entry` to 0 when it does): set it after.
                self.peek()?;
                self.entry = p.entry;
            }
            None => {
                self.block = None;
                self.block_index = self.seg.block_count();
            }
        }
        Ok(())
    }
}

/// Builds a segment file in memory from entries given in ascending key order.
#[derive(Debug, Default)]
pub(crate) struct SegmentBuilder {
    buf: Vec<u8>,
    block_start: usize,
    offsets: Vec<u32>,
    index: Vec<(u64, u32, Box<[u8]>)>,
    blocks: Vec<Arc<Block>>,
    entries: u64,
}

impl SegmentBuilder {
    /// A builder whose buffer starts with room for `bytes` (the expected file size, so the
    /// buffer is not copied as it grows; capped at 1 GiB).
    pub(crate) fn with_capacity(bytes: u64) -> Self {
        let cap = usize::try_from(bytes.min(1 << 30)).unwrap_or(0) + 4096;
        SegmentBuilder {
            buf: Vec::with_capacity(cap),
            ..Self::default()
        }
    }

    pub(crate) fn entries(&self) -> u64 {
        self.entries
    }

    /// Append one entry; keys must be strictly ascending (the caller guarantees it).
    pub(crate) fn add(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let klen = u16::try_from(key.len()).map_err(|_| Error::KeyTooLong(key.len()))?;
        let vlen = match value {
            Some(v) => u32::try_from(v.len())
                .ok()
                .filter(|&l| l != TOMBSTONE)
                .ok_or_else(|| Error::corrupted("<memtable>", "value larger than 4 GiB"))?,
            None => TOMBSTONE,
        };
        if self.offsets.is_empty() {
            self.index.push((self.block_start as u64, 0, key.into()));
        }
        self.offsets
            .push((self.buf.len() - self.block_start) as u32);
        self.buf.extend_from_slice(&klen.to_le_bytes());
        self.buf.extend_from_slice(&vlen.to_le_bytes());
        self.buf.extend_from_slice(key);
        if let Some(v) = value {
            self.buf.extend_from_slice(v);
        }
        self.entries += 1;
        if self.buf.len() - self.block_start >= BLOCK_TARGET_BYTES {
            self.finish_block();
        }
        Ok(())
    }

    #[expect(
        clippy::indexing_slicing,
        reason = "block_start is a past length of buf, and buf only grows"
    )]
    fn finish_block(&mut self) {
        if self.offsets.is_empty() {
            return;
        }
        let data_end = self.buf.len();
        let block_data: Box<[u8]> = self.buf[self.block_start..data_end].into();
        for off in &self.offsets {
            self.buf.extend_from_slice(&off.to_le_bytes());
        }
        self.buf
            .extend_from_slice(&(self.offsets.len() as u32).to_le_bytes());
        let crc = crc32fast::hash(&self.buf[self.block_start..]);
        self.buf.extend_from_slice(&crc.to_le_bytes());
        let len = (self.buf.len() - self.block_start) as u32;
        if let Some(last) = self.index.last_mut() {
            last.1 = len;
        }
        self.blocks.push(Arc::new(Block::new(
            block_data,
            std::mem::take(&mut self.offsets).into_boxed_slice(),
        )));
        self.block_start = self.buf.len();
    }

    /// The file bytes, and the decoded blocks (to seed the cache: the next transaction is
    /// likely to read what this one wrote).
    pub(crate) fn finish(mut self) -> (Vec<u8>, Vec<Arc<Block>>) {
        self.finish_block();
        let index_offset = self.buf.len() as u64;
        let mut index = Vec::new();
        for (offset, len, first_key) in &self.index {
            index.extend_from_slice(&offset.to_le_bytes());
            index.extend_from_slice(&len.to_le_bytes());
            index.extend_from_slice(&(first_key.len() as u16).to_le_bytes());
            index.extend_from_slice(first_key);
        }
        let index_crc = crc32fast::hash(&index);
        self.buf.extend_from_slice(&index);
        let mut footer = Vec::with_capacity(FOOTER_LEN);
        footer.extend_from_slice(MAGIC);
        footer.extend_from_slice(&SEGMENT_VERSION.to_le_bytes());
        footer.extend_from_slice(&(self.index.len() as u32).to_le_bytes());
        footer.extend_from_slice(&self.entries.to_le_bytes());
        footer.extend_from_slice(&index_offset.to_le_bytes());
        footer.extend_from_slice(&(index.len() as u32).to_le_bytes());
        footer.extend_from_slice(&index_crc.to_le_bytes());
        let crc = crc32fast::hash(&footer);
        self.buf.extend_from_slice(&footer);
        self.buf.extend_from_slice(&crc.to_le_bytes());
        (self.buf, self.blocks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(entries: &[(Vec<u8>, Option<Vec<u8>>)]) -> (Vec<u8>, Vec<Arc<Block>>) {
        let mut b = SegmentBuilder::default();
        for (k, v) in entries {
            b.add(k, v.as_deref()).unwrap();
        }
        b.finish()
    }

    fn write_and_open(bytes: &[u8], entries: u64) -> Result<Segment> {
        let dir = std::env::temp_dir().join(format!("butter-seg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{}.seg", rand::random::<u64>()));
        std::fs::write(&path, bytes).unwrap();
        Segment::open(
            path.clone(),
            1,
            bytes.len() as u64,
            entries,
            Arc::new(BlockCache::new(1 << 20)),
        )
    }

    fn sample() -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        (0u32..5000)
            .map(|i| {
                let v = if i % 7 == 0 {
                    None
                } else {
                    Some(vec![i as u8; (i % 300) as usize])
                };
                (i.to_be_bytes().to_vec(), v)
            })
            .collect()
    }

    #[test]
    fn key_cmp_orders_like_byte_slices() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let key = |rng: &mut rand_chacha::ChaCha8Rng| -> Vec<u8> {
            let len = rng.gen_range(0..20);
            (0..len)
                .map(|_| *[0u8, 1, 0x7f, 0x80, 0xff].get(rng.gen_range(0..5)).unwrap())
                .collect()
        };
        for _ in 0..100_000 {
            let (a, b) = (key(&mut rng), key(&mut rng));
            assert_eq!(key_cmp(&a, &b), a.cmp(&b), "{a:?} vs {b:?}");
            assert_eq!(key_cmp(&a, &a), std::cmp::Ordering::Equal);
        }
    }

    #[test]
    fn key_prefix_orders_like_byte_slices_when_it_differs() {
        let keys: [&[u8]; 10] = [
            b"",
            b"\0",
            b"a",
            b"a\0",
            b"a\0\x01",
            b"ab",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefgi",
            &[0xff; 9],
        ];
        for a in keys {
            for b in keys {
                let (pa, pb) = (key_prefix(a), key_prefix(b));
                if pa != pb {
                    assert_eq!(pa.cmp(&pb), a.cmp(b), "{a:?} vs {b:?}");
                }
            }
        }
    }

    #[test]
    fn round_trip_lookup_and_seek() {
        let entries = sample();
        let (bytes, blocks) = build(&entries);
        assert!(
            blocks.len() > 10,
            "expected several blocks, got {}",
            blocks.len()
        );
        let seg = write_and_open(&bytes, entries.len() as u64).unwrap();
        for (k, v) in &entries {
            let got = seg.get_with(k, |v| v.map(<[u8]>::to_vec)).unwrap();
            assert_eq!(got.expect("key present"), *v);
        }
        assert!(seg
            .get_with(&9999u32.to_be_bytes(), |_| ())
            .unwrap()
            .is_none());
        assert!(seg.get_with(&[0, 0], |_| ()).unwrap().is_none());
        let p = seg.seek_ge(&[0, 0, 0x10, 0], true).unwrap().unwrap();
        assert_eq!(
            seg.block(p.block).unwrap().key(p.entry),
            &4096u32.to_be_bytes()
        );
        let p = seg.seek_ge(&4096u32.to_be_bytes(), false).unwrap().unwrap();
        assert_eq!(
            seg.block(p.block).unwrap().key(p.entry),
            &4097u32.to_be_bytes()
        );
        let p = seg.seek_lt(Some(&4096u32.to_be_bytes())).unwrap().unwrap();
        assert_eq!(
            seg.block(p.block).unwrap().key(p.entry),
            &4095u32.to_be_bytes()
        );
        let p = seg.seek_lt(None).unwrap().unwrap();
        assert_eq!(
            seg.block(p.block).unwrap().key(p.entry),
            &4999u32.to_be_bytes()
        );
        assert!(seg.seek_lt(Some(&0u32.to_be_bytes())).unwrap().is_none());
        assert!(seg
            .seek_ge(&4999u32.to_be_bytes(), false)
            .unwrap()
            .is_none());
        let seg = Arc::new(seg);
        let mut it = seg.iter();
        let mut n = 0;
        while let Some((k, v)) = it.peek().unwrap() {
            assert_eq!(k, entries[n].0.as_slice());
            assert_eq!(v, entries[n].1.as_deref());
            it.advance();
            n += 1;
        }
        assert_eq!(n, entries.len());
    }

    /// The lookup finger must not change any answer, whatever order the keys come in: present
    /// and absent keys ascending (the finger's case), descending, and random.
    #[test]
    fn lookups_in_any_order_agree_with_the_entries() {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        let entries: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0u32..6000)
            .filter(|i| i % 3 != 1)
            .map(|i| {
                (
                    i.to_be_bytes().to_vec(),
                    Some(vec![i as u8; (i % 50) as usize]),
                )
            })
            .collect();
        let (bytes, _) = build(&entries);
        let seg = write_and_open(&bytes, entries.len() as u64).unwrap();
        let mut probes: Vec<u32> = (0..6100).collect();
        let mut orders = vec![probes.clone()];
        probes.reverse();
        orders.push(probes.clone());
        probes.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(3));
        orders.push(probes);
        for order in orders {
            for i in order {
                let got = seg
                    .get_with(&i.to_be_bytes(), |v| v.map(<[u8]>::to_vec))
                    .unwrap();
                let want = (i < 6000 && i % 3 != 1).then(|| vec![i as u8; (i % 50) as usize]);
                assert_eq!(got, want.map(Some), "key {i}");
            }
        }
    }

    #[test]
    fn rejects_truncation_and_bit_flips() {
        let entries = sample();
        let (bytes, _) = build(&entries);
        let n = entries.len() as u64;
        let truncated = &bytes[..bytes.len() - 3];
        assert!(matches!(
            write_and_open(truncated, n),
            Err(Error::ChecksumMismatch { .. })
        ));
        let mut flipped = bytes.clone();
        flipped[100] ^= 0x40;
        let seg = write_and_open(&flipped, n).unwrap();
        let err = (0..seg.block_count())
            .map(|i| seg.block(i))
            .find_map(|r| r.err());
        assert!(
            matches!(err, Some(Error::ChecksumMismatch { .. })),
            "{err:?}"
        );
        let mut footer = bytes.clone();
        let at = footer.len() - FOOTER_LEN + FOOTER_VERSION_OFFSET;
        footer[at] = 9;
        let crc = crc32fast::hash(&footer[footer.len() - FOOTER_LEN..footer.len() - 4]);
        let l = footer.len();
        footer[l - 4..].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            write_and_open(&footer, n),
            Err(Error::UnsupportedFormatVersion { found: 9, .. })
        ));
    }
}
