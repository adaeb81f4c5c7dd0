//! The segment file's layout constants (the layout is drawn in the folder's doc, `mod.rs`) and
//! the key order and integer decoding every part of a segment shares.

use std::cmp::Ordering;

/// The segment format version this build writes. It reads this one and every older one:
/// format 1 (blocks of fixed entry headers and a u32 offset per entry, [`ENTRY_HEADER_LEN`])
/// and format 2 (blocks of prefix-shared entries with varint lengths, [`Block::decode`]). The
/// footer and the block index are the same in both.
///
/// [`Block::decode`]: super::block::Block::decode
pub(crate) const SEGMENT_VERSION: u32 = 2;
/// The oldest segment format version this build reads.
pub(super) const OLDEST_SEGMENT_VERSION: u32 = 1;
pub(super) const MAGIC: &[u8; 8] = b"BTRSEG01";
pub(super) const FOOTER_MAGIC_OFFSET: usize = 0;
pub(super) const FOOTER_VERSION_OFFSET: usize = FOOTER_MAGIC_OFFSET + 8;
pub(super) const FOOTER_BLOCK_COUNT_OFFSET: usize = FOOTER_VERSION_OFFSET + 4;
pub(super) const FOOTER_ENTRY_COUNT_OFFSET: usize = FOOTER_BLOCK_COUNT_OFFSET + 4;
pub(super) const FOOTER_INDEX_OFFSET_OFFSET: usize = FOOTER_ENTRY_COUNT_OFFSET + 8;
pub(super) const FOOTER_INDEX_LEN_OFFSET: usize = FOOTER_INDEX_OFFSET_OFFSET + 8;
pub(super) const FOOTER_INDEX_CRC_OFFSET: usize = FOOTER_INDEX_LEN_OFFSET + 4;
pub(super) const FOOTER_CRC_OFFSET: usize = FOOTER_INDEX_CRC_OFFSET + 4;
/// Size of the footer.
pub(crate) const FOOTER_LEN: usize = FOOTER_CRC_OFFSET + 4;

/// Entry header of format 1 on disk, and of every block in memory: key_len u16 + value_len u32.
pub(super) const ENTRY_HEADER_LEN: usize = 6;
/// Block trailer: (format 1: an offset u32 per entry,) count u32 + crc u32.
pub(super) const BLOCK_TRAILER_LEN: usize = 8;
/// Marker value length of a deletion.
pub(super) const TOMBSTONE: u32 = u32::MAX;
/// Close a block once its entries take at least this many bytes in their format-1 (in-memory)
/// form. Part of format 2: a block's entries after its first all start below it there, which
/// bounds what a damaged block can expand to.
pub(super) const BLOCK_TARGET_BYTES: usize = 16 * 1024;

/// Byte-wise lexicographic comparison (shorter prefix first), as `<[u8]>::cmp`, with a fast
/// path: the first 8 bytes compared as one big-endian integer, which orders them the same way
/// and avoids a `memcmp` call for the short keys the slasher uses (6–16 bytes; most are 8,
/// where the rest is empty and only the lengths are left to compare).
#[inline]
pub(crate) fn key_cmp(a: &[u8], b: &[u8]) -> Ordering {
    if let (Some((x, a_rest)), Some((y, b_rest))) =
        (a.split_first_chunk::<8>(), b.split_first_chunk::<8>())
    {
        match u64::from_be_bytes(*x).cmp(&u64::from_be_bytes(*y)) {
            Ordering::Equal if a_rest.is_empty() || b_rest.is_empty() => {
                a_rest.len().cmp(&b_rest.len())
            }
            Ordering::Equal => a_rest.cmp(b_rest),
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

/// Appends `v` as an unsigned LEB128 varint (1 byte below 128, at most 5).
pub(super) fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads an unsigned LEB128 varint of at most 5 bytes at `*at`, moving `*at` past it; `None`
/// past the end or if it does not fit in a u32.
pub(crate) fn get_varint(b: &[u8], at: &mut usize) -> Option<u32> {
    let mut v = 0u32;
    for shift in [0u32, 7, 14, 21, 28] {
        let byte = *b.get(*at)?;
        *at += 1;
        let bits = u32::from(byte & 0x7f);
        if shift == 28 && bits > 0x0f {
            return None;
        }
        v |= bits << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}
