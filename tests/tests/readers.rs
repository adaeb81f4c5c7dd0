//! Tier F (`docs/reliability.md` §2): concurrent readers.
//!
//! While a writer commits transactions that rewrite every key of a table with the
//! transaction's number, reader threads keep opening read transactions. Each read must see
//! one generation: every key and the marker carry the same number, that number equals what
//! the generation implies, it never goes backwards, and a reader that began after the writer
//! acknowledged commit j sees at least j. The `gen-N` directory of a live `ReadTxn` must exist
//! for as long as the reader lives (GC never deletes a pinned generation), and must be gone
//! after the reader ends and another commit runs.
//!
//! Other processes: butter_db allows one process per database (`butter.lock`; a second
//! `Env::open` gets `Error::Locked`, see bad_input.rs), so a reader in another process can only
//! read a `gen-N` snapshot's files directly. What makes that safe is that files opened before
//! GC deletes the snapshot stay readable; `open_files_survive_gc` checks that.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use butter_db::{Env, TableHandle};
use butter_tests::harness::{btrfs_dir, remove_db_dir};

/// Reads each reader thread must complete during the commits for the tier to count.
const MIN_READS_PER_READER: u64 = 20;
const KEYS: u32 = 40;
const COMMITS: u64 = 60;
const READERS: usize = 3;

fn gen_dir(db: &Path, g: u64) -> PathBuf {
    db.join(format!("gen-{g:020}"))
}

/// Transaction `j`: every key `k00..k39` of `t` holds `j` followed by padding of varying size.
fn write_all(env: &Env, t: TableHandle, j: u64) -> butter_db::Result<()> {
    let mut w = env.begin_write()?;
    for k in 0..KEYS {
        let mut v = j.to_le_bytes().to_vec();
        v.resize(8 + ((j as usize * 37 + k as usize * 11) % 900), k as u8);
        w.put(t, format!("k{k:02}").as_bytes(), &v)?;
    }
    w.commit().map(|_| ())
}

/// The number one read transaction sees, after checking every key agrees on it.
fn read_consistent(env: &Env, t: TableHandle) -> Result<(u64, u64), String> {
    let r = env.begin_read();
    let g = r.generation();
    let rows = r.scan(t, b"").map_err(|e| format!("scan: {e}"))?;
    if rows.len() != KEYS as usize {
        return Err(format!("generation {g}: {} keys, want {KEYS}", rows.len()));
    }
    let mut seen = None;
    for (k, v) in &rows {
        let j = v
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
            .ok_or("short value")?;
        if *seen.get_or_insert(j) != j {
            return Err(format!(
                "generation {g}: key {} has txn {j}, others {seen:?}",
                String::from_utf8_lossy(k)
            ));
        }
    }
    if !gen_dir(env.path(), g).exists() {
        return Err(format!(
            "generation {g} is pinned by a reader but its directory is gone"
        ));
    }
    Ok((g, seen.unwrap_or(0)))
}

#[test]
fn readers_see_one_generation_and_pins_hold() {
    let Some(base) = btrfs_dir("readers") else {
        return;
    };
    let t0 = Instant::now();
    let db = base.join("db");
    let env = Env::open_path(&db).expect("open");
    let t = env.create_table("r").expect("create table");
    write_all(&env, t, 1).expect("first commit");
    let acked = AtomicU64::new(1);
    let done = AtomicBool::new(false);

    // A reader pinned for the whole run.
    let pinned = env.begin_read();
    let pinned_gen = pinned.generation();
    let pinned_rows = pinned.scan(t, b"").expect("scan");

    let (per_reader, errors) = std::thread::scope(|s| {
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                s.spawn(|| {
                    let (mut last, mut reads, mut errors) = (0u64, 0u64, Vec::new());
                    while !done.load(Ordering::Acquire) {
                        let floor = acked.load(Ordering::Acquire);
                        match read_consistent(&env, t) {
                            Ok((_, j)) if j < last => {
                                errors.push(format!("went backwards from {last} to {j}"));
                            }
                            Ok((_, j)) if j < floor => {
                                errors.push(format!("saw {j} after commit {floor} was acked"));
                            }
                            Ok((_, j)) => last = j,
                            Err(e) => errors.push(e),
                        }
                        reads += 1;
                    }
                    (reads, errors)
                })
            })
            .collect();
        for j in 2..=COMMITS {
            write_all(&env, t, j).expect("commit");
            acked.store(j, Ordering::Release);
            if !gen_dir(&db, pinned_gen).exists() {
                done.store(true, Ordering::Release);
                panic!("GC deleted generation {pinned_gen} while a reader pins it");
            }
        }
        done.store(true, Ordering::Release);
        readers
            .into_iter()
            .map(|h| h.join().expect("reader thread"))
            .fold((Vec::new(), Vec::new()), |(mut n, mut e), (r, errs)| {
                n.push(r);
                e.extend(errs);
                (n, e)
            })
    });

    assert_eq!(
        pinned.scan(t, b"").expect("scan pinned"),
        pinned_rows,
        "a pinned reader's view changed"
    );
    drop(pinned);
    write_all(&env, t, COMMITS + 1).expect("commit after unpinning");
    assert!(
        !gen_dir(&db, pinned_gen).exists(),
        "generation {pinned_gen} survived GC after its reader ended"
    );
    drop(env);
    remove_db_dir(&db);
    let _ = std::fs::remove_dir_all(&base);
    let reads: u64 = per_reader.iter().sum();
    println!(
        "tier readers: {reads} consistent reads during {COMMITS} commits, {} violations, {:.1} s",
        errors.len(),
        t0.elapsed().as_secs_f64()
    );
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    // A tier whose readers hardly ran checked nothing: every reader must have read while the
    // commits went on (runs so far: 463 to 3,144 reads in all).
    assert!(
        per_reader.iter().all(|&n| n >= MIN_READS_PER_READER),
        "a reader read fewer than {MIN_READS_PER_READER} times during {COMMITS} commits: \
         {per_reader:?}"
    );
}

/// Files of a generation opened before GC deletes it stay readable (what a reader outside
/// the writer's process relies on, since it cannot pin a generation).
#[test]
fn open_files_survive_gc() {
    let Some(base) = btrfs_dir("open_files") else {
        return;
    };
    let db = base.join("db");
    let env = Env::open_path(&db).expect("open");
    let t = env.create_table("r").expect("create table");
    write_all(&env, t, 1).expect("commit");
    let g = env.generation();
    let dir = gen_dir(&db, g);
    let files: Vec<(PathBuf, Vec<u8>, std::fs::File)> = std::fs::read_dir(&dir)
        .expect("list generation")
        .flatten()
        .map(|e| {
            let p = e.path();
            let bytes = std::fs::read(&p).expect("read");
            let f = std::fs::File::open(&p).expect("open");
            (p, bytes, f)
        })
        .collect();
    for j in 2..5 {
        write_all(&env, t, j).expect("commit");
    }
    assert!(!dir.exists(), "generation {g} should have been collected");
    for (p, bytes, mut f) in files {
        let mut now = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut now).expect("read after GC");
        assert_eq!(now, bytes, "{} changed after GC", p.display());
    }
    drop(env);
    remove_db_dir(&db);
    let _ = std::fs::remove_dir_all(&base);
}
