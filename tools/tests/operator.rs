//! The `butter` tool at an operator's level beside LMDB's tools (issue 59, item 2), on real
//! btrfs (`BUTTER_BTRFS_DIR`): exit statuses by kind of failure, `dump` with a header and
//! `load` as its inverse, `dump --list` / `--all`, the table names in a missing table's error,
//! `stat` from the manifest with `--deep` and per table, what `stat` says of a file and of a
//! damaged database, and `remove` of a database `slasher-bench replay --keep-db` kept.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::*;

/// `butter ARGS` with `input` on standard input.
fn butter_with_input(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_butter"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run butter");
    let mut stdin = child.stdin.take().expect("stdin");
    // A command that refuses before reading its input closes the pipe: not the test's error.
    if let Err(e) = stdin.write_all(input) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "write stdin: {e}");
    }
    drop(stdin);
    child.wait_with_output().expect("wait")
}

fn assert_status(o: &Output, code: i32, want: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "status of: {err}");
    assert!(err.contains(want), "expected {want:?} in {err}");
}

/// The first segment file of the newest generation.
fn a_segment(db: &Path) -> (PathBuf, PathBuf) {
    let gen = std::fs::read_dir(db)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("gen-"))
        .max()
        .unwrap();
    let seg = std::fs::read_dir(&gen)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "seg"))
        .unwrap();
    (gen, seg)
}

/// Flips one byte of `seg` at `at` (the generation is made writable for it).
fn damage(gen: &Path, seg: &Path, at: usize) {
    use butter_db::fs::BtrfsFs;
    BtrfsFs.set_readonly(gen, false).unwrap();
    let mut bytes = std::fs::read(seg).unwrap();
    bytes[at] ^= 0x40;
    std::fs::write(seg, &bytes).unwrap();
    BtrfsFs.set_readonly(gen, true).unwrap();
}

#[test]
fn exit_statuses_name_the_kind_of_failure() {
    let Some((t, db)) = test_db("butter_exit", 10) else {
        return;
    };
    // Usage: clap's, and a key bound that is not hex.
    assert_eq!(butter(&["stat"]).status.code(), Some(2));
    assert_status(
        &butter(&["dump", path(&db), "a", "--from", "zz"]),
        2,
        "not hexadecimal",
    );
    // Not a database: a plain directory, a file.
    let plain = t.join("plain");
    std::fs::create_dir(&plain).unwrap();
    assert_status(
        &butter(&["check", path(&plain)]),
        3,
        "not a butter_db database",
    );
    let file = t.join("file");
    std::fs::write(&file, b"x").unwrap();
    assert_status(&butter(&["stat", path(&file)]), 3, "is not a directory");
    // Busy: remove while a process holds the writer's lock.
    let env = open(&db);
    assert_status(
        &butter(&["remove", path(&db)]),
        6,
        "locked by another process",
    );
    drop(env);
    // I/O: the output cannot be written (a full device).
    let full = std::fs::File::create("/dev/full").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_butter"))
        .args(["dump", path(&db), "a"])
        .stdout(full)
        .output()
        .unwrap();
    assert_status(&o, 5, "writing the output");
    // Corrupt: a flipped byte in a data block.
    let (gen, seg) = a_segment(&db);
    damage(&gen, &seg, 10);
    assert_status(&butter(&["check", path(&db)]), 4, "checksum mismatch");
}

#[test]
fn dump_then_load_makes_an_equal_database() {
    let Some((t, db)) = test_db("butter_load", 30) else {
        return;
    };
    // A table with an empty value and a name that needs hex in the header.
    {
        let env = open(&db);
        let odd = env.create_table("odd name=1").unwrap();
        let mut txn = env.begin_write().unwrap();
        txn.put(odd, b"k", b"").unwrap();
        txn.put(odd, b"k2", b"v").unwrap();
        txn.commit().unwrap();
    }
    let o = butter(&["dump", path(&db), "--list"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "a\nb\nodd name=1\n");

    let o = butter(&["dump", path(&db), "b"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "butter-dump format=1 table=b");
    let entries = model_after(30).keys().filter(|(t, _)| t == "b").count();
    assert_eq!(
        lines.last(),
        Some(&format!("end entries={entries}").as_str())
    );
    assert_eq!(lines.len(), entries + 2);

    let all = butter(&["dump", path(&db), "--all"]);
    assert!(all.status.success(), "{}", stderr(&all));
    let dump = all.stdout.clone();
    assert!(stdout(&all).contains(&format!(
        "butter-dump format=1 table-hex={}\n",
        hex::encode("odd name=1")
    )));
    let copy = t.join("copy");
    let o = butter_with_input(&["load", path(&copy)], &dump);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("a ("), "{}", stdout(&o));
    // Entry for entry: the model tables, and the dump of the copy is the same bytes.
    assert_eq!(read_db(&copy), model_after(30));
    let again = butter(&["dump", path(&copy), "--all"]);
    assert_eq!(again.stdout, dump, "dump | load | dump gives the same dump");
    assert!(butter(&["check", path(&copy)]).status.success());

    // load refuses, leaving nothing: an existing directory, a truncated dump, a bad header,
    // keys out of order, a table twice.
    let before = std::fs::read_dir(&t.0).unwrap().count();
    assert_status(
        &butter_with_input(&["load", path(&copy)], &dump),
        1,
        "exists; load makes a new database",
    );
    let fresh = t.join("fresh");
    let cut = &dump[..dump.len() - 20];
    assert_status(
        &butter_with_input(&["load", path(&fresh)], cut),
        1,
        "not a butter dump",
    );
    assert!(!fresh.exists(), "a failed load leaves nothing");
    let v2 = String::from_utf8_lossy(&dump).replace("format=1", "format=2");
    assert_status(
        &butter_with_input(&["load", path(&fresh)], v2.as_bytes()),
        1,
        "dump format 2; this build reads format 1",
    );
    assert_status(
        &butter_with_input(
            &["load", path(&fresh)],
            b"butter-dump format=1 table=x\n02 00\n01 00\nend entries=2\n",
        ),
        1,
        "not in ascending order",
    );
    let twice = [&dump[..], &dump[..]].concat();
    assert_status(
        &butter_with_input(&["load", path(&fresh)], &twice),
        1,
        "is given twice",
    );
    assert!(!fresh.exists());
    assert_eq!(std::fs::read_dir(&t.0).unwrap().count(), before);
}

#[test]
fn stat_reads_the_manifest_unless_deep() {
    let Some((t, db)) = test_db("butter_fast_stat", 20) else {
        return;
    };
    let json = |args: &[&str]| {
        let o = butter(args);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    let fast = json(&["stat", path(&db), "--json"]);
    let deep = json(&["stat", path(&db), "--json", "--deep"]);
    let model = model_after(20);
    for (i, name) in ["a", "b"].iter().enumerate() {
        let (f, d) = (&fast["tables"][i], &deep["tables"][i]);
        assert_eq!(f["name"], serde_json::json!(name));
        assert_eq!(f["entries"], serde_json::Value::Null, "fast: not read");
        let entries = model.keys().filter(|(t, _)| t == name).count() as u64;
        assert_eq!(d["entries"], serde_json::json!(entries));
        assert!(f["stored_entries"].as_u64().unwrap() >= entries);
        assert_eq!(f["stored_entries"], d["stored_entries"]);
        assert_eq!(f["file_bytes"], d["file_bytes"]);
        assert!(f["file_bytes"].as_u64().unwrap() > 0);
    }
    // One table.
    let one = json(&["stat", path(&db), "b", "--json"]);
    assert_eq!(one["tables"].as_array().unwrap().len(), 1);
    assert_eq!(one["tables"][0]["name"], serde_json::json!("b"));
    let o = butter(&["stat", path(&db), "nope"]);
    assert_status(
        &o,
        1,
        "no table \"nope\" in this database; its tables: a, b",
    );

    // Damage in the first data block of a table of many blocks: fast stat does not read it
    // (opening reads the footer, the index and the last block); --deep names it on the
    // table's row, shows the other tables, and exits 4.
    {
        let env = open(&db);
        let big = env.create_table("big").unwrap();
        let mut txn = env.begin_write().unwrap();
        for i in 0..3000u32 {
            txn.put(big, &i.to_be_bytes(), &[i as u8; 100]).unwrap();
        }
        txn.commit().unwrap();
    }
    let (gen, seg) = largest_segment(&db);
    assert!(std::fs::metadata(&seg).unwrap().len() > 100_000);
    damage(&gen, &seg, 10);
    let o = butter(&["stat", path(&db)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = butter(&["stat", path(&db), "--deep", "--json"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["tables"].as_array().unwrap();
    let damaged: Vec<_> = rows.iter().filter(|r| !r["damage"].is_null()).collect();
    assert_eq!(damaged.len(), 1, "{v:#}");
    let said = damaged[0]["damage"].as_str().unwrap();
    assert!(said.contains("checksum mismatch"), "{said}");
    // stat reads DIR through a handle, and names the path given, not the handle's.
    assert!(
        said.contains(&db.display().to_string()) && !said.contains("/proc/self/fd"),
        "{said}"
    );
    assert!(
        rows.iter().any(|r| r["entries"].is_u64()),
        "the undamaged table is still counted: {v:#}"
    );
    let text = butter(&["stat", path(&db), "--deep"]);
    assert_eq!(text.status.code(), Some(4));
    assert!(stdout(&text).contains("DAMAGED: "), "{}", stdout(&text));

    // Damage in the last block, which opening reads: fast stat still prints the directory's
    // identity, generations and writer, names the damage, and exits 4.
    let len = std::fs::metadata(&seg).unwrap().len() as usize;
    damage(&gen, &seg, len - 200);
    let o = butter(&["stat", path(&db)]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("DAMAGED "), "{text}");
    assert!(text.contains("identity "), "{text}");
    assert!(
        text.contains("format       unknown") && !text.contains("manifest     "),
        "nothing shown that was not read: {text}"
    );
    drop(t);
}

/// The largest segment file of the newest generation.
fn largest_segment(db: &Path) -> (PathBuf, PathBuf) {
    let (gen, _) = a_segment(db);
    let seg = std::fs::read_dir(&gen)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    (gen, seg)
}

#[test]
fn remove_names_the_tool_for_a_bench_kept_database() {
    let Some((_t, db)) = test_db("butter_benchkept", 3) else {
        return;
    };
    std::fs::write(db.join(".slasher-bench-db"), b"slasher-bench database\n").unwrap();
    let o = butter(&["remove", path(&db)]);
    assert_status(&o, 3, "slasher-bench clean");
    assert!(db.join("butter.id").exists(), "nothing removed");
}

/// Whether this process runs as root (`restore` from streams needs it).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

#[test]
fn restore_refuses_streams_out_of_order_and_says_it_needs_root() {
    let Some((t, db)) = test_db("butter_stream_order", 5) else {
        return;
    };
    if !is_root() {
        butter_test_support::skip(
            "restore_refuses_streams_out_of_order_and_says_it_needs_root",
            "btrfs send needs root",
        );
        return;
    }
    // Three copies, generations A < B < C, a full stream of A and incremental ones A->B, B->C.
    let streams = t.join("streams");
    std::fs::create_dir(&streams).unwrap();
    let s = |n: &str| streams.join(n);
    let env = open(&db);
    let backup = |copy: &str, stream: &str, parent: Option<&str>| {
        let mut args = vec![
            "backup".to_string(),
            path(&db).into(),
            path(&t.join(copy)).into(),
        ];
        args.extend(["--stream".into(), path(&s(stream)).into()]);
        if let Some(p) = parent {
            args.extend(["--parent".into(), path(&t.join(p)).into()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = butter(&args);
        assert!(o.status.success(), "{}", stderr(&o));
    };
    backup("a", "full-a", None);
    commit(&env, 6);
    backup("b", "inc-ab", Some("a"));
    commit(&env, 7);
    backup("c", "inc-bc", Some("b"));
    drop(env);

    // Out of order: the incremental streams swapped. btrfs receive only reaches the streams
    // received before in this restore (it runs in a mount of DEST's receive subvolume), so
    // B->C, whose parent B is only in the copy elsewhere on the filesystem, is refused.
    let dest = t.join("restored");
    let before = std::fs::read_dir(&t.0).unwrap().count();
    let o = butter(&[
        "restore",
        path(&s("full-a")),
        path(&s("inc-bc")),
        path(&s("inc-ab")),
        path(&dest),
    ]);
    assert_status(&o, 1, "not among the streams restored before it");
    assert!(stderr(&o).contains("inc-bc is an incremental stream"));
    assert!(!dest.exists(), "nothing left");
    assert_eq!(std::fs::read_dir(&t.0).unwrap().count(), before);
    // Full streams out of order: each is received, and the last one brings an older
    // generation (A after C): refused instead of restoring the older state.
    backup("c-full", "full-c", None);
    let o = butter(&[
        "restore",
        path(&s("full-c")),
        path(&s("full-a")),
        path(&dest),
    ]);
    assert_status(&o, 1, "streams out of order");
    assert!(
        stderr(&o).contains("full-a holds generation 7, not newer than generation 9"),
        "{}",
        stderr(&o)
    );
    assert!(!dest.exists(), "nothing left");
    // In order: the newest generation, C.
    let o = butter(&[
        "restore",
        path(&s("full-a")),
        path(&s("inc-ab")),
        path(&s("inc-bc")),
        path(&dest),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("restored generation 9"),
        "{}",
        stdout(&o)
    );
    assert_eq!(read_db(&dest), model_after(7));

    // Not root: refused up front, saying so, nothing made.
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    std::fs::set_permissions(&t.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let open_dir = t.join("anyone");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let mine = open_dir.join("restored");
    let o = Command::new(env!("CARGO_BIN_EXE_butter"))
        .args(["restore", path(&s("full-a")), path(&mine)])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert_status(&o, 1, "needs root");
    assert!(!mine.exists());
}
