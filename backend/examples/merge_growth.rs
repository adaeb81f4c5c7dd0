//! How merges grow with a table: one table shaped like one of the slasher's large ones, filled
//! to SIZE MiB of live entries and then written on at that size (the history has wrapped).
//! Merges run in the background, but each commit first waits for the running one
//! (`Merges::BackgroundWaited`): the figures are those of a writer whose merges keep up (the
//! slasher's 12 s between batches), the same on a loaded machine. Prints one line: what the commits wrote, what the background
//! merges wrote, the largest merge one commit swapped in, the filesystem's peak usage after a
//! commit (old generations btrfs has not reclaimed yet included) and the table's files at the
//! end, each over the table's live bytes.
//!
//! ```sh
//! cargo run --release -p butter_db --example merge_growth -- BTRFS_DIR attesters|chunks SIZE_MIB
//! ```
//!
//! - `attesters`: keys are (epoch, validator) big-endian, values 8 bytes; each commit appends
//!   one epoch at the top and deletes the oldest once 64 epochs are held, as the slasher's
//!   `attesters` table is written and pruned. 96 commits (a wrap and a half).
//! - `chunks`: 8-byte keys, values of 300–700 pseudo-random bytes (compressed tiles); each
//!   commit rewrites one key in 16, spread over the whole range, as the target arrays are
//!   written. 64 commits after the fill (four rewrites of the whole table).
//!
//! `MERGE_GROWTH_TRACE=1` prints each commit's figures to stderr. `BTRFS_DIR/merge-growth`
//! must not exist; it is removed at the end. Use a fresh filesystem of
//! its own: the peak is read from the filesystem's usage (`statvfs`).

use std::path::{Path, PathBuf};
use std::time::Instant;

use butter_db::{Env, Merges};

/// Bytes an entry takes in a segment besides its key and value (design.md §1).
const ENTRY_HEADER: u64 = 6;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn fs_used(dir: &Path) -> u64 {
    let st = rustix::fs::statvfs(dir).expect("statvfs");
    (st.f_blocks - st.f_bfree) * st.f_frsize
}

#[derive(Default)]
struct Totals {
    commits: u64,
    commit_bytes: u64,
    merged_bytes: u64,
    largest_merge: u64,
    peak_used: u64,
    storage_s: f64,
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(base), Some(shape), Some(size)) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: merge_growth BTRFS_DIR attesters|chunks SIZE_MIB");
        std::process::exit(2);
    };
    let size_bytes: u64 = size.parse::<u64>().expect("SIZE_MIB") << 20;
    let dir = PathBuf::from(&base).join("merge-growth");
    assert!(!dir.exists(), "{} exists", dir.display());
    let used_before = fs_used(Path::new(&base));
    let env = Env::builder(&dir)
        .merges(Merges::BackgroundWaited)
        .open()
        .expect("open");
    let t = env.create_table("t").expect("table");
    let mut tot = Totals::default();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut value = Vec::new();
    let trace = std::env::var_os("MERGE_GROWTH_TRACE").is_some();
    let mut commit = |f: &mut dyn FnMut(&mut butter_db::WriteTxn<'_>)| {
        let started = Instant::now();
        let mut w = env.begin_write().expect("begin");
        f(&mut w);
        let info = w.commit().expect("commit");
        tot.storage_s += started.elapsed().as_secs_f64();
        tot.commits += 1;
        tot.commit_bytes += info.bytes_written;
        tot.merged_bytes += info.merged_bytes;
        tot.largest_merge = tot.largest_merge.max(info.merged_bytes);
        if trace {
            eprintln!(
                "commit {}: wrote {} KiB, merges installed {} ({} files, {} KiB), {} segments",
                tot.commits,
                info.bytes_written >> 10,
                info.merges_installed,
                info.merge_files,
                info.merged_bytes >> 10,
                env.files().len() - 2
            );
        }
        tot.peak_used = tot
            .peak_used
            .max(fs_used(Path::new(&base)).saturating_sub(used_before));
    };
    let live_bytes = match shape.as_str() {
        "attesters" => {
            const HISTORY: u64 = 64;
            let per_entry = 16 + 8 + ENTRY_HEADER;
            let validators = size_bytes / (HISTORY * per_entry);
            for epoch in 0..HISTORY * 3 / 2 {
                commit(&mut |w| {
                    for v in 0..validators {
                        let k = [epoch.to_be_bytes(), v.to_be_bytes()].concat();
                        w.put(t, &k, &(epoch ^ v).to_le_bytes()).expect("put");
                    }
                    if let Some(old) = epoch.checked_sub(HISTORY) {
                        for v in 0..validators {
                            let k = [old.to_be_bytes(), v.to_be_bytes()].concat();
                            w.delete(t, &k).expect("delete");
                        }
                    }
                });
            }
            validators * HISTORY * per_entry
        }
        "chunks" => {
            let keys = size_bytes / (8 + 500 + ENTRY_HEADER);
            let mut put = |w: &mut butter_db::WriteTxn<'_>, key: u64, rng: &mut Rng| {
                let len = 300 + (rng.next() % 401) as usize;
                value.clear();
                value.extend((0..len / 8 + 1).flat_map(|_| rng.next().to_le_bytes()));
                value.truncate(len);
                w.put(t, &key.to_be_bytes(), &value).expect("put");
            };
            for part in 0..16u64 {
                commit(&mut |w| {
                    for key in (part * keys / 16)..((part + 1) * keys / 16) {
                        put(w, key, &mut rng);
                    }
                });
            }
            for round in 0..64u64 {
                commit(&mut |w| {
                    for key in (round % 16..keys).step_by(16) {
                        put(w, key, &mut rng);
                    }
                });
            }
            keys * (8 + 500 + ENTRY_HEADER)
        }
        other => panic!("unknown shape {other}"),
    };
    let files: u64 = env
        .files()
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    drop(env);
    butter_db::admin::remove_database(&dir).expect("remove");
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    println!(
        "shape={shape} live_mib={:.0} commits={} commit_mib={:.0} merged_mib={:.0} \
         largest_merge_mib={:.1} peak_used_over_live={:.2} files_over_live={:.2} storage_s={:.1}",
        mib(live_bytes),
        tot.commits,
        mib(tot.commit_bytes),
        mib(tot.merged_bytes),
        mib(tot.largest_merge),
        tot.peak_used as f64 / live_bytes as f64,
        files as f64 / live_bytes as f64,
        tot.storage_s,
    );
}
