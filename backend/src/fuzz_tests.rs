//! The fuzz tier of the engine's decoders of on-disk bytes: `Manifest::decode` and
//! `Segment::open` with every entry read back (through [`crate::fuzzing`]).
//!
//! Each decoder gets `FUZZ_ITERATIONS` (default 10,000) inputs mutated from a seed corpus the
//! engine's own encoders write, by a ChaCha8 PRNG seeded from `FUZZ_SEED` (default 1), so a run
//! reproduces. Mutations: truncation, bit flips, byte overwrites, extreme values (0, 1,
//! u16::MAX, u32::MAX, u64::MAX) written at the seed's length and count fields, splices of
//! two seeds, range deletion, duplication and insertion; half the inputs then get their CRCs
//! recomputed so that the mutation reaches the structure behind them. Every input must decode
//! or give a typed error: a panic (caught with `catch_unwind`) is counted and its input saved
//! and hex-dumped, an input taking 1 s or more is counted, and the process's peak RSS must grow
//! by less than 512 MiB over the loop. One summary line per decoder:
//! `tier fuzz-<decoder>: N inputs, 0 panics, E typed errors, slowest X ms, peak RSS growth Y MiB`.
//! See docs/reliability-fuzz.md.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::fuzzing::{decode_manifest, footer_entry_count, read_segment};
use crate::manifest::{Manifest, SegmentMeta, TableMeta};
use crate::segment::{SegmentBuilder, FOOTER_LEN};

/// The extreme values the mutator writes into length and count fields.
const EXTREMES: [u64; 5] = [0, 1, u16::MAX as u64, u32::MAX as u64, u64::MAX];
/// Each input must decode within this.
const TIME_LIMIT: Duration = Duration::from_secs(1);
/// Bound on the peak RSS growth over one decoder's loop.
const RSS_LIMIT_MIB: u64 = 512;
/// Bound on the peak virtual memory growth over one loop: one reservation of a length field
/// the input does not back (the footer's u32::MAX block count reserved 128 GiB) exceeds it.
const VM_LIMIT_MIB: u64 = 768;

/// Inputs per decoder: `FUZZ_ITERATIONS` if larger than the floor of 10,000.
fn iterations() -> u64 {
    std::env::var("FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
        .max(10_000)
}

fn base_seed() -> u64 {
    std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

/// A seed input and where its length/count fields are: (offset, width in bytes).
struct Seed {
    bytes: Vec<u8>,
    fields: Vec<(usize, usize)>,
}

fn put_le(b: &mut [u8], at: usize, width: usize, value: u64) {
    let bytes = value.to_le_bytes();
    for (i, byte) in bytes.iter().take(width).enumerate() {
        if let Some(slot) = b.get_mut(at + i) {
            *slot = *byte;
        }
    }
}

/// One mutated input from `seeds`.
fn mutate(rng: &mut ChaCha8Rng, seeds: &[Seed]) -> Vec<u8> {
    let seed = &seeds[rng.gen_range(0..seeds.len())];
    let mut b = seed.bytes.clone();
    for _ in 0..rng.gen_range(1..=3) {
        match rng.gen_range(0..9) {
            0 => {
                let at = rng.gen_range(0..=b.len());
                b.truncate(at);
            }
            1 => {
                for _ in 0..rng.gen_range(1..=8) {
                    if !b.is_empty() {
                        let i = rng.gen_range(0..b.len());
                        b[i] ^= 1 << rng.gen_range(0..8);
                    }
                }
            }
            2 => {
                for _ in 0..rng.gen_range(1..=8) {
                    if !b.is_empty() {
                        let i = rng.gen_range(0..b.len());
                        b[i] = *[0u8, 1, 0x7f, 0x80, 0xff, rng.gen()]
                            .get(rng.gen_range(0..6))
                            .unwrap_or(&0);
                    }
                }
            }
            3 | 4 => {
                // An extreme value at a length field of the seed (or anywhere, 1 in 5).
                let value = EXTREMES[rng.gen_range(0..EXTREMES.len())];
                let (at, width) = if !seed.fields.is_empty() && rng.gen_range(0..5) != 0 {
                    seed.fields[rng.gen_range(0..seed.fields.len())]
                } else {
                    (
                        rng.gen_range(0..b.len().max(1)),
                        [2, 4, 8][rng.gen_range(0..3)],
                    )
                };
                put_le(&mut b, at, width, value);
            }
            5 => {
                // Splice: a range of another seed replaces a range of this input.
                let other = &seeds[rng.gen_range(0..seeds.len())].bytes;
                let from = rng.gen_range(0..=other.len());
                let to = rng.gen_range(from..=other.len().min(from + 4096));
                let at = rng.gen_range(0..=b.len());
                let end = rng.gen_range(at..=b.len().min(at + 4096));
                b.splice(at..end, other[from..to].iter().copied());
            }
            6 => {
                let at = rng.gen_range(0..=b.len());
                let end = rng.gen_range(at..=b.len().min(at + 256));
                b.drain(at..end);
            }
            7 => {
                let at = rng.gen_range(0..=b.len());
                let end = rng.gen_range(at..=b.len().min(at + 256));
                let copy = b[at..end].to_vec();
                let to = rng.gen_range(0..=b.len());
                b.splice(to..to, copy);
            }
            _ => {
                let at = rng.gen_range(0..=b.len());
                let junk: Vec<u8> = (0..rng.gen_range(1..=32)).map(|_| rng.gen()).collect();
                b.splice(at..at, junk);
            }
        }
    }
    b
}

fn hex_dump(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(32).take(16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        out.push_str(&format!("  {:06x}  {}\n", i * 32, hex.join(" ")));
    }
    if bytes.len() > 512 {
        out.push_str(&format!("  ... ({} bytes in all)\n", bytes.len()));
    }
    out
}

/// Peak resident set size of this process, in KiB (`VmHWM`).
fn peak_rss_kib() -> u64 {
    status_kib("VmHWM:")
}

/// Peak virtual memory size of this process, in KiB (`VmPeak`): catches a large allocation
/// that is never touched, which the RSS does not show.
fn peak_vm_kib() -> u64 {
    status_kib("VmPeak:")
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// One fuzz loop at a time in this process, so that each one's memory peaks are its own (the
/// engine's other unit tests are small).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What one decoder's loop saw.
#[derive(Debug)]
struct Tier {
    inputs: u64,
    panics: u64,
    typed_errors: u64,
    slow: u64,
    slowest: Duration,
    rss_growth_mib: u64,
    vm_growth_mib: u64,
}

/// Run `decode` on `iterations()` inputs mutated from `seeds` (each fixed up by `fixup` half
/// the time), print the tier line and return the counts.
fn run_tier<E: std::fmt::Display>(
    name: &str,
    seeds: &[Seed],
    fixup: impl Fn(&mut [u8]),
    mut decode: impl FnMut(&[u8]) -> Result<(), E>,
) -> Tier {
    let n = iterations();
    let mut rng = ChaCha8Rng::seed_from_u64(base_seed() ^ crc32fast::hash(name.as_bytes()) as u64);
    let failures = std::env::temp_dir().join("butter-fuzz-failures");
    let _serial = serial();
    let began = Instant::now();
    let rss_before = peak_rss_kib();
    let vm_before = peak_vm_kib();
    let mut tier = Tier {
        inputs: 0,
        panics: 0,
        typed_errors: 0,
        slow: 0,
        slowest: Duration::ZERO,
        rss_growth_mib: 0,
        vm_growth_mib: 0,
    };
    // The seeds themselves first: they must decode.
    let mut inputs: Vec<Vec<u8>> = seeds.iter().map(|s| s.bytes.clone()).collect();
    for i in 0..n {
        let input = match inputs.pop() {
            Some(seed) => {
                let r = decode(&seed);
                assert!(
                    r.is_ok(),
                    "{name}: seed {i} does not decode: {}",
                    r.err().map(|e| e.to_string()).unwrap_or_default()
                );
                tier.inputs += 1;
                continue;
            }
            None => {
                let mut b = mutate(&mut rng, seeds);
                if rng.gen_bool(0.5) {
                    fixup(&mut b);
                }
                b
            }
        };
        let start = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| decode(&input)));
        let took = start.elapsed();
        tier.inputs += 1;
        tier.slowest = tier.slowest.max(took);
        if took >= TIME_LIMIT {
            tier.slow += 1;
            eprintln!("{name}: input {i} took {took:?}\n{}", hex_dump(&input));
        }
        match result {
            Ok(Ok(())) => {}
            Ok(Err(_)) => tier.typed_errors += 1,
            Err(panic) => {
                tier.panics += 1;
                let msg = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                let _ = std::fs::create_dir_all(&failures);
                let saved = failures.join(format!("{name}-{i}.bin"));
                let _ = std::fs::write(&saved, &input);
                eprintln!(
                    "{name}: PANIC on input {i} ({msg}), saved as {}:\n{}",
                    saved.display(),
                    hex_dump(&input)
                );
            }
        }
    }
    tier.rss_growth_mib = peak_rss_kib().saturating_sub(rss_before) / 1024;
    tier.vm_growth_mib = peak_vm_kib().saturating_sub(vm_before) / 1024;
    eprintln!(
        "{name}: {:.1} s, peak virtual memory growth {} MiB",
        began.elapsed().as_secs_f64(),
        tier.vm_growth_mib
    );
    println!(
        "tier fuzz-{name}: {} inputs, {} panics, {} typed errors, slowest {:.1} ms, peak RSS \
         growth {} MiB",
        tier.inputs,
        tier.panics,
        tier.typed_errors,
        tier.slowest.as_secs_f64() * 1000.0,
        tier.rss_growth_mib
    );
    tier
}

fn check(name: &str, tier: &Tier) {
    assert!(tier.inputs >= 10_000, "{name}: {tier:?}");
    assert_eq!(tier.panics, 0, "{name}: panics (inputs saved, see stderr)");
    assert_eq!(tier.slow, 0, "{name}: inputs over {TIME_LIMIT:?}");
    assert!(
        tier.rss_growth_mib < RSS_LIMIT_MIB,
        "{name}: peak RSS grew {} MiB",
        tier.rss_growth_mib
    );
    assert!(
        tier.vm_growth_mib < VM_LIMIT_MIB,
        "{name}: peak virtual memory grew {} MiB (an allocation the input does not back?)",
        tier.vm_growth_mib
    );
    assert!(
        tier.typed_errors > 0,
        "{name}: no mutated input was rejected"
    );
}

// ---- manifest --------------------------------------------------------------------------------

fn manifest_seeds() -> Vec<Seed> {
    let seg = |seq, file_len, entries| SegmentMeta {
        seq,
        file_len,
        entries,
    };
    let manifests = [
        Manifest {
            table_format: 0,
            generation: 1,
            next_seq: 1,
            tables: vec![],
        },
        Manifest {
            table_format: 0,
            generation: 42,
            next_seq: 10,
            tables: vec![
                TableMeta {
                    name: "attesters".into(),
                    segments: vec![seg(9, 100, 3), seg(2, 5000, 300)],
                },
                TableMeta {
                    name: "metadata".into(),
                    segments: vec![],
                },
                TableMeta {
                    name: "proposers".into(),
                    segments: vec![seg(8, 1 << 20, 40_000), seg(7, 44, 0), seg(1, 9, 1)],
                },
            ],
        },
        Manifest {
            table_format: 1,
            generation: u64::MAX - 1,
            next_seq: 0,
            tables: vec![TableMeta {
                name: "tábla-ünïcode".into(),
                segments: vec![],
            }],
        },
        Manifest {
            table_format: 0,
            generation: 7,
            next_seq: 1000,
            tables: (0..6)
                .map(|t| TableMeta {
                    name: format!("t{t}"),
                    segments: (0..t).map(|s| seg(999 - s, 4096 * s, s)).collect(),
                })
                .collect(),
        },
    ];
    manifests
        .iter()
        .map(|m| {
            let bytes = m.encode();
            // Length and count fields: table count, then per table name length and segment
            // count.
            let mut fields = vec![(32, 4)];
            let mut at = 36;
            for t in &m.tables {
                fields.push((at, 2));
                at += 2 + t.name.len();
                fields.push((at, 4));
                at += 4 + 24 * t.segments.len();
            }
            Seed { bytes, fields }
        })
        .collect()
}

/// Recompute a manifest's trailing CRC.
fn fix_manifest_crc(b: &mut [u8]) {
    if let Some(body) = b.len().checked_sub(4) {
        let crc = crc32fast::hash(&b[..body]);
        b[body..].copy_from_slice(&crc.to_le_bytes());
    }
}

#[test]
fn fuzz_manifest_decode() {
    let seeds = manifest_seeds();
    let tier = run_tier("manifest", &seeds, fix_manifest_crc, |b| {
        decode_manifest(b).map(|_| ())
    });
    check("manifest", &tier);
}

// ---- segment ---------------------------------------------------------------------------------

/// A segment file the engine's builder writes, and its length/count fields.
fn segment_seed(entries: &[(Vec<u8>, Option<Vec<u8>>)]) -> Seed {
    let mut builder = SegmentBuilder::default();
    for (k, v) in entries {
        builder.add(k, v.as_deref()).expect("add");
    }
    let (bytes, _) = builder.finish();
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
/// every block's entry count, entry offsets and key/value lengths.
fn segment_fields(b: &[u8]) -> Vec<(usize, usize)> {
    let footer = b.len() - FOOTER_LEN;
    let mut fields = vec![
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
            for i in 0..n {
                let slot = end - 8 - 4 * (n - i);
                fields.push((slot, 4));
                let entry = off + le(b, slot, 4).unwrap_or(0) as usize;
                fields.extend([(entry, 2), (entry + 2, 4)]);
            }
        }
    }
    fields
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
    vec![
        segment_seed(&short),
        segment_seed(&long),
        segment_seed(&oversized),
        segment_seed(&[]),
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
