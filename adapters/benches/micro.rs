//! Micro-benchmark through the slasher storage interface, for butter_db and LMDB in one run:
//! 1M point puts + commit, 1M point gets, a full cursor scan, and the commit latency of an
//! empty and of an 8 MiB transaction.
//!
//! `BENCH_DIR` must be a directory on btrfs (butter_db needs it); `BENCH_LMDB_DIR` optionally
//! puts LMDB elsewhere (e.g. on ext4). Run: `cargo bench -p slasher-adapters --bench micro`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use slasher_adapters::{BackendConfig, Cursor, Environment, RwTransaction};

const N: u64 = 1_000_000;
const RUNS: usize = 5;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn key(i: u64) -> [u8; 8] {
    // Spread the keys so puts are not in insertion order.
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 8).to_be_bytes()
}

fn run<E: Environment>(dir: &Path) {
    let path = dir.join(format!("micro-{}-{}", E::NAME, std::process::id()));
    std::fs::create_dir_all(&path).expect("mkdir");
    let mut config = BackendConfig::new(&path);
    config.max_db_size_mbs = 16 * 1024;
    let env = E::open(&config).expect("open");
    let dbs = env.create_databases().expect("tables");
    let (db, db2) = (dbs.current_epochs_db, dbs.indexed_attestation_db);

    let t = Instant::now();
    let mut txn = env.begin_rw_txn().expect("txn");
    for i in 0..N {
        txn.put(db, &key(i), &i.to_le_bytes()).expect("put");
    }
    let put_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    txn.commit().expect("commit");
    let commit_s = t.elapsed().as_secs_f64();

    let mut gets = Vec::new();
    let mut scans = Vec::new();
    for _ in 0..RUNS {
        let txn = env.begin_rw_txn().expect("txn");
        let t = Instant::now();
        for i in 0..N {
            let v = txn.get(db, &key(i)).expect("get").expect("present");
            assert_eq!(v.len(), 8);
        }
        gets.push(t.elapsed().as_secs_f64());
        drop(txn);
        let mut txn = env.begin_rw_txn().expect("txn");
        let t = Instant::now();
        let mut c = txn.cursor(db).expect("cursor");
        let mut n = 0u64;
        let mut k = c.first_key().expect("first");
        while k.is_some() {
            n += 1;
            k = c.next_key().expect("next");
        }
        assert_eq!(n, N);
        scans.push(t.elapsed().as_secs_f64());
    }

    let mut empty = Vec::new();
    let mut big = Vec::new();
    let value = vec![0xAB_u8; 8 * 1024];
    for run in 0..RUNS as u64 {
        let txn = env.begin_rw_txn().expect("txn");
        let t = Instant::now();
        txn.commit().expect("commit");
        empty.push(t.elapsed().as_secs_f64());
        let mut txn = env.begin_rw_txn().expect("txn");
        for i in 0..1024u64 {
            txn.put(db2, &(run * 1024 + i).to_be_bytes()[2..], &value)
                .expect("put");
        }
        let t = Instant::now();
        txn.commit().expect("commit");
        big.push(t.elapsed().as_secs_f64());
    }
    println!(
        "{:<14} 1M puts {:>7.0} ms + commit {:>6.0} ms | 1M gets {:>7.0} ms | scan {:>7.0} ms | \
         empty commit {:>6.2} ms | 8 MiB commit {:>6.1} ms  (fs {})",
        E::NAME,
        put_s * 1e3,
        commit_s * 1e3,
        median(gets) * 1e3,
        median(scans) * 1e3,
        median(empty) * 1e3,
        median(big) * 1e3,
        dir.display()
    );
    drop(env);
    let _ = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "for s in {p}/gen-* {p}/live; do [ -e \"$s\" ] && btrfs subvolume delete -c \"$s\" >/dev/null 2>&1; done; rm -rf {p}",
            p = path.display()
        ))
        .status();
}

fn main() {
    let Some(dir) = std::env::var_os("BENCH_DIR").map(PathBuf::from) else {
        eprintln!("set BENCH_DIR to a directory on btrfs");
        std::process::exit(2);
    };
    let lmdb_dir = std::env::var_os("BENCH_LMDB_DIR").map_or(dir.clone(), PathBuf::from);
    run::<slasher_adapters::butter::Environment>(&dir);
    run::<slasher_adapters::lmdb::Environment>(&lmdb_dir);
}
