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
//! Data block, format 2 (len bytes; it closes once its entries take about
//! BLOCK_TARGET_BYTES in memory's form below; one oversized entry makes a bigger block)
//! OFFSET        SIZE        DESCRIPTION
//! 0             ...         entries: shared | suffix_len | tag | [value_shared] | key suffix |
//!                             value suffix; the four numbers LEB128 varints, value_shared only
//!                             when tag != 0. Key = previous key[..shared] ++ key suffix;
//!                             tag 0 = a deletion, else value = previous value[..value_shared]
//!                             ++ (tag - 1) bytes of value suffix (Block::decode)
//! len-8         4           entry count n u32
//! len-4         4           crc32 of bytes [0, len-4)
//!
//! Data block, format 1 (still read), and every block in memory (Block)
//! 0             ...         entries: key_len u16 | value_len u32 | key | value
//!                             value_len = TOMBSTONE (u32::MAX): a deletion, no value bytes
//! len-8-4n      4n          entry offsets u32, relative to the block start, ascending (on disk
//!                             only; memory keeps them apart)
//! len-8         4           entry count n u32
//! len-4         4           crc32 of bytes [0, len-4)
//! ```
//! All integers little-endian. Keys inside a segment are strictly ascending, byte-wise.

pub(crate) mod block;
mod builder;
mod cache;
mod format;
mod iter;
mod reader;
#[cfg(test)]
mod tests;
mod verify;

pub(crate) use block::key_prefix;
pub(crate) use builder::{FileSink, SegmentBuilder, SegmentSink};
pub(crate) use cache::BlockCache;
#[cfg(test)]
pub(crate) use format::get_varint;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use format::FOOTER_LEN;
pub(crate) use format::{key_cmp, le_u16, le_u32, le_u64};
pub(crate) use iter::{Entry, SegmentIter};
pub(crate) use reader::{file_name, BlockHint, CacheUse, Load, Probe, Segment};
