//! Shared by the `butter` tool's tests: databases on the real btrfs mount, the binary, and a
//! deterministic workload whose state after each commit is known.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use butter_db::{Env, EnvBuilder, Merges};

/// A fresh directory under `$BUTTER_BTRFS_DIR`, removed (subvolumes included) when dropped;
/// `None` after a SKIP line outside CI.
pub fn btrfs_dir(test: &str) -> Option<TestDir> {
    let base = butter_test_support::btrfs_base(test)?;
    let dir = tempfile::Builder::new()
        .prefix(&format!("{test}-"))
        .tempdir_in(base)
        .expect("temp dir on btrfs");
    Some(TestDir(dir.keep()))
}

/// A test directory on btrfs.
pub struct TestDir(pub PathBuf);

impl TestDir {
    pub fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        remove_tree(&self.0);
    }
}

/// Deletes `dir` with any subvolumes below it.
pub fn remove_tree(dir: &Path) {
    use butter_db::fs::{is_subvolume_root, BtrfsFs, Fs};
    if let Ok(rd) = std::fs::read_dir(dir) {
        for entry in rd.flatten() {
            let path = entry.path();
            let Ok(ft) = entry.file_type() else { continue };
            if ft.is_dir() {
                remove_tree(&path);
                if is_subvolume_root(&path).unwrap_or(false) {
                    let _ = BtrfsFs.delete_subvolume(&path);
                }
            } else {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// Runs the `butter` binary.
pub fn butter(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_butter"))
        .args(args)
        .output()
        .expect("run butter")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// The two tables' contents after transaction `i` of the workload.
pub type Model = BTreeMap<(String, Vec<u8>), Vec<u8>>;

/// Transaction `i` (from 1): table `a` gets keys `i*7 % 200` .. (20 of them) set to a value
/// naming `i`, table `b` gets `counter` = i and loses key `i - 3`'s entry; every 5th
/// transaction deletes a range of `a`. Deterministic, so the state after any `j` is known.
pub fn apply(model: &mut Model, i: u64, mut put: impl FnMut(&str, &[u8], Option<&[u8]>)) {
    let mut set = |model: &mut Model, t: &str, k: Vec<u8>, v: Option<Vec<u8>>| {
        put(t, &k, v.as_deref());
        match v {
            Some(v) => model.insert((t.to_string(), k), v),
            None => model.remove(&(t.to_string(), k)),
        };
    };
    for n in 0..20u64 {
        let k = ((i * 7 + n * 13) % 200).to_be_bytes().to_vec();
        let v = format!("value {i}.{n} {}", "x".repeat((i % 17) as usize)).into_bytes();
        set(model, "a", k, Some(v));
    }
    set(
        model,
        "b",
        b"counter".to_vec(),
        Some(i.to_be_bytes().to_vec()),
    );
    set(
        model,
        "b",
        i.to_be_bytes().to_vec(),
        Some(vec![i as u8; 100]),
    );
    if let Some(old) = i.checked_sub(3) {
        set(model, "b", old.to_be_bytes().to_vec(), None);
    }
    if i % 5 == 0 {
        for k in (i % 200)..((i % 200) + 10) {
            set(model, "a", k.to_be_bytes().to_vec(), None);
        }
    }
}

/// The model after transactions 1..=j.
pub fn model_after(j: u64) -> Model {
    let mut m = Model::new();
    for i in 1..=j {
        apply(&mut m, i, |_, _, _| {});
    }
    m
}

/// Opens (creating) the database in `dir` with inline merges (no merge thread).
pub fn open(dir: &Path) -> Env {
    EnvBuilder::new(dir)
        .merges(Merges::Inline)
        .open()
        .expect("open database")
}

/// Commits transaction `i` of the workload.
pub fn commit(env: &Env, i: u64) {
    let a = env
        .table("a")
        .unwrap_or_else(|| env.create_table("a").unwrap());
    let b = env
        .table("b")
        .unwrap_or_else(|| env.create_table("b").unwrap());
    let mut txn = env.begin_write().unwrap();
    let mut scratch = Model::new();
    apply(&mut scratch, i, |t, k, v| {
        let h = if t == "a" { a } else { b };
        match v {
            Some(v) => txn.put(h, k, v).unwrap(),
            None => txn.delete(h, k).unwrap(),
        }
    });
    txn.commit().unwrap();
}

/// A database in `dir` after transactions 1..=j.
pub fn make_db(dir: &Path, j: u64) {
    let env = open(dir);
    for i in 1..=j {
        commit(&env, i);
    }
}

/// A test directory holding `db`, a database after transactions 1..=j; `None` after a SKIP.
pub fn test_db(test: &str, j: u64) -> Option<(TestDir, PathBuf)> {
    let t = btrfs_dir(test)?;
    let db = t.join("db");
    make_db(&db, j);
    Some((t, db))
}

/// What the database in `dir` holds, read through the engine.
pub fn read_db(dir: &Path) -> Model {
    let env = open(dir);
    let txn = env.begin_read();
    let mut m = Model::new();
    for t in ["a", "b"] {
        let Some(h) = env.table(t) else { continue };
        for (k, v) in txn.scan(h, &[]).unwrap() {
            m.insert((t.to_string(), k), v);
        }
    }
    m
}

/// The transaction count a state read from a database corresponds to (`b/counter`).
pub fn counter(m: &Model) -> u64 {
    m.get(&("b".to_string(), b"counter".to_vec()))
        .map_or(0, |v| u64::from_be_bytes(v.as_slice().try_into().unwrap()))
}
