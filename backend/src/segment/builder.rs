//! Writing a segment file as it is built.
//!
//! Finished blocks are handed to a [`SegmentSink`] in runs of about [`RUN_BYTES`]: a segment
//! is never held in memory whole. Each entry goes into two forms of its block: the in-memory
//! form, which becomes the decoded [`Block`] the cache takes, and the on-disk form
//! ([`Block::encode_v2`]), which is kept with the block's trailer (count, CRC) until the run is
//! written. The index and footer end the file. A commit that rewrites a whole table (every
//! batch of the slasher's first epoch) would otherwise hold a second copy of the table, in
//! freshly faulted pages, until the last block is built.

use std::fs::File;
use std::io::IoSlice;
use std::path::{Path, PathBuf};
use std::time::Instant;

use std::sync::Arc;

use super::block::Block;
use super::cache::BlockCache;
use super::format::{BLOCK_TARGET_BYTES, FOOTER_LEN, MAGIC, SEGMENT_VERSION, TOMBSTONE};
use crate::error::{Error, Result};
use crate::fs::Fs;

/// Bytes of finished blocks written to the sink at a time: each run is also one write-back
/// request to the device (design.md, commit step 2).
pub(crate) const RUN_BYTES: usize = 4 << 20;

/// Where a [`SegmentBuilder`] puts the file's bytes.
pub(crate) trait SegmentSink {
    /// The next bytes of the file, in order; `start` is the file's length so far.
    fn append(&mut self, start: u64, pieces: &[IoSlice<'_>]) -> Result<()>;

    /// The blocks whose bytes `append` has just taken, numbered in file order from `first`.
    /// Dropped unless the sink keeps them.
    fn appended_blocks(&mut self, first: usize, blocks: Vec<Arc<Block>>) {
        let _ = (first, blocks);
    }
}

/// A new segment file at `path`, created at the first run (an empty segment makes no file),
/// each run written back without waiting ([`Fs::append_nowait`]); the caller must call
/// [`Fs::write_back`] before relying on it. With a cache, the blocks written go into it under
/// the segment's sequence number.
pub(crate) struct FileSink<'a> {
    fs: &'a dyn Fs,
    path: PathBuf,
    mode: u32,
    file: Option<File>,
    seed: Option<(&'a BlockCache, u64)>,
    /// Microseconds spent in `create_new_file` and `append_nowait`.
    pub(crate) file_us: u64,
}

impl std::fmt::Debug for FileSink<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSink")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl<'a> FileSink<'a> {
    pub(crate) fn new(
        fs: &'a dyn Fs,
        path: &Path,
        mode: u32,
        seed: Option<(&'a BlockCache, u64)>,
    ) -> Self {
        FileSink {
            fs,
            path: path.to_path_buf(),
            mode,
            file: None,
            seed,
            file_us: 0,
        }
    }
}

impl SegmentSink for FileSink<'_> {
    fn append(&mut self, start: u64, pieces: &[IoSlice<'_>]) -> Result<()> {
        let started = Instant::now();
        let file = match &mut self.file {
            Some(file) => file,
            None => self.file.insert(
                self.fs
                    .create_new_file(&self.path, self.mode)
                    .map_err(|e| Error::io("create", &self.path, e))?,
            ),
        };
        self.fs
            .append_nowait(file, start, pieces)
            .map_err(|e| Error::io("write", &self.path, e))?;
        self.file_us += u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        Ok(())
    }

    fn appended_blocks(&mut self, first: usize, blocks: Vec<Arc<Block>>) {
        if let Some((cache, seq)) = self.seed {
            for (i, b) in blocks.into_iter().enumerate() {
                cache.insert(seq, first + i, b);
            }
        }
    }
}

/// The file in memory, and its blocks (unit tests).
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct MemorySink {
    pub(crate) bytes: Vec<u8>,
    pub(crate) blocks: Vec<Arc<Block>>,
    /// The length of each append, in order.
    pub(crate) appends: Vec<usize>,
}

#[cfg(test)]
impl SegmentSink for MemorySink {
    fn append(&mut self, start: u64, pieces: &[IoSlice<'_>]) -> Result<()> {
        let before = self.bytes.len();
        assert_eq!(start, before as u64, "appends start where the file ends");
        for p in pieces {
            self.bytes.extend_from_slice(p);
        }
        self.appends.push(self.bytes.len() - before);
        Ok(())
    }

    fn appended_blocks(&mut self, first: usize, blocks: Vec<Arc<Block>>) {
        assert_eq!(first, self.blocks.len(), "blocks arrive in file order");
        self.blocks.extend(blocks);
    }
}

/// Builds a segment file from entries given in ascending key order, writing it to its sink
/// as it goes.
#[derive(Debug)]
pub(crate) struct SegmentBuilder<S> {
    sink: S,
    /// The entries of the block being filled, in memory's form, and where each starts.
    block: Vec<u8>,
    offsets: Vec<u32>,
    /// The same entries in the file's form.
    encoded: Vec<u8>,
    /// Finished blocks not yet written, and their bytes in the file's form, back to back.
    pending: Vec<Arc<Block>>,
    run: Vec<u8>,
    /// Blocks written before `pending`.
    blocks_written: usize,
    /// Bytes of the finished blocks, trailers included: where the next block starts.
    written: u64,
    /// Bytes of `run`.
    pending_bytes: usize,
    index: Vec<(u64, u32, Box<[u8]>)>,
    entries: u64,
}

impl<S: SegmentSink> SegmentBuilder<S> {
    /// A builder writing to `sink`.
    pub(crate) fn new(sink: S) -> Self {
        SegmentBuilder {
            sink,
            block: Vec::new(),
            offsets: Vec::new(),
            encoded: Vec::new(),
            pending: Vec::new(),
            run: Vec::new(),
            blocks_written: 0,
            written: 0,
            pending_bytes: 0,
            index: Vec::new(),
            entries: 0,
        }
    }

    pub(crate) fn entries(&self) -> u64 {
        self.entries
    }

    /// About the bytes of the file so far (without its index and footer).
    pub(crate) fn approx_bytes(&self) -> u64 {
        self.written + self.pending_bytes as u64 + self.encoded.len() as u64
    }

    /// Append one entry; keys must be strictly ascending (the caller guarantees it). Fails
    /// when the sink fails to take a finished run.
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
            self.index.push((self.written, 0, key.into()));
            // Most blocks end within an entry of the target: one allocation each.
            self.block.reserve(BLOCK_TARGET_BYTES + 512);
        }
        Block::encode_v2(
            &mut self.encoded,
            &self.block,
            self.offsets.last().copied(),
            key,
            value,
        );
        self.offsets.push(self.block.len() as u32);
        self.block.extend_from_slice(&klen.to_le_bytes());
        self.block.extend_from_slice(&vlen.to_le_bytes());
        self.block.extend_from_slice(key);
        if let Some(v) = value {
            self.block.extend_from_slice(v);
        }
        self.entries += 1;
        if self.block.len() >= BLOCK_TARGET_BYTES {
            self.finish_block();
            if self.pending_bytes >= RUN_BYTES {
                self.write_pending(&[])?;
            }
        }
        Ok(())
    }

    fn finish_block(&mut self) {
        if self.offsets.is_empty() {
            return;
        }
        let start = self.run.len();
        self.run.append(&mut self.encoded);
        self.run
            .extend_from_slice(&(self.offsets.len() as u32).to_le_bytes());
        let crc = crc32fast::hash(self.run.get(start..).unwrap_or(&[]));
        self.run.extend_from_slice(&crc.to_le_bytes());
        let len = self.run.len() - start;
        if let Some(last) = self.index.last_mut() {
            last.1 = len as u32;
        }
        self.written += len as u64;
        self.pending_bytes += len;
        self.pending.push(Arc::new(Block::new(
            std::mem::take(&mut self.block).into_boxed_slice(),
            std::mem::take(&mut self.offsets).into_boxed_slice(),
        )));
    }

    /// Write the pending blocks, then `tail`; hand the blocks to the sink.
    fn write_pending(&mut self, tail: &[u8]) -> Result<()> {
        let start = self.written - self.pending_bytes as u64;
        self.sink
            .append(start, &[IoSlice::new(&self.run), IoSlice::new(tail)])?;
        let blocks = std::mem::take(&mut self.pending);
        let first = self.blocks_written;
        self.blocks_written += blocks.len();
        self.run.clear();
        self.pending_bytes = 0;
        self.sink.appended_blocks(first, blocks);
        Ok(())
    }

    /// Write the rest of the file (the last blocks, the index and the footer); returns its
    /// length and the sink.
    pub(crate) fn finish(mut self) -> Result<(u64, S)> {
        self.finish_block();
        let index_offset = self.written;
        let mut index = Vec::new();
        for (offset, len, first_key) in &self.index {
            index.extend_from_slice(&offset.to_le_bytes());
            index.extend_from_slice(&len.to_le_bytes());
            index.extend_from_slice(&(first_key.len() as u16).to_le_bytes());
            index.extend_from_slice(first_key);
        }
        let index_crc = crc32fast::hash(&index);
        let mut footer = Vec::with_capacity(FOOTER_LEN);
        footer.extend_from_slice(MAGIC);
        footer.extend_from_slice(&SEGMENT_VERSION.to_le_bytes());
        footer.extend_from_slice(&(self.index.len() as u32).to_le_bytes());
        footer.extend_from_slice(&self.entries.to_le_bytes());
        footer.extend_from_slice(&index_offset.to_le_bytes());
        footer.extend_from_slice(&(index.len() as u32).to_le_bytes());
        footer.extend_from_slice(&index_crc.to_le_bytes());
        let crc = crc32fast::hash(&footer);
        footer.extend_from_slice(&crc.to_le_bytes());
        let mut tail = index;
        tail.extend_from_slice(&footer);
        self.write_pending(&tail)?;
        Ok((index_offset + tail.len() as u64, self.sink))
    }
}

#[cfg(test)]
impl SegmentBuilder<MemorySink> {
    /// A builder keeping the file in memory.
    pub(crate) fn in_memory() -> Self {
        Self::new(MemorySink::default())
    }
}
