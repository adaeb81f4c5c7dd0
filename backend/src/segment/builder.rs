//! Writing a segment file in memory.
//!
//! The file is kept as pieces, never as one buffer: each data block's entry bytes are the
//! decoded [`Block`] the cache will hold, its trailer (offsets, count, CRC) is kept beside
//! it, and the index and footer follow. A commit that rewrites a whole table (every batch of
//! the slasher's first epoch) would otherwise fault in, zero and fill a buffer as large as
//! the table, and copy every block out of it again.

use std::io::IoSlice;

use super::*;

/// Builds a segment file in memory from entries given in ascending key order.
#[derive(Debug, Default)]
pub(crate) struct SegmentBuilder {
    /// The entries of the block being filled.
    block: Vec<u8>,
    offsets: Vec<u32>,
    /// The finished blocks, and their trailers back to back.
    blocks: Vec<Arc<Block>>,
    trailers: Vec<u8>,
    /// Bytes of the finished blocks, trailers included: where the next block starts.
    written: u64,
    index: Vec<(u64, u32, Box<[u8]>)>,
    entries: u64,
}

/// A finished segment file: its bytes in order as [`SegmentFile::pieces`], and its decoded
/// blocks (to seed the cache: the next transaction is likely to read what this one wrote).
#[derive(Debug)]
pub(crate) struct SegmentFile {
    blocks: Vec<Arc<Block>>,
    trailers: Vec<u8>,
    /// The block index and the footer.
    tail: Vec<u8>,
    len: u64,
}

impl SegmentBuilder {
    /// A builder for about `bytes` of entries (room for the block list is made up front).
    pub(crate) fn with_capacity(bytes: u64) -> Self {
        let blocks = usize::try_from(bytes / BLOCK_TARGET_BYTES as u64).unwrap_or(0) + 1;
        SegmentBuilder {
            blocks: Vec::with_capacity(blocks.min(1 << 16)),
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
            self.index.push((self.written, 0, key.into()));
            // Most blocks end within an entry of the target: one allocation each.
            self.block.reserve(BLOCK_TARGET_BYTES + 512);
        }
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
        }
        Ok(())
    }

    #[expect(
        clippy::indexing_slicing,
        reason = "start is a past length of trailers, which only grows"
    )]
    fn finish_block(&mut self) {
        if self.offsets.is_empty() {
            return;
        }
        let data = std::mem::take(&mut self.block).into_boxed_slice();
        let start = self.trailers.len();
        for off in &self.offsets {
            self.trailers.extend_from_slice(&off.to_le_bytes());
        }
        self.trailers
            .extend_from_slice(&(self.offsets.len() as u32).to_le_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(&data);
        crc.update(&self.trailers[start..]);
        self.trailers
            .extend_from_slice(&crc.finalize().to_le_bytes());
        let len = data.len() + (self.trailers.len() - start);
        if let Some(last) = self.index.last_mut() {
            last.1 = len as u32;
        }
        self.written += len as u64;
        self.blocks.push(Arc::new(Block::new(
            data,
            std::mem::take(&mut self.offsets).into_boxed_slice(),
        )));
    }

    /// The finished file.
    pub(crate) fn finish(mut self) -> SegmentFile {
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
        SegmentFile {
            len: index_offset + tail.len() as u64,
            blocks: self.blocks,
            trailers: self.trailers,
            tail,
        }
    }
}

impl SegmentFile {
    /// The file's bytes, in order: each block's entries and trailer, then index and footer.
    pub(crate) fn pieces(&self) -> Vec<IoSlice<'_>> {
        let mut pieces = Vec::with_capacity(2 * self.blocks.len() + 1);
        let mut trailers = self.trailers.as_slice();
        for b in &self.blocks {
            // Each block's trailer is 4 bytes per entry and 8 more (built so in finish_block).
            let n = (4 * b.len() + BLOCK_TRAILER_LEN).min(trailers.len());
            let (trailer, rest) = trailers.split_at(n);
            pieces.push(IoSlice::new(b.entry_bytes()));
            pieces.push(IoSlice::new(trailer));
            trailers = rest;
        }
        pieces.push(IoSlice::new(&self.tail));
        pieces
    }

    /// The file's length in bytes.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// The decoded blocks, in file order.
    pub(crate) fn into_blocks(self) -> Vec<Arc<Block>> {
        self.blocks
    }

    /// The whole file in one buffer (tests and fuzz seeds).
    #[cfg(test)]
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        self.pieces()
            .iter()
            .flat_map(|p| p.iter().copied())
            .collect()
    }
}
