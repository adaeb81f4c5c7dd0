//! Micro-benchmark of the commit of a slasher cold start: every transaction reads and
//! rewrites every key of one table, as each batch of the slasher's first epoch rewrites every
//! tile (docs/runs/history-4096.md §4.1.1). Prints, per commit, where its time goes (`CommitInfo`).
//!
//! ```sh
//! cargo run --release -p butter_db --example rewrite -- BTRFS_DIR [KEYS [ROUNDS]]
//! ```
//!
//! KEYS (default 428,000: the sample's tiles per cold batch at history 4096) 8-byte
//! big-endian keys with values of 150–300 pseudo-random bytes (about the size of a compressed
//! tile), written in ascending order, ROUNDS (default 8) times. `BTRFS_DIR/rewrite-bench` must
//! not exist; it is removed at the end. `BUTTER_CACHE_MB` sets the block cache's size.

use std::path::PathBuf;
use std::time::Instant;

use butter_db::{CommitInfo, Env};

/// xorshift64: the values' bytes and lengths, the same every run.
struct Bytes(u64);

impl Bytes {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn fill(&mut self, out: &mut Vec<u8>) {
        out.clear();
        let len = 150 + self.next() % 151;
        while (out.len() as u64) < len {
            out.extend_from_slice(&self.next().to_le_bytes());
        }
        out.truncate(len as usize);
    }
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(
        args.next()
            .ok_or("usage: rewrite BTRFS_DIR [KEYS [ROUNDS]]")?,
    )
    .join("rewrite-bench");
    let keys: u64 = args.next().map_or(Ok(428_000), |a| a.parse())?;
    let rounds: usize = args.next().map_or(Ok(8), |a| a.parse())?;
    if dir.exists() {
        return Err(format!("{} exists; give a directory without it", dir.display()).into());
    }
    // BUTTER_CACHE_MB: the block cache's size (default: the engine's).
    let mut builder = Env::builder(&dir);
    if let Ok(mb) = std::env::var("BUTTER_CACHE_MB") {
        builder = builder.block_cache_bytes(mb.parse::<usize>()? << 20);
    }
    let env = builder.open()?;
    let table = env.create_table("tiles")?;
    let mut bytes = Bytes(0x9E37_79B9_7F4A_7C15);
    let mut value = Vec::new();
    let mut rows: Vec<(f64, f64, CommitInfo)> = Vec::new();
    println!(
        "round  rw_ms  commit_ms  build_ms  file_ms  write_back_ms  snapshot_ms  rest_ms  MiB_written"
    );
    for round in 0..rounds {
        let started = Instant::now();
        let mut txn = env.begin_write()?;
        let mut found = 0u64;
        for k in 0..keys {
            let key = k.to_be_bytes();
            found += u64::from(txn.get(table, &key)?.is_some());
            bytes.fill(&mut value);
            txn.put(table, &key, &value)?;
        }
        if round > 0 && found != keys {
            return Err(format!("round {round}: found {found} of {keys} keys").into());
        }
        let rw = started.elapsed().as_secs_f64() * 1000.0;
        let commit_started = Instant::now();
        let info = txn.commit()?;
        let commit = commit_started.elapsed().as_secs_f64() * 1000.0;
        let accounted = info.build_us + info.file_us + info.write_back_us + info.snapshot_us;
        println!(
            "{round:>5} {rw:>6.0} {commit:>10.1} {:>9.1} {:>8.1} {:>14.1} {:>12.1} {:>8.1} {:>12.1}",
            ms(info.build_us),
            ms(info.file_us),
            ms(info.write_back_us),
            ms(info.snapshot_us),
            commit - ms(accounted),
            info.bytes_written as f64 / f64::from(1 << 20),
        );
        rows.push((rw, commit, info));
    }
    // The first commit writes into an empty table; the medians are of the rewrites after it.
    let later = rows.get(1..).unwrap_or_default();
    let med = |f: &dyn Fn(&(f64, f64, CommitInfo)) -> f64| median(later.iter().map(f).collect());
    println!(
        "median of rounds 1..{rounds}: read+write {:.0} ms, commit {:.1} ms (build {:.1}, file \
         {:.1}, write-back {:.1}, snapshot {:.1})",
        med(&|r| r.0),
        med(&|r| r.1),
        med(&|r| ms(r.2.build_us)),
        med(&|r| ms(r.2.file_us)),
        med(&|r| ms(r.2.write_back_us)),
        med(&|r| ms(r.2.snapshot_us)),
    );
    drop(env);
    butter_db::fs::BtrfsFs.delete_subvolumes_in(&dir)?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
