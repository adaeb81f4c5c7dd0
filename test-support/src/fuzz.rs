//! The one runner of the fuzz tiers (the engine's decoders in `backend/src/fuzz_tests/`, the
//! bench's in `slasher-bench/tests/fuzz_decoders.rs`; docs/reliability-fuzz.md): a PRNG, the
//! byte mutator, and the loop that feeds a decoder, catches panics, bounds each input's CPU
//! time and the loop's memory growth, and prints one summary line per decoder:
//! `tier fuzz-<decoder>: N inputs, 0 panics, E typed errors, slowest X ms, peak RSS growth Y MiB`.
//!
//! `FUZZ_ITERATIONS` (default and floor 10,000) sets the inputs per decoder and `FUZZ_SEED`
//! (default 1) the PRNG's seed, so a run reproduces. A panicking input is saved under the
//! temporary directory's `butter-fuzz-failures/` and hex-dumped.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The extreme values the mutator writes into length and count fields.
pub const EXTREMES: [u64; 5] = [0, 1, u16::MAX as u64, u32::MAX as u64, u64::MAX];
/// Each input must decode within this much of the thread's CPU time (not wall time: see
/// [`crate::thread_cpu_time`]).
pub const TIME_LIMIT: Duration = Duration::from_secs(1);
/// Bound on the peak RSS growth over one decoder's loop.
pub const RSS_LIMIT_MIB: u64 = 512;
/// Bound on the peak virtual memory growth over one loop: one reservation of a length field
/// the input does not back (a 1 GiB length, or a u32::MAX count of 32-byte entries) exceeds it.
pub const VM_LIMIT_MIB: u64 = 768;

/// Inputs per decoder: `FUZZ_ITERATIONS` if larger than the floor of 10,000.
pub fn iterations() -> u64 {
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

/// SplitMix64: small, deterministic, good enough to pick mutations.
#[derive(Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for the decoder `name`: `FUZZ_SEED` mixed with a hash of the name, so each
    /// decoder gets its own sequence.
    pub fn for_decoder(name: &str) -> Rng {
        // FNV-1a of the name.
        let h = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        Rng(base_seed() ^ h)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`0` if `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    pub fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }
    /// True once in `one_in` draws.
    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

/// A seed input and where its length/count fields are: (offset, width in bytes).
#[derive(Clone, Debug)]
pub struct Seed {
    pub bytes: Vec<u8>,
    pub fields: Vec<(usize, usize)>,
}

/// Writes the low `width` bytes of `value` little-endian at `at`, as far as `b` reaches.
pub fn put_le(b: &mut [u8], at: usize, width: usize, value: u64) {
    for (i, byte) in value.to_le_bytes().iter().take(width).enumerate() {
        if let Some(slot) = b.get_mut(at + i) {
            *slot = *byte;
        }
    }
}

/// One mutated copy of a random seed of `seeds` (see [`mutate_one`]).
pub fn mutate(rng: &mut Rng, seeds: &[Seed], limits: &[u64]) -> Vec<u8> {
    let seed = &seeds[rng.below(seeds.len())];
    mutate_one(rng, seed, seeds, limits)
}

/// One to three mutations of `seed`: truncation, bit flips, byte overwrites, an extreme value
/// at one of its length/count fields (a quarter of the time one of `limits`, the format's own
/// caps and one past them; 1 in 5 at any offset), a splice of a range of a seed of
/// `splice_from`, a deleted range, a duplicated range, inserted random bytes.
pub fn mutate_one(rng: &mut Rng, seed: &Seed, splice_from: &[Seed], limits: &[u64]) -> Vec<u8> {
    let mut b = seed.bytes.clone();
    for _ in 0..rng.between(1, 3) {
        match rng.below(9) {
            0 => {
                let at = rng.between(0, b.len());
                b.truncate(at);
            }
            1 => {
                for _ in 0..rng.between(1, 8) {
                    if !b.is_empty() {
                        let i = rng.below(b.len());
                        b[i] ^= 1 << rng.below(8);
                    }
                }
            }
            2 => {
                for _ in 0..rng.between(1, 8) {
                    if !b.is_empty() {
                        let i = rng.below(b.len());
                        b[i] = [0u8, 1, 0x7f, 0x80, 0xff, rng.byte()][rng.below(6)];
                    }
                }
            }
            3 | 4 => {
                let value = if !limits.is_empty() && rng.chance(4) {
                    limits[rng.below(limits.len())]
                } else {
                    EXTREMES[rng.below(EXTREMES.len())]
                };
                let (at, width) = if !seed.fields.is_empty() && !rng.chance(5) {
                    seed.fields[rng.below(seed.fields.len())]
                } else {
                    (rng.below(b.len().max(1)), [2, 4, 8][rng.below(3)])
                };
                put_le(&mut b, at, width, value);
            }
            5 => {
                let other = &splice_from[rng.below(splice_from.len())].bytes;
                let from = rng.between(0, other.len());
                let to = rng.between(from, other.len().min(from + 4096));
                let at = rng.between(0, b.len());
                let end = rng.between(at, b.len().min(at + 4096));
                b.splice(at..end, other[from..to].iter().copied());
            }
            6 => {
                let at = rng.between(0, b.len());
                let end = rng.between(at, b.len().min(at + 256));
                b.drain(at..end);
            }
            7 => {
                let at = rng.between(0, b.len());
                let end = rng.between(at, b.len().min(at + 256));
                let copy = b[at..end].to_vec();
                let to = rng.between(0, b.len());
                b.splice(to..to, copy);
            }
            _ => {
                let at = rng.between(0, b.len());
                let junk: Vec<u8> = (0..rng.between(1, 32)).map(|_| rng.byte()).collect();
                b.splice(at..at, junk);
            }
        }
    }
    b
}

/// The first 512 bytes of `bytes` as hex, 32 a line, with offsets.
pub fn hex_dump(bytes: &[u8]) -> String {
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
pub fn peak_rss_kib() -> u64 {
    status_kib("VmHWM:")
}

/// Peak virtual memory size of this process, in KiB (`VmPeak`): catches a large allocation
/// that is never touched, which the RSS does not show.
pub fn peak_vm_kib() -> u64 {
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

/// One fuzz loop at a time in a process, so that each one's memory peaks are its own.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What one decoder's loop saw.
#[derive(Debug)]
pub struct Tier {
    pub inputs: u64,
    pub panics: u64,
    pub typed_errors: u64,
    pub decoded: u64,
    pub slow: u64,
    pub slowest: Duration,
    pub rss_growth_mib: u64,
    pub vm_growth_mib: u64,
}

/// Decodes every seed (each must decode), then [`iterations`] inputs from `generate`, and
/// prints the tier line. A panic is caught, counted, saved and dumped; an error must render
/// to a non-empty message.
pub fn run_tier<E: std::fmt::Display>(
    name: &str,
    seeds: &[Vec<u8>],
    mut generate: impl FnMut(&mut Rng) -> Vec<u8>,
    mut decode: impl FnMut(&[u8]) -> Result<(), E>,
) -> Tier {
    let _serial = serial();
    let began = Instant::now();
    let mut rng = Rng::for_decoder(name);
    let failures = std::env::temp_dir().join("butter-fuzz-failures");
    let rss_before = peak_rss_kib();
    let vm_before = peak_vm_kib();
    let mut tier = Tier {
        inputs: 0,
        panics: 0,
        typed_errors: 0,
        decoded: 0,
        slow: 0,
        slowest: Duration::ZERO,
        rss_growth_mib: 0,
        vm_growth_mib: 0,
    };
    for (i, seed) in seeds.iter().enumerate() {
        if let Err(e) = decode(seed) {
            panic!("{name}: seed {i} does not decode: {e}");
        }
    }
    for i in 0..iterations() {
        let input = generate(&mut rng);
        let start = crate::thread_cpu_time();
        let result = catch_unwind(AssertUnwindSafe(|| decode(&input)));
        let took = crate::thread_cpu_time().saturating_sub(start);
        tier.inputs += 1;
        tier.slowest = tier.slowest.max(took);
        if took >= TIME_LIMIT {
            tier.slow += 1;
            eprintln!("{name}: input {i} took {took:?}\n{}", hex_dump(&input));
        }
        match result {
            Ok(Ok(())) => tier.decoded += 1,
            Ok(Err(e)) => {
                tier.typed_errors += 1;
                // The error must render (Display walks paths, offsets, sources).
                assert!(!e.to_string().is_empty(), "{name}: empty error message");
            }
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

/// The tier's verdict: enough inputs, no panic, none slow, memory growth under the bounds,
/// and both outcomes met (some inputs rejected, some decoded), so that the loop reached past
/// the first checks of the decoder.
pub fn check(name: &str, tier: &Tier) {
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
    assert!(tier.typed_errors > 0, "{name}: no input was rejected");
    assert!(
        tier.decoded > 0,
        "{name}: no mutated input decoded: {tier:?}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_decoder_name_gives_the_same_inputs() {
        let seeds = [Seed {
            bytes: (0..64).collect(),
            fields: vec![(0, 4)],
        }];
        let run = || {
            let mut rng = Rng::for_decoder("x");
            (0..32)
                .map(|_| mutate(&mut rng, &seeds, &[]))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
        let mut other = Rng::for_decoder("y");
        assert_ne!(
            run()[0..4],
            (0..4)
                .map(|_| mutate(&mut other, &seeds, &[]))
                .collect::<Vec<_>>()[..]
        );
    }

    #[test]
    fn a_panicking_decoder_is_counted_not_propagated() {
        // One input of all panics (each prints a message and, under RUST_BACKTRACE, a
        // backtrace), the rest split between errors and decodes.
        let mut n = 0u32;
        let tier = run_tier(
            "test-panics",
            &[vec![200]],
            |rng| {
                n += 1;
                if n == 5_000 {
                    vec![0]
                } else {
                    vec![rng.byte().max(1)]
                }
            },
            |b| match b.first() {
                Some(0) => panic!("zero"),
                Some(x) if *x < 128 => Err("small"),
                _ => Ok(()),
            },
        );
        assert_eq!(tier.inputs, iterations());
        assert_eq!(tier.panics, 1, "{tier:?}");
        assert!(tier.typed_errors > 0 && tier.decoded > 0, "{tier:?}");
        for e in std::fs::read_dir(std::env::temp_dir().join("butter-fuzz-failures"))
            .into_iter()
            .flatten()
            .flatten()
        {
            if e.file_name().to_string_lossy().starts_with("test-panics-") {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}
