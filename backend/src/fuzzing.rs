//! Thin entry points to the engine's decoders of on-disk bytes, for fuzzing only.
//!
//! Compiled with the non-default `fuzzing` feature (the `cargo fuzz` targets in `fuzz/` use it)
//! and in the crate's own tests (`fuzz_tests/`, the in-tree fuzz tier). Not a stable API:
//! every function takes untrusted bytes and must return a typed [`Error`] for bad input, never
//! panic and never allocate more than the input backs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::manifest::Manifest;
use crate::segment::BlockCache;
use crate::segment::{Segment, FOOTER_LEN};

/// What a manifest decoded to, in brief.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManifestSummary {
    /// Number of tables.
    pub tables: usize,
    /// Number of segments over all tables.
    pub segments: usize,
}

/// Decode `bytes` as a `MANIFEST` file. A manifest the decoder accepts must encode back to the
/// same bytes (the format has one encoding per manifest): this panics if it does not, so a
/// fuzzer reports it.
///
/// # Errors
/// Whatever `Manifest::decode` rejects.
pub fn decode_manifest(bytes: &[u8]) -> Result<ManifestSummary> {
    let m = Manifest::decode(bytes, Path::new("<fuzz>/MANIFEST"))?;
    assert!(
        m.encode() == bytes,
        "a decoded manifest does not encode back to its bytes"
    );
    Ok(ManifestSummary {
        tables: m.tables.len(),
        segments: m.tables.iter().map(|t| t.segments.len()).sum(),
    })
}

/// The entry count the footer of segment bytes claims, if the bytes are long enough to have a
/// footer (what a manifest would have recorded for them).
pub fn footer_entry_count(bytes: &[u8]) -> Option<u64> {
    let at = bytes.len().checked_sub(FOOTER_LEN)? + 16;
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// What reading a segment back gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSummary {
    /// Entries the footer claims.
    pub entries: u64,
    /// Entries the iterator yielded.
    pub iterated: u64,
    /// Of those, tombstones.
    pub tombstones: u64,
}

/// Write `bytes` to `path`, open it as segment 1 (the expected length is the file's, the
/// expected entry count `expect_entries`), iterate every entry, look up and seek around the
/// first 64 keys iterated, and seek to both ends and past the end (every probe, even after
/// one failed).
///
/// # Errors
/// A typed error from `Segment::open` or any block read; writing `path` failing is an
/// [`Error::Io`] too (the caller tells them apart by checking the write itself if it cares).
pub fn read_segment(bytes: &[u8], path: &Path, expect_entries: u64) -> Result<SegmentSummary> {
    std::fs::write(path, bytes).map_err(|e| Error::io("write fuzz segment", path, e))?;
    read_segment_file(path.to_path_buf(), bytes.len() as u64, expect_entries)
}

/// [`read_segment`] on a file already written.
///
/// # Errors
/// As [`read_segment`].
pub fn read_segment_file(
    path: PathBuf,
    expect_len: u64,
    expect_entries: u64,
) -> Result<SegmentSummary> {
    let cache = Arc::new(BlockCache::new(1 << 20));
    let seg = Arc::new(Segment::open(path, 1, expect_len, expect_entries, cache)?);
    let mut it = seg.iter_using(crate::segment::CacheUse::Fill);
    let (mut iterated, mut tombstones) = (0u64, 0u64);
    let mut probes: Vec<Vec<u8>> = Vec::new();
    while let Some((key, value)) = it.peek()? {
        if probes.len() < 64 {
            probes.push(key.to_vec());
        }
        tombstones += u64::from(value.is_none());
        iterated += 1;
        it.advance();
    }
    // Every probe runs (one failing does not skip the others); the first error is returned.
    let mut first_error = None;
    let mut note = |r: Result<()>| {
        if let Err(e) = r {
            first_error.get_or_insert(e);
        }
    };
    let mut hint = None;
    for key in &probes {
        note(
            seg.get_with(key, &mut hint, |v| v.map(<[u8]>::len))
                .map(drop),
        );
        note(seg.seek_ge(key, false).map(drop));
        note(seg.seek_lt(Some(key)).map(drop));
    }
    note(seg.seek_ge(&[], true).map(drop));
    note(seg.seek_lt(None).map(drop));
    note(seg.seek_lt(Some(&[0xff; 40])).map(drop));
    note(seg.get_with(&[0xff; 40], &mut hint, |_| ()).map(drop));
    if let Some(e) = first_error {
        return Err(e);
    }
    Ok(SegmentSummary {
        entries: seg.entries,
        iterated,
        tombstones,
    })
}
