//! The process's limit on open files, on real btrfs: a segment's file is opened on first use
//! and kept open, so a database of many segments raises the soft limit at open when it would
//! not leave room for all of them (`env/recovery.rs`, `allow_open_segments`). A test binary of
//! its own: it lowers the limit of the whole process.

mod common;

use butter_db::fs::open_file_limit;
use butter_db::Env;

const TABLES: usize = 300;

#[test]
fn a_database_of_more_segments_than_the_soft_limit_allows_raises_it() {
    let Some(dir) = common::btrfs_dir("open-files") else {
        return;
    };
    {
        let env = Env::open_path(&dir.path).unwrap();
        let tables: Vec<_> = (0..TABLES)
            .map(|i| env.create_table(&format!("t{i}")).unwrap())
            .collect();
        let mut w = env.begin_write().unwrap();
        for (i, &t) in tables.iter().enumerate() {
            w.put(t, b"key", &i.to_be_bytes()).unwrap();
        }
        w.commit().unwrap();
    }
    // A soft limit that leaves room for a third of the segments beside what is open now.
    let open_now = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    let low = open_now + TABLES as u64 / 3;
    let (_, hard) = open_file_limit();
    assert!(
        hard.is_none_or(|h| h > 2 * (open_now + TABLES as u64 + 256)),
        "hard limit {hard:?}"
    );
    butter_db::fs::set_open_file_soft_limit(low).unwrap();
    assert_eq!(open_file_limit().0, Some(low));

    let env = Env::open_path(&dir.path).unwrap();
    let (soft, _) = open_file_limit();
    assert!(
        soft.is_some_and(|s| s >= open_now + TABLES as u64 + 256),
        "soft limit {soft:?} after opening {TABLES} segments (was {low})"
    );
    // Every segment read, so every file open at once: no EMFILE.
    let r = env.begin_read();
    for i in 0..TABLES {
        let t = env.table(&format!("t{i}")).unwrap();
        let got = r.get(t, b"key").unwrap();
        assert_eq!(got.as_deref(), Some(&i.to_be_bytes()[..]), "table t{i}");
    }
}
