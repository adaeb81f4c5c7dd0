//! A full read of a segment for `butter check` and `butter stat` (`admin.rs`): every block's
//! checksum and layout, the index against the blocks, the order of the keys and the footer's
//! entry count.

use std::cmp::Ordering;

use crate::error::{Error, Result};

use super::format::{key_cmp, ENTRY_HEADER_LEN};
use super::reader::{CacheUse, Segment};

/// What a full read of one segment found (it passed every check).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SegmentCheck {
    /// Data blocks read.
    pub(crate) blocks: u64,
    /// Entries, tombstones included.
    pub(crate) entries: u64,
    /// Of them, deletions.
    pub(crate) tombstones: u64,
    /// Bytes of the entries counted as format 1 stores them (a 6-byte header, the key and the
    /// value), whatever this segment's format: the unit of [`TableStats`]'s live and dead bytes.
    ///
    /// [`TableStats`]: crate::admin::TableStats
    pub(crate) entry_bytes: u64,
}

impl Segment {
    /// Reads every block (without keeping it in the cache), checking its CRC and layout
    /// ([`Block::decode`]), that its first key is the one the index holds, that keys ascend
    /// strictly across the whole segment, that its last key is the largest the manifest
    /// records (its first is checked as the index loads), and that the entries add up to the
    /// footer's count.
    /// The first problem is the error, naming the file and the block's offset.
    pub(crate) fn verify(&self) -> Result<SegmentCheck> {
        let mut check = SegmentCheck::default();
        let mut prev: Vec<u8> = Vec::new();
        for (i, loc) in self.index()?.blocks.iter().enumerate() {
            let bad = |what: String| {
                Error::corrupted(&self.path, format!("block {i} at {}: {what}", loc.offset))
            };
            let block = self.block_using(i, CacheUse::Bypass)?;
            if block.len() == 0 {
                return Err(bad("no entries".into()));
            }
            if block.key(0) != &*loc.first_key {
                return Err(bad("its first key is not the one the index holds".into()));
            }
            for e in 0..block.len() {
                let key = block.key(e);
                if check.entries > 0 && key_cmp(&prev, key) != Ordering::Less {
                    return Err(bad(format!("entry {e}: keys are not strictly ascending")));
                }
                prev.clear();
                prev.extend_from_slice(key);
                let value = block.value(e);
                check.entries += 1;
                check.tombstones += u64::from(value.is_none());
                check.entry_bytes +=
                    (ENTRY_HEADER_LEN + key.len() + value.map_or(0, <[u8]>::len)) as u64;
            }
            check.blocks += 1;
        }
        if check.entries > 0 && prev != *self.max_key {
            return Err(Error::corrupted(
                &self.path,
                "its last key is not the largest key the manifest records for it",
            ));
        }
        if check.entries != self.entries {
            return Err(Error::corrupted(
                &self.path,
                format!(
                    "{} entries in its blocks, the footer says {}",
                    check.entries, self.entries
                ),
            ));
        }
        Ok(check)
    }
}
