//! `slasher-bench` under hostile states and interruptions, through the built binary: signals
//! during `replay` (finding 4), leftovers and `slasher-bench clean` (4), empty or ambiguous
//! inputs (5), unusable output and database directories (6), a gzip bomb (7), and how errors
//! are printed and recorded (9).
//!
//! Tests that need btrfs read the directory from `BUTTER_BTRFS_DIR`; without it they print a
//! loud SKIP, except under `CI=true`, where they fail. Tests that run as an unprivileged user
//! (uid 65534, through `setpriv`) need root and skip loudly otherwise.

use serde_json::Value;
use slasher_adapters::DatabaseDirGuard;
use slasher_bench::fixtures::file::{FixtureReader, FixtureWriter};
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_slasher-bench");
const NOBODY: u32 = 65534;

fn btrfs_dir(test: &str) -> Option<PathBuf> {
    butter_test_support::btrfs_base(test)
}

use butter_test_support::is_root;

/// Whether this test can run commands as uid 65534; prints a SKIP line if not.
fn can_run_as_nobody(test: &str) -> bool {
    let ok = is_root() && Command::new("setpriv").arg("--version").output().is_ok();
    if !ok {
        butter_test_support::skip(test, "needs root and setpriv (util-linux)");
    }
    ok
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(name)
}

/// One response file of the mainnet sample committed in `data/`.
fn sample_file(kind: &str, slot: u64) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../data/mainnet-merge-2022")
        .join(format!("{kind}/{slot}.json.gz"));
    assert!(
        path.is_file(),
        "the mainnet sample file {} is missing",
        path.display()
    );
    path
}

fn p(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// A scratch directory on the real disk (not tmpfs), reachable by every user.
fn scratch(prefix: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("scratch dir");
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod scratch");
    dir
}

/// A scratch directory on btrfs, removed with every database in it, read-only snapshots
/// included, when the test ends or fails.
fn btrfs_scratch(root: &Path, prefix: &str) -> DatabaseDirGuard {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(root)
        .expect("scratch dir on btrfs");
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod scratch");
    DatabaseDirGuard::new(dir.keep())
}

/// The start of a two-user test: a scratch directory on btrfs (see [`btrfs_scratch`]), or
/// `None` (after a SKIP line outside CI) without a btrfs directory or a second user.
fn scratch_for_two_users(test: &str, prefix: &str) -> Option<DatabaseDirGuard> {
    let root = btrfs_dir(test)?;
    if !can_run_as_nobody(test) {
        return None;
    }
    Some(btrfs_scratch(&root, prefix))
}

fn show(what: &str, out: &Output) {
    eprintln!(
        "$ {what}\n--- status {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn run_cmd(mut cmd: Command) -> Output {
    let what = format!("{cmd:?}");
    let out = cmd.output().expect("runs slasher-bench");
    show(&what, &out);
    out
}

fn bench(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("SLASHER_BENCH_BACKTRACE")
        .stdin(Stdio::null());
    cmd
}

fn run(args: &[&str]) -> Output {
    run_cmd(bench(args))
}

/// `program` to run as uid/gid 65534 without supplementary groups (add its arguments).
fn as_nobody(program: &str) -> Command {
    butter_test_support::as_user(NOBODY, program)
}

/// `slasher-bench ARGS` as uid/gid 65534 without supplementary groups.
fn run_as_nobody(args: &[&str]) -> Output {
    let mut cmd = as_nobody(BIN);
    cmd.args(args);
    run_cmd(cmd)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn read_json(path: &Path) -> Value {
    let bytes = fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_slice(&bytes).expect("report.json parses")
}

/// Names in `dir` that start with `slasher-bench-` (the databases replay makes).
fn databases_in(dir: &Path) -> Vec<String> {
    match fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("slasher-bench-"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// `(pid, state, ppid)` of every process in /proc.
fn processes() -> Vec<(u32, char, u32)> {
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc").expect("list /proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
        let Some(rest) = stat.rfind(')').and_then(|i| stat.get(i + 1..)) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().and_then(|s| s.chars().next()).unwrap_or('?');
        let ppid = fields.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        out.push((pid, state, ppid));
    }
    out
}

fn children_of(parent: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|(_, _, ppid)| *ppid == parent)
        .map(|(pid, _, _)| pid)
        .collect()
}

/// Whether `pid` is a running (not zombie) process.
fn alive(pid: u32) -> bool {
    processes()
        .into_iter()
        .any(|(p, state, _)| p == pid && state != 'Z')
}

fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out after {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_exit(child: &mut Child, limit: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("slasher-bench did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The newest read-only generation (`gen-N` snapshot) of the butter database under `db_root`
/// (0 if there is none).
fn butter_generation(db_root: &Path) -> u64 {
    databases_in(db_root)
        .iter()
        .filter(|n| n.starts_with("slasher-bench-butter-"))
        .filter_map(|n| fs::read_dir(db_root.join(n)).ok())
        .flat_map(|rd| rd.filter_map(|e| e.ok()))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix("gen-")?.parse::<u64>().ok()
        })
        .max()
        .unwrap_or(0)
}

/// Start a replay of the tiny fixture (butter, then lmdb) and wait until the butter child has
/// committed a few read-only snapshots. Returns the parent and its child's pid.
fn start_replay_and_wait_for_snapshots(work: &Path) -> (Child, u32) {
    let log = fs::File::create(work.join("stderr.txt")).expect("log file");
    let mut parent = bench(&[
        "replay",
        "--fixture",
        p(&fixture("synthetic-tiny.fixture")),
        "--backends",
        "butter,lmdb",
        "--db-dir",
        p(&work.join("db")),
        "--out",
        p(&work.join("out")),
        "--no-progress",
    ])
    .stdout(Stdio::null())
    .stderr(log)
    .spawn()
    .expect("start replay");
    let pid = parent.id();
    let db = work.join("db");
    let mut child = None;
    wait_until(
        Duration::from_secs(120),
        "the butter child to commit 3 snapshots",
        || {
            if let Ok(Some(status)) = parent.try_wait() {
                panic!("replay ended early ({status}) before it could be interrupted");
            }
            if child.is_none() {
                child = children_of(pid).first().copied();
            }
            child.is_some() && butter_generation(&db) >= 3
        },
    );
    (parent, child.expect("a child was seen"))
}

fn log_of(work: &Path) -> String {
    let log = fs::read_to_string(work.join("stderr.txt")).unwrap_or_default();
    eprintln!("--- replay stderr\n{log}");
    log
}

#[test]
fn finding4_signal_during_replay_stops_children_removes_databases_writes_partial_report() {
    let test = "finding4_signal_during_replay";
    let Some(root) = btrfs_dir(test) else { return };
    for signal in ["INT", "TERM"] {
        let work = btrfs_scratch(&root, "hostile-signal-");
        let (mut parent, child) = start_replay_and_wait_for_snapshots(work.path());
        let descendants: Vec<u32> = std::iter::once(child).chain(children_of(child)).collect();
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(parent.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success());
        let status = wait_exit(&mut parent, Duration::from_secs(60));
        let log = log_of(work.path());
        assert!(!status.success(), "SIG{signal}: replay exited successfully");
        let code = if signal == "INT" { 130 } else { 143 };
        assert_eq!(status.code(), Some(code), "SIG{signal}: exit status");
        wait_until(
            Duration::from_secs(10),
            "every child of the interrupted replay to be gone",
            || descendants.iter().all(|pid| !alive(*pid)),
        );
        let left = databases_in(&work.path().join("db"));
        assert!(
            left.is_empty(),
            "SIG{signal}: databases left behind: {left:?}"
        );

        let report = read_json(&work.path().join("out/report.json"));
        let run = &report["runs"][0];
        assert_eq!(
            run["interrupted"],
            Value::Bool(true),
            "SIG{signal}: {run:#}"
        );
        let rows = run["backends"].as_array().expect("backends array");
        assert_eq!(rows.len(), 1, "only butter had started: {rows:#?}");
        let done = rows[0]["batches"].as_array().expect("batches").len();
        assert!(
            (1..128).contains(&done),
            "SIG{signal}: the partial row holds {done} batches"
        );
        let md = fs::read_to_string(work.path().join("out/report.md")).expect("report.md");
        assert!(md.contains("INTERRUPTED"), "report.md is not marked:\n{md}");
        assert!(
            md.contains(&format!("{done} batches")),
            "report.md does not say how many batches were done"
        );
        assert!(
            log.contains("interrupted"),
            "the parent does not say it was interrupted"
        );
    }
}

#[test]
fn finding4_children_die_with_their_parent() {
    let test = "finding4_children_die_with_their_parent";
    let Some(root) = btrfs_dir(test) else { return };
    let work = btrfs_scratch(&root, "hostile-pdeath-");
    let (mut parent, child) = start_replay_and_wait_for_snapshots(work.path());
    parent.kill().expect("SIGKILL the parent");
    let _ = parent.wait();
    wait_until(
        Duration::from_secs(30),
        "the child to exit after its parent was killed",
        || !alive(child),
    );
    let db = work.path().join("db");
    wait_until(
        Duration::from_secs(10),
        "the orphaned child's database to be removed",
        || databases_in(&db).is_empty(),
    );
}

/// Issue 57, item 3: a child in a batch that runs for minutes (`--validator-chunk-size
/// 4294967295`) whose parent is SIGKILLed must end within seconds, removing its database and
/// its batch stream, not run on as an orphan.
#[test]
fn child_in_a_long_batch_dies_with_its_parent() {
    let test = "child_in_a_long_batch_dies_with_its_parent";
    let Some(root) = btrfs_dir(test) else { return };
    let work = btrfs_scratch(&root, "hostile-longbatch-");
    let (db, out) = (work.path().join("db"), work.path().join("out"));
    let args = butter_replay(&db, &out, &["--validator-chunk-size", "4294967295"]);
    let log = fs::File::create(work.path().join("stderr.txt")).expect("log file");
    let mut parent = bench(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start replay");
    // The child's batch stream has no name in --out (an unnamed file it was handed): the
    // child is in its first batch once its database exists and it has used some CPU.
    let mut child = None;
    wait_until(
        Duration::from_secs(120),
        "the butter child to open its database and start its first batch",
        || {
            if let Ok(Some(status)) = parent.try_wait() {
                panic!("replay ended early ({status})");
            }
            child = children_of(parent.id()).into_iter().find(|pid| {
                fs::read_to_string(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.contains("--child-result"))
            });
            child.is_some()
                && !databases_in(&db).is_empty()
                && child.is_some_and(|pid| cpu_ticks(pid) >= 300)
        },
    );
    // Well into the first batch, which takes minutes with this chunk size. Short-lived
    // probes come and go: the replay child is the one still there.
    std::thread::sleep(Duration::from_secs(2));
    let child = children_of(parent.id())
        .into_iter()
        .find(|&pid| alive(pid))
        .or(child)
        .expect("a child was seen");
    assert!(alive(child), "the child ended before its parent was killed");
    assert!(
        !databases_in(&db).is_empty(),
        "no database while the batch runs"
    );
    parent.kill().expect("SIGKILL the parent");
    let _ = parent.wait();
    let killed = Instant::now();
    while alive(child) && killed.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    if alive(child) {
        // Not left running at full CPU after the test.
        signal(child, "KILL");
        panic!("the orphaned child in a long batch still ran 10 s after its parent was killed");
    }
    eprintln!(
        "child gone {:.1} s after its parent",
        killed.elapsed().as_secs_f64()
    );
    let _ = log_of(work.path());
    assert!(databases_in(&db).is_empty(), "the orphan left its database");
    let left: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".child-"))
        .collect();
    assert!(left.is_empty(), "the orphan left {left:?} in --out");
}

#[test]
fn finding4_clean_removes_leftover_snapshots_as_their_unprivileged_owner() {
    let test = "finding4_clean_removes_leftover_snapshots";
    let Some(work) = scratch_for_two_users(test, "hostile-clean-") else {
        return;
    };
    let db = work.path().join("db");
    let out = work.path().join("out");
    for dir in [&db, &out] {
        fs::create_dir(dir).unwrap();
        std::os::unix::fs::chown(dir, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let made = run_as_nobody(&[
        "replay",
        "--fixture",
        p(&fixture("synthetic-tiny.fixture")),
        "--backends",
        "butter",
        "--batches",
        "3",
        "--keep-db",
        "--no-progress",
        "--db-dir",
        p(&db),
        "--out",
        p(&out),
    ]);
    assert!(made.status.success(), "the replay as uid {NOBODY} failed");
    assert!(
        butter_generation(&db) >= 1,
        "no read-only snapshot was kept"
    );
    // Neighbours that clean must not touch: somebody's directory, and one that is named like a
    // database but was not made by replay.
    let precious = db.join("precious");
    fs::create_dir(&precious).unwrap();
    fs::write(precious.join("data"), b"keep me").unwrap();
    let lookalike = db.join("slasher-bench-lmdb-1-2");
    fs::create_dir(&lookalike).unwrap();
    for dir in [&precious, &lookalike] {
        std::os::unix::fs::chown(dir, Some(NOBODY), Some(NOBODY)).unwrap();
    }

    // Nothing to clean there: said so, exit 0, nothing touched.
    let nothing = run_as_nobody(&["clean", p(&precious)]);
    assert!(nothing.status.success(), "clean of a foreign dir failed");
    assert!(
        String::from_utf8_lossy(&nothing.stdout).contains("nothing to clean"),
        "no clear answer"
    );
    assert!(precious.join("data").exists());

    let cleaned = run_as_nobody(&["clean", p(&db)]);
    assert!(cleaned.status.success(), "clean as uid {NOBODY} failed");
    let left = databases_in(&db);
    assert_eq!(
        left,
        ["slasher-bench-lmdb-1-2"],
        "clean left a database or removed the look-alike"
    );
    assert!(
        precious.join("data").exists(),
        "clean removed a foreign dir"
    );
}

#[test]
fn finding5_empty_backends_and_unmatched_or_duplicate_import_files_are_errors() {
    let work = scratch("hostile-names-");
    let w = work.path();
    let out = run(&[
        "replay",
        "--fixture",
        p(&fixture("synthetic-tiny.fixture")),
        "--backends",
        "",
        "--db-dir",
        p(&w.join("db")),
        "--out",
        p(&w.join("out")),
    ]);
    assert!(
        !out.status.success(),
        "--backends \"\" ran nothing and succeeded"
    );
    assert!(
        stderr(&out).contains("--backends"),
        "the error does not name --backends"
    );

    let import = |att: &Path, hdr: &Path, fixture: &Path| {
        run(&[
            "import-beacon-api",
            "--attestations",
            p(att),
            "--headers",
            p(hdr),
            "--out",
            p(fixture),
        ])
    };
    let dirs = |name: &str| {
        let att = w.join(name).join("attestations");
        let hdr = w.join(name).join("headers");
        fs::create_dir_all(&att).unwrap();
        fs::create_dir_all(&hdr).unwrap();
        (att, hdr)
    };

    // A zero-padded slot: not a name the importer reads.
    let (att, hdr) = dirs("padded");
    fs::copy(
        sample_file("attestations", 4699968),
        att.join("04699968.json.gz"),
    )
    .unwrap();
    fs::copy(
        sample_file("headers", 4699968),
        hdr.join("04699968.json.gz"),
    )
    .unwrap();
    let out = import(&att, &hdr, &w.join("padded.fixture"));
    assert!(
        !out.status.success(),
        "zero-padded names gave an empty fixture"
    );
    assert!(
        stderr(&out).contains("04699968.json.gz"),
        "the error does not list the file that did not match"
    );

    // The same slot twice.
    let (att, hdr) = dirs("dup");
    fs::copy(
        sample_file("attestations", 4699968),
        att.join("4699968.json.gz"),
    )
    .unwrap();
    fs::write(att.join("4699968.json"), b"null").unwrap();
    fs::copy(sample_file("headers", 4699968), hdr.join("4699968.json.gz")).unwrap();
    let out = import(&att, &hdr, &w.join("dup.fixture"));
    assert!(
        !out.status.success(),
        "N.json beside N.json.gz was accepted"
    );
    let err = stderr(&out);
    assert!(
        err.contains("4699968.json ")
            || err.contains("4699968.json\n")
            || err.contains("4699968.json,"),
        "the plain duplicate is not named: {err}"
    );
    assert!(
        err.contains("4699968.json.gz"),
        "the gzip duplicate is not named"
    );

    // Well-named files that hold no block: zero batches.
    let (att, hdr) = dirs("missed");
    fs::write(att.join("4699968.json"), b"null").unwrap();
    fs::write(hdr.join("4699968.json"), b"null").unwrap();
    let target = w.join("missed.fixture");
    let out = import(&att, &hdr, &target);
    assert!(
        !out.status.success(),
        "a fixture with 0 batches was written"
    );
    assert!(
        stderr(&out).contains("0 batches"),
        "the error does not say 0 batches"
    );

    let help = run(&["import-beacon-api", "--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        text.contains("leading zero"),
        "--help does not document the file-name rules"
    );
}

#[test]
fn finding6_unusable_out_or_later_db_dir_is_refused_before_any_batch() {
    let work = scratch("hostile-dirs-");
    let w = work.path();
    let tiny = fixture("synthetic-tiny.fixture");

    // The second backend's database directory cannot be created (its parent is a file).
    let file = w.join("a-file");
    fs::write(&file, b"").unwrap();
    let bad = file.join("sub");
    let ok = w.join("ok");
    let out = run(&[
        "replay",
        "--fixture",
        p(&tiny),
        "--backends",
        "lmdb,redb",
        "--batches",
        "2",
        "--no-progress",
        "--db-dir",
        &format!("lmdb={},redb={}", p(&ok), p(&bad)),
        "--out",
        p(&w.join("out1")),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        !err.contains("== lmdb"),
        "lmdb replayed before the bad redb dir was found"
    );
    assert!(
        err.contains(p(&bad)),
        "the error does not name the bad directory"
    );
    assert!(databases_in(&ok).is_empty());

    // A read-only output directory, for an unprivileged user.
    if !can_run_as_nobody("finding6 (read-only --out)") {
        return;
    }
    let ro = w.join("ro-out");
    fs::create_dir(&ro).unwrap();
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o555)).unwrap();
    let db = w.join("nobody-db");
    fs::create_dir(&db).unwrap();
    std::os::unix::fs::chown(&db, Some(NOBODY), Some(NOBODY)).unwrap();
    let out = run_as_nobody(&[
        "replay",
        "--fixture",
        p(&tiny),
        "--backends",
        "lmdb",
        "--batches",
        "2",
        "--no-progress",
        "--db-dir",
        p(&db),
        "--out",
        p(&ro),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        !err.contains("== lmdb"),
        "lmdb replayed before --out was found read-only"
    );
    assert!(err.contains(p(&ro)), "the error does not name --out");
    assert!(err.contains("not writable"), "the error does not say why");
}

#[test]
fn finding7_inflated_input_is_capped() {
    let work = scratch("hostile-gzip-");
    let w = work.path();
    let att = w.join("attestations");
    let hdr = w.join("headers");
    fs::create_dir_all(&att).unwrap();
    fs::create_dir_all(&hdr).unwrap();
    // 65 MiB of JSON whitespace: about 65 KiB gzipped.
    let bomb = att.join("4699968.json.gz");
    let mut gz = flate2::write::GzEncoder::new(
        fs::File::create(&bomb).unwrap(),
        flate2::Compression::best(),
    );
    let block = vec![b' '; 1 << 20];
    for _ in 0..65 {
        gz.write_all(&block).unwrap();
    }
    gz.finish().unwrap();
    fs::copy(sample_file("headers", 4699968), hdr.join("4699968.json.gz")).unwrap();

    let err =
        slasher_bench::fixtures::beacon_api::read_body(&bomb).expect_err("the bomb was inflated");
    assert!(
        matches!(
            err,
            slasher_bench::fixtures::beacon_api::ApiFileError::TooLarge { ref path, limit }
                if path == &bomb && limit == slasher_bench::fixtures::beacon_api::MAX_INFLATED_BYTES
        ),
        "not the typed size error: {err:?}"
    );

    let out = run(&[
        "import-beacon-api",
        "--attestations",
        p(&att),
        "--headers",
        p(&hdr),
        "--out",
        p(&w.join("x.fixture")),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains(p(&bomb)), "the error does not name the file");
    assert!(err.contains("64 MiB"), "the error does not give the cap");
}

/// A copy of the tiny fixture whose slasher configuration no backend accepts
/// (`history_length` not a multiple of `chunk_size`): every child fails while opening.
fn fixture_with_bad_config(dir: &Path) -> PathBuf {
    let path = dir.join("bad-config.fixture");
    let reader = FixtureReader::open(fixture("synthetic-tiny.fixture")).expect("open tiny");
    let mut description = reader.manifest().description.clone();
    description.slasher_config.history_length = description.slasher_config.chunk_size * 3 + 1;
    let mut writer = FixtureWriter::create(&path).expect("create");
    for batch in reader.take(2) {
        writer.write_batch(&batch.expect("batch")).expect("write");
    }
    writer.finish(description).expect("finish");
    path
}

#[test]
fn finding9_errors_print_each_cause_once_plainly_and_failures_reach_the_report() {
    let work = scratch("hostile-errors-");
    let w = work.path();

    // Each cause once, no backtrace unless asked for.
    let missing = w.join("no-such.fixture");
    let mut cmd = bench(&["inspect", p(&missing)]);
    cmd.env("RUST_BACKTRACE", "1");
    let out = run_cmd(cmd);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert_eq!(
        err.matches("No such file or directory").count(),
        1,
        "a cause is printed more than once"
    );
    assert!(
        !err.to_lowercase().contains("backtrace"),
        "RUST_BACKTRACE gave a user error a backtrace"
    );
    let mut cmd = bench(&["inspect", p(&missing)]);
    cmd.env("SLASHER_BENCH_BACKTRACE", "1");
    let out = run_cmd(cmd);
    assert!(
        stderr(&out).to_lowercase().contains("backtrace"),
        "SLASHER_BENCH_BACKTRACE=1 gave no backtrace"
    );
    let out = run(&[
        "import-beacon-api",
        "--attestations",
        p(&w.join("none")),
        "--headers",
        p(&w.join("none")),
        "--out",
        p(&w.join("x.fixture")),
    ]);
    assert_eq!(stderr(&out).matches("No such file or directory").count(), 1);

    // Plain values.
    let out = run(&[
        "replay",
        "--fixture",
        p(&fixture("synthetic-tiny.fixture")),
        "--backends",
        "lmdb",
        "--batches",
        "0",
        "--db-dir",
        p(&w.join("db")),
        "--out",
        p(&w.join("out0")),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("--batches 0"),
        "--batches is not printed plainly"
    );
    assert!(!err.contains("Some("), "an Option is printed");

    // A bad magic says what it found, even in an empty file.
    let empty = w.join("empty.fixture");
    fs::write(&empty, b"").unwrap();
    let out = run(&["inspect", p(&empty)]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("magic"), "not the magic error");
    assert!(
        err.lines().all(|l| !l.trim_end().ends_with("found")),
        "`found` is followed by nothing"
    );
    assert!(
        err.contains("empty file"),
        "an empty file is not named as such"
    );

    // An invalid configuration (here the fixture's hint) is refused before any backend runs.
    let bad = fixture_with_bad_config(w);
    let out = run(&[
        "replay",
        "--fixture",
        p(&bad),
        "--backends",
        "lmdb",
        "--no-progress",
        "--db-dir",
        p(&w.join("db")),
        "--out",
        p(&w.join("out-refused")),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("must be a multiple of chunk_size"), "{err}");
    assert!(!err.contains("== lmdb"), "a backend started: {err}");

    // A failed backend's reason is in report.json and report.md: a map size beyond the
    // address space is refused by LMDB itself when the child opens it.
    let out = run(&[
        "replay",
        "--fixture",
        p(&fixture("synthetic-tiny.fixture")),
        "--backends",
        "lmdb",
        "--max-db-size",
        "9000000000",
        "--no-progress",
        "--db-dir",
        p(&w.join("db")),
        "--out",
        p(&w.join("out-failed")),
    ]);
    assert!(!out.status.success());
    let report = read_json(&w.join("out-failed/report.json"));
    let error = report["runs"][0]["failures"][0]["error"]
        .as_str()
        .expect("a failure row with an error")
        .to_owned();
    assert!(
        error.contains("does not fit in the address space"),
        "report.json lacks the child's reason: {error}"
    );
    let md = fs::read_to_string(w.join("out-failed/report.md")).expect("report.md");
    assert!(
        md.contains("does not fit in the address space"),
        "report.md lacks the child's reason"
    );
}

// ---- issue 47: shared directories and a second user ------------------------------------------

/// Every entry under `dir` (symlinks not followed): relative path, type, and a SHA-256 of each
/// file's content. Two listings are equal only if nothing was added, removed or changed.
fn tree_state(dir: &Path) -> Vec<String> {
    use sha2::{Digest, Sha256};
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        // A missing or unreadable directory is part of the state (no panic here, so a test
        // can resume a stopped process before it asserts).
        let entries = match fs::read_dir(&d) {
            Ok(rd) => rd,
            Err(e) => {
                out.push(format!("{} unreadable: {e}", d.display()));
                continue;
            }
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            let meta = fs::symlink_metadata(&path).expect("lstat");
            if meta.is_dir() {
                out.push(format!("{rel}/"));
                stack.push(path);
            } else if meta.file_type().is_symlink() {
                out.push(format!(
                    "{rel} -> {}",
                    fs::read_link(&path).unwrap().display()
                ));
            } else {
                let digest = Sha256::digest(fs::read(&path).expect("read"));
                out.push(format!("{rel} {}", hex::encode(digest)));
            }
        }
    }
    out.sort();
    out
}

/// `program ARGS` as uid/gid 65534 (the other user).
fn other_user(program: &str, args: &[&str]) -> Output {
    let mut cmd = as_nobody(program);
    cmd.args(args);
    run_cmd(cmd)
}

/// The arguments of a replay of the tiny fixture on butter into `db` and `out`, then `extra`.
fn butter_replay(db: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    let fixture = fixture("synthetic-tiny.fixture");
    let mut args = vec![
        "replay",
        "--fixture",
        p(&fixture),
        "--backends",
        "butter",
        "--no-progress",
        "--db-dir",
        p(db),
        "--out",
        p(out),
    ];
    args.extend_from_slice(extra);
    args.into_iter().map(String::from).collect()
}

/// A butter database of this user's kept by a replay in `dir`: read-only snapshots and files
/// another user must not be able to get deleted or changed. Returns its directory.
fn kept_butter_database(dir: &Path, out: &Path) -> PathBuf {
    let args = butter_replay(dir, out, &["--batches", "3", "--keep-db"]);
    let made = run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(made.status.success(), "the first replay failed");
    let name = databases_in(dir).pop().expect("a kept database");
    dir.join(name)
}

/// Waits until the replay `parent` has a child that committed two snapshots of a new butter
/// database in `db_root` (besides any database that was there before), and returns the
/// child's pid.
fn wait_for_butter_child(parent: &mut Child, db_root: &Path) -> u32 {
    let before = databases_in(db_root);
    let mut child = None;
    wait_until(
        Duration::from_secs(120),
        "the butter child to commit",
        || {
            if let Ok(Some(status)) = parent.try_wait() {
                panic!("replay ended early ({status})");
            }
            // The newest generation's number, not how many there are: each commit deletes
            // the generation before it, so two are on disk only for a moment.
            let committed = databases_in(db_root)
                .iter()
                .filter(|n| !before.contains(n))
                .filter_map(|n| fs::read_dir(db_root.join(n)).ok())
                .flat_map(|rd| rd.filter_map(|e| e.ok()))
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.strip_prefix("gen-")?.parse::<u64>().ok()
                })
                .max()
                .unwrap_or(0);
            // Other short-lived children (probes) come and go; the replay child stays.
            child = children_of(parent.id()).first().copied();
            child.is_some() && committed >= 2
        },
    );
    child.expect("a child was seen")
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .expect("kill");
    assert!(status.success(), "kill -{name} {pid}");
}

/// Hole 1: during user A's replay, user B renames the run's database directory away and puts
/// a symlink to another database of A's in its place. The run must neither write into nor
/// delete through the symlink. Since issue 57 a --db-dir that B can write is refused before
/// anything is made in it, so B does this one level up: the --db-dir is A's own, in a
/// directory B can write; B renames it and makes a directory of B's in its place, holding the
/// symlink under the run's database name. The run reaches its database through handles only,
/// so it finishes and removes its database where it made it. (The child's side of a swapped
/// database directory: `child_works_in_the_handed_down_directory_not_the_path`.)
#[test]
fn swapped_database_directory_is_not_followed() {
    let test = "swapped_database_directory";
    let Some(work) = scratch_for_two_users(test, "hostile-swap-") else {
        return;
    };
    let w = work.path();
    let private = w.join("private");
    fs::create_dir(&private).unwrap();
    let victim = kept_butter_database(&private, &w.join("out0"));
    let before = tree_state(&victim);
    assert!(
        before.iter().any(|l| l.starts_with("gen-")),
        "the victim holds no snapshot: {before:?}"
    );
    // The shared directory: B may write it (no sticky bit).
    let shared = w.join("sb");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o777)).unwrap();
    // Issue 57: as --db-dir itself it is refused, nothing made in it.
    let refused = run(
        &butter_replay(&shared, &w.join("out-refused"), &["--batches", "3"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(
        !refused.status.success(),
        "a --db-dir B can write was accepted"
    );
    assert!(
        stderr(&refused).contains("is refused") && stderr(&refused).contains("mode 777"),
        "no clear refusal: {}",
        stderr(&refused)
    );
    assert!(
        tree_state(&shared).is_empty(),
        "the refused --db-dir was written to"
    );
    let mine = shared.join("mine");
    fs::create_dir(&mine).unwrap();
    let log = fs::File::create(w.join("stderr.txt")).expect("log file");
    let args = butter_replay(&mine, &w.join("out"), &["--batches", "10"]);
    let mut a = bench(&args.iter().map(String::as_str).collect::<Vec<_>>())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start replay");
    let child = wait_for_butter_child(&mut a, &mine);
    // Hold the run still while B swaps its directory, so the swap lands mid-run.
    signal(child, "STOP");
    let name = databases_in(&mine).pop().expect("the run's database");
    let db = mine.join(&name);
    let moved = shared.join("moved-away");
    assert!(other_user("mv", &[p(&mine), p(&moved)]).status.success());
    assert!(other_user("mkdir", &[p(&mine)]).status.success());
    assert!(other_user("ln", &["-s", p(&victim), p(&db)])
        .status
        .success());
    signal(child, "CONT");
    let status = wait_exit(&mut a, Duration::from_secs(300));
    let log = log_of(w);

    assert_eq!(
        tree_state(&victim),
        before,
        "the other database changed through the swapped-in symlink"
    );
    assert!(
        fs::symlink_metadata(&db).unwrap().file_type().is_symlink(),
        "B's symlink was removed or replaced"
    );
    // The run holds its --db-dir open: it removed its database where it made it (now under
    // B's new name), through that handle, and so finished as usual.
    assert!(status.success(), "the run failed: {log}");
    assert!(
        databases_in(&moved).is_empty(),
        "the run's database was not removed where it was made"
    );
    fs::remove_file(&db).unwrap();
    fs::remove_dir(&mine).unwrap();
    slasher_bench::system::clean::remove_db_dir(&victim).expect("cleanup");
}

/// Hole 2: user B plants `report.md` in A's sticky, world-writable --out as a symlink to a
/// file of A's; A's replay must replace the symlink, not write through it. And an --out owned
/// by B, or writable by everyone without the sticky bit, is refused before anything runs.
#[test]
fn planted_report_symlink_is_replaced_not_followed() {
    let test = "planted_report_symlink";
    let Some(work) = scratch_for_two_users(test, "hostile-report-") else {
        return;
    };
    let w = work.path();
    let precious = w.join("precious.txt");
    fs::write(&precious, b"A's own notes\n").unwrap();
    let before = tree_state(w);
    assert_eq!(before.len(), 1);
    let out = w.join("out");
    fs::create_dir(&out).unwrap();
    fs::set_permissions(&out, fs::Permissions::from_mode(0o1777)).unwrap();
    let planted = out.join("report.md");
    assert!(other_user("ln", &["-s", p(&precious), p(&planted)])
        .status
        .success());
    let replay = |out: &Path| {
        let args = butter_replay(&w.join("db"), out, &["--batches", "3"]);
        run(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let done = replay(&out);
    assert!(done.status.success(), "the replay failed");
    assert_eq!(
        fs::read(&precious).unwrap(),
        b"A's own notes\n",
        "the report was written through B's symlink"
    );
    let meta = fs::symlink_metadata(&planted).unwrap();
    assert!(meta.is_file(), "report.md is not A's new file");
    assert!(fs::read_to_string(&planted).unwrap().contains("butter"));

    // Refused up front: an --out of B's, and one everybody can write without the sticky bit.
    let foreign = w.join("foreign-out");
    fs::create_dir(&foreign).unwrap();
    std::os::unix::fs::chown(&foreign, Some(NOBODY), Some(NOBODY)).unwrap();
    let open = w.join("open-out");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
    for (dir, why) in [(&foreign, "not by you"), (&open, "no sticky bit")] {
        let refused = replay(dir);
        assert!(
            !refused.status.success(),
            "--out {} was accepted",
            dir.display()
        );
        assert!(
            stderr(&refused).contains(why),
            "no clear refusal for {}",
            dir.display()
        );
        assert!(
            tree_state(dir).is_empty(),
            "{} was written to",
            dir.display()
        );
    }
    assert!(
        tree_state(w).contains(&before[0]),
        "precious.txt changed: {before:?}"
    );
}

/// Issue 57, item 1: the replay's child is handed the database directory as an inherited
/// descriptor. Here the parent's side is played by the test: it opens the run's directory,
/// then user B (who can write the shared --db-dir) renames it away and puts a symlink to a
/// canary directory of A's in its place, and only then does the child start. The child must
/// build its database in the directory it was handed (now `moved-away`), and the canary must
/// be unchanged.
#[test]
fn child_works_in_the_handed_down_directory_not_the_path() {
    use std::os::fd::AsRawFd as _;
    let test = "child_works_in_the_handed_down_directory";
    let Some(work) = scratch_for_two_users(test, "hostile-dbfd-") else {
        return;
    };
    let w = work.path();
    let canary = w.join("canary");
    fs::create_dir(&canary).unwrap();
    fs::write(canary.join("notes.txt"), b"A's canary\n").unwrap();
    let before = tree_state(&canary);
    let shared = w.join("sb");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o777)).unwrap();
    let db = shared.join("slasher-bench-butter-1-1");
    slasher_bench::system::clean::create_db_dir(&db, slasher_adapters::DatabaseBackend::Butter)
        .expect("the run's database directory");
    let handle = fs::File::open(&db).expect("a handle on it");
    rustix::io::fcntl_setfd(&handle, rustix::io::FdFlags::empty()).unwrap();
    let moved = shared.join("moved-away");
    assert!(other_user("mv", &[p(&db), p(&moved)]).status.success());
    assert!(other_user("ln", &["-s", p(&canary), p(&db)])
        .status
        .success());
    let out = w.join("out");
    fs::create_dir(&out).unwrap();
    let fd = handle.as_raw_fd().to_string();
    let result = out.join(".child-butter-test.json");
    let done = run(&[
        "replay",
        "--fixture",
        p(&fixture("synthetic-tiny.fixture")),
        "--backends",
        "butter",
        "--no-progress",
        "--batches",
        "3",
        "--db-dir",
        p(&db),
        "--db-dir-fd",
        &fd,
        "--child-result",
        p(&result),
    ]);
    drop(handle);
    assert_eq!(
        tree_state(&canary),
        before,
        "the child wrote into B's symlink target"
    );
    assert!(done.status.success(), "the child failed: {}", stderr(&done));
    let made: Vec<String> = fs::read_dir(&moved)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        made.iter().any(|n| n == "butter.id"),
        "the database is not in the directory the child was handed: {made:?}"
    );
    fs::remove_file(&db).unwrap();
    let _ = slasher_bench::system::clean::remove_db_dir(&moved);
}

/// Issue 57, item 2: user B, who can write A's sticky --out, keeps planting
/// `.child-butter.json.batches` (the stream's old, predictable name) as a symlink to a file of
/// A's during A's replay. The stream must never be created through it (A's file unchanged),
/// and B's symlink is B's: not removed. A group-writable --out (B in the group) is refused
/// before anything is created in it.
#[test]
fn planted_stream_symlink_is_not_followed() {
    let test = "planted_stream_symlink";
    let Some(work) = scratch_for_two_users(test, "hostile-stream-") else {
        return;
    };
    let w = work.path();
    let precious = w.join("precious.txt");
    fs::write(&precious, b"A's own notes\n").unwrap();
    let out = w.join("out");
    fs::create_dir(&out).unwrap();
    fs::set_permissions(&out, fs::Permissions::from_mode(0o1777)).unwrap();
    let planted = out.join(".child-butter.json.batches");
    let script = format!(
        "while :; do ln -s {} {} 2>/dev/null; done",
        p(&precious),
        p(&planted)
    );
    let mut b = as_nobody("sh")
        .args(["-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start B's loop");
    wait_until(Duration::from_secs(10), "B's first symlink", || {
        fs::symlink_metadata(&planted).is_ok()
    });
    let args = butter_replay(&w.join("db"), &out, &["--batches", "3"]);
    let done = run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let _ = b.kill();
    let _ = b.wait();
    assert_eq!(
        fs::read_to_string(&precious).unwrap(),
        "A's own notes\n",
        "the batch stream was written through B's symlink"
    );
    assert!(done.status.success(), "the replay failed");
    assert!(
        fs::symlink_metadata(&planted).is_ok_and(|m| m.file_type().is_symlink()),
        "B's symlink was removed or replaced"
    );
    let left: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".child-") && n != ".child-butter.json.batches")
        .collect();
    assert!(left.is_empty(), "the run left {left:?} in --out");

    // Group-writable, B's group, no sticky bit: refused, nothing created in it.
    let group = w.join("group-out");
    fs::create_dir(&group).unwrap();
    std::os::unix::fs::chown(&group, None, Some(NOBODY)).unwrap();
    fs::set_permissions(&group, fs::Permissions::from_mode(0o770)).unwrap();
    let refused = run(&butter_replay(&w.join("db"), &group, &["--batches", "3"])
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>());
    assert!(
        !refused.status.success(),
        "a group-writable --out was accepted"
    );
    assert!(
        stderr(&refused).contains("writable by other users"),
        "no clear refusal: {}",
        stderr(&refused)
    );
    assert!(
        tree_state(&group).is_empty(),
        "the refused --out was written to"
    );
}

/// Hole 3: `clean DIR` (as root) while another user's replay writes a database in DIR must
/// skip (and name) that database, and the replay must finish. A leftover of a finished run is
/// still removed, and a directory with nothing to clean is not an error.
#[test]
fn clean_skips_a_live_runs_database() {
    let test = "clean_skips_a_live_run";
    let Some(work) = scratch_for_two_users(test, "hostile-cleanlive-") else {
        return;
    };
    let w = work.path();
    let db = w.join("db");
    fs::create_dir(&db).unwrap();
    // A finished run's leftover, which clean must still remove.
    let leftover = kept_butter_database(&db, &w.join("out0"));
    let out = w.join("out");
    fs::create_dir(&out).unwrap();
    for dir in [&db, &out] {
        std::os::unix::fs::chown(dir, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let log = fs::File::create(w.join("stderr.txt")).expect("log file");
    let mut a = as_nobody(BIN)
        .args(butter_replay(&db, &out, &["--batches", "10"]))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start replay");
    let child = wait_for_butter_child(&mut a, &db);
    signal(child, "STOP");
    let live: Vec<String> = databases_in(&db)
        .into_iter()
        .filter(|n| db.join(n) != leftover)
        .collect();
    let [live] = live.as_slice() else {
        panic!("not one live database: {live:?}")
    };
    let live_before = tree_state(&db.join(live));
    let cleaned = run(&["clean", p(&db)]);
    let live_after = tree_state(&db.join(live));
    signal(child, "CONT");
    let status = wait_exit(&mut a, Duration::from_secs(300));
    let log = log_of(w);
    assert!(cleaned.status.success(), "clean failed");
    assert_eq!(
        live_before, live_after,
        "clean touched the live run's database"
    );
    assert!(
        String::from_utf8_lossy(&cleaned.stdout)
            .contains(&format!("skipped {}", p(&db.join(live)))),
        "clean did not name the database it skipped"
    );
    assert!(!leftover.exists(), "clean left the finished run's database");
    assert!(status.success(), "the replay failed after clean: {log}");
    assert!(databases_in(&db).is_empty(), "the replay left its database");

    let nothing = run(&["clean", p(&db)]);
    assert!(
        nothing.status.success(),
        "clean of an empty directory failed"
    );
    assert!(String::from_utf8_lossy(&nothing.stdout).contains("nothing to clean"));
}

/// Whether signal `number` is pending for process `pid` (its thread-group or own pending set).
fn signal_pending(pid: u32, number: u32) -> bool {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .filter(|l| l.starts_with("ShdPnd:") || l.starts_with("SigPnd:"))
        .filter_map(|l| u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok())
        .any(|mask| mask & (1 << (number - 1)) != 0)
}

/// CPU time process `pid` has used (user + system), in clock ticks (`/proc/PID/stat`).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(rest) = stat.rfind(')').and_then(|i| stat.get(i + 1..)) else {
        return 0;
    };
    // After the command: state is field 3, utime field 14, stime field 15.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    field(14).unwrap_or(0) + field(15).unwrap_or(0)
}

/// Issue 47: a child stuck in a batch that never ends (a validator chunk size of 2^32 - 1)
/// takes the first SIGTERM as a request to stop after its batch, and ends at the second one.
#[test]
fn second_signal_ends_a_stuck_child() {
    let work = scratch("hostile-stuck-");
    let w = work.path();
    let log = fs::File::create(w.join("stderr.txt")).expect("log file");
    let mut parent = bench(&[
        "replay",
        "--fixture",
        p(&fixture("synthetic-tiny.fixture")),
        "--backends",
        "lmdb",
        "--validator-chunk-size",
        "4294967295",
        "--no-progress",
        "--db-dir",
        p(&w.join("db")),
        "--out",
        p(&w.join("out")),
    ])
    .stdout(Stdio::null())
    .stderr(log)
    .spawn()
    .expect("start replay");
    let db = w.join("db");
    let mut child = None;
    // The child opens its database after installing its handlers, and is in its endless
    // first batch once it has used a few seconds of CPU (a batch of the tiny fixture takes
    // milliseconds otherwise).
    wait_until(
        Duration::from_secs(120),
        "the replay child to be stuck in a batch",
        || {
            child = children_of(parent.id()).into_iter().find(|pid| {
                fs::read_to_string(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.contains("--child-result"))
            });
            child.is_some()
                && databases_in(&db)
                    .iter()
                    .any(|n| db.join(n).join("data.mdb").exists())
                && child.is_some_and(|pid| cpu_ticks(pid) >= 300)
        },
    );
    let child = child.unwrap();
    const SIGTERM: u32 = 15;
    signal(child, "TERM");
    wait_until(
        Duration::from_secs(30),
        "the first SIGTERM to be taken",
        || !signal_pending(child, SIGTERM),
    );
    assert!(
        alive(child),
        "the first SIGTERM ended the stuck child at once"
    );
    signal(child, "TERM");
    wait_until(
        Duration::from_secs(30),
        "the second SIGTERM to end the child",
        || !alive(child),
    );
    let status = wait_exit(&mut parent, Duration::from_secs(60));
    let log = log_of(w);
    assert!(!status.success(), "the run passed with a killed child");
    assert!(log.contains("FAILED"), "the child's end is not reported");
}

/// Issue 57 (smaller item): a run ended by a second SIGTERM (the parent ends at once, its
/// child, stuck in a batch, gets the parent-death SIGTERM as its second signal and ends at
/// once too) leaves none of the child's files in --out: they have no name there (unnamed
/// files the parent hands down). Before, the child's batch stream was left.
#[test]
fn interrupted_run_leaves_no_child_files_in_out() {
    let work = scratch("hostile-leftover-");
    let w = work.path();
    let out = w.join("out");
    let log = fs::File::create(w.join("stderr.txt")).expect("log file");
    let mut parent = bench(&[
        "replay",
        "--fixture",
        p(&fixture("synthetic-tiny.fixture")),
        "--backends",
        "lmdb",
        "--validator-chunk-size",
        "4294967295",
        "--no-progress",
        "--db-dir",
        p(&w.join("db")),
        "--out",
        p(&out),
    ])
    .stdout(Stdio::null())
    .stderr(log)
    .spawn()
    .expect("start replay");
    let db = w.join("db");
    let mut child = None;
    wait_until(
        Duration::from_secs(120),
        "the replay child to be stuck in a batch",
        || {
            child = children_of(parent.id()).into_iter().find(|pid| {
                fs::read_to_string(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.contains("--child-result"))
            });
            child.is_some()
                && databases_in(&db)
                    .iter()
                    .any(|n| db.join(n).join("data.mdb").exists())
                && child.is_some_and(|pid| cpu_ticks(pid) >= 300)
        },
    );
    let child = child.unwrap();
    signal(parent.id(), "TERM");
    // The parent forwards the first signal to the child, then ends at the second.
    wait_until(
        Duration::from_secs(30),
        "the first SIGTERM to reach the child",
        || log_of(w).contains("stopping lmdb after its current batch"),
    );
    signal(parent.id(), "TERM");
    let status = wait_exit(&mut parent, Duration::from_secs(60));
    assert!(!status.success(), "the run passed after two signals");
    wait_until(Duration::from_secs(30), "the child to end", || {
        !alive(child)
    });
    let _ = log_of(w);
    let left: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".child-"))
        .collect();
    assert!(
        left.is_empty(),
        "the interrupted run left {left:?} in --out"
    );
}

/// Issue 47: after a user's `rm -rf` removed a kept butter database's marker and files but not
/// its read-only snapshots, `clean` recognises the remains (the name, the engine's entries,
/// its identity) and removes them; a look-alike without the engine's identity stays.
#[test]
fn clean_removes_what_rm_rf_left() {
    let test = "clean_removes_what_rm_rf_left";
    let Some(root) = btrfs_dir(test) else { return };
    let work = btrfs_scratch(&root, "hostile-remains-");
    let w = work.path();
    let db = w.join("db");
    fs::create_dir(&db).unwrap();
    let kept = kept_butter_database(&db, &w.join("out0"));
    let rm = run_cmd({
        let mut cmd = Command::new("rm");
        cmd.arg("-rf").arg(&kept);
        cmd
    });
    assert!(!rm.status.success(), "rm -rf removed read-only snapshots");
    assert!(
        !kept.join(".slasher-bench-db").exists(),
        "rm -rf left the marker"
    );
    assert!(butter_generation(&db) >= 1, "no snapshot is left to clean");
    let lookalike = db.join("slasher-bench-butter-1-2");
    fs::create_dir_all(lookalike.join("gen-00000000000000000001")).unwrap();
    fs::write(lookalike.join("gen-00000000000000000001/butter.id"), b"not").unwrap();

    let cleaned = run(&["clean", p(&db)]);
    assert!(cleaned.status.success(), "clean failed");
    assert!(!kept.exists(), "clean left the remains");
    assert_eq!(databases_in(&db), ["slasher-bench-butter-1-2"]);
    assert!(lookalike
        .join("gen-00000000000000000001/butter.id")
        .exists());
}
