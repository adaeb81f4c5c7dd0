//! Unit tests of the replay's parsing and summaries.

use super::*;

#[test]
fn db_dir_specs_parse() {
    let b = [DatabaseBackend::Lmdb, DatabaseBackend::Redb];
    let one = parse_db_dirs("/x", &b).expect("one dir");
    assert_eq!(one.get(&DatabaseBackend::Redb), Some(&PathBuf::from("/x")));
    let per = parse_db_dirs("lmdb=/a, redb=/b", &b).expect("per backend");
    assert_eq!(per.get(&DatabaseBackend::Lmdb), Some(&PathBuf::from("/a")));
    assert_eq!(per.get(&DatabaseBackend::Redb), Some(&PathBuf::from("/b")));
    let err = parse_db_dirs("lmdb=/a", &b).expect_err("redb missing");
    assert!(
        err.to_string().contains("no entry for backend redb"),
        "{err}"
    );
    assert!(parse_db_dirs("nosuch=/a", &b).is_err());
}

#[test]
fn empty_batches_have_no_digest() {
    assert_eq!(slashings_digest(&HashSet::new(), &HashSet::new()), None);
}

#[test]
fn a_dead_childs_stream_becomes_a_partial_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = batches_file(&dir.path().join(".child-butter.json"));
    assert!(path
        .to_string_lossy()
        .ends_with(".child-butter.json.batches"));
    let head = BackendResult {
        name: "butter@btrfs".into(),
        backend: "butter".into(),
        durable: true,
        open_ms: 5.0,
        ..BackendResult::default()
    };
    let mut stream = BatchStream::create(&path, &head).unwrap();
    assert!(partial_row(&path).is_none(), "no batch finished: no row");
    for (index, wall_ms) in [(0u64, 30.0), (1, 10.0), (2, 20.0)] {
        let batch = BatchRecord {
            index,
            wall_ms,
            commit_ms: wall_ms / 10.0,
            db_bytes: 100 * (index + 1),
            attester_slashings: usize::from(index == 1),
            ..BatchRecord::default()
        };
        stream.batch(&batch).unwrap();
    }
    drop(stream);
    // The child died while writing a fourth batch: a torn last line.
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"index\":3,\"wall");
    std::fs::write(&path, text).unwrap();

    let row = partial_row(&path).expect("a row");
    assert!(row.interrupted, "marked partial");
    assert_eq!(row.name, "butter@btrfs");
    assert_eq!(row.open_ms, 5.0);
    let indexes: Vec<u64> = row.batches.iter().map(|b| b.index).collect();
    assert_eq!(indexes, [0, 1, 2]);
    assert_eq!(row.first_batch_ms, 30.0);
    assert_eq!(row.median_batch_ms, 20.0);
    assert_eq!(row.max_batch_ms, 30.0);
    assert!((row.total_s - 0.06).abs() < 1e-9, "{}", row.total_s);
    assert_eq!(row.db_bytes_final, 300);
    assert_eq!(row.slashings.attester, 1);
}

#[test]
fn an_oom_kill_is_named_with_its_limit() {
    let cgroup = Path::new("/sys/fs/cgroup/memory/x");
    let text = oom_reason(Some(128 << 20), cgroup);
    assert!(
        text.starts_with("killed by the kernel's OOM killer (memory limit 128 MiB;"),
        "{text}"
    );
    assert!(text.contains("/sys/fs/cgroup/memory/x"), "{text}");
    let text = oom_reason(None, cgroup);
    assert!(text.contains("the machine's memory ran out"), "{text}");
}
