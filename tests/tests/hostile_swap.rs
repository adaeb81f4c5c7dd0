//! Tier "hostile swap" (issue 57; docs/reliability.md §4.1): for each command (`slasher-bench
//! replay` with each backend, `slasher-bench clean`, and every `butter` subcommand) a first,
//! traced run lists every system call that looks a path up through a directory another user
//! can write (the shared directory S, owned by uid 65534; the command runs as root on paths
//! `S/a/...` and `S/b/...`, in directories of root's inside S). The first lookup of an entry
//! of S is the command resolving the path it was given; every later one is a swap point: the
//! command looks up again a name it has already resolved. For each swap point the command runs
//! again and is held right before that call while uid 65534 renames the entry away and puts a
//! symlink to the canary in its place (`mv S/a S/a.moved; ln -s C/a S/a`), then goes on.
//!
//! The canary C holds, for each entry of S, a tree by the same names the command uses there:
//! closed databases (with read-only generations and a merge output), a database held open by
//! this process, a subvolume and a read-only snapshot, files, `slasher-bench` leftovers and
//! reports. After each run its listing (type, mode, owner, size, mtime, SHA-256 of each file,
//! symlink targets, read-only flags) must be what it was, and no database outside it may carry
//! a canary database's identity (adopted). The command may fail; it may not change the canary.
//!
//! The tier runs twice. `hostile_swap_tier`: the commands run as root, everything they use and
//! the canary are root's. `hostile_swap_tier_two_unprivileged_users`: the commands run as uid
//! 65533, a second unprivileged user, who owns `S/a`, `S/b`, the working directory and the
//! canary (its own other databases: what a redirected command of its could damage); the two
//! `--stream` cases are left out there, as btrfs send and receive need root.
//!
//! Needs root, setpriv (util-linux), btrfs-progs, x86-64 and `BUTTER_BTRFS_DIR`; CI never
//! skips. The commands are the `butter` and `slasher-bench` binaries next to this test's
//! profile directory (`cargo build -p butter-tools -p slasher-bench`; scripts/test.sh builds
//! the workspace first), or those in `HOSTILE_SWAP_BIN_DIR` (e.g. an older commit's build, to
//! show what the tier finds there). `HOSTILE_SWAP_ONLY=substring` limits the commands (for
//! development). Both runs take about a minute in a debug build (82 swap points over 17
//! commands as root, 30 over 15 as uid 65533; the replays read the smallest committed fixture,
//! 2 batches).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use butter_db::fs::{is_subvolume_root, BtrfsFs, Fs};
use butter_db::{Env, EnvBuilder, Merges};
use butter_tests::harness::{self, btrfs_dir, in_ci};
use butter_tests::swap::{trace, Run, SharedCall, SwapPoints, Traced};
use sha2::{Digest, Sha256};

const NOBODY: u32 = 65534;
/// The second unprivileged user, whose commands uid 65534 redirects in the second run.
const VICTIM: u32 = 65533;
/// The entries of S the commands' paths go through.
const ENTRIES: [&str; 2] = ["a", "b"];
/// The fixture replay reads (committed): the smallest one. Its two batches take about a second
/// untraced in a debug build, so each of the replay's swap points costs a second or two; the
/// mainnet-merge fixture's 400,000 validators take minutes a batch in a debug build (the runs
/// timed out at 120 s each).
const FIXTURE: &str = "synthetic-tiny.fixture";
/// How long one run of a command may take.
const RUN_LIMIT: Duration = Duration::from_secs(120);
/// A leftover of a replay that no longer runs (pid above the kernel's limit).
const LMDB_LEFTOVER: &str = "slasher-bench-lmdb-4194399-1";
const BUTTER_LEFTOVER: &str = "slasher-bench-butter-4194398-1";
const MARKER: &str = ".slasher-bench-db";

fn s(p: &Path) -> OsString {
    p.as_os_str().to_owned()
}

/// A closed butter database at `dir` (root's) with three commits and a merge output waiting
/// in `compact/`; every value names `tag`.
fn make_db(dir: &Path, tag: &str) {
    let env = EnvBuilder::new(dir)
        .merges(Merges::Inline)
        .open()
        .expect("make a database");
    let t = env.create_table("t").expect("table");
    for i in 0..3u8 {
        let mut w = env.begin_write().expect("write");
        for k in 0..20u8 {
            w.put(t, &[i, k], format!("{tag} {i} {k}").as_bytes())
                .expect("put");
        }
        w.commit().expect("commit");
    }
    drop(env);
    std::fs::write(dir.join("compact/00000000000000aa.seg"), b"pending merge").unwrap();
}

/// A `slasher-bench replay` leftover: its marker, and an LMDB-like file or a butter database.
fn make_leftover(dir: &Path, name: &str, tag: &str) {
    let d = dir.join(name);
    std::fs::create_dir(&d).unwrap();
    std::fs::write(
        d.join(MARKER),
        "slasher-bench database: made by slasher-bench for a test\n",
    )
    .unwrap();
    if name.contains("butter") {
        make_db(&d, tag);
    } else {
        std::fs::write(d.join("data.mdb"), format!("{tag} lmdb pages")).unwrap();
    }
}

/// The canary: for each entry of S, a tree of root's by the names the commands use there.
/// The databases named `live-db` stay open (held by the returned environments).
fn make_canary(c: &Path) -> Vec<Env> {
    std::fs::create_dir(c).unwrap();
    let mut held = Vec::new();
    for e in ENTRIES {
        let d = c.join(e);
        std::fs::create_dir(&d).unwrap();
        std::fs::write(
            d.join("file.txt"),
            format!("canary {e}: {}", rand::random::<u64>()),
        )
        .unwrap();
        BtrfsFs.create_subvolume(&d.join("subvol")).unwrap();
        std::fs::write(d.join("subvol/inside"), b"canary subvolume").unwrap();
        BtrfsFs
            .snapshot(&d.join("subvol"), &d.join("subvol-ro"), true)
            .unwrap();
        for db in ["db", "copy", "restored", "new", "compact-copy"] {
            make_db(&d.join(db), &format!("canary {e}/{db}"));
        }
        std::fs::write(d.join("stream"), b"canary stream bytes").unwrap();
        std::fs::create_dir(d.join("plain")).unwrap();
        std::fs::write(d.join("plain/MANIFEST"), b"canary plain copy").unwrap();
        std::fs::create_dir(d.join("dbs")).unwrap();
        make_leftover(&d.join("dbs"), LMDB_LEFTOVER, "canary");
        make_leftover(&d.join("dbs"), BUTTER_LEFTOVER, "canary");
        std::fs::create_dir(d.join("out")).unwrap();
        std::fs::write(d.join("out/report.md"), b"canary report").unwrap();
        std::fs::write(d.join("out/report.json"), b"{\"canary\": true}").unwrap();
        make_db(&d.join("live-db"), &format!("canary {e}/live-db"));
        held.push(Env::open_path(d.join("live-db")).expect("hold the live canary open"));
    }
    held
}

/// Everything under `dir`, never following a symlink: per entry its type (a subvolume with its
/// read-only flag), mode, owner, size, mtime, and a file's SHA-256 or a symlink's target.
fn listing(dir: &Path) -> BTreeMap<PathBuf, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
        let mut entries: Vec<_> = match std::fs::read_dir(dir) {
            Ok(rd) => rd.flatten().collect(),
            Err(e) => {
                out.insert(
                    dir.strip_prefix(base).unwrap().into(),
                    format!("unreadable {e}"),
                );
                return;
            }
        };
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().to_path_buf();
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                out.insert(rel, "vanished".into());
                continue;
            };
            let head = format!(
                "mode {:o} uid {} mtime {}.{}",
                m.mode(),
                m.uid(),
                m.mtime(),
                m.mtime_nsec()
            );
            if m.file_type().is_symlink() {
                let t = std::fs::read_link(&p).unwrap_or_default();
                out.insert(rel, format!("symlink -> {} {head}", t.display()));
            } else if m.is_dir() {
                let what = if is_subvolume_root(&p).unwrap_or(false) {
                    let ro = BtrfsFs.is_readonly(&p).unwrap_or(false);
                    format!("subvolume{}", if ro { " read-only" } else { "" })
                } else {
                    "dir".into()
                };
                out.insert(rel, format!("{what} {head}"));
                walk(base, &p, out);
            } else {
                let sum = std::fs::read(&p)
                    .map(|b| hex(&Sha256::digest(&b)))
                    .unwrap_or_else(|e| format!("unreadable {e}"));
                out.insert(rel, format!("file {} bytes sha256 {sum} {head}", m.len()));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The identity files (`butter.id`, 28 bytes) anywhere below `dir`, with where they are.
fn identities(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                continue;
            };
            if m.is_dir() {
                stack.push(p);
            } else if m.is_file() && e.file_name() == "butter.id" {
                if let Ok(b) = std::fs::read(&p) {
                    out.push((p, b));
                }
            }
        }
    }
    out
}

/// What differs between two listings, a line each (at most 12).
fn differences(
    before: &BTreeMap<PathBuf, String>,
    after: &BTreeMap<PathBuf, String>,
) -> Vec<String> {
    let mut d = Vec::new();
    for (p, b) in before {
        match after.get(p) {
            None => d.push(format!("{} removed", p.display())),
            Some(a) if a != b => d.push(format!("{} changed: {b} => {a}", p.display())),
            _ => {}
        }
    }
    for p in after.keys().filter(|p| !before.contains_key(*p)) {
        d.push(format!("{} created", p.display()));
    }
    d.truncate(12);
    d
}

/// One command of the tier.
struct Case {
    name: String,
    /// Makes what the command works on in S (fresh for each run).
    setup: Box<dyn Fn(&Tier)>,
    argv: Vec<OsString>,
    stdin: Option<PathBuf>,
}

/// The tier's directories and tools.
struct Tier {
    /// Everything (removed at the end).
    _root: harness::BtrfsDir,
    /// The shared directory, uid 65534's.
    shared: PathBuf,
    /// The canary.
    canary: PathBuf,
    /// Root's working directory (the commands' cwd, their inputs, scratch files).
    work: PathBuf,
    butter: PathBuf,
    bench: PathBuf,
    /// Who runs the commands and owns their directories and the canary (`None`: root).
    user: Option<u32>,
}

impl Tier {
    /// Hands `p` and everything below it to the tier's user (nothing to do for root). A
    /// read-only subvolume is made writable for the change and read-only again.
    fn give(&self, p: &Path) {
        let Some(uid) = self.user else {
            return;
        };
        let m = std::fs::symlink_metadata(p).unwrap();
        if m.is_dir() {
            let ro = is_subvolume_root(p).unwrap() && BtrfsFs.is_readonly(p).unwrap();
            if ro {
                BtrfsFs.set_readonly(p, false).unwrap();
            }
            for e in std::fs::read_dir(p).unwrap().flatten() {
                self.give(&e.path());
            }
            std::os::unix::fs::lchown(p, Some(uid), Some(uid)).unwrap();
            if ro {
                BtrfsFs.set_readonly(p, true).unwrap();
            }
        } else {
            std::os::unix::fs::lchown(p, Some(uid), Some(uid)).unwrap();
        }
    }

    /// A fresh canary, the tier user's.
    fn make_canary(&self) -> Vec<Env> {
        let held = make_canary(&self.canary);
        self.give(&self.canary);
        held
    }

    /// Empties S and makes what `case` works on there, the tier user's.
    fn set_up(&self, case: &Case) {
        self.reset_shared();
        (case.setup)(self);
        for e in ENTRIES {
            self.give(&self.e(e));
        }
    }

    fn e(&self, entry: &str) -> PathBuf {
        self.shared.join(entry)
    }

    /// Empties S and makes `S/a` and `S/b`, root's directories (0755) inside it.
    fn reset_shared(&self) {
        for e in std::fs::read_dir(&self.shared).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_symlink() {
                std::fs::remove_file(&p).unwrap();
            } else {
                harness::remove_db_dir(&p);
            }
        }
        for e in ENTRIES {
            std::fs::create_dir(self.e(e)).unwrap();
            std::fs::set_permissions(self.e(e), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    /// Runs `butter args...` untraced (setup); it must succeed.
    fn butter_ok(&self, args: &[&Path]) {
        let o = Command::new(&self.butter).args(args).output().unwrap();
        assert!(
            o.status.success(),
            "setup: butter {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// The second user renames `S/<entry>` away and puts a symlink to `C/<entry>` in its place.
fn swap(tier: &Tier, call: &SharedCall, n: usize) {
    let entry = tier.shared.join(&call.entry);
    let moved = tier
        .shared
        .join(format!("{}.moved-{n}", call.entry.to_string_lossy()));
    let target = tier.canary.join(&call.entry);
    let o = butter_test_support::as_user(NOBODY, "sh")
        .args([
            "-c",
            "mv -T -- \"$1\" \"$2\" && ln -s -- \"$3\" \"$1\"",
            "sh",
        ])
        .arg(&entry)
        .arg(&moved)
        .arg(&target)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "uid {NOBODY} could not swap {}: {}",
        entry.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn cases(t: &Tier) -> Vec<Case> {
    let db = t.e("a").join("db");
    let src_db = |t: &Tier| make_db(&t.e("a").join("db"), "source");
    let mut v = Vec::new();
    for (name, extra) in [
        ("butter stat", vec!["stat", "--deep"]),
        ("butter check", vec!["check"]),
        ("butter dump", vec!["dump", "--all"]),
        ("butter remove", vec!["remove"]),
    ] {
        let mut argv: Vec<OsString> = extra.iter().map(OsString::from).collect();
        argv.push(s(&db));
        v.push(Case {
            name: name.into(),
            setup: Box::new(src_db),
            argv,
            stdin: None,
        });
    }
    let root = t.user.is_none();
    for (name, flags, dest) in [
        ("butter backup", vec![], "copy"),
        ("butter backup --plain", vec!["--plain"], "plain"),
        ("butter backup --compact", vec!["--compact"], "compact-copy"),
    ] {
        let mut argv: Vec<OsString> = vec!["backup".into()];
        argv.extend(flags.iter().map(OsString::from));
        argv.push(s(&db));
        argv.push(s(&t.e("b").join(dest)));
        v.push(Case {
            name: name.into(),
            setup: Box::new(src_db),
            argv,
            stdin: None,
        });
    }
    v.extend(root.then(|| Case {
        name: "butter backup --stream".into(),
        setup: Box::new(src_db),
        argv: vec![
            "backup".into(),
            "--stream".into(),
            s(&t.e("b").join("stream")),
            s(&db),
            s(&t.e("b").join("copy")),
        ],
        stdin: None,
    }));
    let copy = t.e("a").join("copy");
    v.push(Case {
        name: "butter restore".into(),
        setup: Box::new(move |t: &Tier| {
            src_db(t);
            t.butter_ok(&[
                Path::new("backup"),
                &t.e("a").join("db"),
                &t.e("a").join("copy"),
            ]);
        }),
        argv: vec!["restore".into(), s(&copy), s(&t.e("b").join("restored"))],
        stdin: None,
    });
    v.push(Case {
        name: "butter restore --plain".into(),
        setup: Box::new(move |t: &Tier| {
            src_db(t);
            t.butter_ok(&[
                Path::new("backup"),
                Path::new("--plain"),
                &t.e("a").join("db"),
                &t.e("a").join("plain"),
            ]);
        }),
        argv: vec![
            "restore".into(),
            "--plain".into(),
            s(&t.e("a").join("plain")),
            s(&t.e("b").join("restored")),
        ],
        stdin: None,
    });
    v.extend(root.then(|| Case {
        name: "butter restore (stream)".into(),
        setup: Box::new(move |t: &Tier| {
            src_db(t);
            t.butter_ok(&[
                Path::new("backup"),
                Path::new("--stream"),
                &t.e("a").join("stream"),
                &t.e("a").join("db"),
                &t.e("a").join("copy"),
            ]);
        }),
        argv: vec![
            "restore".into(),
            s(&t.e("a").join("stream")),
            s(&t.e("b").join("restored")),
        ],
        stdin: None,
    }));
    let dump = t.work.join("load-input.dump");
    v.push(Case {
        name: "butter load".into(),
        setup: Box::new(|_: &Tier| {}),
        argv: vec!["load".into(), s(&t.e("b").join("new"))],
        stdin: Some(dump),
    });
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures")
        .join(FIXTURE);
    for backend in ["lmdb", "mdbx", "redb", "butter"] {
        v.push(Case {
            name: format!("slasher-bench replay --backends {backend}"),
            setup: Box::new(|t: &Tier| std::fs::create_dir(t.e("a").join("dbs")).unwrap()),
            argv: vec![
                "replay".into(),
                "--fixture".into(),
                s(&fixture),
                "--backends".into(),
                backend.into(),
                "--batches".into(),
                "2".into(),
                "--no-progress".into(),
                "--db-dir".into(),
                s(&t.e("a").join("dbs")),
                "--out".into(),
                s(&t.e("b").join("out")),
            ],
            stdin: None,
        });
    }
    v.push(Case {
        name: "slasher-bench clean".into(),
        setup: Box::new(|t: &Tier| {
            let dbs = t.e("a").join("dbs");
            std::fs::create_dir(&dbs).unwrap();
            make_leftover(&dbs, LMDB_LEFTOVER, "leftover");
            make_leftover(&dbs, BUTTER_LEFTOVER, "leftover");
        }),
        argv: vec!["clean".into(), s(&t.e("a").join("dbs"))],
        stdin: None,
    });
    v
}

/// What one command's swap points found.
#[derive(Default)]
struct Found {
    calls: usize,
    resolutions: usize,
    points: usize,
    damaged: Vec<String>,
    failed_runs: usize,
    /// The run without a swap succeeded.
    first_ok: bool,
}

fn run_case(t: &Tier, case: &Case, canary: &mut (Vec<Env>, BTreeMap<PathBuf, String>)) -> Found {
    let program = if case.name.starts_with("butter") {
        &t.butter
    } else {
        &t.bench
    };
    let mut argv = vec![s(program)];
    argv.extend(case.argv.iter().cloned());
    let scratch = t.work.join("scratch");
    let _ = std::fs::create_dir(&scratch);
    let run = Run {
        argv,
        cwd: &t.work,
        stdin: case.stdin.as_deref(),
        scratch: &scratch,
        shared: &t.shared,
        limit: RUN_LIMIT,
        uid: t.user,
    };
    let canary_ids: Vec<Vec<u8>> = identities(&t.canary).into_iter().map(|(_, b)| b).collect();

    // The enumeration: a run without a swap.
    t.set_up(case);
    let first: Traced = trace(&run, None);
    let mut points = SwapPoints::default();
    let listed: Vec<(Option<usize>, &SharedCall)> =
        first.calls.iter().map(|c| (points.next(c), c)).collect();
    let mut found = Found {
        calls: first.calls.len(),
        resolutions: points.resolutions,
        points: points.points,
        first_ok: first.ended.success(),
        ..Found::default()
    };
    if !first.ended.success() {
        found.failed_runs += 1;
        eprintln!(
            "hostile swap: {}: the run without a swap failed ({:?}): {}",
            case.name,
            first.ended,
            String::from_utf8_lossy(&first.stderr).trim()
        );
    }
    for (n, c) in &listed {
        let what = n.map_or("resolution".to_string(), |n| format!("swap point {n}"));
        eprintln!(
            "hostile swap: {}: {what}: {} {}",
            case.name,
            c.syscall,
            c.path.display()
        );
    }
    assert_eq!(
        listing(&t.canary),
        canary.1,
        "{}: the run without a swap changed the canary",
        case.name
    );

    for k in 1..=found.points {
        t.set_up(case);
        let mut do_swap = |call: &SharedCall| swap(t, call, k);
        let traced = trace(&run, Some((k, &mut do_swap)));
        if !traced.ended.success() {
            found.failed_runs += 1;
        }
        let at = traced
            .stopped_before
            .as_ref()
            .map_or("(the run ended before it)".into(), |c| {
                format!("{} {}", c.syscall, c.path.display())
            });
        let after = listing(&t.canary);
        let diff = differences(&canary.1, &after);
        let adopted: Vec<String> = [t.shared.as_path(), t.work.as_path()]
            .iter()
            .flat_map(|d| identities(d))
            .filter(|(_, id)| canary_ids.contains(id))
            .map(|(p, _)| format!("{} carries a canary database's identity", p.display()))
            .collect();
        if diff.is_empty() && adopted.is_empty() {
            continue;
        }
        let line = format!(
            "swap point {k} (before {at}; exit {:?}): {}",
            traced.ended,
            diff.iter()
                .chain(&adopted)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        );
        eprintln!("hostile swap: {}: CANARY DAMAGED at {line}", case.name);
        found.damaged.push(line);
        // A fresh canary for the next points.
        canary.0.clear();
        harness::remove_db_dir(&t.canary);
        canary.0 = t.make_canary();
        canary.1 = listing(&t.canary);
    }
    found
}

/// The binaries: `HOSTILE_SWAP_BIN_DIR`, else this test's profile directory.
fn binaries() -> Result<(PathBuf, PathBuf), String> {
    let dir = match std::env::var_os("HOSTILE_SWAP_BIN_DIR") {
        Some(d) => PathBuf::from(d),
        None => std::env::current_exe()
            .ok()
            .and_then(|e| e.parent()?.parent().map(Path::to_path_buf))
            .ok_or("no profile directory")?,
    };
    let butter = dir.join("butter");
    let bench = dir.join("slasher-bench");
    for b in [&butter, &bench] {
        if !b.is_file() {
            return Err(format!(
                "{} missing: `cargo build -p butter-tools -p slasher-bench` (or set \
                 HOSTILE_SWAP_BIN_DIR)",
                b.display()
            ));
        }
    }
    Ok((butter, bench))
}

#[test]
fn hostile_swap_tier() {
    run_tier("hostile_swap_tier", None);
}

#[test]
fn hostile_swap_tier_two_unprivileged_users() {
    run_tier("hostile_swap_tier_two_unprivileged_users", Some(VICTIM));
}

/// The two tiers take turns, setup included: the tracer waits for any child of this process
/// (`waitpid(-1)`), so two tracers at once would take each other's stops, and a tracer would
/// reap the commands the other tier's setup and swaps start.
static ONE_TRACER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The tier with the commands run by `user` (`None`: root).
fn run_tier(test: &str, user: Option<u32>) {
    let _turn = ONE_TRACER.lock().unwrap_or_else(|e| e.into_inner());
    let who = user.map_or("root".to_string(), |u| format!("uid {u}"));
    let mut problems = Vec::new();
    if !butter_test_support::is_root() {
        problems.push("not root (it acts as root and as uid 65534)".to_string());
    }
    for tool in ["setpriv", "btrfs"] {
        if Command::new(tool).arg("--version").output().is_err() {
            problems.push(format!("{tool} not found"));
        }
    }
    let bins = binaries();
    if let Err(e) = &bins {
        problems.push(e.clone());
    }
    if !harness::require(test, &problems) {
        return;
    }
    let Some(root) = btrfs_dir(test) else {
        return;
    };
    let (butter, bench) = bins.unwrap();
    let base = std::fs::canonicalize(&*root).unwrap();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    let shared = base.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::os::unix::fs::chown(&shared, Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    let work = base.join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::set_permissions(&work, std::fs::Permissions::from_mode(0o700)).unwrap();
    let tier = Tier {
        shared,
        canary: base.join("canary"),
        work,
        butter,
        bench,
        _root: root,
        user,
    };
    // load's input: a dump of a small database of its own.
    let dump_src = tier.work.join("dump-source");
    make_db(&dump_src, "dumped");
    let o = Command::new(&tier.butter)
        .args([OsString::from("dump"), "--all".into(), s(&dump_src)])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "dump: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::write(tier.work.join("load-input.dump"), &o.stdout).unwrap();
    tier.give(&tier.work);

    let held = tier.make_canary();
    let mut canary = (held, listing(&tier.canary));
    let only = std::env::var("HOSTILE_SWAP_ONLY").ok();
    let start = Instant::now();
    let mut lines = Vec::new();
    let (mut total_points, mut total_damage, mut commands) = (0, 0, 0);
    for case in cases(&tier) {
        if only.as_deref().is_some_and(|o| !case.name.contains(o)) {
            continue;
        }
        let t0 = Instant::now();
        let f = run_case(&tier, &case, &mut canary);
        commands += 1;
        total_points += f.points;
        total_damage += f.damaged.len();
        let line = format!(
            "{}: {} calls through the shared directory, {} resolutions, {} swap points, {} \
             damaged the canary, {} runs failed, {:.1} s",
            case.name,
            f.calls,
            f.resolutions,
            f.points,
            f.damaged.len(),
            f.failed_runs,
            t0.elapsed().as_secs_f64()
        );
        println!("hostile swap ({who}): {line}");
        for d in &f.damaged {
            println!("    {d}");
        }
        lines.push((line, f, case.name.clone()));
    }
    drop(canary);
    println!(
        "tier hostile swap ({who}): {total_points} swap points over {commands} commands, \
         {total_damage} violations, {:.0} s",
        start.elapsed().as_secs_f64()
    );
    let damaged: Vec<&String> = lines
        .iter()
        .filter(|(_, f, _)| !f.damaged.is_empty())
        .map(|(l, _, _)| l)
        .collect();
    assert!(
        damaged.is_empty(),
        "a swap changed the canary or a canary database was adopted:\n{}",
        damaged
            .iter()
            .map(|l| l.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    if in_ci() || std::env::var_os("HOSTILE_SWAP_BIN_DIR").is_none() {
        // The current tools: every run without a swap must succeed (else the tier tests an
        // error path only).
        let failed: Vec<&String> = lines
            .iter()
            .filter(|(_, f, _)| !f.first_ok || f.calls == 0)
            .map(|(l, _, _)| l)
            .collect();
        assert!(
            failed.is_empty(),
            "commands whose run without a swap failed, or never looked a path up through the \
             shared directory (the tier would test nothing there):\n{failed:?}"
        );
        // No command looks a path up a second time. The one allowance: `backup --stream` is
        // given two paths in the same directory (the stream file and DEST), each looked up
        // once, so that directory is looked up twice (docs/reliability.md §4.1).
        let second_lookups: Vec<&String> = lines
            .iter()
            .filter(|(_, f, name)| {
                f.points > usize::from(name.as_str() == "butter backup --stream")
            })
            .map(|(l, _, _)| l)
            .collect();
        assert!(
            second_lookups.is_empty(),
            "commands that looked a path in the shared directory up again after resolving it:\n{}",
            second_lookups
                .iter()
                .map(|l| l.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}
