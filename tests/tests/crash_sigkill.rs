//! Process-kill tests: a child process commits numbered transactions and is killed (SIGKILL at
//! random moments, or by aborting at a named fail point inside the commit). After each kill the
//! database must hold exactly the state after some j transactions, with
//! last acknowledged <= j <= last started, and must accept more transactions.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use butter_db::Env;
use rand::{Rng, SeedableRng};

use butter_tests::crash_workload::{committed, model, table};
use butter_tests::harness::btrfs_dir;

fn spawn_child(dir: &Path, failpoint: Option<&str>) -> Child {
    spawn_child_with(dir, failpoint, false)
}

fn spawn_child_with(dir: &Path, failpoint: Option<&str>, broken: bool) -> Child {
    spawn_child_stopping(dir, failpoint, broken, None)
}

fn spawn_child_stopping(
    dir: &Path,
    failpoint: Option<&str>,
    broken: bool,
    stop_after: Option<u64>,
) -> Child {
    let mut cmd = Command::new(butter_tests::harness::child_exe());
    cmd.arg("crash")
        .env("CRASH_CHILD_DIR", dir)
        .stdout(Stdio::piped())
        .stderr(match std::env::var_os("CRASH_DEBUG") {
            Some(_) => Stdio::inherit(),
            None => Stdio::null(),
        });
    if let Some(fp) = failpoint {
        cmd.env("BUTTER_FAILPOINT", fp);
    }
    if broken {
        cmd.env("BUTTER_BROKEN_ACK_BEFORE_SNAPSHOT", "1");
    }
    if let Some(n) = stop_after {
        cmd.env("CRASH_CHILD_STOP_AFTER", n.to_string());
    }
    cmd.spawn().expect("spawn child")
}

/// Check the recovered state against the model and return j.
fn verify(dir: &Path, last_ack: u64, last_started: u64) -> u64 {
    let env = Env::open_path(dir).expect("reopen after crash");
    let t = table(&env);
    let j = committed(&env, t);
    assert!(
        last_ack <= j && j <= last_started,
        "recovered {j} transactions, acknowledged {last_ack}, started {last_started}"
    );
    let r = env.begin_read();
    let got: std::collections::BTreeMap<_, _> = r.scan(t, b"").expect("scan").into_iter().collect();
    assert_eq!(
        got,
        model(j),
        "state after recovery is not the state after {j} transactions"
    );
    j
}

/// Read the child's output until it has acknowledged `until_ack` transactions or exited.
/// The child's progress as read from its stdout: the last START and ACK numbers seen.
struct Progress {
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    ack: u64,
    started: u64,
}

impl Progress {
    fn new(child: &mut Child) -> Self {
        let stdout = child.stdout.take().expect("stdout");
        Progress {
            lines: BufReader::new(stdout).lines(),
            ack: 0,
            started: 0,
        }
    }

    /// Read lines until ACK `until_ack` (or the end of the output).
    fn read_until_ack(&mut self, until_ack: u64) {
        while let Some(Ok(line)) = self.lines.next() {
            // libtest prints the test name without a newline before the child's first line.
            if let Some((_, n)) = line.split_once("START ") {
                self.started = n.parse().expect("number");
            } else if let Some((_, n)) = line.split_once("ACK ") {
                self.ack = n.parse().expect("number");
                if self.ack >= until_ack {
                    return;
                }
            }
        }
    }

    /// After the child is dead: everything it printed, to its last line.
    fn drain(&mut self) {
        self.read_until_ack(u64::MAX);
    }
}

/// Read the child's output until it has acknowledged `until_ack` transactions or exited, then
/// close the pipe (a child that prints again dies of EPIPE).
fn read_progress(child: &mut Child, until_ack: u64) -> (u64, u64) {
    let mut p = Progress::new(child);
    p.read_until_ack(until_ack);
    (p.ack, p.started)
}

#[test]
fn sigkill_at_random_points() {
    let Some(dir) = btrfs_dir("sigkill") else {
        return;
    };
    let seed: u64 = std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("sigkill_at_random_points seed {seed}");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let kills = 100;
    let started_at = Instant::now();
    let mut j = 0;
    for _ in 0..kills {
        let mut child = spawn_child(&dir, None);
        // Let it commit a few transactions, then kill it at a random moment.
        let target = j + rng.gen_range(1..4);
        let mut progress = Progress::new(&mut child);
        progress.read_until_ack(target);
        // The child keeps committing (the pipe stays open) until the kill lands.
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..20_000)));
        child.kill().expect("kill");
        child.wait().expect("wait");
        // Every line it printed before dying is still in the pipe: the exact last START/ACK.
        progress.drain();
        let ack = progress.ack.max(j);
        let started = progress.started.max(ack);
        j = verify(&dir, ack, started);
    }
    println!(
        "tier sigkill: {kills} fault points, 0 violations, {:.1} s ({j} transactions)",
        started_at.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn abort_at_every_commit_fail_point() {
    let Some(dir) = btrfs_dir("failpoints") else {
        return;
    };
    let points = [
        "merge::after_write",
        "spill::before_write",
        "spill::after_write",
        "commit::after_clone",
        "commit::after_segments",
        "commit::before_snapshot",
        "commit::after_snapshot",
        "gc::delete",
        "recovery::discard_live",
    ];
    // Create the table first, so every fail point below is reached by a numbered transaction.
    table(&Env::open_path(&*dir).expect("open"));
    let started_at = Instant::now();
    let mut j = 0;
    let mut tried = 0;
    for round in 0..4 {
        for fp in points {
            let mut child = spawn_child(&dir, Some(fp));
            let (ack, started) = read_progress(&mut child, u64::MAX);
            let status = child.wait().expect("wait");
            assert!(
                !status.success(),
                "child should have aborted at {fp} (round {round})"
            );
            let started = started.max(ack).max(j);
            j = verify(&dir, ack.max(j), started + 1);
            if fp == "commit::after_snapshot" || fp == "gc::delete" {
                assert_eq!(
                    j, started,
                    "{fp}: a commit whose snapshot exists must survive"
                );
            }
            let unsnapshotted = [
                "spill::before_write",
                "spill::after_write",
                "commit::after_clone",
                "commit::after_segments",
                "commit::before_snapshot",
            ];
            if unsnapshotted.contains(&fp) {
                assert_eq!(
                    j + 1,
                    started,
                    "{fp}: a commit without its snapshot must vanish"
                );
            }
            tried += 1;
        }
    }
    println!(
        "tier failpoints: {tried} fault points, 0 violations, {:.1} s",
        started_at.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The harness can fail: a store that acknowledges a commit before its snapshot exists loses
/// acknowledged transactions when killed, and the oracle must say so.
#[test]
fn kills_catch_acknowledging_before_the_snapshot() {
    let Some(dir) = btrfs_dir("broken_ack") else {
        return;
    };
    let mut violations = 0;
    for round in 0..5 {
        // The child commits three transactions and waits: killed then, an honest store has all
        // three; one that acknowledges before the snapshot has lost the third.
        let before = committed_count(&dir);
        let mut child = spawn_child_stopping(&dir, None, true, Some(before + 3));
        let (ack, _) = read_progress(&mut child, before + 3);
        child.kill().expect("kill");
        child.wait().expect("wait");
        let after = committed_count(&dir);
        if after < ack {
            violations += 1;
        }
        println!("broken round {round}: acknowledged {ack}, recovered {after}");
    }
    println!("tier sigkill (broken ack-before-snapshot): 5 kills, {violations} violations");
    assert!(
        violations > 0,
        "the kill harness did not catch a store that acknowledges early"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn committed_count(dir: &Path) -> u64 {
    let env = Env::open_path(dir).expect("open");
    let t = table(&env);
    committed(&env, t)
}

/// SIGKILL while the child is still opening the database (recovery: discarding `live/`,
/// re-snapshotting it from the newest generation, deleting older ones), at random delays
/// after it starts; then the usual check. Every fourth kill waits for one commit first, so
/// recovery always has a half-finished `live/` or an old generation to clean up.
#[test]
fn sigkill_during_recovery() {
    let Some(dir) = btrfs_dir("recovery_kill") else {
        return;
    };
    let seed: u64 = std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("sigkill_during_recovery seed {seed}");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    table(&Env::open_path(&*dir).expect("open"));
    let started_at = Instant::now();
    let kills = 80;
    let mut j = 0;
    for n in 0..kills {
        let child = butter_tests::harness::WorkloadChild::spawn(
            "crash",
            &[("CRASH_CHILD_DIR", dir.display().to_string())],
        );
        if n % 4 == 3 {
            child.wait_for(Duration::from_secs(30), |p| p.acked > j);
        }
        std::thread::sleep(Duration::from_micros(rng.gen_range(0..40_000)));
        let mut child = child;
        child.kill();
        let (p, _) = child.finish(Duration::from_secs(30));
        let ack = p.acked.max(j);
        j = verify(&dir, ack, p.started.max(ack) + 1);
    }
    println!(
        "tier recovery-kill: {kills} fault points, 0 violations, {:.1} s",
        started_at.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
