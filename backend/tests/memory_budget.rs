//! The environment's one memory budget (design.md §7.1), on real btrfs: the block cache, the
//! segments' indexes and the write transaction stay within one sum, and pressure seen in a
//! memory cgroup (here a directory of the cgroup files the engine reads) shrinks the cache
//! and then the transaction's share, and lets them grow again once it is gone.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use butter_db::budget::MAX_LEVEL;
use butter_db::memory::{CgroupVersion, MemoryCgroup};
use butter_db::{Env, Merges, TableHandle};

const CACHE: usize = 2 << 20;
const MEMTABLE: u64 = 2 << 20;
/// `Budget::note_memtable` passes a transaction's memory on in steps of this much.
const STEP: u64 = 1 << 20;

fn value(key: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (key as usize * 31 + i) as u8).collect()
}

/// Commit `keys` entries of 200 bytes in transactions of 5,000.
fn fill(env: &Env, t: TableHandle, keys: u64) {
    for start in (0..keys).step_by(5_000) {
        let mut w = env.begin_write().unwrap();
        for key in start..(start + 5_000).min(keys) {
            w.put(t, &key.to_be_bytes(), &value(key, 200)).unwrap();
        }
        w.commit().unwrap();
    }
}

/// Commit one new entry (a put equal to what is committed is skipped, and a transaction with
/// nothing to write commits nothing).
fn touch(env: &Env, t: TableHandle, n: u64) {
    let mut w = env.begin_write().unwrap();
    w.put(t, &(u64::MAX - n).to_be_bytes(), b"touch").unwrap();
    w.commit().unwrap();
}

fn read_all(env: &Env, t: TableHandle, keys: u64) {
    let r = env.begin_read();
    for key in 0..keys {
        let got = r
            .get(t, &key.to_be_bytes())
            .unwrap()
            .expect("committed key");
        assert_eq!(&got[..], &value(key, 200)[..], "key {key}");
    }
}

/// What the budget counts of the engine's memory now must be within it (plus the step by
/// which a transaction's memory is passed on).
fn assert_within_budget(env: &Env, when: &str) {
    let m = env.memory_use();
    let used = m.cache_bytes + m.index_bytes + m.memtable_bytes;
    assert!(
        used <= m.budget_bytes + STEP,
        "{when}: cache {} + indexes {} + memtable {} = {used} > budget {}",
        m.cache_bytes,
        m.index_bytes,
        m.memtable_bytes,
        m.budget_bytes
    );
}

#[test]
fn cache_indexes_and_transaction_stay_within_one_budget() {
    let Some(dir) = common::btrfs_dir("budget-sum") else {
        return;
    };
    let env = Env::builder(&dir.path)
        .block_cache_bytes(CACHE)
        .memtable_bytes(MEMTABLE)
        .memory_cgroup(None)
        .open()
        .unwrap();
    let t = env.create_table("t").unwrap();
    let keys = 60_000; // ~12 MB of values: several times the budget
    fill(&env, t, keys);
    read_all(&env, t, keys);
    let m = env.memory_use();
    assert_eq!(m.budget_bytes, CACHE as u64 + MEMTABLE);
    assert!(m.index_bytes > 0, "open segments have indexes: {m:?}");
    // Between transactions the cache has the transaction's share too.
    assert!(
        m.cache_bytes > CACHE as u64,
        "an idle cache may use the whole budget: {m:?}"
    );
    assert_within_budget(&env, "after reading everything");

    // A transaction that grows to most of its share pushes blocks out as it grows.
    let mut w = env.begin_write().unwrap();
    for key in 0..5_000u64 {
        w.put(t, &(keys + key).to_be_bytes(), &value(key, 200))
            .unwrap();
        if key % 1_000 == 0 {
            let got = w.get(t, &(key * 8).to_be_bytes()).unwrap();
            assert_eq!(got.as_deref(), Some(&value(key * 8, 200)[..]));
        }
    }
    assert_eq!(
        w.spilled_runs(),
        0,
        "the transaction stayed within its share"
    );
    assert!(w.memory_bytes() > MEMTABLE / 2);
    for key in 0..keys {
        assert!(w.get(t, &key.to_be_bytes()).unwrap().is_some());
    }
    assert!(env.memory_use().memtable_bytes > MEMTABLE / 2);
    assert_within_budget(&env, "with a transaction of most of its share");
    w.commit().unwrap();
    assert_within_budget(&env, "after its commit");
}

/// The database in `dir` with a cache of CACHE bytes, no memory cgroup, and `merges`.
fn open_without_cgroup(dir: &Path, merges: Merges) -> Env {
    Env::builder(dir)
        .block_cache_bytes(CACHE)
        .memory_cgroup(None)
        .merges(merges)
        .open()
        .unwrap()
}

/// Segment files of the database in `dir` this process holds open.
fn open_segment_files(dir: &Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir) && target.extension().is_some_and(|x| x == "seg"))
        .count()
}

#[test]
fn reopening_reads_no_index_until_a_read_needs_it() {
    let Some(dir) = common::btrfs_dir("budget-lazy-index") else {
        return;
    };
    let open = || open_without_cgroup(&dir.path, Merges::Background);
    let keys = 30_000;
    {
        let env = open();
        for name in ["a", "b"] {
            let t = env.create_table(name).unwrap();
            fill(&env, t, keys);
        }
        assert!(env.memory_use().index_bytes > 0);
        assert!(open_segment_files(&dir.path) > 1);
    }
    assert_eq!(open_segment_files(&dir.path), 0, "closed");
    let env = open();
    assert_eq!(env.memory_use().index_bytes, 0, "reopened: no index read");
    assert_eq!(
        open_segment_files(&dir.path),
        0,
        "reopened: no segment file open"
    );
    let (a, b) = (env.table("a").unwrap(), env.table("b").unwrap());
    // One key of table a: at most a's segments are read (those whose range holds it).
    let r = env.begin_read();
    assert_eq!(
        r.get(a, &7u64.to_be_bytes()).unwrap().as_deref(),
        Some(&value(7, 200)[..])
    );
    drop(r);
    let after_one = env.memory_use().index_bytes;
    let files_after_one = open_segment_files(&dir.path);
    assert!(after_one > 0 && files_after_one > 0);
    read_all(&env, a, keys);
    let after_a = env.memory_use().index_bytes;
    assert!(after_a >= after_one);
    read_all(&env, b, keys);
    let after_b = env.memory_use().index_bytes;
    assert!(
        after_b > after_a,
        "table b's indexes load as b is read: {after_a} then {after_b}"
    );
    assert!(open_segment_files(&dir.path) > files_after_one);
    assert_within_budget(&env, "after reading both tables");
}

/// A reader that started right after a reopen, before any segment was read, still reads every
/// segment whole after commits have merged them away and unlinked their files from `live/`.
#[test]
fn a_reader_from_before_a_merge_reads_the_segments_it_retired() {
    let Some(dir) = common::btrfs_dir("budget-lazy-retired") else {
        return;
    };
    let open = || open_without_cgroup(&dir.path, Merges::Inline);
    let keys = 20_000;
    {
        let env = open();
        let t = env.create_table("t").unwrap();
        fill(&env, t, keys);
    }
    let env = open();
    let t = env.table("t").unwrap();
    assert_eq!(env.memory_use().index_bytes, 0);
    let reader = env.begin_read();
    let listed: Vec<_> = live_segment_files(&dir.path);
    // Overwrite everything, several times: the commits' merges retire every listed segment.
    for round in 0..4u64 {
        let mut w = env.begin_write().unwrap();
        for key in 0..keys {
            w.put(t, &key.to_be_bytes(), &value(key + round + 1, 200))
                .unwrap();
        }
        w.commit().unwrap();
    }
    let now = live_segment_files(&dir.path);
    let gone = listed.iter().filter(|f| !now.contains(f)).count();
    assert!(
        gone > 0,
        "no listed segment was retired: {listed:?} then {now:?}"
    );
    for key in 0..keys {
        let got = reader.get(t, &key.to_be_bytes()).unwrap();
        assert_eq!(got.as_deref(), Some(&value(key, 200)[..]), "key {key}");
    }
}

/// The segment files in the database's `live/`.
fn live_segment_files(db: &Path) -> Vec<std::ffi::OsString> {
    let mut names: Vec<_> = std::fs::read_dir(db.join("live"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".seg"))
        .collect();
    names.sort();
    names
}

/// A v1 memory cgroup's files, as far as the engine reads them: a limit and the anonymous
/// memory charged.
/// Calls of [`count_pressure`], the pressure function of the pressure test's environment (the
/// only one in this binary that has one), with `true` and with `false`.
static RELEASES: AtomicU64 = AtomicU64::new(0);
static RELIEFS: AtomicU64 = AtomicU64::new(0);

fn count_pressure(under: bool) {
    let count = if under { &RELEASES } else { &RELIEFS };
    count.fetch_add(1, Ordering::Relaxed);
}

fn write_cgroup(dir: &Path, limit: u64, anon: u64) {
    std::fs::write(
        dir.join("memory.stat"),
        format!("rss {anon}\ncache 0\nhierarchical_memory_limit {limit}\ntotal_rss {anon}\n"),
    )
    .unwrap();
}

#[test]
fn pressure_shrinks_the_cache_then_the_transactions_share_and_relief_restores_them() {
    let Some(dir) = common::btrfs_dir("budget-pressure") else {
        return;
    };
    let cg_dir = dir.path.join("fake-cgroup");
    std::fs::create_dir(&cg_dir).unwrap();
    let limit: u64 = 100 << 20;
    write_cgroup(&cg_dir, limit, 10 << 20);
    let cgroup = MemoryCgroup {
        dir: cg_dir.clone(),
        mount: dir.path.clone(),
        version: CgroupVersion::V1,
    };
    let db = dir.path.join("db");
    let env = Env::builder(&db)
        .block_cache_bytes(CACHE)
        .memtable_bytes(MEMTABLE)
        .memory_cgroup(Some(cgroup))
        .on_memory_pressure(count_pressure)
        .open()
        .unwrap();
    let t = env.create_table("t").unwrap();
    let keys = 20_000;
    fill(&env, t, keys);
    let calm = env.memory_use();
    assert_eq!(calm.pressure_level, 0);
    assert_eq!(calm.releases, 0, "no call without pressure");
    assert_eq!(RELEASES.load(Ordering::Relaxed), 0);
    assert_eq!(RELIEFS.load(Ordering::Relaxed), 0);
    assert_eq!(calm.cgroup_limit_bytes, Some(limit));
    assert_eq!(calm.cgroup_anon_bytes, Some(10 << 20));
    assert_eq!(calm.memtable_budget_bytes, MEMTABLE);

    // At 60 %, between half and three quarters: the level holds at 0, but the allocator is
    // told to give memory back (memory can climb the rest inside one transaction).
    write_cgroup(&cg_dir, limit, 60 << 20);
    touch(&env, t, 0);
    let m = env.memory_use();
    assert_eq!(
        (m.pressure_level, m.releases, m.releasing),
        (0, 1, true),
        "{m:?}"
    );
    assert_eq!(RELIEFS.load(Ordering::Relaxed), 0);

    // Anonymous memory at 90 % of the limit: each commit raises the level by one.
    write_cgroup(&cg_dir, limit, 90 << 20);
    for level in 1..=MAX_LEVEL + 1 {
        touch(&env, t, u64::from(level));
        let m = env.memory_use();
        assert_eq!(m.pressure_level, level.min(MAX_LEVEL), "{m:?}");
        assert!(
            // (never below 1 MiB: room for one lookup's and the commit's blocks)
            m.cache_room_bytes <= ((CACHE as u64 + MEMTABLE) >> m.pressure_level).max(1 << 20),
            "level {level}: {m:?}"
        );
        assert!(m.cache_bytes <= m.cache_room_bytes, "{m:?}");
        // Each commit under pressure asked the allocator to give freed memory back.
        assert_eq!(m.releases, 1 + u64::from(level), "{m:?}");
        assert_eq!(RELEASES.load(Ordering::Relaxed), m.releases);
    }
    let squeezed = env.memory_use();
    assert_eq!(squeezed.peak_pressure_level, MAX_LEVEL);
    assert!(
        squeezed.memtable_budget_bytes < MEMTABLE / 2,
        "{squeezed:?}"
    );

    // Under pressure a transaction that fits its normal share spills.
    let mut w = env.begin_write().unwrap();
    for key in 0..6_000u64 {
        w.put(t, &key.to_be_bytes(), &value(key + 1, 200)).unwrap();
    }
    assert!(w.spilled_runs() > 0, "a squeezed share spills");
    assert!(w.peak_memory_bytes() <= squeezed.memtable_budget_bytes);
    w.commit().unwrap();

    // Relief: at 40 % the level falls by one a commit, and the room comes back.
    write_cgroup(&cg_dir, limit, 40 << 20);
    for n in 0..MAX_LEVEL {
        touch(&env, t, u64::from(n + 100));
    }
    let relieved = env.memory_use();
    assert_eq!(relieved.pressure_level, 0);
    // The allocator was told once that the pressure is gone, and nothing more after.
    assert_eq!(RELIEFS.load(Ordering::Relaxed), 1);
    assert!(!relieved.releasing);
    touch(&env, t, 200);
    assert_eq!(env.memory_use().releases, relieved.releases);
    assert_eq!(RELEASES.load(Ordering::Relaxed), relieved.releases);
    assert_eq!(RELIEFS.load(Ordering::Relaxed), 1);
    assert_eq!(relieved.memtable_budget_bytes, MEMTABLE);
    assert!(relieved.cache_room_bytes > 2 * squeezed.cache_room_bytes);
    // Nothing was lost on the way.
    let r = env.begin_read();
    for key in 0..keys {
        let want = if key < 6_000 {
            value(key + 1, 200)
        } else {
            value(key, 200)
        };
        assert_eq!(
            r.get(t, &key.to_be_bytes()).unwrap().as_deref(),
            Some(&want[..])
        );
    }
}
