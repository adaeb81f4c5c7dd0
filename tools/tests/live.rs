//! The `butter` tool beside a live writer, with `btrfs send` streams, and killed half-way:
//! - `check`, `stat`, `backup`, `backup --plain` (restored) and `backup --compact` while a
//!   writer commits and deletes the generations they read never fail, and every copy holds
//!   exactly the state after some committed transaction;
//! - a full and an incremental stream restore to the state they were taken at, and a
//!   truncated stream is refused, leaving nothing;
//! - a SIGKILL at any moment of `backup` (`--compact` too) or `restore` (`--plain` too) leaves
//!   either a whole copy or nothing the engine opens (and `butter remove` clears what is left);
//!   of `backup --plain`, a copy that restores whole or one without its list, which `restore
//!   --plain` refuses.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use butter_db::{Env, EnvBuilder, Error};
use common::*;

/// Opens the database with background merges (the default), so generations come and go as in
/// production.
fn open_background(dir: &Path) -> Env {
    EnvBuilder::new(dir).open().expect("open")
}

/// A copy's state must be the model after the transaction count it records.
fn assert_committed_state(copy: &Path) -> u64 {
    let m = read_db(copy);
    let j = counter(&m);
    assert_eq!(
        m,
        model_after(j),
        "{} is not the state after {j}",
        copy.display()
    );
    j
}

/// `butter ARGS` with `input` on standard input.
fn butter_with_input(args: &[&str], input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_butter"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run butter");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).expect("write stdin");
    drop(stdin);
    child.wait_with_output().expect("wait")
}

/// Transactions the writer commits while the tool reads.
const LIVE_TXNS: u64 = 120;

/// Runs check, stat and backup in a loop until `done` says the writer has finished (and at
/// least three rounds), then checks that every copy holds a committed state and that some were
/// taken while the writer was committing.
fn read_beside_writer(t: &TestDir, db: &Path, mut done: impl FnMut() -> bool) {
    let (mut rounds, mut copies) = (0, Vec::new());
    while !done() || rounds < 3 {
        for args in [vec!["check", path(db)], vec!["stat", path(db), "--json"]] {
            let o = butter(&args);
            assert!(
                o.status.success(),
                "{args:?} beside the writer: {}",
                stderr(&o)
            );
        }
        let dest = t.join(&format!("copy-{rounds}"));
        let o = butter(&["backup", path(db), path(&dest)]);
        assert!(
            o.status.success(),
            "backup beside the writer: {}",
            stderr(&o)
        );
        copies.push(dest);
        // A plain copy as a tar stream, restored; and a compacting copy.
        let o = butter(&["backup", "--plain", path(db), "-"]);
        assert!(
            o.status.success(),
            "backup --plain beside the writer: {}",
            stderr(&o)
        );
        let plain = t.join(&format!("plain-{rounds}"));
        let r = butter_with_input(&["restore", "--plain", "-", path(&plain)], &o.stdout);
        assert!(r.status.success(), "restore --plain: {}", stderr(&r));
        copies.push(plain);
        let compact = t.join(&format!("compact-{rounds}"));
        let o = butter(&["backup", "--compact", path(db), path(&compact)]);
        assert!(
            o.status.success(),
            "backup --compact beside the writer: {}",
            stderr(&o)
        );
        copies.push(compact);
        rounds += 1;
    }
    let seen: Vec<u64> = copies.iter().map(|c| assert_committed_state(c)).collect();
    eprintln!("{rounds} rounds beside the writer; copies at transactions {seen:?}");
    assert!(
        seen.iter().any(|&j| j > 0 && j < LIVE_TXNS),
        "no copy was taken while the writer was committing: {seen:?}"
    );
}

#[test]
fn check_stat_and_backup_beside_a_committing_writer() {
    let Some(t) = btrfs_dir("butter_live") else {
        return;
    };
    let db = t.join("db");
    let env = Arc::new(open_background(&db));
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (env, done) = (env.clone(), done.clone());
        std::thread::spawn(move || {
            for i in 1..=LIVE_TXNS {
                commit(&env, i);
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    read_beside_writer(&t, &db, || done.load(Ordering::SeqCst));
    writer.join().unwrap();
}

/// The variable naming the database the writer child commits to.
const WRITER_CHILD_DB: &str = "BUTTER_TOOLS_WRITER_CHILD_DB";

/// Not a test of its own: the writer process of
/// `check_stat_and_backup_beside_an_unprivileged_writer`, run by that test as another user
/// (this test binary again, with this test alone). Without the variable it does nothing.
#[test]
fn writer_child() {
    let Some(db) = std::env::var_os(WRITER_CHILD_DB) else {
        return;
    };
    let env = open_background(Path::new(&db));
    for i in 1..=LIVE_TXNS {
        commit(&env, i);
    }
}

/// As above, with the writer an unprivileged process: without `CAP_SYS_ADMIN` or the mount
/// option `user_subvol_rm_allowed`, it deletes its old generations by clearing their read-only
/// flag, unlinking their files one by one and `rmdir` (design.md §3 step 7), which a reader
/// can meet half-way.
#[test]
fn check_stat_and_backup_beside_an_unprivileged_writer() {
    use std::os::unix::process::CommandExt;
    let Some(t) = btrfs_dir("butter_live_user") else {
        return;
    };
    if !butter_test_support::is_root() {
        butter_test_support::skip(
            "check_stat_and_backup_beside_an_unprivileged_writer",
            "running the writer as another user needs root",
        );
        return;
    }
    // Judged on this test's own filesystem, not every mount of the machine.
    let options =
        butter_test_support::mount_options(&t.0).expect("the mount options of the test directory");
    if options.iter().any(|o| o == "user_subvol_rm_allowed") {
        butter_test_support::skip(
            "check_stat_and_backup_beside_an_unprivileged_writer",
            "the test filesystem is mounted with user_subvol_rm_allowed, so the unprivileged \
             writer deletes its generations with SNAP_DESTROY like root: nothing new is tested",
        );
        return;
    }
    let db = t.join("db");
    std::fs::create_dir(&db).unwrap();
    std::os::unix::fs::chown(&db, Some(65534), Some(65534)).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "writer_child", "--nocapture", "--test-threads=1"])
        .env(WRITER_CHILD_DB, &db)
        .uid(65534)
        .gid(65534)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // The child has made the database once a generation exists.
    while !std::fs::read_dir(&db)
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("gen-"))
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    read_beside_writer(&t, &db, || match child.try_wait().unwrap() {
        Some(status) => {
            assert!(status.success(), "the writer child failed");
            true
        }
        None => false,
    });
}

fn btrfs_progs_and_root(test: &str) -> bool {
    if !butter_test_support::is_root() {
        butter_test_support::skip(test, "btrfs send and receive need root");
        return false;
    }
    if Command::new("btrfs").arg("--version").output().is_err() {
        butter_test_support::skip(test, "btrfs-progs is not installed");
        return false;
    }
    true
}

#[test]
fn streams_restore_full_and_incremental_and_refuse_truncation() {
    let Some(t) = btrfs_dir("butter_stream") else {
        return;
    };
    if !btrfs_progs_and_root("streams_restore_full_and_incremental") {
        return;
    }
    let db = t.join("db");
    make_db(&db, 40);
    let (full, inc) = (t.join("full.stream"), t.join("inc.stream"));
    let (copy1, copy2) = (t.join("copy1"), t.join("copy2"));
    let o = butter(&["backup", path(&db), path(&copy1), "--stream", path(&full)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("stream (full)"), "{}", stdout(&o));
    // The stream file is never overwritten.
    let o = butter(&[
        "backup",
        path(&db),
        path(&t.join("c")),
        "--stream",
        path(&full),
    ]);
    assert!(stderr(&o).contains("exists"), "{}", stderr(&o));
    assert!(!t.join("c").exists());
    {
        let env = open(&db);
        for i in 41..=44 {
            commit(&env, i);
        }
    }
    let o = butter(&[
        "backup",
        path(&db),
        path(&copy2),
        "--stream",
        path(&inc),
        "--parent",
        path(&copy1),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("incremental from generation 42"),
        "{}",
        stdout(&o)
    );
    let (full_len, inc_len) = (
        std::fs::metadata(&full).unwrap().len(),
        std::fs::metadata(&inc).unwrap().len(),
    );
    assert!(
        inc_len < full_len,
        "incremental {inc_len} vs full {full_len}"
    );

    let r1 = t.join("r1");
    let o = butter(&["restore", path(&full), path(&r1)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_db(&r1), model_after(40));
    let r2 = t.join("r2");
    let o = butter(&["restore", path(&full), path(&inc), path(&r2)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_db(&r2), model_after(44));
    assert!(!r2.join(butter_db::admin::RECEIVE_DIR).exists());

    // Standard output and input.
    let piped = t.join("piped");
    let mut send = Command::new(env!("CARGO_BIN_EXE_butter"))
        .args(["backup", path(&db), path(&t.join("copy3")), "--stream", "-"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_butter"))
        .args(["restore", "-", path(&piped)])
        .stdin(send.stdout.take().unwrap())
        .output()
        .unwrap();
    assert!(send.wait().unwrap().success());
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_db(&piped), model_after(44));

    // A truncated stream: refused, nothing left.
    let bytes = std::fs::read(&full).unwrap();
    for cut in [bytes.len() / 2, bytes.len() - 100, 10] {
        let truncated = t.join("truncated.stream");
        std::fs::write(&truncated, &bytes[..cut]).unwrap();
        let dest = t.join("r-truncated");
        let o = butter(&["restore", path(&truncated), path(&dest)]);
        assert!(!o.status.success(), "a stream cut at {cut} was restored");
        let err = stderr(&o);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            !dest.exists(),
            "cut at {cut}: {} was left: {err}",
            dest.display()
        );
    }
}

/// What a killed run left.
#[derive(Debug, Default)]
struct Left {
    /// A whole copy.
    whole: usize,
    /// Something, not openable.
    partial: usize,
    /// Nothing.
    nothing: usize,
}

/// Kills `args` after `delay`, then checks what is left in `dest`: a whole copy holding the
/// state after `want` transactions, or nothing the engine opens (which `butter remove`
/// clears).
fn kill_and_check(args: &[&str], dest: &Path, delay: Duration, want: u64, left: &mut Left) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_butter"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(delay);
    let _ = child.kill();
    child.wait().unwrap();
    if !dest.exists() {
        left.nothing += 1;
        return;
    }
    if dest.join("butter.id").exists() {
        assert!(butter(&["check", path(dest)]).status.success());
        assert_eq!(assert_committed_state(dest), want);
        assert!(butter(&["remove", path(dest)]).status.success());
        left.whole += 1;
        return;
    }
    left.partial += 1;
    let has_gen = std::fs::read_dir(dest)
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("gen-"));
    if has_gen {
        match Env::open_path(dest) {
            Err(Error::ForeignEntry { .. }) => {}
            other => panic!("a killed copy in {} was opened: {other:?}", dest.display()),
        }
    }
    if std::fs::read_dir(dest).is_ok_and(|mut d| d.next().is_some()) {
        let o = butter(&["remove", path(dest)]);
        assert!(o.status.success(), "remove after a kill: {}", stderr(&o));
    } else {
        // Killed before the marker: an empty directory, which is not a database.
        std::fs::remove_dir(dest).unwrap();
    }
    assert!(!dest.exists());
}

/// 40 runs of `args` killed after 0 to 39² × `unit` µs, each checked by [`kill_and_check`]
/// (the source holds transactions 1..=20).
fn kill_rounds(args: &[&str], dest: &Path, unit: u64) -> Left {
    let mut left = Left::default();
    for step in 0..40u64 {
        let delay = Duration::from_micros(step * step * unit);
        kill_and_check(args, dest, delay, 20, &mut left);
    }
    left
}

#[test]
fn a_killed_backup_or_restore_leaves_nothing_the_engine_adopts() {
    let Some((t, db)) = test_db("butter_kill", 20) else {
        return;
    };
    let dest = t.join("dest");
    let left = kill_rounds(&["backup", path(&db), path(&dest)], &dest, 80);
    eprintln!("backup killed: {left:?}");
    assert!(left.partial > 0, "no kill fell inside a backup: {left:?}");
    let copy = t.join("copy");
    assert!(butter(&["backup", path(&db), path(&copy)]).status.success());
    let left = kill_rounds(&["restore", path(&copy), path(&dest)], &dest, 80);
    eprintln!("restore from a copy killed: {left:?}");
    // A compacting copy killed at any moment: its scratch database goes with the rest.
    let left = kill_rounds(&["backup", "--compact", path(&db), path(&dest)], &dest, 120);
    eprintln!("backup --compact killed: {left:?}");
    assert!(
        left.partial > 0,
        "no kill fell inside a compacting copy: {left:?}"
    );
    // A plain copy killed at any moment: restored whole, or refused (its list is written last).
    let plain = t.join("plain");
    let (mut listed, mut unlisted) = (0, 0);
    for step in 0..40u64 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_butter"))
            .args(["backup", "--plain", path(&db), path(&plain)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(step * step * 20));
        let _ = child.kill();
        child.wait().unwrap();
        if !plain.exists() {
            continue;
        }
        let o = butter(&["restore", "--plain", path(&plain), path(&dest)]);
        if plain.join("butter-copy.manifest").exists() {
            assert!(o.status.success(), "{}", stderr(&o));
            assert_eq!(assert_committed_state(&dest), 20);
            assert!(butter(&["remove", path(&dest)]).status.success());
            listed += 1;
        } else {
            assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
            assert!(!dest.exists());
            unlisted += 1;
        }
        remove_tree(&plain);
    }
    eprintln!("backup --plain killed: {listed} whole, {unlisted} without their list");
    // A plain restore killed at any moment.
    assert!(butter(&["backup", "--plain", path(&db), path(&plain)])
        .status
        .success());
    let left = kill_rounds(
        &["restore", "--plain", path(&plain), path(&dest)],
        &dest,
        80,
    );
    eprintln!("restore --plain killed: {left:?}");
    assert!(
        left.partial > 0,
        "no kill fell inside a plain restore: {left:?}"
    );
    if butter_test_support::is_root() {
        let stream = t.join("s.stream");
        let c2 = t.join("c2");
        let args = ["backup", path(&db), path(&c2), "--stream", path(&stream)];
        assert!(butter(&args).status.success());
        let left = kill_rounds(&["restore", path(&stream), path(&dest)], &dest, 60);
        eprintln!("restore from a stream killed: {left:?}");
        assert!(left.partial > 0, "no kill fell inside a restore: {left:?}");
    }
}
