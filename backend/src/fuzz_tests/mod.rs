//! The fuzz tier of the engine's decoders of on-disk bytes: `Manifest::decode` and
//! `Segment::open` with every entry read back (through [`crate::fuzzing`]).
//!
//! The loop, PRNG and mutator are the workspace's one fuzz runner,
//! `butter_test_support::fuzz` (also behind slasher-bench's decoder tier): each decoder gets
//! `FUZZ_ITERATIONS` (default and floor 10,000) inputs mutated from a seed corpus the engine's
//! own encoders write, seeded from `FUZZ_SEED` (default 1), so a run reproduces. Half the
//! inputs then get their CRCs recomputed so that the mutation reaches the structure behind
//! them. Every input must decode or give a typed error: a panic is counted and its input saved
//! and hex-dumped, an input taking 1 s of CPU or more is counted, and peak RSS and virtual
//! memory must stay within bounds over the loop. One summary line per decoder:
//! `tier fuzz-<decoder>: N inputs, 0 panics, E typed errors, slowest X ms, peak RSS growth Y MiB`.
//! See docs/reliability-fuzz.md.

use std::path::{Path, PathBuf};

use butter_test_support::fuzz::{self, check, peak_vm_kib, serial, Seed, Tier};

mod manifest;
mod segment;

/// Run `decode` on the seeds, then on inputs mutated from them, each fixed up by `fixup` (its
/// CRCs recomputed) half the time.
fn run_tier<E: std::fmt::Display>(
    name: &str,
    seeds: &[Seed],
    fixup: impl Fn(&mut [u8]),
    decode: impl FnMut(&[u8]) -> Result<(), E>,
) -> Tier {
    let raw: Vec<Vec<u8>> = seeds.iter().map(|s| s.bytes.clone()).collect();
    let generate = |rng: &mut fuzz::Rng| {
        let mut b = fuzz::mutate(rng, seeds, &[]);
        if rng.chance(2) {
            fixup(&mut b);
        }
        b
    };
    fuzz::run_tier(name, &raw, generate, decode)
}
