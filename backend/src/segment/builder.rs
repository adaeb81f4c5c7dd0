//! Writing a segment file in memory.

use super::*;

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
