//! The `butter` binary, subcommand by subcommand, on real btrfs (`BUTTER_BTRFS_DIR`): what each
//! prints on a database whose contents the test knows, and that bad input gets a one-line
//! error and changes nothing.

mod common;

use std::path::Path;

use common::*;

/// Every entry of a directory tree (names and sizes), to show that nothing changed.
fn listing(dir: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            out.push((p.display().to_string(), meta.len()));
            if meta.is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The error line of a failed run: one line, starting `butter: `, containing `want`.
fn assert_error(o: &std::process::Output, want: &str) {
    let err = stderr(o);
    assert!(!o.status.success(), "expected a failure, got {}", stdout(o));
    // The status says which kind of failure (tests/operator.rs checks each one).
    assert!(
        matches!(o.status.code(), Some(1..=6)),
        "{:?}: {err}",
        o.status.code()
    );
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("butter: "), "{err}");
    assert!(err.contains(want), "expected {want:?} in {err}");
}

#[test]
fn help_names_every_subcommand() {
    let o = butter(&["--help"]);
    assert!(o.status.success());
    let help = stdout(&o);
    for sub in ["stat", "check", "backup", "restore", "dump", "remove"] {
        assert!(help.contains(sub), "{sub} missing from {help}");
        let o = butter(&[sub, "--help"]);
        assert!(o.status.success(), "{sub} --help");
        assert!(
            stdout(&o).contains("Usage: butter"),
            "{sub}: {}",
            stdout(&o)
        );
    }
    // A usage error is clap's (status 2), not a command's.
    assert_eq!(butter(&["stat"]).status.code(), Some(2));
}

#[test]
fn stat_check_and_dump_show_what_was_committed() {
    let Some((_t, db)) = test_db("butter_stat", 40) else {
        return;
    };
    let model = model_after(40);

    let o = butter(&["stat", path(&db), "--json", "--deep"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["generation"],
        serde_json::json!(42),
        "2 table creations + 40 commits"
    );
    assert_eq!(v["generations_on_disk"], serde_json::json!([42]));
    assert_eq!(v["lock_holder"], serde_json::Value::Null);
    assert_eq!(v["format_version"], serde_json::json!(2));
    assert_eq!(v["identity"].as_str().unwrap().len(), 32);
    for (i, name) in ["a", "b"].iter().enumerate() {
        let row = &v["tables"][i];
        assert_eq!(row["name"], serde_json::json!(name));
        let entries = model.keys().filter(|(t, _)| t == name).count() as u64;
        assert_eq!(row["entries"], serde_json::json!(entries), "{name}");
        let live: u64 = model
            .iter()
            .filter(|((t, _), _)| t == name)
            .map(|((_, k), v)| 6 + k.len() as u64 + v.len() as u64)
            .sum();
        assert_eq!(row["live_bytes"], serde_json::json!(live), "{name}");
        assert!(row["segments"].as_u64().unwrap() >= 1);
    }
    // Overwrites and deletions leave dead bytes until a merge of the whole table.
    let dead: u64 = (0..2)
        .map(|i| v["tables"][i]["dead_bytes"].as_u64().unwrap())
        .sum();
    assert!(dead > 0, "{v:#}");
    let text = butter(&["stat", path(&db)]);
    assert!(text.status.success());
    assert!(
        stdout(&text).contains("generation   42"),
        "{}",
        stdout(&text)
    );

    let o = butter(&["check", path(&db)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("ok: "), "{}", stdout(&o));

    // dump: every entry of b, then a range of a (entry lines alone).
    let o = butter(&["dump", path(&db), "b", "--raw"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let want: Vec<String> = model
        .iter()
        .filter(|((t, _), _)| t == "b")
        .map(|((_, k), v)| format!("{} {}", hex::encode(k), hex::encode(v)))
        .collect();
    assert_eq!(stdout(&o).lines().collect::<Vec<_>>(), want);
    let (from, to) = (10u64.to_be_bytes(), 50u64.to_be_bytes());
    let o = butter(&[
        "dump",
        path(&db),
        "a",
        "--from",
        &hex::encode(from),
        "--to",
        &hex::encode(to),
        "--limit",
        "7",
        "--raw",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let want: Vec<String> = model
        .iter()
        .filter(|((t, k), _)| t == "a" && k.as_slice() >= &from[..] && k.as_slice() < &to[..])
        .take(7)
        .map(|((_, k), v)| format!("{} {}", hex::encode(k), hex::encode(v)))
        .collect();
    assert_eq!(want.len(), 7);
    assert_eq!(stdout(&o).lines().collect::<Vec<_>>(), want);

    // Bad input: an unknown table, a bad key.
    assert_error(
        &butter(&["dump", path(&db), "nope"]),
        "no table \"nope\" in this database; its tables: a, b",
    );
    assert_error(
        &butter(&["dump", path(&db), "a", "--from", "xyz"]),
        "not hexadecimal",
    );
    // None of it wrote into the database: the engine still opens it at the same state.
    assert_eq!(read_db(&db), model);
}

#[test]
fn not_a_database_is_refused_by_every_command() {
    let Some(t) = btrfs_dir("butter_notdb") else {
        return;
    };
    let plain = t.join("plain");
    std::fs::create_dir(&plain).unwrap();
    std::fs::write(plain.join("notes.txt"), b"mine").unwrap();
    let before = listing(&t.0);
    for args in [
        vec!["stat", path(&plain)],
        vec!["check", path(&plain)],
        vec!["dump", path(&plain), "a"],
        vec!["remove", path(&plain)],
    ] {
        assert_error(&butter(&args), "not a butter_db database");
    }
    let dest = t.join("dest");
    assert_error(
        &butter(&["backup", path(&plain), path(&dest)]),
        "not a butter_db database",
    );
    assert_error(
        &butter(&["restore", path(&plain), path(&dest)]),
        "not a butter_db database",
    );
    assert_eq!(listing(&t.0), before, "nothing changed");
}

#[test]
fn check_names_a_damaged_segment() {
    let Some(t) = btrfs_dir("butter_damage") else {
        return;
    };
    let db = t.join("db");
    {
        // One segment of many blocks: open reads only the footer, the index and the last
        // block, so damage in the first block is found by the full read alone.
        let env = open(&db);
        let big = env.create_table("big").unwrap();
        let mut txn = env.begin_write().unwrap();
        for i in 0..3000u32 {
            txn.put(big, &i.to_be_bytes(), &[i as u8; 100]).unwrap();
        }
        txn.commit().unwrap();
    }
    let gen = std::fs::read_dir(&db)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_str().unwrap().starts_with("gen-"))
        .unwrap();
    let seg = std::fs::read_dir(&gen)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "seg"))
        .unwrap();
    assert!(
        std::fs::metadata(&seg).unwrap().len() > 100_000,
        "many blocks"
    );
    // Stat and dump open the segment without reading that block.
    let o = butter(&["dump", path(&db), "big", "--from", "00000bb0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Flip one byte of the first data block (the footer and index, read at open, stay intact).
    use butter_db::fs::BtrfsFs;
    BtrfsFs.set_readonly(&gen, false).unwrap();
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[10] ^= 0x40;
    std::fs::write(&seg, &bytes).unwrap();
    BtrfsFs.set_readonly(&gen, true).unwrap();
    let o = butter(&["dump", path(&db), "big", "--from", "00000bb0"]);
    assert!(
        o.status.success(),
        "the damage is not in the blocks dump read: {}",
        stderr(&o)
    );
    let o = butter(&["check", path(&db)]);
    assert_error(&o, "checksum mismatch");
    assert!(stderr(&o).contains(seg.file_name().unwrap().to_str().unwrap()));
    // The block by its number and its byte range: `block 0 of N, bytes 0..END (END bytes)`.
    let err = stderr(&o);
    // check reads DIR through a handle, and names the path given, not the handle's.
    assert!(
        err.contains(&format!("{}/gen-", db.display())) && !err.contains("/proc/self/fd"),
        "the error names DIR as given: {err}"
    );
    assert!(err.contains(": block 0 of "), "the first block: {err}");
    let end: u64 = err
        .split_once("bytes 0..")
        .and_then(|(_, rest)| rest.split_once(' '))
        .and_then(|(end, _)| end.parse().ok())
        .unwrap_or_else(|| panic!("no byte range in {err}"));
    assert!(
        err.contains(&format!("bytes 0..{end} ({end} bytes)")),
        "{err}"
    );
    assert!(
        end > 10 && end < std::fs::metadata(&seg).unwrap().len(),
        "the flipped byte 10 lies in the range, which is one block: {err}"
    );
}

#[test]
fn remove_deletes_a_database_and_refuses_others() {
    let Some((_t, db)) = test_db("butter_remove", 5) else {
        return;
    };
    // In use: refused.
    let env = open(&db);
    assert_error(&butter(&["remove", path(&db)]), "locked by another process");
    let o = butter(&["stat", path(&db)]);
    assert!(
        stdout(&o).contains(&format!("pid {} holds the lock", std::process::id())),
        "{}",
        stdout(&o)
    );
    drop(env);
    // A foreign entry: refused, untouched.
    std::fs::write(db.join("mine.txt"), b"keep me").unwrap();
    let before = listing(&db);
    assert_error(&butter(&["remove", path(&db)]), "mine.txt");
    assert_eq!(listing(&db), before);
    std::fs::remove_file(db.join("mine.txt")).unwrap();
    let o = butter(&["remove", path(&db)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("1 generations"), "{}", stdout(&o));
    assert!(!db.exists());
    // What `rm -rf` leaves of a database (its files gone, its read-only generation not, nor
    // its identity inside it): still removable.
    make_db(&db, 3);
    let rm = std::process::Command::new("rm")
        .args(["-rf", path(&db)])
        .output()
        .unwrap();
    assert!(
        !rm.status.success() && db.exists(),
        "rm -rf removed a read-only snapshot"
    );
    assert!(!db.join("butter.id").exists());
    let o = butter(&["remove", path(&db)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!db.exists());
}

#[test]
fn backup_refuses_bad_destinations_and_changes_nothing() {
    let Some((t, db)) = test_db("butter_baddest", 3) else {
        return;
    };
    let full = t.join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("x"), b"x").unwrap();
    let file = t.join("file");
    std::fs::write(&file, b"f").unwrap();
    let before = listing(&t.0);
    assert_error(
        &butter(&["backup", path(&db), path(&db.join("inside"))]),
        "inside the database directory",
    );
    assert_error(&butter(&["backup", path(&db), path(&full)]), "not empty");
    assert_error(
        &butter(&["backup", path(&db), path(&file)]),
        "not a directory",
    );
    assert_error(
        &butter(&["backup", path(&db), path(&t.join("no/such/parent"))]),
        "its parent directory does not exist",
    );
    assert_eq!(listing(&t.0), before);
}

#[test]
fn backup_makes_a_new_database_that_opens() {
    let Some((t, db)) = test_db("butter_backup", 30) else {
        return;
    };
    let dest = t.join("copy");
    std::fs::create_dir(&dest).unwrap(); // an empty directory is accepted
    let o = butter(&["backup", path(&db), path(&dest)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("copied generation 32"),
        "{}",
        stdout(&o)
    );
    let ids = |p: &Path| {
        let o = butter(&["stat", path(p), "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["identity"].as_str().unwrap().to_string()
    };
    assert_ne!(ids(&db), ids(&dest), "a copy has its own identity");
    assert!(butter(&["check", path(&dest)]).status.success());
    assert_eq!(read_db(&dest), model_after(30));
    // The copy is a database of its own: writes to it do not reach the original.
    let env = open(&dest);
    commit(&env, 31);
    drop(env);
    assert_eq!(read_db(&dest), model_after(31));
    assert_eq!(read_db(&db), model_after(30));
    // And `restore` from a copy is the same operation in the other direction.
    let back = t.join("back");
    let o = butter(&["restore", path(&dest), path(&back)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(read_db(&back), model_after(31));
    for d in [&dest, &back] {
        assert!(butter(&["remove", path(d)]).status.success());
    }
}
