//! Sequential iteration over a segment's entries.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::error::Result;

use super::block::Block;
use super::format::key_cmp;
use super::reader::{CacheUse, Pos, Segment};

/// A key and its value (`None` for a tombstone), borrowed from a block.
pub(crate) type Entry<'a> = (&'a [u8], Option<&'a [u8]>);

/// Sequential iterator over a segment's entries, tombstones included; or over a table's
/// partitions (key-disjoint segments in ascending key order) as if they were one segment.
#[derive(Debug)]
pub(crate) struct SegmentIter {
    /// The segment, or the partitions in key order.
    run: Vec<Arc<Segment>>,
    /// Which of them `block_index` and `entry` are in.
    at: usize,
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
                let Some(seg) = self.run.get(self.at) else {
                    return Ok(());
                };
                if self.block_index >= seg.block_count()? {
                    if self.at + 1 >= self.run.len() {
                        return Ok(());
                    }
                    // The next partition, from its start.
                    self.at += 1;
                    self.block_index = 0;
                    continue;
                }
                self.block = Some(seg.block_using(self.block_index, self.cache_use)?);
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
        // The first segment of the run whose largest key is at or above `key` (above, if
        // `!inclusive`): no earlier one holds a key that far, and it holds one.
        let mut at = key.map_or(0, |k| {
            self.run.partition_point(|s| {
                let order = key_cmp(&s.max_key, k);
                order.is_lt() || (!inclusive && order.is_eq())
            })
        });
        let mut pos = match (key, self.run.get(at)) {
            (_, None) => None,
            (None, Some(_)) => Some(Pos { block: 0, entry: 0 }),
            (Some(k), Some(seg)) => seg.seek_ge(k, inclusive)?,
        };
        if pos.is_none() && at + 1 < self.run.len() {
            // (Cannot happen: its largest key is there.) The next one's start is.
            at += 1;
            pos = Some(Pos { block: 0, entry: 0 });
        }
        match pos {
            Some(p) => {
                if self.block_index != p.block || self.at != at {
                    self.block = None;
                }
                self.at = at;
                self.block_index = p.block;
                // peek loads the block (and resets `entry` to 0 when it does): set it after.
                self.peek()?;
                self.entry = p.entry;
            }
            None => {
                self.block = None;
                self.at = self.run.len().saturating_sub(1);
                self.block_index = match self.run.last() {
                    Some(s) => s.block_count()?,
                    None => 0,
                };
            }
        }
        Ok(())
    }
}

impl Segment {
    /// Iterate every entry in key order, reading blocks through the cache as `cache_use` says.
    pub(crate) fn iter_using(self: &Arc<Self>, cache_use: CacheUse) -> SegmentIter {
        SegmentIter::over_run(vec![self.clone()], cache_use)
    }
}

impl SegmentIter {
    /// Iterate the entries of `run`, key-disjoint segments in ascending key order, one after
    /// the other, reading blocks through the cache as `cache_use` says.
    pub(crate) fn over_run(run: Vec<Arc<Segment>>, cache_use: CacheUse) -> SegmentIter {
        SegmentIter {
            run,
            at: 0,
            cache_use,
            block: None,
            block_index: 0,
            entry: 0,
        }
    }
}
