// The `slasher_database_size` gauge on a butter_db database, through Lighthouse's own slasher.
//
// This file belongs to the butter_db project (integration/lighthouse/database_size_test.rs);
// it is not part of Lighthouse. `scripts/lighthouse.sh` copies it into a Lighthouse checkout as
// `slasher/tests/butter_database_size.rs`, where it runs in builds with the butter feature
// (`scripts/lighthouse.sh LIGHTHOUSE_DIR test`, the butter run).
//
// The gauge in `slasher/service/src/service.rs`, as patched, is
// `slasher::butter_database_size(path).unwrap_or_else(|| size_of_dir(path))`. This test
// writes a database with Lighthouse's `Slasher`, then checks that the function the gauge asks
// first gives the bytes of the files the newest generation's manifest lists, far more than the
// top-level entries Lighthouse's `size_of_dir` would add up, and `None` for a directory that
// is not a butter database.
#![cfg(feature = "butter")]

use logging::test_logger;
use slasher::{
    test_utils::{chain_spec, indexed_att},
    Config, DatabaseBackend, Slasher,
};
use std::path::Path;
use tempfile::tempdir;
use types::Epoch;

/// What Lighthouse's `size_of_dir` adds up: the regular files directly in `dir` (0 if there
/// is no `dir`).
fn top_level_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum()
}

/// The regular files in the newest `gen-*` directory, added up: the newest generation's
/// segments and manifest (and segments the newest commit retired, which the gauge leaves out,
/// so this is an upper bound).
fn newest_generation_bytes(dir: &Path) -> u64 {
    let newest = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("gen-"))
        .max()
        .expect("a committed generation");
    top_level_bytes(&newest)
}

#[test]
fn database_size_gauge_reports_a_butter_database() {
    let tempdir = tempdir().unwrap();
    let mut config = Config::new(tempdir.path().into());
    config.backend = DatabaseBackend::Butter;
    config.validator_chunk_size = 8;
    config.chunk_size = 16;
    config.history_length = 64;
    let path = config.database_path.clone();
    let slasher = Slasher::open(config, chain_spec(), test_logger()).unwrap();

    // 512 validators attesting in every one of 32 epochs.
    let validators: Vec<u64> = (0..512).collect();
    for epoch in 1..33u64 {
        slasher.accept_attestation(indexed_att(validators.clone(), epoch - 1, epoch, epoch));
        slasher.process_queued(Epoch::new(epoch)).unwrap();
    }

    let size = slasher::butter_database_size(&path).expect("a butter database");
    // After it: the newest generation cannot change (nothing commits any more), and a
    // background merge's output in `compact/`, which the gauge counts too, only grows until
    // a commit takes it in.
    let generation = newest_generation_bytes(&path);
    let pending = top_level_bytes(&path.join("compact"));
    let top = top_level_bytes(&path);
    assert!(
        size <= generation + pending,
        "gauge {size}, newest generation's files {generation}, merge outputs {pending}"
    );
    assert!(size * 2 > generation, "gauge {size}, newest generation's files {generation}");
    assert!(size > 50 * top, "gauge {size}, top-level files {top}");
    drop(slasher);

    let not_butter = tempdir.path().join("elsewhere");
    std::fs::create_dir(&not_butter).unwrap();
    assert_eq!(slasher::butter_database_size(&not_butter), None);
    // The read-only snapshots, which the temporary directory's own removal cannot delete.
    slasher_adapters::cleanup::destroy_database_dir(&path).unwrap();
}
