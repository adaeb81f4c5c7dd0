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
