//! Background merges run on one thread for the environment's life (`env/worker.rs`), not on a
//! new thread each: with glibc's allocator every new thread may get an arena of its own, and
//! the arenas of finished merges piled up in the replay's memory (docs/runs/memory-limit.md §4).
//! Alone in its file: the test counts the process's merge threads.

mod common;

use std::collections::BTreeSet;

use butter_db::Env;

/// Thread ids of this process's threads named `butter-merge`.
fn merge_threads() -> BTreeSet<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            (comm.trim() == "butter-merge").then(|| e.file_name().to_string_lossy().into_owned())
        })
        .collect()
}

#[test]
fn every_background_merge_runs_on_one_thread() {
    let Some(dir) = common::btrfs_dir("merge-worker") else {
        return;
    };
    let env = Env::open_path(&dir.path).unwrap();
    let t = env.create_table("t").unwrap();
    let mut seen = BTreeSet::new();
    let mut merges = 0;
    for commit in 0..60u64 {
        let mut w = env.begin_write().unwrap();
        for key in (commit % 3..3_000).step_by(3) {
            w.put(t, &key.to_be_bytes(), &[commit as u8; 64]).unwrap();
        }
        merges += w.commit().unwrap().merges_installed;
        seen.extend(merge_threads());
    }
    assert!(merges >= 2, "the workload made {merges} background merges");
    assert_eq!(
        seen.len(),
        1,
        "merge threads seen: {seen:?} for {merges} merges"
    );
    drop(env);
    assert!(
        merge_threads().is_empty(),
        "the thread ends with the environment"
    );
}
