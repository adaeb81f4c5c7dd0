//! A write transaction larger than its memory budget (design.md §2, "Spilling"), on real
//! btrfs: it spills sorted runs to `live/`, reads and cursors see its writes through them, its
//! memory accounting stays within the budget, the commit installs everything in one
//! generation that reopens equal to a model, and an aborted transaction leaves no run behind.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use butter_db::{Env, TableHandle};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// The budget the tests give: far below what their transactions write.
const BUDGET: u64 = 256 << 10;

/// A tiny deterministic generator (xorshift64*), so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn scan_all(env: &Env, t: TableHandle) -> Model {
    env.begin_read().scan(t, b"").unwrap().into_iter().collect()
}

fn live_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir.join("live"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

fn value(key: u64, round: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (key as usize + round as usize * 7 + i) as u8)
        .collect()
}

/// Every entry a write cursor walks from the first key, with its value.
fn walk(w: &mut butter_db::WriteTxn<'_>, t: TableHandle) -> Model {
    let mut c = w.cursor(t).unwrap();
    let mut out = Model::new();
    let mut k = c.first_key().unwrap();
    while k.is_some() {
        let (key, v) = c.current().unwrap().unwrap();
        out.insert(key, v);
        k = c.next_key().unwrap();
    }
    out
}

/// Committed data in two tables, then one transaction that writes several times its budget
/// (overwrites, deletions of committed keys, a new table, keys in and out of order); checked
/// against a model while it runs, after its commit and after a reopen.
#[test]
fn a_transaction_larger_than_its_budget_spills_commits_and_reopens_equal() {
    let Some(dir) = common::btrfs_dir("spill-commit") else {
        return;
    };
    let env = Env::builder(&dir.path)
        .memtable_bytes(BUDGET)
        .open()
        .unwrap();
    assert_eq!(env.memtable_budget(), BUDGET);
    let a = env.create_table("a").unwrap();
    let b = env.create_table("b").unwrap();
    let mut ma = Model::new();
    let mut mb = Model::new();
    // The committed base: small transactions, none of them spilling.
    for round in 0..3u64 {
        let mut w = env.begin_write().unwrap();
        for key in (round..3_000).step_by(3) {
            let k = key.to_be_bytes().to_vec();
            w.put(a, &k, &value(key, round, 40)).unwrap();
            ma.insert(k, value(key, round, 40));
        }
        assert_eq!(w.spilled_runs(), 0, "a small transaction does not spill");
        w.commit().unwrap();
    }
    let before = live_files(&dir.path);

    let mut rng = Rng(0x5_9111);
    let mut w = env.begin_write().unwrap();
    let c = w.create_table("c").unwrap();
    let mut mc = Model::new();
    let mut most_runs = 0;
    for step in 0..60_000u64 {
        // Mostly ascending through a wide key range, with jumps back (the slasher's shape).
        let key = if rng.next() % 10 < 8 {
            step / 2
        } else {
            rng.next() % 40_000
        };
        let k = key.to_be_bytes().to_vec();
        let len = 20 + (rng.next() % 120) as usize;
        match rng.next() % 10 {
            0 => {
                w.delete(a, &k).unwrap();
                ma.remove(&k);
            }
            1 | 2 => {
                w.put(b, &k, &value(key, step, len)).unwrap();
                mb.insert(k, value(key, step, len));
            }
            3 => {
                // A key longer than the inline limit, boxed in the memtable.
                let mut long = k.clone();
                long.extend_from_slice(&[0xab; 24]);
                w.put(c, &long, &value(key, step, len)).unwrap();
                mc.insert(long, value(key, step, len));
            }
            _ => {
                w.put(a, &k, &value(key, step, len)).unwrap();
                ma.insert(k, value(key, step, len));
            }
        }
        assert!(
            w.memory_bytes() <= BUDGET,
            "step {step}: {} bytes accounted, budget {BUDGET}",
            w.memory_bytes()
        );
        most_runs = most_runs.max(w.spilled_runs());
        if step % 10_000 == 9_999 {
            // Lookups see the memtable, the runs and the committed segments in order.
            for probe in 0..200u64 {
                let k = (rng.next() % 41_000).to_be_bytes().to_vec();
                assert_eq!(
                    w.get(a, &k).unwrap().map(|v| v.into_owned()),
                    ma.get(&k).cloned(),
                    "step {step}, probe {probe}"
                );
            }
        }
    }
    assert!(w.spilled_runs() > 0, "the transaction spilled");
    assert!(
        most_runs <= 3 * 4,
        "at most four runs per table at a time, {most_runs}"
    );
    assert!(w.peak_memory_bytes() <= BUDGET);
    // Runs are files in live/ while the transaction is open.
    assert!(live_files(&dir.path).len() > before.len());
    // A cursor walks the merge of memtable, runs and segments.
    assert_eq!(walk(&mut w, a), ma);
    assert_eq!(walk(&mut w, b), mb);
    assert_eq!(walk(&mut w, c), mc);
    let info = w.commit().unwrap();
    assert_eq!(env.generation(), info.generation);
    assert_eq!(scan_all(&env, a), ma);
    assert_eq!(scan_all(&env, b), mb);
    assert_eq!(scan_all(&env, c), mc);
    // live/ holds the manifest's segments and nothing else: no run was left behind.
    let named: BTreeSet<String> = env
        .files()
        .iter()
        .filter(|p| p.starts_with(dir.path.join("live")))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let on_disk: BTreeSet<String> = live_files(&dir.path)
        .into_iter()
        .filter(|n| n.ends_with(".seg") || n == "MANIFEST")
        .collect();
    assert_eq!(on_disk, named);
    drop(env);

    let env = Env::open_path(&dir.path).unwrap();
    let (a, b) = (env.table("a").unwrap(), env.table("b").unwrap());
    assert_eq!(scan_all(&env, a), ma);
    assert_eq!(scan_all(&env, b), mb);
    assert_eq!(scan_all(&env, env.table("c").unwrap()), mc);
    // And the next (small) transaction builds on it.
    let mut w = env.begin_write().unwrap();
    w.put(a, b"z", b"last").unwrap();
    w.commit().unwrap();
    ma.insert(b"z".to_vec(), b"last".to_vec());
    assert_eq!(scan_all(&env, a), ma);
}

/// A spilling transaction that is dropped leaves the database and live/ as they were.
#[test]
fn an_aborted_spilling_transaction_leaves_no_run_behind() {
    let Some(dir) = common::btrfs_dir("spill-abort") else {
        return;
    };
    let env = Env::builder(&dir.path)
        .memtable_bytes(BUDGET)
        .open()
        .unwrap();
    let t = env.create_table("t").unwrap();
    let mut w = env.begin_write().unwrap();
    for key in 0..2_000u64 {
        w.put(t, &key.to_be_bytes(), &value(key, 0, 30)).unwrap();
    }
    w.commit().unwrap();
    let model = scan_all(&env, t);
    let before = live_files(&dir.path);
    let generation = env.generation();

    let mut w = env.begin_write().unwrap();
    for key in 0..30_000u64 {
        w.put(t, &key.to_be_bytes(), &value(key, 1, 60)).unwrap();
    }
    assert!(w.spilled_runs() > 0);
    assert!(live_files(&dir.path).len() > before.len());
    drop(w);
    assert_eq!(live_files(&dir.path), before, "the runs are deleted");
    assert_eq!(env.generation(), generation);
    assert_eq!(scan_all(&env, t), model);
    // The next transaction commits normally, and the database reopens as it says.
    let mut w = env.begin_write().unwrap();
    w.put(t, b"after", b"abort").unwrap();
    w.commit().unwrap();
    drop(env);
    let env = Env::open_path(&dir.path).unwrap();
    let t = env.table("t").unwrap();
    let mut want = model;
    want.insert(b"after".to_vec(), b"abort".to_vec());
    assert_eq!(scan_all(&env, t), want);
}

/// A cursor that deletes and overwrites as it walks (the slasher's pruning) keeps its place
/// when its own writes make the transaction spill under it.
#[test]
fn a_write_cursor_walks_on_through_spills() {
    let Some(dir) = common::btrfs_dir("spill-cursor") else {
        return;
    };
    let env = Env::builder(&dir.path)
        .memtable_bytes(BUDGET)
        .open()
        .unwrap();
    let t = env.create_table("t").unwrap();
    let mut model = Model::new();
    let mut w = env.begin_write().unwrap();
    for key in 0..20_000u64 {
        let k = (key * 2).to_be_bytes().to_vec();
        w.put(t, &k, &value(key, 0, 16)).unwrap();
        model.insert(k, value(key, 0, 16));
    }
    w.commit().unwrap();

    let mut w = env.begin_write().unwrap();
    // Keys of this transaction ahead of the cursor, in its memtable when the walk starts:
    // the walk's own writes spill them to a run, and the walk must still reach them.
    let mut all: Vec<Vec<u8>> = (0..20_000u64)
        .map(|k| (k * 2).to_be_bytes().to_vec())
        .collect();
    for key in (1..40_000u64).step_by(20) {
        let k = key.to_be_bytes().to_vec();
        w.put(t, &k, &value(key, 2, 16)).unwrap();
        model.insert(k.clone(), value(key, 2, 16));
        all.push(k);
    }
    all.sort();
    assert_eq!(w.spilled_runs(), 0, "the walk starts before any spill");
    let mut visited = Vec::new();
    {
        let mut c = w.cursor(t).unwrap();
        let mut k = c.first_key().unwrap();
        while let Some(key) = k {
            visited.push(key.clone());
            let n = u64::from_be_bytes(key.as_slice().try_into().unwrap());
            if n % 6 == 0 {
                c.delete_current().unwrap();
                model.remove(&key);
            } else {
                let v = value(n, 1, 150);
                c.put(&key, &v).unwrap();
                model.insert(key.clone(), v);
            }
            k = c.next_key().unwrap();
        }
    }
    assert!(w.spilled_runs() > 0, "the walk's writes spilled");
    let first_wrong = visited.iter().zip(&all).position(|(v, a)| v != a);
    assert!(
        visited == all,
        "every key once, in order: visited {} of {}, first difference at {first_wrong:?}",
        visited.len(),
        all.len()
    );
    w.commit().unwrap();
    assert_eq!(scan_all(&env, t), model);
}
