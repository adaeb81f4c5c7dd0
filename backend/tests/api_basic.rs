//! Basic engine behaviour on real btrfs: commit, abort, reopen, read isolation, file counts,
//! typed errors.

mod common;

use butter_db::fs::{is_subvolume_root, BtrfsFs, Fs};
use butter_db::{Env, Error};

#[test]
fn commit_abort_reopen() {
    let Some(dir) = common::btrfs_dir("commit_abort_reopen") else {
        return;
    };
    let env = Env::open_path(&dir.path).unwrap();
    let t = env.create_table("t").unwrap();
    let mut w = env.begin_write().unwrap();
    w.put(t, b"a", b"1").unwrap();
    w.put(t, b"b", b"2").unwrap();
    assert_eq!(w.get(t, b"a").unwrap().as_deref(), Some(&b"1"[..]));
    let info = w.commit().unwrap();
    assert_eq!(info.generation, 2);
    let mut w = env.begin_write().unwrap();
    w.put(t, b"c", b"3").unwrap();
    w.delete(t, b"a").unwrap();
    drop(w);
    let r = env.begin_read();
    assert_eq!(
        r.scan(t, b"").unwrap(),
        vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"2".to_vec())
        ]
    );
    drop(r);
    let mut w = env.begin_write().unwrap();
    w.delete(t, b"a").unwrap();
    w.put(t, b"c", b"3").unwrap();
    w.commit().unwrap();
    drop(env);
    let env = Env::open_path(&dir.path).unwrap();
    let t = env.table("t").unwrap();
    let r = env.begin_read();
    assert_eq!(
        r.scan(t, b"").unwrap(),
        vec![
            (b"b".to_vec(), b"2".to_vec()),
            (b"c".to_vec(), b"3".to_vec())
        ]
    );
}

/// The database directory may be a subvolume root (one made for it, or the top of a btrfs
/// mounted for it): open, commit and reopen work there as in a plain directory.
#[test]
fn database_directory_can_be_a_subvolume() {
    let Some(dir) = common::btrfs_dir("db_in_subvolume") else {
        return;
    };
    let db = dir.path.join("db");
    BtrfsFs.create_subvolume(&db).unwrap();
    assert!(is_subvolume_root(&db).unwrap(), "the test's premise");
    let env = Env::open_path(&db).expect("open in a subvolume root");
    let t = env.create_table("t").unwrap();
    let mut w = env.begin_write().unwrap();
    w.put(t, b"k", b"v").unwrap();
    w.commit().unwrap();
    drop(env);
    let env = Env::open_path(&db).expect("reopen in a subvolume root");
    let t = env.table("t").unwrap();
    assert_eq!(
        env.begin_read().scan(t, b"").unwrap(),
        vec![(b"k".to_vec(), b"v".to_vec())]
    );
}

#[test]
fn readers_keep_their_generation() {
    let Some(dir) = common::btrfs_dir("readers_keep_their_generation") else {
        return;
    };
    let env = Env::open_path(&dir.path).unwrap();
    let t = env.create_table("t").unwrap();
    let mut w = env.begin_write().unwrap();
    w.put(t, b"k", b"old").unwrap();
    w.commit().unwrap();
    let r = env.begin_read();
    let g = r.generation();
    for i in 0..20u32 {
        let mut w = env.begin_write().unwrap();
        w.put(t, b"k", format!("new{i}").as_bytes()).unwrap();
        w.put(t, &i.to_be_bytes(), &[0u8; 100]).unwrap();
        w.commit().unwrap();
    }
    assert_eq!(r.get(t, b"k").unwrap().as_deref(), Some(&b"old"[..]));
    assert!(
        dir.path.join(format!("gen-{g:020}")).exists(),
        "pinned generation was deleted"
    );
    drop(r);
    let mut w = env.begin_write().unwrap();
    w.put(t, b"k", b"last").unwrap();
    w.commit().unwrap();
    assert!(
        !dir.path.join(format!("gen-{g:020}")).exists(),
        "unpinned generation kept"
    );
    let gens = std::fs::read_dir(&dir.path)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("gen-")
        })
        .count();
    assert_eq!(gens, 1);
}

/// A put of the value the transaction already sees is not recorded (design.md §2): a
/// transaction of only such puts commits nothing, while a put that differs from what the
/// transaction sees is kept, wherever the key's current value lives (the memtable, a deletion
/// there, the newest segment holding the key).
#[test]
fn a_put_of_the_current_value_is_not_recorded() {
    let Some(dir) = common::btrfs_dir("same_value_put") else {
        return;
    };
    let env = Env::open_path(&dir.path).unwrap();
    let t = env.create_table("t").unwrap();
    let keys: [&[u8]; 3] = [b"a", b"b", b"c"];
    let mut w = env.begin_write().unwrap();
    for k in keys {
        w.put(t, k, b"1").unwrap();
    }
    let first = w.commit().unwrap().generation;

    let mut w = env.begin_write().unwrap();
    for k in keys {
        w.put(t, k, b"1").unwrap();
    }
    assert_eq!(
        w.commit().unwrap().generation,
        first,
        "puts of the committed values made a new generation"
    );

    let mut w = env.begin_write().unwrap();
    w.put(t, b"a", b"2").unwrap();
    w.put(t, b"a", b"1").unwrap(); // back to the committed value, away from the memtable's
    w.delete(t, b"b").unwrap();
    w.put(t, b"b", b"1").unwrap(); // over the memtable's deletion
    w.put(t, b"c", b"2").unwrap();
    w.put(t, b"c", b"2").unwrap(); // the memtable's value again
    for (k, v) in [(b"a", b"1"), (b"b", b"1"), (b"c", b"2")] {
        assert_eq!(w.get(t, k).unwrap().as_deref(), Some(&v[..]));
    }
    assert_eq!(w.commit().unwrap().generation, first + 1);

    // `c` is 2 in the newest segment and 1 in the oldest: a put of 1 changes it.
    let mut w = env.begin_write().unwrap();
    w.put(t, b"c", b"1").unwrap();
    assert_eq!(w.commit().unwrap().generation, first + 2);
    drop(env);
    let env = Env::open_path(&dir.path).unwrap();
    let t = env.table("t").unwrap();
    assert_eq!(
        env.begin_read().scan(t, b"").unwrap(),
        keys.iter()
            .map(|k| (k.to_vec(), b"1".to_vec()))
            .collect::<Vec<_>>()
    );
}

/// The check that skips a put of the current value reads no block from disk (design.md §2):
/// with no block cache, a put the transaction did not read first is recorded even though it
/// changes nothing, and the same put after a read of the key (whose block the read left at
/// hand) is not.
#[test]
fn the_same_value_check_reads_only_blocks_at_hand() {
    let Some(dir) = common::btrfs_dir("same_value_check_at_hand") else {
        return;
    };
    let env = Env::builder(&dir.path).block_cache_bytes(0).open().unwrap();
    let t = env.create_table("t").unwrap();
    let mut w = env.begin_write().unwrap();
    for k in 0..1000u32 {
        w.put(t, &k.to_be_bytes(), b"1").unwrap();
    }
    let first = w.commit().unwrap().generation;

    let mut w = env.begin_write().unwrap();
    w.put(t, &7u32.to_be_bytes(), b"1").unwrap();
    assert_eq!(
        w.commit().unwrap().generation,
        first + 1,
        "a put checked without its block at hand was dropped"
    );

    let mut w = env.begin_write().unwrap();
    for k in [7u32, 8] {
        assert_eq!(
            w.get(t, &k.to_be_bytes()).unwrap().as_deref(),
            Some(&b"1"[..])
        );
        w.put(t, &k.to_be_bytes(), b"1").unwrap();
    }
    // 9 is in the block the read of 8 left at hand (the first segment's only block).
    w.put(t, &9u32.to_be_bytes(), b"1").unwrap();
    assert_eq!(
        w.commit().unwrap().generation,
        first + 1,
        "a put of the value in the block at hand was recorded"
    );
    let r = env.begin_read();
    for k in [0u32, 7, 8, 999] {
        assert_eq!(
            r.get(t, &k.to_be_bytes()).unwrap().as_deref(),
            Some(&b"1"[..])
        );
    }
}

#[test]
fn one_million_keys_stay_in_few_files() {
    let Some(dir) = common::btrfs_dir("one_million_keys") else {
        return;
    };
    let env = Env::open_path(&dir.path).unwrap();
    let t = env.create_table("t").unwrap();
    for batch in 0..10u64 {
        let mut w = env.begin_write().unwrap();
        for i in 0..100_000u64 {
            let k = (batch * 100_000 + i).to_be_bytes();
            w.put(t, &k, &i.to_le_bytes()).unwrap();
        }
        w.commit().unwrap();
    }
    let live_files = std::fs::read_dir(dir.path.join("live")).unwrap().count();
    assert!(live_files < 1000, "{live_files} files in live/");
    let r = env.begin_read();
    for probe in [0u64, 1, 99_999, 100_000, 543_210, 999_999] {
        let v = r.get(t, &probe.to_be_bytes()).unwrap().expect("present");
        assert_eq!(v.as_ref(), &(probe % 100_000).to_le_bytes());
    }
    assert!(r.get(t, &1_000_000u64.to_be_bytes()).unwrap().is_none());
}

#[test]
fn second_process_open_is_locked() {
    let Some(dir) = common::btrfs_dir("second_open_is_locked") else {
        return;
    };
    let _env = Env::open_path(&dir.path).unwrap();
    // flock is per open file description, so a second open in this process conflicts too.
    let err = Env::open_path(&dir.path).unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
}

#[test]
fn not_btrfs_is_a_typed_error() {
    let dir =
        std::path::Path::new("/dev/shm").join(format!("butter-not-btrfs-{}", std::process::id()));
    let err = Env::open_path(&dir).unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        matches!(err, Error::NotBtrfs { found: "tmpfs", .. }),
        "{err}"
    );
    assert!(err.to_string().contains("mkfs.btrfs"), "{err}");
}

/// Keys and values beyond the format's limits are refused at `put`, and the transaction stays
/// usable: what it wrote before still commits.
#[test]
fn oversized_key_or_value_is_a_typed_error() {
    let Some(dir) = common::btrfs_dir("oversized_key_or_value_is_a_typed_error") else {
        return;
    };
    let env = Env::open_path(&dir.path).unwrap();
    let t = env.create_table("t").unwrap();
    let mut w = env.begin_write().unwrap();
    w.put(t, b"kept", b"1").unwrap();
    let long_key = vec![7u8; 65_536];
    assert!(matches!(
        w.put(t, &long_key, b"v"),
        Err(Error::KeyTooLong(65_536))
    ));
    // Zeroed by the allocator on demand: `put` rejects it by length without touching it.
    let huge = vec![0u8; u32::MAX as usize];
    assert!(matches!(
        w.put(t, b"huge", &huge),
        Err(Error::ValueTooLong(n)) if n == u32::MAX as usize
    ));
    drop(huge);
    w.commit().unwrap();
    let r = env.begin_read();
    assert_eq!(
        r.scan(t, b"").unwrap(),
        vec![(b"kept".to_vec(), b"1".to_vec())]
    );
}

/// Opening a database at a new path creates its parent directories, the directory and the lock
/// file through `Fs` (so the fault tiers reach them); a failure there is a typed error that
/// names the path and leaves nothing behind it.
#[test]
fn open_creates_directories_and_lock_file_through_fs() {
    use butter_db::fs::{FaultPlan, FaultTiming, FaultyFs, Fs};
    use std::sync::Arc;
    let Some(dir) = common::btrfs_dir("open_through_fs") else {
        return;
    };
    let db = dir.path.join("a/b/db");
    let failing_at = |at: u64| {
        let fs = Arc::new(FaultyFs::with_plan(FaultPlan {
            at,
            errno: libc::EIO,
            sticky: false,
            timing: FaultTiming::Before,
        }));
        let err = Env::builder(&db)
            .with_fs(fs.clone() as Arc<dyn Fs>)
            .open()
            .expect_err("the fault fails the open");
        (err, fs.failures())
    };
    // Operation 1: the missing parents.
    let (err, failed) = failing_at(1);
    assert_eq!(failed, [(1, "create_dir_all")]);
    assert!(
        matches!(&err, Error::Io { op: "create database directory", path, .. }
            if path == &dir.path.join("a/b")),
        "{err:?}"
    );
    assert!(!dir.path.join("a").exists(), "nothing was created");
    // Operation 3 (after the parents and the directory): the lock file.
    let (err, failed) = failing_at(3);
    assert_eq!(failed, [(3, "open_lock_file")]);
    assert!(
        matches!(&err, Error::Io { op: "open lock file", path, .. }
            if path == &db.join("butter.lock")),
        "{err:?}"
    );
    assert!(db.is_dir(), "the directory exists from operation 2");
    assert!(!db.join("butter.lock").exists(), "no lock file");
    // A healthy filesystem opens it.
    Env::open_path(&db).expect("open");
}

#[test]
fn block_cache_is_sized_from_the_memory_available_unless_set() {
    let Some(dir) = common::btrfs_dir("block_cache_is_sized") else {
        return;
    };
    let env = Env::open_path(&dir.path).unwrap();
    let expected =
        butter_db::memory::default_block_cache_bytes(butter_db::memory::available_bytes());
    assert_eq!(env.block_cache_bytes(), expected);
    drop(env);
    let env = Env::builder(&dir.path)
        .block_cache_bytes(3 << 20)
        .open()
        .unwrap();
    assert_eq!(env.block_cache_bytes(), 3 << 20);
}
