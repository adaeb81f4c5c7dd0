//! The fuzz tier of `Segment::open` with every entry read back.

use super::*;
use crate::fuzzing::{footer_entry_count, read_segment};
use crate::segment::{get_varint, SegmentBuilder, FOOTER_LEN};

/// A segment file the engine's builder writes, and its length/count fields.
fn segment_seed(entries: &[(Vec<u8>, Option<Vec<u8>>)]) -> Seed {
    let mut builder = SegmentBuilder::in_memory();
    for (k, v) in entries {
        builder.add(k, v.as_deref()).expect("add");
    }
    let (_, file) = builder.finish().expect("finish");
    let bytes = file.bytes;
    let fields = segment_fields(&bytes);
    Seed { bytes, fields }
}

fn le(b: &[u8], at: usize, width: usize) -> Option<u64> {
    let mut w = [0u8; 8];
    w[..width].copy_from_slice(b.get(at..at.checked_add(width)?)?);
    Some(u64::from_le_bytes(w))
}

/// The blocks a (possibly damaged) segment's index names: (offset, len), as far as it parses.
/// A byte range: (offset, length).
type Span = (usize, usize);

fn segment_blocks(b: &[u8]) -> (Vec<Span>, Option<Span>) {
    let Some(footer) = b.len().checked_sub(FOOTER_LEN) else {
        return (Vec::new(), None);
    };
    let index_offset = le(b, footer + 24, 8).unwrap_or(u64::MAX);
    let index_len = le(b, footer + 32, 4).unwrap_or(0);
    let (Ok(start), Ok(len)) = (usize::try_from(index_offset), usize::try_from(index_len)) else {
        return (Vec::new(), None);
    };
    let Some(index) = start.checked_add(len).and_then(|end| b.get(start..end)) else {
        return (Vec::new(), None);
    };
    let mut blocks = Vec::new();
    let mut at = 0;
    while let (Some(off), Some(blen), Some(klen)) = (
        le(index, at, 8),
        le(index, at + 8, 4),
        le(index, at + 12, 2),
    ) {
        blocks.push((off as usize, blen as usize));
        at += 14 + klen as usize;
    }
    (blocks, Some((start, len)))
}

/// Offsets of the footer's counts and lengths, every index entry's offset/len/key length, and
/// every block's entry count and its entries' length fields: format 1's offsets and fixed
/// headers, format 2's varints (each taken as one byte wide, which most of them are).
fn segment_fields(b: &[u8]) -> Vec<(usize, usize)> {
    let footer = b.len() - FOOTER_LEN;
    let version = le(b, footer + 8, 4).unwrap_or(0);
    let mut fields = vec![
        (footer + 8, 4),
        (footer + 12, 4),
        (footer + 16, 8),
        (footer + 24, 8),
        (footer + 32, 4),
    ];
    let (blocks, index) = segment_blocks(b);
    if let Some((start, _)) = index {
        let mut at = start;
        for (off, len) in &blocks {
            fields.extend([(at, 8), (at + 8, 4), (at + 12, 2)]);
            let klen = le(b, at + 12, 2).unwrap_or(0) as usize;
            at += 14 + klen;
            let end = off + len;
            let n = le(b, end - 8, 4).unwrap_or(0) as usize;
            fields.push((end - 8, 4));
            if version == 1 {
                for i in 0..n {
                    let slot = end - 8 - 4 * (n - i);
                    fields.push((slot, 4));
                    let entry = off + le(b, slot, 4).unwrap_or(0) as usize;
                    fields.extend([(entry, 2), (entry + 2, 4)]);
                }
            } else {
                format2_fields(b, *off, end - 8, n, &mut fields);
            }
        }
    }
    fields
}

/// The varints of a format-2 block's `n` entries in `b[start..end]`, as far as they parse.
fn format2_fields(b: &[u8], start: usize, end: usize, n: usize, fields: &mut Vec<(usize, usize)>) {
    let Some(body) = b.get(start..end) else {
        return;
    };
    let mut at = 0;
    for _ in 0..n {
        let mut varint = |fields: &mut Vec<(usize, usize)>| {
            fields.push((start + at, 1));
            get_varint(body, &mut at).map(|v| v as usize)
        };
        let (Some(_), Some(suffix), Some(tag)) = (varint(fields), varint(fields), varint(fields))
        else {
            return;
        };
        if tag > 0 && varint(fields).is_none() {
            return;
        }
        at += suffix + tag.saturating_sub(1);
    }
}

/// Recompute every CRC of a segment that still parses far enough: each block's, the index's
/// and the footer's.
fn fix_segment_crcs(b: &mut [u8]) {
    let Some(footer) = b.len().checked_sub(FOOTER_LEN) else {
        return;
    };
    let (blocks, index) = segment_blocks(b);
    for (off, len) in blocks {
        if len >= 4 && off.checked_add(len).is_some_and(|end| end <= b.len()) {
            let crc = crc32fast::hash(&b[off..off + len - 4]);
            b[off + len - 4..off + len].copy_from_slice(&crc.to_le_bytes());
        }
    }
    if let Some((start, len)) = index {
        let crc = crc32fast::hash(&b[start..start + len]);
        b[footer + 36..footer + 40].copy_from_slice(&crc.to_le_bytes());
    }
    let crc = crc32fast::hash(&b[footer..footer + 40]);
    b[footer + 40..].copy_from_slice(&crc.to_le_bytes());
}

fn segment_seeds() -> Vec<Seed> {
    // A few hundred short keys, every fifth a tombstone.
    let short: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0u64..300)
        .map(|i| {
            let v = (i % 5 != 0).then(|| vec![i as u8; (i % 97) as usize]);
            (i.to_be_bytes().to_vec(), v)
        })
        .collect();
    // Long keys (up to 3 KiB, sharing a prefix) over several blocks.
    let long: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0u32..40)
        .map(|i| {
            let mut k = vec![b'k'; 200 + 70 * i as usize];
            k.extend_from_slice(&i.to_be_bytes());
            let v = (i % 3 != 0).then(|| vec![0xa5; 16]);
            (k, v)
        })
        .collect();
    // One entry bigger than a block, between small ones; and an empty segment.
    let oversized = vec![
        (b"a".to_vec(), Some(b"x".to_vec())),
        (b"b".to_vec(), Some(vec![7; 20_000])),
        (b"c".to_vec(), None),
    ];
    // A file of format 1, which this build still reads (`segment/testdata`).
    let format1 = include_bytes!("../segment/testdata/format1.seg").to_vec();
    vec![
        segment_seed(&short),
        segment_seed(&long),
        segment_seed(&oversized),
        segment_seed(&[]),
        Seed {
            fields: segment_fields(&format1),
            bytes: format1,
        },
    ]
}

/// A scratch directory of this process, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("butter-fuzz-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Decode `bytes` as segment 1 of a manifest that recorded the footer's entry count (the
/// manifest is checked separately: this reaches the segment's own checks).
fn decode_segment(bytes: &[u8], path: &Path) -> crate::Result<()> {
    let entries = footer_entry_count(bytes).unwrap_or(0);
    read_segment(bytes, path, entries).map(|_| ())
}

#[test]
fn fuzz_segment_open_and_read() {
    let seeds = segment_seeds();
    for seed in &seeds {
        assert!(
            seed.fields.len() > 4 || footer_entry_count(&seed.bytes) == Some(0),
            "seed fields"
        );
    }
    let scratch = Scratch::new("segment");
    let path = scratch.0.join("0000000000000001.seg");
    let tier = run_tier("segment", &seeds, fix_segment_crcs, |b| {
        decode_segment(b, &path)
    });
    check("segment", &tier);
}

// ---- regression inputs the tier found ----------------------------------------------------------

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// An empty segment's footer claiming u32::MAX blocks (CRC valid): `Segment::open` reserved
/// the claimed count up front, a 128 GiB `Vec::with_capacity`, and the process aborted. Now the
/// reservation is capped by the index length and the missing index is a typed error.
#[test]
fn fuzz_regression_segment_block_count_u32_max() {
    let bytes = unhex(
        "425452534547303101000000ffffffff00000000000000000000000000000000000000000000000043bf43ae",
    );
    let scratch = Scratch::new("regression-block-count");
    let _serial = serial();
    let vm_before = peak_vm_kib();
    let err = read_segment(&bytes, &scratch.0.join("1.seg"), 0).unwrap_err();
    let grew_mib = peak_vm_kib().saturating_sub(vm_before) / 1024;
    assert!(grew_mib < 256, "peak virtual memory grew {grew_mib} MiB");
    assert!(
        matches!(err, crate::Error::Corrupted { .. }),
        "{err:?} is not Corrupted"
    );
}

/// A footer-only segment (no blocks) whose footer claims 65,535 entries (CRC valid), found by
/// the tier as input 1019 of the first run: `seek_lt(None)` computed `blocks.len() - 1` and
/// panicked. Now `Segment::open` refuses entries without blocks (and `seek_lt` no longer
/// subtracts from an empty list).
#[test]
fn fuzz_regression_segment_entries_without_blocks() {
    let bytes = unhex(
        "42545253454730310100000000000000ffff000000000000000000000000000000000000000000000\
         8c8c8a3",
    );
    assert_eq!(bytes.len(), FOOTER_LEN);
    let scratch = Scratch::new("regression-entries");
    let err = read_segment(&bytes, &scratch.0.join("1.seg"), 0xffff).unwrap_err();
    assert!(
        matches!(&err, crate::Error::Corrupted { reason, .. } if reason.contains("0 blocks")),
        "{err:?}"
    );
}
