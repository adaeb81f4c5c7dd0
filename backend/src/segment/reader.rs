//! [`Segment`]: a segment file, its index in memory (read when it opens, or on first use) and its
//! blocks read on demand.

use std::cmp::Ordering;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::cache::BlockCache;
use crate::error::{Error, Result};
use crate::manifest::SegmentMeta;

use super::block::{key_prefix, search_prefixed, Block};
use super::format::{
    key_cmp, le_u16, le_u32, le_u64, FOOTER_BLOCK_COUNT_OFFSET, FOOTER_CRC_OFFSET,
    FOOTER_ENTRY_COUNT_OFFSET, FOOTER_INDEX_CRC_OFFSET, FOOTER_INDEX_LEN_OFFSET,
    FOOTER_INDEX_OFFSET_OFFSET, FOOTER_LEN, FOOTER_VERSION_OFFSET, MAGIC, OLDEST_SEGMENT_VERSION,
    SEGMENT_VERSION,
};

/// How a read of a segment's blocks uses the block cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CacheUse {
    /// From the cache, or from disk into the cache: reads of live data.
    Fill,
    /// From the cache if there, else from disk without keeping it: a background merge, whose
    /// inputs stay live until it is swapped in and whose reads should not push out the blocks
    /// readers use.
    Bypass,
    /// Taken out of the cache if there, else from disk without keeping it: a commit's merge,
    /// whose inputs that commit retires; their cached blocks would only hold memory beside
    /// the new segment's.
    Take,
}

/// Location of one block inside a segment file.
#[derive(Debug)]
pub(super) struct BlockLoc {
    pub(super) offset: u64,
    pub(super) len: u32,
    pub(super) first_key: Box<[u8]>,
}

/// An immutable segment: its key range, and its file and block index once loaded (at open, or
/// on first use for a segment opened from the manifest's record, [`Segment::open_listed`]); its
/// blocks are read on demand through the shared block cache.
#[derive(Debug)]
pub(crate) struct Segment {
    /// Sequence number; unique in the database, also the file name.
    pub(crate) seq: u64,
    pub(super) path: PathBuf,
    pub(crate) file_len: u64,
    pub(crate) entries: u64,
    pub(crate) min_key: Box<[u8]>,
    pub(crate) max_key: Box<[u8]>,
    pub(super) cache: Arc<BlockCache>,
    /// The open file and its block index, once loaded ([`Segment::index`]).
    index: OnceLock<Index>,
}

/// A segment's open file and its block index in memory.
#[derive(Debug)]
pub(super) struct Index {
    pub(super) file: File,
    /// The format version its footer names (it says how the blocks are encoded).
    pub(super) version: u32,
    pub(super) blocks: Vec<BlockLoc>,
    /// Each block's first key's [`key_prefix`], for [`search_prefixed`] without reaching into
    /// `blocks`' boxed keys.
    pub(super) first_prefixes: Box<[u64]>,
    /// What `blocks` and `first_prefixes` take in memory, counted in the cache's
    /// [`BlockCache::index_bytes`] while the index is loaded. (The segment's two keys are held
    /// whether or not it is, and are not counted: a few dozen bytes a segment.)
    bytes: u64,
}

/// Where a transaction's last point lookup in a segment ended. The slasher reads keys in
/// ascending runs, so the next lookup usually lands in the same block and skips the index
/// search and the shared cache. Each transaction keeps its own, one per segment it reads
/// (`view.rs`), so a lookup takes no lock.
#[derive(Debug)]
pub(crate) struct BlockHint {
    pub(super) block: usize,
    pub(super) data: Arc<Block>,
    /// Where the next lookup's key probably is: just after the last key found, or where the
    /// last missing key would have been.
    pub(super) expect: usize,
}

/// Whether a point lookup may read a block from disk ([`Segment::probe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Load {
    /// From the hint, the cache, or disk into the cache.
    Read,
    /// From the hint or the cache only.
    CachedOnly,
}

/// What a point lookup in one segment found ([`Segment::probe`]).
#[derive(Debug)]
pub(crate) enum Probe<R> {
    /// The key's entry: `f` of its value, or of `None` for a deletion.
    Found(R),
    /// The segment does not have the key.
    Absent,
    /// The key's block would have had to be read from disk, and the lookup was not allowed to.
    NotRead,
}

impl<R> Probe<R> {
    /// The entry found, if any: for a lookup that may read ([`Load::Read`]), `None` means the
    /// key is not there.
    pub(crate) fn found(self) -> Option<R> {
        match self {
            Probe::Found(r) => Some(r),
            Probe::Absent | Probe::NotRead => None,
        }
    }
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

/// What a segment's footer says (checked: its checksum, magic and format version).
struct Footer {
    /// Where the footer starts: the end of the index.
    at: u64,
    version: u32,
    block_count: usize,
    entries: u64,
    index_offset: u64,
    index_len: usize,
    index_crc: u32,
}

/// Open a segment file, never through a symlink (a segment is always a file this database
/// wrote), and check its length against the manifest's `expect_len`.
fn open_file(path: &Path, expect_len: u64) -> Result<(File, u64)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => Error::foreign(path, "it is a symlink"),
            _ => Error::io("open segment", path, e),
        })?;
    let file_len = file
        .metadata()
        .map_err(|e| Error::io("stat segment", path, e))?
        .len();
    check_len(path, file_len, expect_len)?;
    Ok((file, file_len))
}

/// A segment file's length against the one the manifest records.
fn check_len(path: &Path, file_len: u64, expect_len: u64) -> Result<()> {
    if file_len == expect_len {
        return Ok(());
    }
    Err(Error::corrupted(
        path,
        format!("length {file_len}, manifest says {expect_len} (truncated?)"),
    ))
}

/// Read and check the footer of `file` (`file_len` bytes).
fn read_footer(file: &File, path: &Path, file_len: u64) -> Result<Footer> {
    if file_len < FOOTER_LEN as u64 {
        return Err(Error::corrupted(path, "shorter than the segment footer"));
    }
    let mut footer = [0u8; FOOTER_LEN];
    let footer_at = file_len - FOOTER_LEN as u64;
    file.read_exact_at(&mut footer, footer_at)
        .map_err(|e| Error::io("read segment footer", path, e))?;
    let stored = le_u32(&footer, FOOTER_CRC_OFFSET).unwrap_or(0);
    let got = crc32fast::hash(&footer[..FOOTER_CRC_OFFSET]);
    if stored != got {
        return Err(Error::ChecksumMismatch {
            path: path.to_path_buf(),
            region: "segment footer".into(),
            offset: footer_at,
            len: FOOTER_LEN as u64,
            expected: stored,
            got,
        });
    }
    if &footer[..8] != MAGIC {
        return Err(Error::corrupted(path, "bad segment magic"));
    }
    let version = le_u32(&footer, FOOTER_VERSION_OFFSET).unwrap_or(0);
    if !(OLDEST_SEGMENT_VERSION..=SEGMENT_VERSION).contains(&version) {
        return Err(Error::UnsupportedFormatVersion {
            path: path.to_path_buf(),
            found: version,
            supported: SEGMENT_VERSION,
        });
    }
    Ok(Footer {
        at: footer_at,
        version,
        block_count: le_u32(&footer, FOOTER_BLOCK_COUNT_OFFSET).unwrap_or(0) as usize,
        entries: le_u64(&footer, FOOTER_ENTRY_COUNT_OFFSET).unwrap_or(0),
        index_offset: le_u64(&footer, FOOTER_INDEX_OFFSET_OFFSET).unwrap_or(0),
        index_len: le_u32(&footer, FOOTER_INDEX_LEN_OFFSET).unwrap_or(0) as usize,
        index_crc: le_u32(&footer, FOOTER_INDEX_CRC_OFFSET).unwrap_or(0),
    })
}

/// Read and check the block index the footer points at: its checksum, and that its blocks
/// lie back to back from offset 0 up to the index.
fn read_index(file: &File, path: &Path, footer: &Footer) -> Result<Vec<BlockLoc>> {
    let (index_offset, index_len) = (footer.index_offset, footer.index_len);
    let mut index = vec![0u8; index_len];
    file.read_exact_at(&mut index, index_offset)
        .map_err(|e| Error::io("read segment index", path, e))?;
    let got = crc32fast::hash(&index);
    if got != footer.index_crc {
        return Err(Error::ChecksumMismatch {
            path: path.to_path_buf(),
            region: "segment index".into(),
            offset: index_offset,
            len: index_len as u64,
            expected: footer.index_crc,
            got,
        });
    }
    // The footer's count is not trusted for the allocation: each index entry takes at
    // least 14 bytes of the (checksummed, file-backed) index.
    let mut blocks = Vec::with_capacity(footer.block_count.min(index.len() / 14));
    let mut at = 0usize;
    let mut next_offset = 0u64;
    for _ in 0..footer.block_count {
        let bad = || Error::corrupted(path, "truncated block index");
        let offset = le_u64(&index, at).ok_or_else(bad)?;
        let len = le_u32(&index, at + 8).ok_or_else(bad)?;
        let klen = le_u16(&index, at + 12).ok_or_else(bad)? as usize;
        let first_key = index.get(at + 14..at + 14 + klen).ok_or_else(bad)?;
        at += 14 + klen;
        if offset != next_offset {
            return Err(Error::corrupted(path, "blocks are not contiguous"));
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
            path,
            "block index does not cover the data",
        ));
    }
    Ok(blocks)
}

impl Segment {
    /// The open segment file (for copying it byte for byte: `admin`'s export of a generation).
    pub(crate) fn file(&self) -> Result<&File> {
        Ok(&self.index()?.file)
    }

    /// Open a segment file and check it against what the manifest says about it: its length
    /// and footer, its entry count, and its block index. Its key range is read from its first
    /// and last block.
    pub(crate) fn open(
        path: PathBuf,
        seq: u64,
        expect_len: u64,
        expect_entries: u64,
        cache: Arc<BlockCache>,
    ) -> Result<Segment> {
        let mut seg = Segment {
            seq,
            path,
            file_len: expect_len,
            entries: expect_entries,
            min_key: Box::default(),
            max_key: Box::default(),
            cache,
            index: OnceLock::new(),
        };
        let index = seg.load_index()?;
        if let Some(first) = index.blocks.first() {
            seg.min_key = first.first_key.clone();
        }
        if let Some(last) = seg.install(index).blocks.len().checked_sub(1) {
            let last = seg.block(last)?;
            seg.max_key = last.key(last.len().saturating_sub(1)).into();
        }
        Ok(seg)
    }

    /// A segment as a manifest of version 2 lists it, its key range included: nothing is read
    /// from the file but its length (it must be a file, not a symlink, of `meta.file_len`
    /// bytes). The file is opened and its footer and index read and checked on first use
    /// ([`Segment::index`]), so that opening a database reads no index and holds no segment
    /// open that no one reads.
    pub(crate) fn open_listed(
        path: PathBuf,
        meta: &SegmentMeta,
        cache: Arc<BlockCache>,
    ) -> Result<Segment> {
        let stat =
            std::fs::symlink_metadata(&path).map_err(|e| Error::io("stat segment", &path, e))?;
        if stat.file_type().is_symlink() {
            return Err(Error::foreign(&path, "it is a symlink"));
        }
        check_len(&path, stat.len(), meta.file_len)?;
        Ok(Segment {
            seq: meta.seq,
            path,
            file_len: meta.file_len,
            entries: meta.entries,
            min_key: meta.min_key.clone(),
            max_key: meta.max_key.clone(),
            cache,
            index: OnceLock::new(),
        })
    }

    /// The file and its block index, loaded now if they are not yet: a segment opened with
    /// [`Segment::open_listed`] is checked here as [`Segment::open`] checks it, and its first
    /// key against the manifest's (its last key is checked by [`Segment::verify`]).
    pub(super) fn index(&self) -> Result<&Index> {
        if let Some(index) = self.index.get() {
            return Ok(index);
        }
        let index = self.load_index()?;
        let first = index.blocks.first().map_or(&[][..], |b| &b.first_key[..]);
        if first != &*self.min_key {
            return Err(Error::corrupted(
                &self.path,
                "its first key is not the smallest key the manifest records for it",
            ));
        }
        Ok(self.install(index))
    }

    /// Keep `index` as this segment's (unless another thread's load got there first) and count
    /// it in the cache's index bytes.
    fn install(&self, index: Index) -> &Index {
        let bytes = index.bytes;
        if self.index.set(index).is_ok() {
            self.cache.count_index(bytes, true);
        }
        self.index
            .get()
            .expect("set just above, by this thread or another")
    }

    /// Open the file and read and check its footer and index against the length and entry count
    /// this segment was opened with.
    fn load_index(&self) -> Result<Index> {
        let path = &self.path;
        let (file, file_len) = open_file(path, self.file_len)?;
        let footer = read_footer(&file, path, file_len)?;
        let entries = footer.entries;
        if entries != self.entries {
            return Err(Error::corrupted(
                path,
                format!("{entries} entries, manifest says {}", self.entries),
            ));
        }
        if footer.index_offset.checked_add(footer.index_len as u64) != Some(footer.at) {
            return Err(Error::corrupted(path, "index does not end at the footer"));
        }
        let blocks = read_index(&file, path, &footer)?;
        if blocks.is_empty() != (entries == 0) {
            return Err(Error::corrupted(
                path,
                format!("{entries} entries in {} blocks", blocks.len()),
            ));
        }
        let per_block = std::mem::size_of::<BlockLoc>() + std::mem::size_of::<u64>();
        let keys: usize = blocks.iter().map(|b| b.first_key.len()).sum();
        Ok(Index {
            file,
            version: footer.version,
            first_prefixes: blocks.iter().map(|b| key_prefix(&b.first_key)).collect(),
            bytes: (blocks.len() * per_block + keys) as u64,
            blocks,
        })
    }

    /// Load block `i` (from the cache, or from disk into the cache).
    pub(crate) fn block(&self, i: usize) -> Result<Arc<Block>> {
        self.block_using(i, CacheUse::Fill)
    }

    /// Load block `i`, using the cache as `cache_use` says.
    pub(crate) fn block_using(&self, i: usize, cache_use: CacheUse) -> Result<Arc<Block>> {
        let cached = match cache_use {
            CacheUse::Fill | CacheUse::Bypass => self.cache.get(self.seq, i),
            CacheUse::Take => self.cache.take(self.seq, i),
        };
        if let Some(b) = cached {
            return Ok(b);
        }
        let index = self.index()?;
        let loc = index
            .blocks
            .get(i)
            .ok_or_else(|| Error::corrupted(&self.path, format!("no block {i}")))?;
        let mut data = vec![0u8; loc.len as usize];
        index
            .file
            .read_exact_at(&mut data, loc.offset)
            .map_err(|e| Error::io("read segment block", &self.path, e))?;
        let block = Arc::new(
            Block::decode(data, index.version, &self.path, loc.offset).map_err(|e| match e {
                // Name the block by its number in the segment, beside its byte range.
                Error::ChecksumMismatch {
                    path,
                    offset,
                    len,
                    expected,
                    got,
                    ..
                } => Error::ChecksumMismatch {
                    path,
                    region: format!("block {i} of {}", index.blocks.len()),
                    offset,
                    len,
                    expected,
                    got,
                },
                other => other,
            })?,
        );
        if cache_use == CacheUse::Fill {
            self.cache.insert(self.seq, i, block.clone());
        }
        Ok(block)
    }

    /// Its number of blocks (its index loaded if it is not yet).
    pub(crate) fn block_count(&self) -> Result<usize> {
        Ok(self.index()?.blocks.len())
    }

    /// The blocks it may have in the cache: its number of blocks, or 0 while its index is not
    /// loaded (none of its blocks can be in the cache then: a block enters it only through a
    /// loaded index, or as its segment is written, and a written segment is opened with
    /// [`Segment::open`]).
    pub(crate) fn cacheable_blocks(&self) -> usize {
        self.index.get().map_or(0, |index| index.blocks.len())
    }

    /// Whether its index is loaded (tests of loading on first use).
    #[cfg(test)]
    pub(crate) fn index_loaded(&self) -> bool {
        self.index.get().is_some()
    }

    /// Whether `key` is within this segment's key range.
    pub(crate) fn may_contain(&self, key: &[u8]) -> bool {
        self.entries > 0
            && key_cmp(key, &self.min_key).is_ge()
            && key_cmp(key, &self.max_key).is_le()
    }

    /// [`Segment::probe`] with [`Load::Read`]: `None` means the key is not in this segment
    /// (the tests' and the fuzz tier's form).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn get_with<R>(
        &self,
        key: &[u8],
        hint: &mut Option<BlockHint>,
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<Option<R>> {
        Ok(self.probe(key, hint, Load::Read, f)?.found())
    }

    /// Point lookup: `f` gets the value (`None` for a tombstone) while the block is at hand.
    /// `hint` is where the caller's previous lookup in this segment ended (`None` at first),
    /// and is left where this one ends. The key's block is read only if `load` allows it: with
    /// [`Load::CachedOnly`], a block that is neither the hint's nor in the cache is
    /// [`Probe::NotRead`], and the hint is left as it was.
    pub(crate) fn probe<R>(
        &self,
        key: &[u8],
        hint: &mut Option<BlockHint>,
        load: Load,
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<Probe<R>> {
        if !self.may_contain(key) {
            return Ok(Probe::Absent);
        }
        // Reading the index is reading from disk too.
        let index = match (self.index.get(), load) {
            (Some(index), _) => index,
            (None, Load::Read) => self.index()?,
            (None, Load::CachedOnly) => return Ok(Probe::NotRead),
        };
        if let Some(h) = hint.as_mut() {
            let prefix = key_prefix(key);
            let in_block = index.starts_at_or_before(h.block, key, prefix)
                && !index.starts_at_or_before(h.block + 1, key, prefix);
            if in_block {
                let found = h.data.search_from(key, h.expect);
                h.expect = found.map_or_else(|i| i, |i| i + 1);
                return Ok(found.map_or(Probe::Absent, |i| Probe::Found(f(h.data.value(i)))));
            }
        }
        let Some(bi) = index.block_for(key) else {
            return Ok(Probe::Absent);
        };
        let block = match load {
            Load::Read => self.block(bi)?,
            Load::CachedOnly => match self.cache.get(self.seq, bi) {
                Some(block) => block,
                None => return Ok(Probe::NotRead),
            },
        };
        let found = block.search_from(key, 0);
        let probe = found.map_or(Probe::Absent, |i| Probe::Found(f(block.value(i))));
        *hint = Some(BlockHint {
            block: bi,
            data: block,
            expect: found.map_or_else(|i| i, |i| i + 1),
        });
        Ok(probe)
    }

    /// The first position whose key is >= `key` (> if `!inclusive`); `None` past the end.
    pub(crate) fn seek_ge(&self, key: &[u8], inclusive: bool) -> Result<Option<Pos>> {
        if self.entries == 0 {
            return Ok(None);
        }
        let index = self.index()?;
        let mut bi = index.block_for(key).unwrap_or(0);
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
            if bi >= index.blocks.len() {
                return Ok(None);
            }
        }
    }

    /// The last position whose key is < `key` (or the last entry if `key` is `None`).
    pub(crate) fn seek_lt(&self, key: Option<&[u8]>) -> Result<Option<Pos>> {
        if self.entries == 0 {
            return Ok(None);
        }
        let index = self.index()?;
        let Some(key) = key else {
            let Some(bi) = index.blocks.len().checked_sub(1) else {
                return Ok(None);
            };
            let n = self.block(bi)?.len();
            return Ok(n.checked_sub(1).map(|e| Pos {
                block: bi,
                entry: e,
            }));
        };
        let Some(mut bi) = index.block_for(key) else {
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
}

impl Index {
    /// The block that would hold `key`, if any block could.
    fn block_for(&self, key: &[u8]) -> Option<usize> {
        let prefix = key_prefix(key);
        let n = search_prefixed(&*self.first_prefixes, prefix, |i| {
            self.starts_at_or_before(i, key, prefix)
        });
        n.checked_sub(1)
    }

    /// Whether block `i` starts at or before `key`, whose [`key_prefix`] is `prefix` (false
    /// past the last block).
    fn starts_at_or_before(&self, i: usize, key: &[u8], prefix: u64) -> bool {
        match self.first_prefixes.get(i).map(|p| p.cmp(&prefix)) {
            Some(Ordering::Less) => true,
            Some(Ordering::Equal) => self
                .blocks
                .get(i)
                .is_some_and(|b| key_cmp(&b.first_key, key).is_le()),
            Some(Ordering::Greater) | None => false,
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if let Some(index) = self.index.get() {
            self.cache.count_index(index.bytes, false);
        }
    }
}
