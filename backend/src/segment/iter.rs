//! Sequential iteration over a segment's entries.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::error::Result;

use super::block::Block;
use super::reader::{CacheUse, Pos, Segment};

/// A key and its value (`None` for a tombstone), borrowed from a block.
pub(crate) type Entry<'a> = (&'a [u8], Option<&'a [u8]>);

/// Sequential iterator over a segment's entries, tombstones included.
#[derive(Debug)]
pub(crate) struct SegmentIter {
    seg: Arc<Segment>,
    cache_use: CacheUse,
    block: Option<Arc<Block>>,
    block_index: usize,
    entry: usize,
}

impl SegmentIter {
    /// The current entry without advancing: (key, value or tombstone).
    pub(crate) fn peek(&mut self) -> Result<Option<Entry<'_>>> {
        self.load()?;
        Ok(self.current())
    }

    /// Load the block of the current entry if it is not loaded (moving to the next block at
    /// the end of one), without reading the entry.
    pub(crate) fn load(&mut self) -> Result<()> {
        loop {
            if self.block.is_none() {
                if self.block_index >= self.seg.block_count() {
                    return Ok(());
                }
                self.block = Some(self.seg.block_using(self.block_index, self.cache_use)?);
                self.entry = 0;
            }
            let len = self.block.as_ref().map_or(0, |b| b.len());
            if self.entry < len {
                break;
            }
            self.block = None;
            self.block_index += 1;
        }
        Ok(())
    }

    /// The current entry if [`SegmentIter::load`] has loaded its block; `None` at the end or
    /// before the first load.
    pub(crate) fn current(&self) -> Option<Entry<'_>> {
        let b = self.block.as_ref()?;
        (self.entry < b.len()).then(|| (b.key(self.entry), b.value(self.entry)))
    }

    /// How the current entry's key orders against `key` ([`Block::cmp_key`]: `prefix` is
    /// `key`'s prefix), without reading the entry when the prefixes and lengths tell; `None` at
    /// the end or before the first load.
    pub(crate) fn cmp_current(&self, key: &[u8], prefix: u64) -> Option<Ordering> {
        let b = self.block.as_ref()?;
        (self.entry < b.len()).then(|| b.cmp_key(self.entry, key, prefix))
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

impl Segment {
    /// Iterate every entry in key order, reading blocks through the cache as `cache_use` says.
    pub(crate) fn iter_using(self: &Arc<Self>, cache_use: CacheUse) -> SegmentIter {
        SegmentIter {
            seg: self.clone(),
            cache_use,
            block: None,
            block_index: 0,
            entry: 0,
        }
    }
}
