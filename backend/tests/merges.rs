//! Background merges on real btrfs: every merge mode gives the same contents as a model,
//! readers keep their generation while merges are swapped in, the segment count stays bounded,
//! merge files left behind by a stopped process are deleted at open, and the segments merges
//! retire are closed.

mod common;

use std::collections::BTreeMap;

use butter_db::{Env, Merges};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A tiny deterministic generator (xorshift64*), so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn scan_all(env: &Env, t: butter_db::TableHandle) -> Model {
    env.begin_read().scan(t, b"").unwrap().into_iter().collect()
}

fn seg_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir.join("live"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".seg")
        })
        .count()
}

/// 80 commits shaped like the slasher's chunk tables: each overwrites a strided slice of the
/// whole key range in ascending order (values of varying size), and some delete keys.
fn run_mode(mode: Merges) -> usize {
    let Some(dir) = common::btrfs_dir(&format!("merges-{mode:?}")) else {
        return 0;
    };
    let env = Env::builder(&dir.path).merges(mode).open().unwrap();
    let t = env.create_table("chunks").unwrap();
    let mut model = Model::new();
    let mut rng = Rng(0x5eed_0000 ^ mode as u64);
    let mut installed = 0;
    let mut pinned: Option<(butter_db::ReadTxn<'_>, Model)> = None;
    for commit in 0..80u64 {
        let mut w = env.begin_write().unwrap();
        let stride = 1 + rng.next() % 4;
        for key in (commit % stride..4_000).step_by(stride as usize) {
            let k = key.to_be_bytes().to_vec();
            if rng.next() % 23 == 0 {
                w.delete(t, &k).unwrap();
                model.remove(&k);
            } else {
                let len = 16 + (rng.next() % 200) as usize;
                let v: Vec<u8> = (0..len).map(|i| (commit as usize + i) as u8).collect();
                w.put(t, &k, &v).unwrap();
                model.insert(k, v);
            }
        }
        let info = w.commit().unwrap();
        installed += info.merges_installed;
        assert!(
            seg_files(&dir.path) <= 16,
            "{mode:?}: {} segments after commit {commit}",
            seg_files(&dir.path)
        );
        if commit % 20 == 5 {
            // A reader pinned across 20 commits (and the merges they swap in) sees its own
            // generation to the end.
            if let Some((r, want)) = pinned.take() {
                let got: Model = r.scan(t, b"").unwrap().into_iter().collect();
                assert!(got == want, "{mode:?}: a pinned reader's view changed");
            }
            pinned = Some((env.begin_read(), model.clone()));
        }
        if commit % 10 == 9 {
            assert!(
                scan_all(&env, t) == model,
                "{mode:?}: contents after {commit}"
            );
            let r = env.begin_read();
            for probe in 0..4_000u64 {
                let k = probe.to_be_bytes();
                assert_eq!(
                    r.get(t, &k).unwrap().as_deref(),
                    model.get(&k[..]).map(Vec::as_slice),
                    "{mode:?}: key {probe} after commit {commit}"
                );
            }
        }
    }
    drop(pinned);
    drop(env);
    let left = std::fs::read_dir(dir.path.join("compact")).unwrap().count();
    assert_eq!(left, 0, "{mode:?}: files left in compact/ after close");
    let env = Env::builder(&dir.path).merges(mode).open().unwrap();
    let t = env.table("chunks").unwrap();
    assert!(
        scan_all(&env, t) == model,
        "{mode:?}: contents after reopen"
    );
    installed
}

#[test]
fn background_merges_keep_the_contents() {
    let background = run_mode(Merges::Background);
    let waited = run_mode(Merges::BackgroundWaited);
    let inline = run_mode(Merges::Inline);
    if std::env::var_os("BUTTER_BTRFS_DIR").is_none() {
        return;
    }
    println!("merges installed: background {background}, waited {waited}, inline {inline}");
    assert!(background > 0, "no background merge was swapped in");
    assert!(waited > 0, "no background merge was swapped in (waited)");
    assert_eq!(inline, 0, "inline mode swapped in a background merge");
}

#[test]
fn leftover_merge_files_are_deleted_at_open() {
    let Some(dir) = common::btrfs_dir("leftover_merge_files") else {
        return;
    };
    let env = Env::open_path(&dir.path).unwrap();
    let t = env.create_table("t").unwrap();
    let mut w = env.begin_write().unwrap();
    w.put(t, b"k", b"v").unwrap();
    w.commit().unwrap();
    drop(env);
    // What a process killed during a background merge leaves: a partial segment file.
    let orphan = dir.path.join("compact").join("00000000000000ff.seg");
    std::fs::write(&orphan, b"half a segment").unwrap();
    let env = Env::open_path(&dir.path).unwrap();
    assert!(!orphan.exists(), "the leftover merge file was not deleted");
    let t = env.table("t").unwrap();
    assert_eq!(
        env.begin_read().get(t, b"k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
}

/// Descriptors of this process open on files under `dir`, and how many of those files are
/// deleted.
fn open_files_under(dir: &std::path::Path) -> (usize, usize) {
    let (mut open, mut deleted) = (0, 0);
    for fd in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(target) = std::fs::read_link(fd.path()) else {
            continue; // closed since the listing
        };
        let target = target.to_string_lossy().into_owned();
        if target.starts_with(&*dir.to_string_lossy()) {
            open += 1;
            deleted += usize::from(target.ends_with(" (deleted)"));
        }
    }
    (open, deleted)
}

#[test]
fn merged_away_segments_are_closed() {
    let Some(dir) = common::btrfs_dir("merged_away_segments_are_closed") else {
        return;
    };
    let env = Env::builder(&dir.path)
        .merges(Merges::Inline)
        .open()
        .unwrap();
    let t = env.create_table("t").unwrap();
    for commit in 0..40u32 {
        // Every commit rewrites the whole table, so it merges the previous segment away.
        let mut w = env.begin_write().unwrap();
        for key in 0..2_000u32 {
            w.put(t, &key.to_be_bytes(), &commit.to_le_bytes()).unwrap();
        }
        w.commit().unwrap();
        // The retiring thread closes them; at most two versions wait for it, plus the one it
        // is dropping, each holding one retired segment here.
        let (_, deleted) = open_files_under(&dir.path);
        assert!(
            deleted <= 3,
            "{deleted} merged-away segments still open after commit {commit}"
        );
    }
    assert_eq!(
        env.begin_read()
            .get(t, &7u32.to_be_bytes())
            .unwrap()
            .as_deref(),
        Some(&39u32.to_le_bytes()[..])
    );
    drop(env);
    assert_eq!(
        open_files_under(&dir.path),
        (0, 0),
        "files of the database still open after the environment was dropped"
    );
}
