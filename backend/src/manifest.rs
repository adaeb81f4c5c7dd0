//! The manifest: which tables exist and which segment files hold each one, for one generation.
//!
//! ```text
//! MANIFEST (live/MANIFEST, and so gen-N/MANIFEST)
//! OFFSET   SIZE  DESCRIPTION
//! 0        8     magic "BTRMANI1"
//! 8        4     format version u32: 2 (FORMAT_VERSION), or 1 (still read; written back only
//!                as it was read)
//! 12       4     table format u32: 0 = segments (the only one read; 1 was SQLite files)
//! 16       8     generation u64 (N of the gen-N snapshot this manifest is committed as)
//! 24       8     next segment sequence number u64
//! 32       4     table count u32
//! 36       ...   per table:
//!                  name_len u16 | name (UTF-8) | segment count u32 |
//!                  per segment, newest first: seq u64 | file_len u64 | entry_count u64 |
//!                    (version 2 only:) min_key_len u16 | min_key | max_key_len u16 | max_key
//! len-4    4     crc32 of bytes [0, len-4)
//! ```
//! All integers little-endian. Version 2 records each segment's smallest and largest key, so
//! that opening the database needs no segment's index (`Segment::open_listed`): a segment's file
//! is opened and its index read on first use. A version-1 manifest is read too; its segments
//! are opened at once, as before, and the next commit writes version 2.

use std::path::Path;

use crate::error::{Error, Result};
use crate::segment::{key_cmp, le_u16, le_u32, le_u64};

/// Version of the manifest (and of the database as a whole) this build writes.
pub(crate) const FORMAT_VERSION: u32 = 2;
/// The version before: no key range per segment. Still read.
const KEYLESS_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"BTRMANI1";
const MAGIC_OFFSET: usize = 0;
const VERSION_OFFSET: usize = MAGIC_OFFSET + 8;
const TABLE_FORMAT_OFFSET: usize = VERSION_OFFSET + 4;
const GENERATION_OFFSET: usize = TABLE_FORMAT_OFFSET + 4;
const NEXT_SEQ_OFFSET: usize = GENERATION_OFFSET + 8;
const TABLE_COUNT_OFFSET: usize = NEXT_SEQ_OFFSET + 8;
const TABLES_OFFSET: usize = TABLE_COUNT_OFFSET + 4;

/// A segment as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SegmentMeta {
    pub(crate) seq: u64,
    pub(crate) file_len: u64,
    pub(crate) entries: u64,
    /// Its smallest and largest key (both empty for a segment without entries, and in a
    /// manifest of version 1, which does not record them: [`Manifest::keys_recorded`]).
    pub(crate) min_key: Box<[u8]>,
    pub(crate) max_key: Box<[u8]>,
}

/// One table's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableMeta {
    pub(crate) name: String,
    /// Newest first.
    pub(crate) segments: Vec<SegmentMeta>,
}

/// A decoded manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Manifest {
    /// Whether each segment's key range is recorded (version 2; a commit always records it).
    /// `false` only for a version-1 manifest as read, which encodes back as version 1.
    pub(crate) keys_recorded: bool,
    pub(crate) table_format: u32,
    pub(crate) generation: u64,
    pub(crate) next_seq: u64,
    pub(crate) tables: Vec<TableMeta>,
}

impl Manifest {
    /// The same manifest as version 1 would have recorded it: no key ranges.
    #[cfg(test)]
    pub(crate) fn into_version_1(mut self) -> Manifest {
        self.keys_recorded = false;
        for s in self.tables.iter_mut().flat_map(|t| t.segments.iter_mut()) {
            (s.min_key, s.max_key) = Default::default();
        }
        self
    }

    /// The format version it encodes as.
    pub(crate) fn version(&self) -> u32 {
        if self.keys_recorded {
            FORMAT_VERSION
        } else {
            KEYLESS_VERSION
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64 + self.tables.len() * 64);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&self.version().to_le_bytes());
        b.extend_from_slice(&self.table_format.to_le_bytes());
        b.extend_from_slice(&self.generation.to_le_bytes());
        b.extend_from_slice(&self.next_seq.to_le_bytes());
        b.extend_from_slice(&(self.tables.len() as u32).to_le_bytes());
        for t in &self.tables {
            b.extend_from_slice(&(t.name.len() as u16).to_le_bytes());
            b.extend_from_slice(t.name.as_bytes());
            b.extend_from_slice(&(t.segments.len() as u32).to_le_bytes());
            for s in &t.segments {
                b.extend_from_slice(&s.seq.to_le_bytes());
                b.extend_from_slice(&s.file_len.to_le_bytes());
                b.extend_from_slice(&s.entries.to_le_bytes());
                if self.keys_recorded {
                    for key in [&s.min_key, &s.max_key] {
                        b.extend_from_slice(&(key.len() as u16).to_le_bytes());
                        b.extend_from_slice(key);
                    }
                }
            }
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    pub(crate) fn decode(bytes: &[u8], path: &Path) -> Result<Manifest> {
        let bad = |reason: &str| Error::corrupted(path, reason.to_string());
        if bytes.len() < TABLES_OFFSET + 4 {
            return Err(bad("manifest shorter than its header (truncated?)"));
        }
        if bytes.get(..8) != Some(MAGIC.as_slice()) {
            return Err(bad("not a butter_db manifest (bad magic)"));
        }
        let body_len = bytes.len() - 4;
        let stored = le_u32(bytes, body_len).ok_or_else(|| bad("no checksum"))?;
        let body = bytes.get(..body_len).ok_or_else(|| bad("no checksum"))?;
        let got = crc32fast::hash(body);
        if stored != got {
            return Err(Error::ChecksumMismatch {
                path: path.into(),
                region: "manifest".into(),
                offset: 0,
                len: bytes.len() as u64,
                expected: stored,
                got,
            });
        }
        let version = le_u32(bytes, VERSION_OFFSET).ok_or_else(|| bad("no version"))?;
        if version != FORMAT_VERSION && version != KEYLESS_VERSION {
            return Err(Error::UnsupportedFormatVersion {
                path: path.into(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let table_format = le_u32(body, TABLE_FORMAT_OFFSET).ok_or_else(|| bad("header"))?;
        let generation = le_u64(body, GENERATION_OFFSET).ok_or_else(|| bad("header"))?;
        let next_seq = le_u64(body, NEXT_SEQ_OFFSET).ok_or_else(|| bad("header"))?;
        let count = le_u32(body, TABLE_COUNT_OFFSET).ok_or_else(|| bad("header"))?;
        let mut at = TABLES_OFFSET;
        let mut tables = Vec::new();
        for _ in 0..count {
            let trunc = || bad("truncated table list");
            let nlen = le_u16(body, at).ok_or_else(trunc)? as usize;
            let name = body.get(at + 2..at + 2 + nlen).ok_or_else(trunc)?;
            let name = std::str::from_utf8(name).map_err(|_| bad("table name not UTF-8"))?;
            at += 2 + nlen;
            let nseg = le_u32(body, at).ok_or_else(trunc)?;
            at += 4;
            let mut segments = Vec::new();
            for _ in 0..nseg {
                let seq = le_u64(body, at).ok_or_else(trunc)?;
                let file_len = le_u64(body, at + 8).ok_or_else(trunc)?;
                let entries = le_u64(body, at + 16).ok_or_else(trunc)?;
                if seq >= next_seq {
                    return Err(bad("segment number beyond the next sequence number"));
                }
                at += 24;
                let (mut min_key, mut max_key): (Box<[u8]>, Box<[u8]>) = Default::default();
                if version == FORMAT_VERSION {
                    for key in [&mut min_key, &mut max_key] {
                        let klen = le_u16(body, at).ok_or_else(trunc)? as usize;
                        *key = body.get(at + 2..at + 2 + klen).ok_or_else(trunc)?.into();
                        at += 2 + klen;
                    }
                    let empty = min_key.is_empty() && max_key.is_empty();
                    if (entries == 0 && !empty) || key_cmp(&min_key, &max_key).is_gt() {
                        return Err(bad("a segment's key range does not fit its entries"));
                    }
                }
                segments.push(SegmentMeta {
                    seq,
                    file_len,
                    entries,
                    min_key,
                    max_key,
                });
            }
            tables.push(TableMeta {
                name: name.to_string(),
                segments,
            });
        }
        if at != body.len() {
            return Err(bad("trailing bytes after the table list"));
        }
        Ok(Manifest {
            keys_recorded: version == FORMAT_VERSION,
            table_format,
            generation,
            next_seq,
            tables,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(seq: u64, file_len: u64, entries: u64, keys: [&[u8]; 2]) -> SegmentMeta {
        SegmentMeta {
            seq,
            file_len,
            entries,
            min_key: keys[0].into(),
            max_key: keys[1].into(),
        }
    }

    fn sample() -> Manifest {
        Manifest {
            keys_recorded: true,
            table_format: 0,
            generation: 42,
            next_seq: 10,
            tables: vec![
                TableMeta {
                    name: "attesters".into(),
                    segments: vec![
                        seg(9, 100, 3, [b"", b"\x01\x02"]),
                        seg(2, 5000, 300, [b"apple", b"pear"]),
                        seg(1, 44, 0, [b"", b""]),
                    ],
                },
                TableMeta {
                    name: "metadata".into(),
                    segments: vec![],
                },
            ],
        }
    }

    #[test]
    fn round_trip() {
        let m = sample();
        assert_eq!(Manifest::decode(&m.encode(), Path::new("m")).unwrap(), m);
        assert_eq!(le_u32(&m.encode(), VERSION_OFFSET), Some(2));
    }

    #[test]
    fn version_1_is_read_and_written_back_as_read() {
        let old = sample().into_version_1();
        let bytes = old.encode();
        assert_eq!(le_u32(&bytes, VERSION_OFFSET), Some(1));
        // Version 2 adds two key lengths (4 bytes) and the keys to each segment.
        assert_eq!(bytes.len() + 3 * 4 + 11, sample().encode().len());
        let read = Manifest::decode(&bytes, Path::new("m")).unwrap();
        assert!(!read.keys_recorded);
        assert_eq!(read, old);
        assert_eq!(read.encode(), bytes);
    }

    #[test]
    fn a_key_range_that_does_not_fit_is_refused() {
        let mut m = sample();
        m.tables[0].segments[1].min_key = b"zebra".as_slice().into();
        let err = Manifest::decode(&m.encode(), Path::new("m")).unwrap_err();
        assert!(err.to_string().contains("key range"), "{err}");
        let mut m = sample();
        m.tables[0].segments[2].max_key = b"k".as_slice().into();
        let err = Manifest::decode(&m.encode(), Path::new("m")).unwrap_err();
        assert!(err.to_string().contains("key range"), "{err}");
    }

    #[test]
    fn every_truncation_and_bit_flip_is_rejected() {
        let bytes = sample().encode();
        for len in 0..bytes.len() {
            assert!(
                Manifest::decode(&bytes[..len], Path::new("m")).is_err(),
                "len {len}"
            );
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x08;
            assert!(Manifest::decode(&b, Path::new("m")).is_err(), "flip at {i}");
        }
    }

    #[test]
    fn future_version_is_a_typed_error() {
        let mut b = sample().encode();
        b[VERSION_OFFSET] = 3;
        let l = b.len();
        let crc = crc32fast::hash(&b[..l - 4]);
        b[l - 4..].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            Manifest::decode(&b, Path::new("m")),
            Err(Error::UnsupportedFormatVersion {
                found: 3,
                supported: 2,
                ..
            })
        ));
    }
}
