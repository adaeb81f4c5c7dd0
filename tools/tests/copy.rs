//! The copies of issue 59 that LMDB's `mdb_copy` makes and a snapshot cannot: `backup --plain`
//! (the generation as plain files on a filesystem that is not btrfs, or a tar stream on
//! standard output) with `restore --plain` as an unprivileged user, and `backup --compact`
//! (live entries only, like `mdb_copy -c`). The source databases live on real btrfs
//! (`BUTTER_BTRFS_DIR`); the plain copies go to a directory under /var/tmp, which must not be
//! btrfs.

mod common;

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::*;

/// A fresh directory on a filesystem that is not btrfs (`/var/tmp`, or `BUTTER_PLAIN_DIR`),
/// removed when dropped; `None` after a SKIP line if that is btrfs too.
fn plain_dir(test: &str) -> Option<tempfile::TempDir> {
    let base = std::env::var_os("BUTTER_PLAIN_DIR").map_or("/var/tmp".into(), PathBuf::from);
    if butter_test_support::is_btrfs(&base) {
        butter_test_support::skip(
            test,
            &format!(
                "{} is btrfs; set BUTTER_PLAIN_DIR to a directory on another filesystem",
                base.display()
            ),
        );
        return None;
    }
    Some(
        tempfile::Builder::new()
            .prefix(&format!("{test}-"))
            .tempdir_in(base)
            .expect("temp dir"),
    )
}

/// `butter ARGS` with `input` on standard input, as uid/gid 65534 when `as_nobody`.
fn butter_as(args: &[&str], input: Option<&[u8]>, as_nobody: bool) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_butter"));
    cmd.args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if as_nobody {
        cmd.uid(65534).gid(65534);
    }
    let mut child = cmd.spawn().expect("run butter");
    if let Some(input) = input {
        let mut stdin = child.stdin.take().expect("stdin");
        if let Err(e) = stdin.write_all(input) {
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
        }
    }
    child.wait_with_output().expect("wait")
}

fn assert_status(o: &Output, code: i32, want: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "status of: {err}");
    assert!(err.contains(want), "expected {want:?} in {err}");
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", stderr(o));
    stdout(o)
}

/// `butter dump --all DIR`.
fn dump_all(db: &Path) -> String {
    ok(&butter(&["dump", "--all", path(db)]))
}

/// The names in `dir` with each file's bytes, to show that a refused command changed nothing.
fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let bytes = std::fs::read(e.path()).unwrap_or_default();
            (e.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect();
    v.sort();
    v
}

/// A directory on the btrfs mount that uid 65534 may create entries in (when the test runs as
/// root, the restores run as 65534; otherwise as the test's own, unprivileged, user).
fn open_to_nobody(t: &TestDir) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = t.join("anyone");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

/// Gives a plain copy's files to uid 65534 (who restores it), when running as root.
fn give_to_nobody(dir: &Path) {
    if !butter_test_support::is_root() {
        return;
    }
    std::os::unix::fs::chown(dir, Some(65534), Some(65534)).unwrap();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        std::os::unix::fs::chown(e.path(), Some(65534), Some(65534)).unwrap();
    }
}

#[test]
fn plain_copy_to_another_filesystem_and_tar_restore_without_root() {
    let Some((t, db)) = test_db("butter_plain", 40) else {
        return;
    };
    let Some(plain) = plain_dir("plain_copy_to_another_filesystem") else {
        return;
    };
    let nobody = butter_test_support::is_root();
    let copy = plain.path().join("copy");
    let out = ok(&butter(&["backup", "--plain", path(&db), path(&copy)]));
    assert!(out.contains("as plain files to"), "{out}");
    assert!(out.contains("read back and checked"), "{out}");
    // The generation's files and the list, nothing else; the list names each with its length.
    let list = std::fs::read_to_string(copy.join("butter-copy.manifest")).unwrap();
    assert!(
        list.starts_with("butter-copy format=1 generation="),
        "{list}"
    );
    let mut names: Vec<String> = std::fs::read_dir(&copy)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    for n in names.iter().filter(|n| *n != "butter-copy.manifest") {
        let len = std::fs::metadata(copy.join(n)).unwrap().len();
        assert!(
            list.contains(&format!("file {n} {len} ")),
            "{n} not listed: {list}"
        );
    }
    assert!(names.iter().any(|n| n.ends_with(".seg")), "{names:?}");

    // The same as a tar stream on standard output (the report on stderr).
    let o = butter(&["backup", "--plain", path(&db), "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("standard output (tar"),
        "{}",
        stderr(&o)
    );
    let tar = o.stdout;
    assert_eq!(tar.len() % 512, 0);

    // Restores, without root: from the directory, and from the stream on standard input.
    let anyone = open_to_nobody(&t);
    give_to_nobody(plain.path());
    give_to_nobody(&copy);
    let (r_dir, r_tar) = (anyone.join("from-dir"), anyone.join("from-tar"));
    let o = butter_as(
        &["restore", "--plain", path(&copy), path(&r_dir)],
        None,
        nobody,
    );
    assert!(ok(&o).contains("restored generation"), "{}", stdout(&o));
    let o = butter_as(
        &["restore", "--plain", "-", path(&r_tar)],
        Some(&tar),
        nobody,
    );
    assert!(ok(&o).contains("restored generation"), "{}", stdout(&o));
    let source = dump_all(&db);
    assert!(source.contains("butter-dump format=1 table=a"));
    for r in [&r_dir, &r_tar] {
        assert_eq!(
            dump_all(r),
            source,
            "{} differs from the source",
            r.display()
        );
        assert!(ok(&butter(&["check", path(r)])).starts_with("ok:"));
    }
    // Each a database the engine opens, holding the workload's state.
    assert_eq!(read_db(&r_dir), model_after(40));
    assert_eq!(read_db(&r_tar), model_after(40));

    // GNU tar reads the stream: its extraction is a directory copy too.
    let extracted = plain.path().join("x");
    std::fs::create_dir(&extracted).unwrap();
    std::fs::write(plain.path().join("copy.tar"), &tar).unwrap();
    match Command::new("tar")
        .arg("-xf")
        .arg(plain.path().join("copy.tar"))
        .arg("-C")
        .arg(&extracted)
        .output()
    {
        Ok(o) => {
            assert!(o.status.success(), "tar -x: {}", stderr(&o));
            let r = t.join("from-extracted");
            ok(&butter(&[
                "restore",
                "--plain",
                path(&extracted.join("butter-copy")),
                path(&r),
            ]));
            assert_eq!(dump_all(&r), source);
        }
        Err(e) => butter_test_support::skip("tar extraction", &format!("no tar: {e}")),
    }
}

#[test]
fn plain_copy_refuses_a_non_empty_destination_and_leaves_it_unchanged() {
    let Some((t, db)) = test_db("butter_plain_dest", 10) else {
        return;
    };
    let Some(plain) = plain_dir("plain_copy_refuses") else {
        return;
    };
    // A directory holding a file, one of them named as a copy's file would be.
    let full = plain.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("MANIFEST"), b"the operator's\n").unwrap();
    std::fs::write(full.join("notes"), b"keep me\n").unwrap();
    let before = listing(&full);
    let o = butter(&["backup", "--plain", path(&db), path(&full)]);
    assert_status(&o, 1, "not empty; nothing was changed");
    assert_eq!(listing(&full), before);
    // A symlink to an empty directory is not followed.
    let empty = plain.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let link = plain.path().join("link");
    std::os::unix::fs::symlink(&empty, &link).unwrap();
    let o = butter(&["backup", "--plain", path(&db), path(&link)]);
    assert_status(&o, 1, "not a directory");
    assert!(listing(&empty).is_empty());
    // A file.
    let file = plain.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert_status(
        &butter(&["backup", "--plain", path(&db), path(&file)]),
        1,
        "not a directory",
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
    // Inside the database.
    let inside = db.join("inside");
    assert_status(
        &butter(&["backup", "--plain", path(&db), path(&inside)]),
        1,
        "inside the database directory",
    );
    assert!(!inside.exists());
    // An empty directory is taken, and kept.
    ok(&butter(&["backup", "--plain", path(&db), path(&empty)]));
    assert!(empty.join("butter-copy.manifest").is_file());
    // Not a database: nothing made.
    let nodb = t.join("nodb");
    std::fs::create_dir(&nodb).unwrap();
    let dest = plain.path().join("never");
    assert_status(
        &butter(&["backup", "--plain", path(&nodb), path(&dest)]),
        3,
        "",
    );
    assert!(!dest.exists());
}

/// Sets `name`'s SHA-256 in the list of the copy `dir` to that of its bytes now.
fn relist(dir: &Path, name: &str) {
    use sha2::{Digest, Sha256};
    let bytes = std::fs::read(dir.join(name)).unwrap();
    let sha = hex::encode(Sha256::digest(&bytes));
    let list_path = dir.join("butter-copy.manifest");
    let list = std::fs::read_to_string(&list_path).unwrap();
    let fixed: Vec<String> = list
        .lines()
        .map(|l| {
            if l.starts_with(&format!("file {name} ")) {
                format!("file {name} {} {sha}", bytes.len())
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(&list_path, fixed.join("\n") + "\n").unwrap();
}

#[test]
fn restore_plain_refuses_a_damaged_truncated_or_incomplete_copy() {
    let Some(t) = btrfs_dir("butter_plain_bad") else {
        return;
    };
    // A table of many blocks, so that a segment's first block is not its last (which opening a
    // segment reads): only reading the copy whole finds damage there.
    let db = t.join("db");
    let mut dump = String::from("butter-dump format=1 table=big\n");
    for i in 0..5000u32 {
        dump.push_str(&format!("{i:08x} {}\n", format!("{i:04x}").repeat(20)));
    }
    dump.push_str("end entries=5000\n");
    let o = butter_as(&["load", path(&db)], Some(dump.as_bytes()), false);
    assert!(o.status.success(), "{}", stderr(&o));
    let Some(plain) = plain_dir("restore_plain_refuses") else {
        return;
    };
    let copy = plain.path().join("copy");
    ok(&butter(&["backup", "--plain", path(&db), path(&copy)]));
    let tar = butter(&["backup", "--plain", path(&db), "-"]).stdout;
    let dest = t.join("restored");
    let before = std::fs::read_dir(&t.0).unwrap().count();
    let nothing_left = |t: &TestDir| {
        assert!(!dest.exists(), "nothing left");
        assert_eq!(std::fs::read_dir(&t.0).unwrap().count(), before);
    };

    // Given to a plain restore, the copy directory names itself; a snapshot restore points to
    // --plain.
    assert_status(
        &butter(&["restore", path(&copy), path(&dest)]),
        1,
        "restore it with `butter restore --plain`",
    );
    nothing_left(&t);

    // A tar stream cut short: refused, naming it.
    let cut = &tar[..tar.len() / 2];
    let o = butter_as(&["restore", "--plain", "-", path(&dest)], Some(cut), false);
    assert_status(&o, 4, "truncated");
    nothing_left(&t);
    // One byte of a segment changed in the stream: its SHA-256 differs from the list's.
    let mut flipped = tar.clone();
    flipped[512 * 2 + 100] ^= 0x01; // inside the first file after the directory entry
    let o = butter_as(
        &["restore", "--plain", "-", path(&dest)],
        Some(&flipped),
        false,
    );
    assert_status(&o, 4, "SHA-256");
    nothing_left(&t);

    // A segment changed in the directory: the same.
    let seg = std::fs::read_dir(&copy)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".seg"))
        .max_by_key(|e| e.metadata().unwrap().len())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .unwrap();
    assert!(std::fs::metadata(copy.join(&seg)).unwrap().len() > 100_000);
    let mut bytes = std::fs::read(copy.join(&seg)).unwrap();
    bytes[10] ^= 0x01;
    std::fs::write(copy.join(&seg), &bytes).unwrap();
    assert_status(
        &butter(&["restore", "--plain", path(&copy), path(&dest)]),
        4,
        &format!("{seg} has"),
    );
    nothing_left(&t);
    // ... and the list changed to match it: the engine's check of the result catches it.
    relist(&copy, &seg);
    assert_status(
        &butter(&["restore", "--plain", path(&copy), path(&dest)]),
        4,
        "checksum mismatch",
    );
    nothing_left(&t);

    // A copy cut short (no list yet) is not a copy.
    std::fs::remove_file(copy.join("butter-copy.manifest")).unwrap();
    assert_status(
        &butter(&["restore", "--plain", path(&copy), path(&dest)]),
        3,
        "is not a plain copy",
    );
    nothing_left(&t);

    // A destination that is not empty is refused and left as it was.
    std::fs::create_dir(&dest).unwrap();
    std::fs::write(dest.join("notes"), b"keep me\n").unwrap();
    let o = butter_as(&["restore", "--plain", "-", path(&dest)], Some(&tar), false);
    assert_status(&o, 1, "not empty");
    assert_eq!(
        listing(&dest),
        vec![("notes".into(), b"keep me\n".to_vec())]
    );
}

#[test]
fn compacting_copy_holds_live_entries_only() {
    let Some((t, db)) = test_db("butter_compact", 120) else {
        return;
    };
    let deep = |d: &Path| {
        butter_tools::stat(
            d,
            &butter_tools::StatOptions {
                deep: true,
                table: None,
            },
        )
        .unwrap()
    };
    let sum = |s: &butter_tools::Stat, f: &dyn Fn(&butter_tools::TableRow) -> u64| {
        s.tables.iter().map(f).sum::<u64>()
    };
    let src = deep(&db);
    let src_dead = sum(&src, &|r| r.dead_bytes.unwrap());
    assert!(
        src_dead > 0,
        "the workload overwrites and deletes: dead bytes expected"
    );
    let copy = t.join("compact");
    let out = ok(&butter(&["backup", "--compact", path(&db), path(&copy)]));
    assert!(out.contains("compared entry for entry"), "{out}");
    // Equal in content, by the tool and by the engine.
    assert_eq!(dump_all(&copy), dump_all(&db));
    assert!(ok(&butter(&["check", path(&copy)])).starts_with("ok:"));
    let c = deep(&copy);
    // Nothing dead: every stored entry is one a reader sees, no deletion is stored.
    assert_eq!(sum(&c, &|r| r.dead_bytes.unwrap()), 0);
    assert_eq!(sum(&c, &|r| r.tombstones.unwrap()), 0);
    assert_eq!(
        sum(&c, &|r| r.stored_entries),
        sum(&c, &|r| r.entries.unwrap())
    );
    assert_eq!(
        sum(&c, &|r| r.entries.unwrap()),
        sum(&src, &|r| r.entries.unwrap())
    );
    // Smaller than the source.
    let (src_bytes, copy_bytes) = (sum(&src, &|r| r.file_bytes), sum(&c, &|r| r.file_bytes));
    assert!(
        copy_bytes < src_bytes,
        "compacted {copy_bytes} bytes, source {src_bytes}"
    );
    assert_ne!(c.identity, src.identity);
    assert_eq!(read_db(&copy), model_after(120));
    // The scratch database is gone; the copy is a database `remove` takes.
    assert!(!copy.join("butter.scratch").exists());

    // A destination that is not empty is refused and left as it was; inside the database too.
    let full = t.join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("notes"), b"keep me\n").unwrap();
    assert_status(
        &butter(&["backup", "--compact", path(&db), path(&full)]),
        1,
        "not empty",
    );
    assert_eq!(
        listing(&full),
        vec![("notes".into(), b"keep me\n".to_vec())]
    );
    let inside = db.join("inside");
    assert_status(
        &butter(&["backup", "--compact", path(&db), path(&inside)]),
        1,
        "inside the database directory",
    );
    assert!(!inside.exists());
    // --compact and --plain do not combine.
    assert_eq!(
        butter(&[
            "backup",
            "--compact",
            "--plain",
            path(&db),
            path(&t.join("x"))
        ])
        .status
        .code(),
        Some(2)
    );
}

#[test]
fn compacting_copy_in_many_transactions() {
    let Some((t, db)) = test_db("butter_compact_txns", 60) else {
        return;
    };
    // Small transactions: the copy commits one and begins the next many times, within a table
    // and across tables (the engine has one writer: a transaction begun before the last one
    // committed would wait for it forever).
    let copy = t.join("compact");
    let c = butter_tools::compact::compact_committing_every(&db, &copy, 4096, 7).unwrap();
    assert!(c.commits > 10, "{} commits", c.commits);
    assert_eq!(c.entries, c.verified.entries);
    assert_eq!(dump_all(&copy), dump_all(&db));
    assert_eq!(read_db(&copy), model_after(60));
}

/// A FIFO given (or planted) where `restore` and `restore --plain` expect a copy or a stream
/// is opened without waiting for a writer: the restore fails at once on the empty input
/// instead of hanging, and makes nothing.
#[test]
fn restore_from_a_fifo_nobody_writes_fails_instead_of_waiting() {
    let Some(t) = btrfs_dir("butter_restore_fifo") else {
        return;
    };
    let fifo = t.join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let dest = t.join("restored");
    for plain in [true, false] {
        let mut args = vec!["restore"];
        if plain {
            args.push("--plain");
        }
        args.extend([path(&fifo), path(&dest)]);
        let mut child = Command::new(env!("CARGO_BIN_EXE_butter"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run butter");
        let start = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if start.elapsed() > std::time::Duration::from_secs(30) {
                let _ = child.kill();
                panic!(
                    "`butter {}` still waits on the FIFO after 30 s",
                    args.join(" ")
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        assert!(!status.success(), "`butter {}` succeeded", args.join(" "));
        assert!(
            !dest.exists(),
            "`butter {}` left {}",
            args.join(" "),
            dest.display()
        );
    }
}
