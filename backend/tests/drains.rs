//! Drains on real btrfs, with partitions of 32 KiB and jobs of 128 KiB so that a few MiB of
//! data make dozens of partitions: tables shaped like the slasher's keep their contents (after
//! reopen too), no one background job writes more than a bounded share of its table, and a
//! table appended at one end and pruned at the other leaves its middle partitions alone.

mod common;

use std::collections::BTreeMap;

use butter_db::{Env, Merges, TableHandle};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const PART: u64 = 32 << 10;
const JOB: u64 = 128 << 10;

fn open(dir: &std::path::Path, mode: Merges) -> Env {
    Env::builder(dir)
        .merges(mode)
        .merge_sizes(PART, JOB)
        .open()
        .unwrap()
}

fn scan(env: &Env, t: TableHandle) -> Model {
    env.begin_read().scan(t, b"").unwrap().into_iter().collect()
}

fn live_segments(dir: &std::path::Path) -> Vec<u64> {
    let mut seqs: Vec<u64> = std::fs::read_dir(dir.join("live"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            u64::from_str_radix(name.strip_suffix(".seg")?, 16).ok()
        })
        .collect();
    seqs.sort_unstable();
    seqs
}

/// What a run measured.
#[derive(Debug, Default)]
struct Run {
    /// Bytes the commits' own segments and the background merges wrote.
    written: u64,
    /// The most one commit's installed merges wrote.
    largest_install: u64,
    /// The most one merge wrote (`CommitInfo::largest_merge_bytes`).
    largest_merge: u64,
    /// Segment files at the end, and how many of them were written before the last 30
    /// commits (by sequence number).
    segments: usize,
    early_segments: usize,
}

/// `commits` transactions of `shape` (attesters-like or chunk-like), checking the contents
/// against a model every 25 commits and after reopening.
fn run(name: &str, mode: Merges, commits: u64, attesters: bool) -> Option<Run> {
    let dir = common::btrfs_dir(&format!("drains-{name}"))?;
    let env = open(&dir.path, mode);
    let t = env.create_table("t").unwrap();
    let mut model = Model::new();
    let mut r = Run::default();
    let mut half_seq = 0;
    for c in 0..commits {
        let mut w = env.begin_write().unwrap();
        if attesters {
            // Epoch c for 300 validators at the top; epoch c - 60 pruned at the bottom.
            for v in 0..300u64 {
                let k = [c.to_be_bytes(), v.to_be_bytes()].concat();
                let val = (c * 1_000 + v).to_le_bytes().to_vec();
                w.put(t, &k, &val).unwrap();
                model.insert(k, val);
            }
            if let Some(old) = c.checked_sub(60) {
                for v in 0..300u64 {
                    let k = [old.to_be_bytes(), v.to_be_bytes()].concat();
                    w.delete(t, &k).unwrap();
                    model.remove(&k);
                }
            }
        } else {
            // 2,000 chunks of 100 bytes; each commit rewrites one in 16, spread over all.
            for chunk in (c % 16..2_000).step_by(16) {
                let k = chunk.to_be_bytes().to_vec();
                let val = vec![(c + chunk) as u8; 100];
                w.put(t, &k, &val).unwrap();
                model.insert(k, val);
            }
        }
        let info = w.commit().unwrap();
        r.written += info.bytes_written + info.merged_bytes;
        r.largest_install = r.largest_install.max(info.merged_bytes);
        r.largest_merge = r.largest_merge.max(info.largest_merge_bytes);
        // The largest merge is one of those the commit installed, and part of its table.
        assert!(
            info.largest_merge_bytes <= info.merged_bytes,
            "{name}: {info:?}"
        );
        if info.merges_installed == 0 {
            assert_eq!(info.largest_merge_table_bytes, 0, "{name}: {info:?}");
        }
        assert!(
            info.largest_merge_bytes <= info.largest_merge_table_bytes,
            "{name}: {info:?}"
        );
        if c + 30 == commits {
            half_seq = live_segments(&dir.path).last().copied().unwrap_or(0);
        }
        if c % 25 == 24 {
            assert!(scan(&env, t) == model, "{name}: contents after commit {c}");
        }
    }
    let segs = live_segments(&dir.path);
    r.segments = segs.len();
    r.early_segments = segs.iter().filter(|&&s| s <= half_seq).count();
    drop(env);
    let env = open(&dir.path, mode);
    let t = env.table("t").unwrap();
    assert!(scan(&env, t) == model, "{name}: contents after reopen");
    let rd = env.begin_read();
    for (k, v) in model.iter().step_by(97) {
        assert_eq!(rd.get(t, k).unwrap().as_deref(), Some(&v[..]), "{name}");
        // Scans and cursors from a key, and from just after it (between two keys, which may
        // be between two partitions), cross the partitions' boundaries.
        let after = [k.as_slice(), &[0]].concat();
        for from in [k.clone(), after] {
            let want: Vec<(Vec<u8>, Vec<u8>)> = model
                .range(from.clone()..)
                .take(500)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let mut got = rd.scan(t, &from).unwrap();
            got.truncate(500);
            assert!(got == want, "{name}: scan from {from:?}");
        }
    }
    drop(rd);
    let mut w = env.begin_write().unwrap();
    let mut c = w.cursor(t).unwrap();
    assert_eq!(
        c.last_key().unwrap().as_ref(),
        model.keys().next_back(),
        "{name}"
    );
    for k in model.keys().step_by(211) {
        assert_eq!(c.seek(k).unwrap().as_ref(), Some(k), "{name}: cursor seek");
        let mut want = model.range(k.clone()..).skip(1).map(|(k, _)| k);
        for _ in 0..50 {
            assert_eq!(
                c.next_key().unwrap().as_ref(),
                want.next(),
                "{name}: cursor step"
            );
        }
    }
    drop(c);
    w.abort();
    Some(r)
}

#[test]
fn an_appended_and_pruned_table_is_drained_a_range_at_a_time() {
    // 60 epochs × 300 keys of 24 bytes (~600 KiB of entries, ~20 partitions) once the window
    // is full, then 140 more epochs that wrap it.
    let Some(r) = run("attesters", Merges::BackgroundWaited, 200, true) else {
        return;
    };
    println!("attesters: {r:?}");
    assert!(r.segments > 10, "the table was not partitioned: {r:?}");
    assert!(r.largest_merge > 0, "no merge was installed: {r:?}");
    // A job reads at most JOB of partitions (plus one over) and the upper segments' share.
    assert!(
        r.largest_install <= 2 * JOB + 2 * PART,
        "one merge wrote {} bytes: {r:?}",
        r.largest_install
    );
    // The older half of the window, which appends and pruning have not touched for 30 commits
    // (and about as many drain jobs), kept partitions from before them.
    assert!(r.early_segments > 0, "every partition was rewritten: {r:?}");
}

#[test]
fn a_table_overwritten_everywhere_is_drained_within_the_job_budget() {
    for mode in [Merges::BackgroundWaited, Merges::Background] {
        let Some(r) = run(&format!("chunks-{mode:?}"), mode, 150, false) else {
            return;
        };
        println!("chunks {mode:?}: {r:?}");
        assert!(r.segments > 4, "the table was not partitioned: {r:?}");
        // Only where every commit waits for the merge: with the merge thread at idle priority
        // on a loaded machine, a drain can start late over more upper bytes than the policy
        // meant, and a job's share of them grows with that.
        if mode == Merges::BackgroundWaited {
            assert!(
                r.largest_install <= 2 * JOB + 2 * PART,
                "{mode:?}: one merge wrote {} bytes: {r:?}",
                r.largest_install
            );
        }
    }
}
