//! Runs the backend conformance suite (`slasher_adapters::conformance`) against every backend
//! compiled into this build. Test names read `conformance::<backend>::<check>`.
//!
//! Run with e.g. `cargo test -p slasher-adapters --no-default-features
//! --features lmdb,mdbx,redb,test-utils --test conformance`.
//! `CONFORMANCE_SEED=<n>` replays a model-based run; `BUTTER_TEST_DIR` chooses where the
//! default temporary directories are created.
#![cfg(feature = "test-utils")]

mod conformance {
    #[allow(unused_imports)]
    use slasher_adapters::conformance::default_temp_dir;

    #[cfg(feature = "lmdb")]
    slasher_adapters::conformance_tests!(
        lmdb,
        slasher_adapters::lmdb::Environment,
        default_temp_dir
    );

    // The timing wrapper the replay measures storage time with must behave exactly as the
    // backend it wraps.
    #[cfg(feature = "lmdb")]
    slasher_adapters::conformance_tests!(
        timed_lmdb,
        slasher_adapters::timed::Timed<slasher_adapters::lmdb::Environment>,
        default_temp_dir
    );

    #[cfg(feature = "mdbx")]
    slasher_adapters::conformance_tests!(
        mdbx,
        slasher_adapters::mdbx::Environment,
        default_temp_dir
    );

    #[cfg(feature = "redb")]
    slasher_adapters::conformance_tests!(
        redb,
        slasher_adapters::redb::Environment,
        default_temp_dir
    );

    #[cfg(feature = "butter")]
    slasher_adapters::conformance_tests!(
        butter,
        slasher_adapters::butter::Environment,
        btrfs_temp_dir,
        available = btrfs_available
    );

    /// Whether `BUTTER_BTRFS_DIR` names the btrfs mount. Outside CI a missing mount skips the
    /// butter tests with a loud line on stderr; with `CI=true` it fails them.
    #[cfg(feature = "butter")]
    fn btrfs_available() -> bool {
        butter_test_support::btrfs_base("butter conformance").is_some()
    }

    /// A fresh directory on the btrfs mount named by `BUTTER_BTRFS_DIR` (scripts/test.sh sets
    /// it). butter_db refuses other filesystems, so there is no fallback.
    #[cfg(feature = "butter")]
    fn btrfs_temp_dir() -> slasher_adapters::conformance::TempDir {
        let Some(base) = std::env::var_os("BUTTER_BTRFS_DIR") else {
            panic!("BUTTER_BTRFS_DIR is not set: run scripts/test.sh (root) or point it at a btrfs mount");
        };
        tempfile::Builder::new()
            .prefix("conformance-")
            .tempdir_in(base)
            .expect("temp dir on btrfs")
    }
}

/// `butter::database_size`, which Lighthouse's `slasher_database_size` gauge calls through the
/// glue: a butter_db database's size from its newest manifest, and `None` for anything else.
#[cfg(feature = "butter")]
#[test]
fn butter_database_size_counts_the_newest_generation() {
    use slasher_adapters::{butter, BackendConfig, Environment, RwTransaction};
    if butter_test_support::btrfs_base("butter database_size").is_none() {
        return;
    }
    let base = std::env::var_os("BUTTER_BTRFS_DIR").expect("checked above");
    let guard = slasher_adapters::cleanup::DatabaseDirGuard::new(
        tempfile::Builder::new()
            .prefix("conformance-size-")
            .tempdir_in(base)
            .expect("temp dir on btrfs")
            .keep(),
    );
    let path = guard.path().join("db");
    // An LMDB-shaped directory is not butter's: the gauge measures it its own way.
    std::fs::create_dir(&path).unwrap();
    std::fs::write(path.join("data.mdb"), [0u8; 4096]).unwrap();
    assert_eq!(butter::database_size(&path).unwrap(), None);
    std::fs::remove_file(path.join("data.mdb")).unwrap();

    let env = butter::Environment::open(&BackendConfig::new(&path)).unwrap();
    let dbs = env.create_databases().unwrap();
    let mut txn = env.begin_rw_txn().unwrap();
    for k in 0..2000u64 {
        txn.put(dbs.attesters_db, &k.to_be_bytes(), &[k as u8; 100])
            .unwrap();
    }
    txn.commit().unwrap();
    let size = butter::database_size(&path)
        .unwrap()
        .expect("a butter database");
    let files: u64 = env
        .filenames()
        .iter()
        .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
        .sum();
    // 2,000 values of 100 bytes, no two neighbours sharing a byte (so segment format 2 stores
    // each whole), and nothing but the newest generation's files (a merge output in `compact/`
    // may come on top, but not in a single commit's database).
    assert!(size > 2000 * 100, "{size}");
    assert_eq!(size, files, "the live files: {:?}", env.filenames());
    drop(env);
}

/// `BackendConfig::butter_cache_bytes` sizes the engine's block cache (the replay's
/// `--butter-cache-mib` reaches the engine this way, not through the environment).
#[cfg(feature = "butter")]
#[test]
fn butter_cache_size_comes_from_the_backend_config() {
    use slasher_adapters::{butter, BackendConfig, Environment};
    let Some(base) = butter_test_support::btrfs_base("butter cache size") else {
        return;
    };
    // Removed with its read-only snapshots, which a plain temporary directory would leave.
    let guard = slasher_adapters::cleanup::DatabaseDirGuard::new(
        tempfile::Builder::new()
            .prefix("cache-size-")
            .tempdir_in(base)
            .expect("temp dir on btrfs")
            .keep(),
    );
    for bytes in [3 << 20, 5 << 20] {
        let config = BackendConfig {
            butter_cache_bytes: Some(bytes),
            ..BackendConfig::new(guard.path())
        };
        let env = butter::Environment::open(&config).expect("open");
        assert_eq!(env.env().block_cache_bytes(), bytes);
    }
}
