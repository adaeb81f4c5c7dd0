//! The kill and power-loss tiers (`docs/reliability.md` §2) against LMDB, MDBX and redb,
//! through the slasher adapters, with the same oracle and the same faults as butter_db's own
//! tiers (`crash_sigkill.rs`, `power_loss.rs`), so the report can compare the backends.
//!
//! - SIGKILL: a child opens the store in a directory on btrfs, reads the marker j and commits
//!   transactions j+1, j+2, ... of the seeded workload; the parent kills it at a random moment
//!   after one to three new acknowledgements, reopens the store and checks that it holds exactly
//!   the state after some j with last acknowledged <= j <= last started. The next child goes on
//!   from there.
//! - Power loss: btrfs on the FUSE lazy disk, a child committing a few transactions, power cut
//!   at every flush (dropping every unflushed write, or keeping a random prefix of them); the
//!   durable image must pass the oracle, accept one more transaction and `btrfs check`.
//!
//! Every backend is opened with durable commits ([`Durability::Immediate`]).
//!
//! [`Durability::Immediate`]: slasher_adapters::Durability::Immediate

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use slasher_adapters::DatabaseBackend;

use butter_tests::adapter_workload::{self, open_store, CHILD_BACKEND, REOPEN_FAILED};
use butter_tests::harness::{
    btrfs_dir, device_problems, require, seed, Progress, ScratchDir, WorkloadChild,
};
use butter_tests::lazy_disk::CutMode;
use butter_tests::power::{cycle, ChildSpec, Fault};
use butter_tests::workload::Workload;

/// The tiers share the btrfs mount, loop devices and the cores: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// The test function a workload child runs.
const CHILD_ENTRY: &str = "adapters";

/// Kills per backend.
const KILLS: u64 = 30;
/// How far past its starting point a kill-tier child may go (it is killed long before).
const KILL_CHILD_TXNS: u64 = 200;
/// How long a kill-tier child may take to acknowledge its transactions.
const ACK_LIMIT: Duration = Duration::from_secs(60);

/// Commits of one power-loss cycle; the workload has two more for the recovery check.
const POWER_TXNS: u64 = 8;
/// At most this many cut points per backend and mode; beyond it every step-th flush is cut.
const MAX_POINTS_PER_MODE: u64 = 80;

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

// ---- SIGKILL --------------------------------------------------------------------------------

/// What the kill tier saw for one backend.
#[derive(Debug, Default)]
struct KillTally {
    kills: u64,
    /// Kills that landed after a `START i` without its `ACK i` and yet recovered `i`: the
    /// commit had taken effect before the child could acknowledge it (both are allowed).
    unacked_survived: u64,
    violations: Vec<String>,
    /// The last recovered j.
    committed: u64,
}

/// Starts a child going on from the store's marker, kills it after it acknowledged one to
/// three new transactions plus 0–20 ms, and returns everything it printed and whether it
/// reached its target.
fn kill_once(
    backend: DatabaseBackend,
    db: &Path,
    seed: u64,
    j: u64,
    rng: &mut ChaCha8Rng,
) -> (Progress, bool) {
    let mut child = WorkloadChild::spawn(
        CHILD_ENTRY,
        &[
            (CHILD_BACKEND, backend.name().to_string()),
            ("CHILD_DB", db.display().to_string()),
            ("CHILD_SEED", seed.to_string()),
            ("CHILD_TXNS", KILL_CHILD_TXNS.to_string()),
        ],
    );
    let target = j + rng.gen_range(1..=3);
    let reached = child.wait_for(ACK_LIMIT, |p| p.acked >= target);
    std::thread::sleep(Duration::from_micros(rng.gen_range(0..20_000)));
    child.kill();
    // Every line printed before the kill is still in the pipe: the exact last START and ACK.
    let (progress, _) = child.finish(Duration::from_secs(30));
    (progress, reached)
}

/// `KILLS` kill-and-check rounds against `backend` in `dir`.
fn kill_tier(backend: DatabaseBackend, dir: &Path, seed: u64) -> KillTally {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let db = dir.join("db");
    let mut wl = Workload::new(seed, KILL_CHILD_TXNS);
    let mut tally = KillTally::default();
    let mut j = 0;
    for kill in 1..=KILLS {
        let (p, reached) = kill_once(backend, &db, seed, j, &mut rng);
        tally.kills += 1;
        // The last recovered j is durable: it is a lower bound whatever the child printed.
        let acked = p.acked.max(j);
        let started = p.started.max(acked);
        if !reached {
            tally.violations.push(format!(
                "kill {kill}: the child did not commit past {j} (acked {}): {:?}",
                p.acked, p.other
            ));
        }
        if wl.len() < started {
            wl = Workload::new(seed, started + KILL_CHILD_TXNS);
        }
        let verdict = open_store(backend, &db)
            .map_err(|e| format!("{REOPEN_FAILED}: {e}"))
            .and_then(|store| adapter_workload::check_store(store.as_ref(), &wl, acked, started));
        match verdict {
            Ok(recovered) => {
                if recovered > p.acked.max(j) {
                    tally.unacked_survived += 1;
                }
                j = recovered;
            }
            Err(e) => {
                let line = format!("kill {kill}: {e} (acked {acked}, started {started})");
                println!("adapters_sigkill [{backend}]: violation {line}");
                tally.violations.push(line);
                // Start over on an empty store, so later rounds are judged on their own.
                let _ = std::fs::remove_dir_all(&db);
                j = 0;
            }
        }
    }
    tally.committed = j;
    tally
}

fn sigkill(backend: DatabaseBackend) {
    let test = format!("adapters_sigkill_{backend}");
    let Some(dir) = btrfs_dir(&test) else {
        return;
    };
    let _serial = serial();
    let seed = seed(&test, "CRASH_SEED");
    let t0 = Instant::now();
    let tally = kill_tier(backend, &dir, seed);
    println!(
        "tier sigkill [{backend}]: {} kills, {} violations, {:.1} s ({} transactions; {} kills \
         recovered a commit not yet acknowledged)",
        tally.kills,
        tally.violations.len(),
        t0.elapsed().as_secs_f64(),
        tally.committed,
        tally.unacked_survived
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        tally.violations.is_empty(),
        "{backend}, seed {seed} (replay with CRASH_SEED={seed}):\n{}",
        tally.violations.join("\n")
    );
}

#[test]
fn sigkill_lmdb() {
    sigkill(DatabaseBackend::Lmdb);
}

#[test]
fn sigkill_mdbx() {
    sigkill(DatabaseBackend::Mdbx);
}

#[test]
fn sigkill_redb() {
    sigkill(DatabaseBackend::Redb);
}

// ---- power loss -----------------------------------------------------------------------------

/// Backends whose store may not open again after power is cut while the child is still
/// creating it, before its first transaction: redb 2.x first extends `slasher.redb` and
/// flushes its header without the magic number, then writes the magic number and flushes
/// again; power lost between the two flushes leaves a non-empty file without the magic
/// number, which every later open rejects as `InvalidData` (on purpose since redb PR #914,
/// December 2024: it no longer re-initialises a file it does not recognise). Nothing acknowledged is lost, but the store needs a person to
/// delete the file. These cut points are counted as violations and listed; the test fails on
/// every other violation.
const UNOPENABLE_AFTER_CREATE_CUT: [DatabaseBackend; 1] = [DatabaseBackend::Redb];

/// What the power-loss tier saw for one backend.
#[derive(Debug, Default)]
struct PowerTally {
    flushes: u64,
    points: u64,
    /// Every violation, one line each.
    violations: Vec<String>,
    /// Those where the store did not open after a cut before the child's first transaction.
    unopenable_after_create: u64,
}

fn power_child(backend: DatabaseBackend, seed: u64, extra: &[(&'static str, &str)]) -> ChildSpec {
    let mut envs = vec![
        (CHILD_BACKEND, backend.name().to_string()),
        ("CHILD_SEED", seed.to_string()),
        ("CHILD_TXNS", POWER_TXNS.to_string()),
    ];
    envs.extend(extra.iter().map(|(k, v)| (*k, (*v).to_string())));
    ChildSpec {
        entry: CHILD_ENTRY,
        envs,
    }
}

/// A baseline cycle without a fault (and without `CHILD_ACK_EARLY`) counts the flushes F;
/// then power is cut at K = 1..=F for each mode, every `step`-th flush, `step` the larger of
/// `min_step` and what keeps a mode at `MAX_POINTS_PER_MODE` cut points. Each mode gets a seed
/// derived from the run's seed and K.
fn power_tier(
    test: &str,
    seed: u64,
    spec: &ChildSpec,
    modes: &[fn(u64) -> CutMode],
    min_step: u64,
) -> PowerTally {
    let store = spec.store();
    let wl = Workload::new(seed, POWER_TXNS + 2);
    let scratch = ScratchDir::new(Path::new("/tmp"), test);
    let honest = ChildSpec {
        envs: spec
            .envs
            .iter()
            .filter(|(k, _)| *k != "CHILD_ACK_EARLY")
            .cloned()
            .collect(),
        ..spec.clone()
    };
    let base = cycle(&scratch.path, &wl, &honest, Fault::None);
    assert_eq!(
        base.progress.acked, POWER_TXNS,
        "{store:?}: baseline run did not finish: {:?}",
        base.progress.other
    );
    if let Err(e) = &base.verdict {
        panic!("{store:?}: baseline run (no fault) fails the oracle: {e}");
    }
    let flushes = base.fsyncs;
    let step = flushes.div_ceil(MAX_POINTS_PER_MODE).max(min_step);
    println!("{test}: baseline {POWER_TXNS} commits, {flushes} flushes, cutting every {step}");
    let mut tally = PowerTally {
        flushes,
        ..PowerTally::default()
    };
    for (m, mode) in modes.iter().enumerate() {
        let mut k = 1 + m as u64 % step;
        while k <= flushes {
            let cut = mode(seed ^ (k << 8) ^ m as u64);
            let r = cycle(&scratch.path, &wl, spec, Fault::CutAtFsync(k, cut));
            tally.points += 1;
            if let Err(e) = r.verdict {
                // The child never started transaction 1: the cut came while it created the store.
                if r.progress.started == 0 && e.starts_with(REOPEN_FAILED) {
                    tally.unopenable_after_create += 1;
                }
                let line = format!(
                    "K={k} {cut:?}: {e} (acked {}, started {}, cut {}, child said {:?})",
                    r.progress.acked, r.progress.started, r.cut, r.progress.other
                );
                println!("{test}: violation {line}");
                tally.violations.push(line);
            }
            k += step;
        }
    }
    tally
}

fn power_loss(backend: DatabaseBackend) {
    let test = format!("adapters_power_loss_{backend}");
    if !require(&test, &device_problems()) {
        return;
    }
    let _serial = serial();
    let seed = seed(&test, "POWER_SEED");
    let t0 = Instant::now();
    let tally = power_tier(
        &test,
        seed,
        &power_child(backend, seed, &[]),
        &[|_| CutMode::Drop, CutMode::Prefix],
        1,
    );
    println!(
        "tier power-loss [{backend}]: {} cut points, {} violations, {:.1} s ({} flushes per run; \
         {} of the violations: the store does not open after a cut while it was being created, \
         nothing acknowledged)",
        tally.points,
        tally.violations.len(),
        t0.elapsed().as_secs_f64(),
        tally.flushes,
        tally.unopenable_after_create
    );
    let tolerated = if UNOPENABLE_AFTER_CREATE_CUT.contains(&backend) {
        tally.unopenable_after_create
    } else {
        0
    };
    assert_eq!(
        tally.violations.len() as u64,
        tolerated,
        "{backend}, seed {seed} (replay with POWER_SEED={seed}):\n{}",
        tally.violations.join("\n")
    );
}

#[test]
fn power_loss_lmdb() {
    power_loss(DatabaseBackend::Lmdb);
}

#[test]
fn power_loss_mdbx() {
    power_loss(DatabaseBackend::Mdbx);
}

#[test]
fn power_loss_redb() {
    power_loss(DatabaseBackend::Redb);
}

/// The adapter path can fail: an LMDB child that prints `ACK i` before committing loses
/// acknowledged transactions when power is cut, and the oracle must say so.
#[test]
fn adapters_early_ack_is_caught() {
    let test = "adapters_early_ack_is_caught";
    if !require(test, &device_problems()) {
        return;
    }
    let _serial = serial();
    let seed = seed(test, "POWER_SEED");
    let t0 = Instant::now();
    let tally = power_tier(
        test,
        seed,
        &power_child(DatabaseBackend::Lmdb, seed, &[("CHILD_ACK_EARLY", "1")]),
        &[|_| CutMode::Drop],
        4,
    );
    println!(
        "tier power-loss [lmdb] (broken: ack before commit): {} cut points, {} violations, \
         {:.1} s",
        tally.points,
        tally.violations.len(),
        t0.elapsed().as_secs_f64()
    );
    assert!(
        tally
            .violations
            .iter()
            .any(|v| v.contains("LOST acknowledged")),
        "the adapter power-loss tier did not catch a child acknowledging before committing"
    );
}
