//! Micro-benchmark of a full cursor scan (`first_key`, then `get_current` and `next_key` to the
//! end) through the slasher storage interface, LMDB beside butter_db:
//!
//! ```sh
//! cargo run --release -p slasher-adapters --example scan --features lmdb,butter -- \
//!     lmdb=EXT4_DIR butter=BTRFS_DIR
//! ```
//!
//! Each backend gets 1,000,000 keys (8-byte big-endian, 16-byte values) in 10 commits of
//! 100,000, so butter_db's table is several segments, as after a few slasher batches. Then
//! the two are scanned in turn, 7 rounds, and the median of each is printed with the ratio.
//! The directories must be empty or absent; they are removed at the end.

use std::path::PathBuf;
use std::time::Instant;

use slasher_adapters::{
    with_backend, BackendConfig, BackendVisitor, Cursor, DatabaseBackend, Durability, Environment,
    RwTransaction,
};

const KEYS: u64 = 1_000_000;
const COMMITS: u64 = 10;
const ROUNDS: usize = 7;

struct Fill(PathBuf);

impl BackendVisitor for Fill {
    type Output = Result<(), String>;
    fn visit<E: Environment>(self) -> Self::Output {
        let (env, db) = open::<E>(&self.0)?;
        let per = KEYS / COMMITS;
        for c in 0..COMMITS {
            let mut txn = env.begin_rw_txn().map_err(|e| e.to_string())?;
            for i in c * per..(c + 1) * per {
                // Interleaved across commits, so every segment spans the whole key range.
                let k = (i % per * COMMITS + c).to_be_bytes();
                let mut v = [0u8; 16];
                v[..8].copy_from_slice(&i.to_le_bytes());
                txn.put(db, &k, &v).map_err(|e| e.to_string())?;
            }
            txn.commit().map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

struct Scan(PathBuf);

impl BackendVisitor for Scan {
    type Output = Result<(u64, f64), String>;
    fn visit<E: Environment>(self) -> Self::Output {
        let (env, db) = open::<E>(&self.0)?;
        let mut txn = env.begin_rw_txn().map_err(|e| e.to_string())?;
        let started = Instant::now();
        let mut n = 0u64;
        let mut sum = 0u64;
        {
            let mut cursor = txn.cursor(db).map_err(|e| e.to_string())?;
            let mut key = cursor.first_key().map_err(|e| e.to_string())?;
            while key.is_some() {
                let (_, v) = cursor
                    .get_current()
                    .map_err(|e| e.to_string())?
                    .ok_or("no current entry")?;
                sum = sum.wrapping_add(u64::from(v.first().copied().unwrap_or(0)));
                n += 1;
                key = cursor.next_key().map_err(|e| e.to_string())?;
            }
        }
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        std::hint::black_box(sum);
        Ok((n, ms))
    }
}

/// The environment in `dir` (made if missing) and the table the benchmark uses.
fn open<E: Environment>(dir: &std::path::Path) -> Result<(E, E::Database), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let env = E::open(&BackendConfig {
        max_db_size_mbs: 16 * 1024,
        durability: Durability::Immediate,
        ..BackendConfig::new(dir)
    })
    .map_err(|e| e.to_string())?;
    let db = env
        .create_databases()
        .map_err(|e| e.to_string())?
        .attesters_db;
    Ok((env, db))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() -> Result<(), String> {
    let mut rows: Vec<(DatabaseBackend, PathBuf)> = Vec::new();
    for arg in std::env::args().skip(1) {
        let (name, dir) = arg
            .split_once('=')
            .ok_or_else(|| format!("{arg}: expected BACKEND=DIR"))?;
        let backend: DatabaseBackend = name.parse().map_err(|e| format!("{name}: {e}"))?;
        rows.push((backend, PathBuf::from(dir).join("scan-bench")));
    }
    if rows.is_empty() {
        return Err("usage: scan lmdb=DIR butter=DIR".into());
    }
    for (b, dir) in &rows {
        if dir.exists() {
            return Err(format!("{} exists; give an empty directory", dir.display()));
        }
        with_backend(*b, Fill(dir.clone())).map_err(|e| e.to_string())??;
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); rows.len()];
    for _ in 0..ROUNDS {
        for (i, (b, dir)) in rows.iter().enumerate() {
            let (n, ms) = with_backend(*b, Scan(dir.clone())).map_err(|e| e.to_string())??;
            if n != KEYS {
                return Err(format!("{}: scanned {n} keys, not {KEYS}", b.name()));
            }
            if let Some(t) = times.get_mut(i) {
                t.push(ms);
            }
        }
    }
    let medians: Vec<f64> = times.into_iter().map(median).collect();
    let base = medians.first().copied().unwrap_or(f64::NAN);
    for ((b, _), m) in rows.iter().zip(&medians) {
        println!(
            "{:<8} full scan of {KEYS} keys: median {m:8.1} ms of {ROUNDS}, {:.2}x the first row",
            b.name(),
            m / base
        );
    }
    for (_, dir) in &rows {
        if let Err(e) = slasher_adapters::config::destroy_database_dir(dir) {
            eprintln!("could not remove {}: {e}", dir.display());
        }
    }
    Ok(())
}
