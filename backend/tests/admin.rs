//! The read-only inspection and copy API (`butter_db::admin`, design.md §9) against the states
//! a writer deleting a generation passes through, and against damage it must report rather
//! than work around. The `butter` tool's own tests (`tools/tests/`) cover the commands.

mod common;

use std::path::{Path, PathBuf};

use butter_db::admin::{self, NewCopy, Snapshot};
use butter_db::fs::BtrfsFs;
use butter_db::{Env, Error, Merges};

fn make_db(dir: &Path, commits: u8) -> Env {
    let env = Env::open_path(dir).unwrap();
    let t = env.create_table("t").unwrap();
    for i in 0..commits {
        let mut txn = env.begin_write().unwrap();
        txn.put(t, &[i], &[i; 100]).unwrap();
        txn.commit().unwrap();
    }
    env
}

fn newest_generation(dir: &Path) -> PathBuf {
    let mut gens: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("gen-"))
        .collect();
    gens.sort();
    gens.pop().unwrap()
}

fn segments(gen: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(gen)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect()
}

#[test]
fn a_copy_refuses_a_source_that_stopped_being_read_only() {
    let Some(dir) = common::btrfs_dir("admin_rdonly") else {
        return;
    };
    let db = dir.path.join("db");
    let env = make_db(&db, 3);
    // A reader pins the generation; the next commit makes a newer one.
    let pin = env.begin_read();
    let mut txn = env.begin_write().unwrap();
    txn.put(env.table("t").unwrap(), b"k", b"v").unwrap();
    txn.commit().unwrap();
    let old = db.join(format!("gen-{:020}", pin.generation()));
    let snap = Snapshot::open_generation(&old).unwrap();
    // What an unprivileged deleter does first: clear the flag, then unlink.
    BtrfsFs.set_readonly(&old, false).unwrap();
    std::fs::remove_file(&segments(&old)[0]).unwrap();
    let dest = dir.path.join("dest");
    let mut copy = NewCopy::create(&dest).unwrap();
    let err = copy.install(&snap).unwrap_err();
    assert!(
        matches!(&err, Error::Corrupted { reason, .. } if reason.contains("read-only")),
        "{err}"
    );
    drop(copy);
    assert!(!dest.exists(), "the unfinished copy was removed");
    // The newest generation copies as usual.
    let info = admin::backup(&db, &dest).unwrap();
    assert_eq!(info.generation, env.generation());
    drop(pin);
}

#[test]
fn a_missing_segment_in_the_newest_generation_is_reported() {
    let Some(dir) = common::btrfs_dir("admin_missing") else {
        return;
    };
    let db = dir.path.join("db");
    drop(make_db(&db, 3));
    let gen = newest_generation(&db);
    let seg = segments(&gen).pop().unwrap();
    BtrfsFs.set_readonly(&gen, false).unwrap();
    std::fs::remove_file(&seg).unwrap();
    BtrfsFs.set_readonly(&gen, true).unwrap();
    // No newer generation exists, so this is damage, not a writer moving on.
    match Snapshot::open(&db) {
        Err(Error::Io { path, .. }) => assert_eq!(path, seg),
        other => panic!("expected the missing segment, got {other:?}"),
    }
    let dest = dir.path.join("dest");
    assert!(admin::backup(&db, &dest).is_err());
    assert!(!dest.exists());
}

#[test]
fn remove_refuses_another_databases_generation() {
    let Some(dir) = common::btrfs_dir("admin_foreign") else {
        return;
    };
    let (a, b) = (dir.path.join("a"), dir.path.join("b"));
    drop(make_db(&a, 1));
    drop(make_db(&b, 2));
    // b's generation, snapshotted into a under a name a could have.
    use butter_db::fs::Fs;
    let foreign = a.join(format!("gen-{:020}", 999));
    BtrfsFs
        .snapshot(&newest_generation(&b), &foreign, true)
        .unwrap();
    match admin::remove_database(&a) {
        Err(Error::ForeignEntry { path, .. }) => assert_eq!(path, foreign),
        other => panic!("expected ForeignEntry, got {other:?}"),
    }
    assert!(
        a.join("butter.id").exists() && foreign.exists(),
        "untouched"
    );
    // A copy stopped half-way (marker, staging subvolume, no identity) is removable.
    let half = dir.path.join("half");
    let copy = NewCopy::create(&half).unwrap();
    std::mem::forget(copy); // as if killed: its drop would clean up
    BtrfsFs
        .snapshot(
            &newest_generation(&b),
            &half.join(admin::STAGING_SUBVOLUME),
            false,
        )
        .unwrap();
    let removed = admin::remove_database(&half).unwrap();
    assert_eq!(removed.other_subvolumes, 1);
    assert!(!half.exists());
}

#[test]
fn database_bytes_are_the_newest_generations_files() {
    let Some(dir) = common::btrfs_dir("admin_size") else {
        return;
    };
    let db = dir.path.join("db");
    // Inline merges: no background output in `compact/` to count beside the live files.
    let env = Env::builder(&db).merges(Merges::Inline).open().unwrap();
    let t = env.create_table("t").unwrap();
    for i in 0..3u8 {
        let mut txn = env.begin_write().unwrap();
        txn.put(t, &[i], &[i; 100]).unwrap();
        txn.commit().unwrap();
    }
    // What the engine says its live files are (`Env::files`: the lock, the manifest and the
    // segments in `live/`), which the newest generation's manifest lists.
    let expected: u64 = env
        .files()
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    let size = admin::database_bytes(&db).unwrap();
    assert_eq!(size, expected);
    assert!(size > 300, "three entries of 100 bytes: {size}");
    // A reader pins an older generation: its files are not counted beside the newest's (the
    // new value is in one segment with the three merged entries, under the sum of both).
    let pin = env.begin_read();
    let mut txn = env.begin_write().unwrap();
    txn.put(env.table("t").unwrap(), b"k", &[7; 5000]).unwrap();
    txn.commit().unwrap();
    let grown = admin::database_bytes(&db).unwrap();
    assert!(grown > 5000 && grown < size + 5000, "{size} -> {grown}");
    drop(pin);
    // Not a database: a typed error, nothing else.
    let other = dir.path.join("other");
    std::fs::create_dir(&other).unwrap();
    assert!(matches!(
        admin::database_bytes(&other),
        Err(Error::NotADatabase { .. })
    ));
}

#[test]
fn a_generations_files_export_and_stage_back_into_a_copy() {
    let Some(dir) = common::btrfs_dir("admin_export") else {
        return;
    };
    let db = dir.path.join("db");
    let env = make_db(&db, 5);
    // A reader's snapshot keeps reading its generation's files after the writer deletes it.
    let snap = Snapshot::open(&db).unwrap();
    let gen = snap.dir().to_path_buf();
    let mut txn = env.begin_write().unwrap();
    txn.put(env.table("t").unwrap(), b"later", b"v").unwrap();
    txn.commit().unwrap();
    let files = snap.files().unwrap();
    let mut names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
    names.sort_unstable();
    assert!(names.contains(&"MANIFEST") && names.contains(&"butter.id"));
    assert!(names.iter().any(|n| n.ends_with(".seg")));
    // Each file's bytes, read through the snapshot's descriptors.
    let read = |f: &admin::GenerationFile<'_>| {
        let mut buf = vec![0u8; f.len as usize];
        let mut at = 0;
        while at < buf.len() {
            let n = f.read_at(&mut buf[at..], at as u64).unwrap();
            assert!(n > 0, "{} ends early", f.name);
            at += n;
        }
        buf
    };
    let bytes: Vec<(String, Vec<u8>)> = files.iter().map(|f| (f.name.clone(), read(f))).collect();
    if gen.exists() {
        for (name, b) in &bytes {
            assert_eq!(&std::fs::read(gen.join(name)).unwrap(), b, "{name}");
        }
    }
    // Written into a staged copy, they make a database holding the snapshot's state.
    let dest = dir.path.join("copy");
    let mut copy = NewCopy::create(&dest).unwrap();
    let staging = copy.stage().unwrap();
    for (name, b) in &bytes {
        std::fs::write(staging.join(name), b).unwrap();
    }
    let info = copy.install_staged().unwrap().clone();
    assert_eq!(info.generation, snap.generation());
    assert_eq!(info.source_identity, snap.identity());
    assert_ne!(info.identity, snap.identity());
    let made = copy.finish().unwrap();
    let copied = Snapshot::open(&dest).unwrap();
    copied.verify().unwrap();
    let mut keys = Vec::new();
    copied
        .scan("t", None, None, |k, _| {
            keys.push(k.to_vec());
            true
        })
        .unwrap();
    assert_eq!(keys, (0..5u8).map(|i| vec![i]).collect::<Vec<_>>());
    assert_eq!(made.identity, copied.identity());
    // A staging subvolume holding something that is not a generation is refused, and the
    // copy (marker, staging subvolume, a scratch database) is removed when dropped.
    let bad = dir.path.join("bad");
    let mut copy = NewCopy::create(&bad).unwrap();
    let staging = copy.stage().unwrap();
    std::fs::write(staging.join("MANIFEST"), b"not a manifest").unwrap();
    assert!(copy.install_staged().is_err());
    drop(Env::open_path(copy.scratch_dir()).unwrap());
    assert!(copy.scratch_dir().join("butter.id").exists());
    drop(copy);
    assert!(!bad.exists(), "the unfinished copy was not removed");
    // A scratch database stopped before the engine gave it an identity (an empty directory)
    // is the copy's too.
    let copy = NewCopy::create(&bad).unwrap();
    std::fs::create_dir(copy.scratch_dir()).unwrap();
    drop(copy);
    assert!(
        !bad.exists(),
        "a copy with an unfinished scratch database was not removed"
    );
}
