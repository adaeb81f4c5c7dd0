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

mod manifest;
mod segment;

/// The extreme values the mutator writes into length and count fields.
const EXTREMES: [u64; 5] = [0, 1, u16::MAX as u64, u32::MAX as u64, u64::MAX];
/// Each input must decode within this much of the thread's CPU time (not wall time: see
/// `butter_test_support::thread_cpu_time`).
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
        let start = butter_test_support::thread_cpu_time();
        let result = catch_unwind(AssertUnwindSafe(|| decode(&input)));
        let took = butter_test_support::thread_cpu_time().saturating_sub(start);
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
