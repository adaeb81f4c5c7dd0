//! Differential test: seeded random attestation streams through the slasher on each compiled
//! backend, in lockstep with the slasher on the in-memory backend and with the naive O(n²)
//! reference checker (`slasher::reference`).
//!
//! After **every** batch:
//! - the slashings found on the backend equal, exactly, those found on the memory backend (the
//!   batch logic is deterministic), and so do the batch counters;
//! - every slashing is genuine (a double vote or a surround with a common validator);
//! - the validators slashed so far equal the reference's: validators with a slashable pair among
//!   their *processed* attestations (the reference mirrors validation, dropping and deferral).
//!
//! Window effects are part of the model: too-old attestations are dropped by both; pruning only
//! ever uses the current epoch, and epochs never decrease, so everything a valid attestation can
//! conflict with is still inside the window when it is processed.
//!
//! Streams: mostly honest attestations (data a function of the target epoch, sources
//! non-decreasing, so honest votes never conflict), aggregated over random subsets, repeated and
//! late; a per-seed rate of faulty ones (random source/target/root) creates the slashings. Some
//! targets are in the future (deferred), some too old (dropped), and rare epoch jumps beyond H
//! exercise the wrap-around and the epoch reset.
//!
//! `SLASHER_DIFF_SEED=n` runs one seed; `SLASHER_DIFF_SEEDS=n` changes the number of seeds.

mod slasher_support;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use slasher_adapters::backend::Environment;
use slasher_adapters::slasher::reference::{
    is_valid_slashing, slashed_validators, ReferenceSlasher,
};
use slasher_adapters::slasher::{
    AttestationStats, AttesterRecord, AttesterSlashing, BatchStats, BatchTimings, BlockStats,
    Config, IndexedAttestation, Slasher,
};
use slasher_support::{att, MemEnv, TestCtx};

const DEFAULT_SEEDS: u64 = 50;
const ATTESTATIONS_PER_SEED: usize = 2_000;

#[derive(Debug, Clone)]
enum Event {
    Attest(Box<IndexedAttestation>),
    Process(u64),
    Prune(u64),
}

#[derive(Debug, Clone)]
struct Scenario {
    chunk_size: usize,
    validator_chunk_size: usize,
    history_length: usize,
    validators: u64,
    events: Vec<Event>,
}

fn honest_source(target: u64) -> u64 {
    // Non-decreasing in the target, spans of 1 or 2 epochs.
    target.saturating_sub(1) / 2 * 2
}

fn random_indices(rng: &mut ChaCha8Rng, validators: u64, max_len: usize) -> Vec<u64> {
    let len = rng.gen_range(1..=max_len);
    let set: BTreeSet<u64> = (0..len).map(|_| rng.gen_range(0..validators)).collect();
    set.into_iter().collect()
}

fn scenario(seed: u64) -> Scenario {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let chunk_size = [2, 4, 8][rng.gen_range(0..3)];
    let validator_chunk_size = [2, 4, 8][rng.gen_range(0..3)];
    let history_length = chunk_size * [1, 2, 4][rng.gen_range(0..3)];
    let h = history_length as u64;
    let validators = rng.gen_range(8..=64);
    let fault_rate = rng.gen_range(0.002..0.03);
    // Mean attestations per batch (and twice that per prune), per seed: a few dozen to a hundred
    // and more, so batches mix many attestations and the number of commits stays moderate.
    let batch_interval = rng.gen_range(40..=120);
    let mut epoch = rng.gen_range(0..2 * h);
    let mut events = Vec::new();
    let mut sent: Vec<IndexedAttestation> = Vec::new();
    // A few aggregates per target epoch, drawn again and again (as gossip and blocks repeat
    // aggregates); this also keeps the number of distinct attestations to hash down.
    let mut pools: HashMap<u64, Vec<Vec<u64>>> = HashMap::new();
    let mut attestations = 0;
    while attestations < ATTESTATIONS_PER_SEED {
        let roll: f64 = rng.gen();
        let attestation = if roll < fault_rate {
            let target = epoch.saturating_sub(rng.gen_range(0..=h)) + rng.gen_range(0..=1);
            let source = target.saturating_sub(rng.gen_range(0..=h));
            let indices = random_indices(&mut rng, validators, 2);
            att(&indices, source, target, rng.gen_range(0..3))
        } else if roll < 0.01 + fault_rate {
            // Source after target: always dropped.
            att(
                &random_indices(&mut rng, validators, 3),
                epoch + 1,
                epoch,
                0,
            )
        } else if roll < 0.06 && !sent.is_empty() {
            // Resubmission of an earlier attestation (maybe too old by now).
            sent[rng.gen_range(0..sent.len())].clone()
        } else {
            let lag = match rng.gen_range(0..100) {
                0..=69 => 0,
                70..=89 => 1,
                90..=96 => rng.gen_range(2..=h + 2),
                _ => 0,
            };
            let ahead = u64::from(rng.gen_range(0..100) >= 97) * rng.gen_range(1..=2);
            let target = epoch.saturating_sub(lag) + ahead;
            let pool = pools.entry(target).or_default();
            let indices = if pool.len() >= 4 || (!pool.is_empty() && rng.gen_bool(0.8)) {
                pool[rng.gen_range(0..pool.len())].clone()
            } else {
                let fresh = random_indices(&mut rng, validators, 6);
                pool.push(fresh.clone());
                fresh
            };
            att(&indices, honest_source(target), target, 0)
        };
        sent.push(attestation.clone());
        events.push(Event::Attest(Box::new(attestation)));
        attestations += 1;

        if rng.gen_range(0..batch_interval) == 0 {
            events.push(Event::Process(epoch));
        }
        if rng.gen_range(0..2 * batch_interval) == 0 {
            events.push(Event::Prune(epoch));
        }
        match rng.gen_range(0..1000) {
            0..=1 => epoch += rng.gen_range(h..=3 * h),
            2..=59 => epoch += 1,
            _ => {}
        }
    }
    // Flush everything that was deferred.
    events.push(Event::Process(epoch + 2));
    events.push(Event::Prune(epoch + 2));
    Scenario {
        chunk_size,
        validator_chunk_size,
        history_length,
        validators,
        events,
    }
}

fn configure(ctx: &TestCtx, s: &Scenario) -> Config {
    let mut config = ctx.config();
    config.chunk_size = s.chunk_size;
    config.validator_chunk_size = s.validator_chunk_size;
    config.history_length = s.history_length;
    config
}

/// Batch counters without the timings.
type Counters = (u64, BlockStats, AttestationStats);

/// What one event must produce, computed once per process on the memory backend and the
/// reference, then checked against every backend.
#[derive(Debug)]
enum Expect {
    Attest(Arc<AttesterRecord>),
    Process {
        epoch: u64,
        counters: Counters,
        slashings: HashSet<AttesterSlashing>,
    },
    Prune {
        epoch: u64,
        deleted: (usize, usize),
    },
}

#[derive(Debug)]
struct Prepared {
    seed: u64,
    scenario: Scenario,
    expects: Vec<Expect>,
    slashed: BTreeSet<u64>,
}

fn counters(stats: &BatchStats) -> Counters {
    (
        stats.current_epoch,
        stats.block_stats.clone(),
        stats.attestation_stats.clone(),
    )
}

/// Run one seed on the memory backend in lockstep with the reference, checking after every
/// batch that the slashings are genuine and the slashed validators match the reference.
fn prepare(dir: &Path, seed: u64) -> Prepared {
    let scenario = scenario(seed);
    let mut config = Config::new(dir.join(format!("prepare-{seed}")));
    config.chunk_size = scenario.chunk_size;
    config.validator_chunk_size = scenario.validator_chunk_size;
    config.history_length = scenario.history_length;
    let memory: Slasher<MemEnv> = Slasher::create(config).expect("open memory slasher");
    let mut reference = ReferenceSlasher::new(scenario.history_length as u64);
    let mut all: HashSet<AttesterSlashing> = HashSet::new();
    let mut expects = Vec::with_capacity(scenario.events.len());
    let mut hashed: HashMap<IndexedAttestation, Arc<AttesterRecord>> = HashMap::new();
    for event in &scenario.events {
        match event {
            Event::Attest(a) => {
                let record = hashed
                    .entry((**a).clone())
                    .or_insert_with(|| Arc::new(AttesterRecord::new((**a).clone())))
                    .clone();
                memory.accept_attester_record(record.clone());
                reference.accept_attestation((**a).clone());
                expects.push(Expect::Attest(record));
            }
            Event::Process(epoch) => {
                let stats = memory
                    .process_queued(*epoch)
                    .unwrap_or_else(|e| panic!("seed {seed}: memory process_queued({epoch}): {e}"));
                reference.process_queued(*epoch);
                let found = memory.get_attester_slashings();
                for slashing in &found {
                    assert!(
                        is_valid_slashing(slashing),
                        "seed {seed}: bogus {slashing:?}"
                    );
                }
                all.extend(found.iter().cloned());
                assert_eq!(
                    &slashed_validators(&all),
                    reference.slashed_validators(),
                    "seed {seed}: slashed validators differ from the reference after the batch \
                     at epoch {epoch} (C={} K={} H={})",
                    scenario.chunk_size,
                    scenario.validator_chunk_size,
                    scenario.history_length,
                );
                expects.push(Expect::Process {
                    epoch: *epoch,
                    counters: counters(&stats),
                    slashings: found,
                });
            }
            Event::Prune(epoch) => {
                let stats = memory
                    .prune_database(*epoch)
                    .unwrap_or_else(|e| panic!("seed {seed}: memory prune_database({epoch}): {e}"));
                expects.push(Expect::Prune {
                    epoch: *epoch,
                    deleted: (stats.num_proposers_deleted, stats.num_attestations_deleted),
                });
            }
        }
    }
    assert_eq!(reference.num_queued(), memory.num_queued_attestations());
    println!(
        "slasher_differential: seed={seed} distinct attestations hashed={}",
        hashed.len()
    );
    Prepared {
        seed,
        scenario,
        expects,
        slashed: reference.slashed_validators().clone(),
    }
}

/// Every seed prepared once per test process (the first backend test to get here computes it,
/// the others wait), so attestations are hashed once and the memory run is shared.
fn prepared() -> &'static [Prepared] {
    static PREPARED: OnceLock<Vec<Prepared>> = OnceLock::new();
    PREPARED.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let start = std::time::Instant::now();
        let out: Vec<Prepared> = seeds()
            .into_iter()
            .map(|seed| {
                let p = prepare(dir.path(), seed);
                println!(
                    "slasher_differential: seed={seed} C={} K={} H={} validators={} events={} \
                     slashed={}",
                    p.scenario.chunk_size,
                    p.scenario.validator_chunk_size,
                    p.scenario.history_length,
                    p.scenario.validators,
                    p.scenario.events.len(),
                    p.slashed.len()
                );
                p
            })
            .collect();
        println!(
            "slasher_differential: prepared {} seeds in {:?}",
            out.len(),
            start.elapsed()
        );
        out
    })
}

/// Replay a prepared seed on backend `E`; everything must match the memory run exactly.
fn run_seed<E: Environment>(ctx: &TestCtx, p: &Prepared, time: &mut BatchTimings) -> usize {
    let seed = p.seed;
    println!("slasher_differential: backend={} seed={seed}", ctx.backend);
    let slasher = ctx.open::<E>(configure(ctx, &p.scenario));
    let mut all: HashSet<AttesterSlashing> = HashSet::new();
    let mut batches = 0;
    for expect in &p.expects {
        match expect {
            Expect::Attest(record) => slasher.accept_attester_record(record.clone()),
            Expect::Process {
                epoch,
                counters: want,
                slashings,
            } => {
                batches += 1;
                let stats = slasher.process_queued(*epoch).unwrap_or_else(|e| {
                    panic!("seed {seed}: {} process_queued({epoch}): {e}", ctx.backend)
                });
                assert_eq!(
                    &counters(&stats),
                    want,
                    "seed {seed}: batch counters differ from the memory backend at epoch {epoch}"
                );
                let found = slasher.get_attester_slashings();
                assert_eq!(
                    &found, slashings,
                    "seed {seed}: slashings differ from the memory backend at epoch {epoch}"
                );
                all.extend(found);
                let t = &stats.timings;
                time.begin_us += t.begin_us;
                time.blocks_us += t.blocks_us;
                time.store_us += t.store_us;
                time.double_vote_us += t.double_vote_us;
                time.arrays_us += t.arrays_us;
                time.commit_us += t.commit_us;
                time.total_us += t.total_us;
            }
            Expect::Prune { epoch, deleted } => {
                let stats = slasher.prune_database(*epoch).unwrap_or_else(|e| {
                    panic!("seed {seed}: {} prune_database({epoch}): {e}", ctx.backend)
                });
                assert_eq!(
                    &(stats.num_proposers_deleted, stats.num_attestations_deleted),
                    deleted,
                    "seed {seed}: prune counts differ at epoch {epoch}"
                );
            }
        }
    }
    assert_eq!(
        slashed_validators(&all),
        p.slashed,
        "seed {seed}: final slashed validators"
    );
    batches
}

fn seeds() -> Vec<u64> {
    if let Some(seed) = std::env::var("SLASHER_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return vec![seed];
    }
    let n = std::env::var("SLASHER_DIFF_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEEDS);
    (0..n).collect()
}

fn random_streams_match_reference<E: Environment>(ctx: &TestCtx) {
    let prepared = prepared();
    let start = std::time::Instant::now();
    let mut batches = 0;
    let mut time = BatchTimings::default();
    for p in prepared {
        batches += run_seed::<E>(ctx, p, &mut time);
    }
    println!(
        "slasher_differential: backend={} process_queued time (µs): {time:?}",
        ctx.backend
    );
    let slashed: usize = prepared.iter().map(|p| p.slashed.len()).sum();
    println!(
        "slasher_differential: backend={} seeds={} batches={batches} slashed validators={slashed} \
         in {:?}",
        ctx.backend,
        prepared.len(),
        start.elapsed()
    );
    assert!(slashed > 0, "the streams produced no slashings at all");
}

/// The reference itself on a hand-checked stream, so that the oracle is not taken on trust.
#[test]
fn reference_checker_hand_checked() {
    let mut r = ReferenceSlasher::new(16);
    r.accept_attestation(att(&[1, 2], 1, 2, 0));
    r.accept_attestation(att(&[2, 3], 0, 3, 0)); // 2: surrounds (1→2)
    r.accept_attestation(att(&[4], 1, 2, 1)); // alone: no conflict
    r.accept_attestation(att(&[1], 1, 2, 0)); // same data again
    r.accept_attestation(att(&[5], 3, 9, 0)); // deferred at epoch 4
    r.process_queued(4);
    assert_eq!(
        r.slashed_validators().iter().copied().collect::<Vec<_>>(),
        vec![2]
    );
    assert_eq!(r.num_queued(), 1);
    r.accept_attestation(att(&[5], 3, 9, 1)); // double vote with the deferred one
    r.accept_attestation(att(&[4], 1, 2, 2)); // too old at epoch 18: dropped
    r.process_queued(18);
    assert_eq!(
        r.slashed_validators().iter().copied().collect::<Vec<_>>(),
        vec![2, 5]
    );
}

per_backend!(random_streams_match_reference);
