//! `fill` leaves exactly what a replay leaves (issue 43, item 1).
//!
//! Small regular chains are replayed batch by batch through the slasher (`process_queued` then
//! `prune_database`, as `replay` does), and the same chains are filled into a second database.
//! Every table of the two must agree key by key and value by value, for LMDB and for butter.
//! Two shapes, 600 validators each, windows that wrap (so pruning and overwrites run):
//!
//! - Lighthouse's chunk sizes (three validator chunks, the last one partial), history 32,
//!   45 epochs;
//! - validator chunks of 64 (ten, the last of 24 validators, which many batches do not reach),
//!   the shortest history (16), 40 epochs.
//!
//! The comparison must be able to fail: one cell of one tile of the filled database is then
//! changed, and the comparison must name that table.

use std::collections::BTreeMap;
use std::path::Path;

use slasher_adapters::backend::{Cursor, Environment, RwTransaction};
use slasher_adapters::cleanup::DatabaseDirGuard;
use slasher_adapters::slasher::array::{Chunk, TileCodec};
use slasher_adapters::slasher::{Config, Slasher};
use slasher_adapters::tables::{MIN_TARGETS_DB, TABLE_NAMES};
use slasher_bench::replay::fill::{fill, RegularChain};

const VALIDATORS: u64 = 600;
const END_EPOCH: u64 = 1_000;

/// One chain and the slasher settings it runs with.
#[derive(Clone, Copy)]
struct Shape {
    history: usize,
    validator_chunk_size: usize,
    epochs: u64,
}

const SHAPES: [Shape; 2] = [
    Shape {
        history: 32,
        validator_chunk_size: 256,
        epochs: 45,
    },
    Shape {
        history: 16,
        validator_chunk_size: 64,
        epochs: 40,
    },
];

type Tables = BTreeMap<&'static str, Vec<(Vec<u8>, Vec<u8>)>>;

fn config(path: &Path, shape: Shape) -> Config {
    let mut c = Config::new(path);
    c.history_length = shape.history;
    c.validator_chunk_size = shape.validator_chunk_size;
    c
}

/// Every entry of every table.
fn dump<E: Environment>(slasher: &Slasher<E>) -> Tables {
    let mut txn = slasher.environment().begin_rw_txn().expect("txn");
    let mut tables = Tables::new();
    for (name, db) in TABLE_NAMES.iter().zip(slasher.databases().all()) {
        let mut cursor = txn.cursor(db).expect("cursor");
        let mut entries = Vec::new();
        let mut key = cursor.first_key().expect("first");
        while key.is_some() {
            let (k, v) = cursor.get_current().expect("get").expect("current entry");
            entries.push((k.to_vec(), v));
            key = cursor.next_key().expect("next");
        }
        tables.insert(name, entries);
    }
    tables
}

/// The first table that differs, with where.
fn first_difference(replayed: &Tables, filled: &Tables) -> Option<String> {
    for name in TABLE_NAMES {
        let (a, b) = (&replayed[name], &filled[name]);
        if let Some(i) = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i)) {
            let show = |e: Option<&(Vec<u8>, Vec<u8>)>| {
                e.map(|(k, v)| format!("{} → {} bytes", hex::encode(k), v.len()))
            };
            return Some(format!(
                "{name}: {} entries replayed, {} filled; entry {i}: replayed {:?}, filled {:?}",
                a.len(),
                b.len(),
                show(a.get(i)),
                show(b.get(i))
            ));
        }
    }
    None
}

fn replay<E: Environment>(dir: &Path, chain: &RegularChain, shape: Shape) -> Tables {
    let slasher = Slasher::<E>::create(config(dir, shape)).expect("open");
    for batch in chain.batches() {
        let batch = batch.expect("batch");
        for h in batch.headers {
            slasher.accept_block_header(h);
        }
        for a in batch.attestations {
            slasher.accept_attestation(a);
        }
        slasher
            .process_queued(batch.current_epoch)
            .expect("process");
        slasher.prune_database(batch.current_epoch).expect("prune");
    }
    assert!(
        slasher.get_attester_slashings().is_empty(),
        "a regular chain slashes nobody"
    );
    assert!(slasher.get_proposer_slashings().is_empty());
    dump(&slasher)
}

fn check_backend<E: Environment>(base: &Path, name: &str) {
    for (i, shape) in SHAPES.into_iter().enumerate() {
        check_shape::<E>(base, &format!("{name}-{i}"), shape, i == 0);
    }
}

fn check_shape<E: Environment>(base: &Path, name: &str, shape: Shape, mutate: bool) {
    let chain = RegularChain::ending_at(VALIDATORS, END_EPOCH, shape.epochs, 3).expect("chain");
    let replayed_dir = DatabaseDirGuard::new(base.join(format!("{name}-replayed")));
    let filled_dir = DatabaseDirGuard::new(base.join(format!("{name}-filled")));
    let replayed = replay::<E>(replayed_dir.path(), &chain, shape);

    let slasher = Slasher::<E>::create(config(filled_dir.path(), shape)).expect("open");
    let report = fill(&slasher, &chain, &mut |_, _, _| {}).expect("fill");
    let filled = dump(&slasher);
    assert_eq!(report.batches, shape.epochs * 32);
    // The chain must exercise every table and the window's wrap.
    for name in TABLE_NAMES {
        assert!(
            !replayed[name].is_empty(),
            "{name} is empty after the replay"
        );
    }
    assert_eq!(
        replayed["attesters"].len() as u64,
        VALIDATORS * shape.history as u64,
        "every attesters slot of every validator is written once the window has wrapped"
    );
    if let Some(diff) = first_difference(&replayed, &filled) {
        panic!("{name}: the filled database differs from the replayed one: {diff}");
    }
    if !mutate {
        return;
    }

    // The negative control: one cell of one tile changed.
    let (key, value) = filled[MIN_TARGETS_DB][5].clone();
    let c = slasher.config();
    let mut codec = TileCodec::new(c.tile_codec);
    let mut tile: Chunk = codec.decode(&value, c).expect("decode");
    tile.data[7] = tile.data[7].wrapping_sub(1);
    let mut txn = slasher.environment().begin_rw_txn().expect("txn");
    txn.put(
        slasher.databases().min_targets_db,
        &key,
        &codec.encode(&tile).expect("encode"),
    )
    .expect("put");
    txn.commit().expect("commit");
    let diff = first_difference(&replayed, &dump(&slasher))
        .expect("the comparison finds the changed tile");
    assert!(diff.starts_with(MIN_TARGETS_DB), "{diff}");
}

#[test]
fn fill_equals_replay_lmdb() {
    let dir = tempfile::tempdir().expect("temp dir");
    check_backend::<slasher_adapters::lmdb::Environment>(dir.path(), "lmdb");
}

#[test]
fn fill_equals_replay_butter() {
    let Some(base) = butter_test_support::btrfs_base("fill_equals_replay") else {
        return;
    };
    let work = tempfile::Builder::new()
        .prefix("fill-")
        .tempdir_in(&base)
        .expect("temp dir on btrfs");
    check_backend::<slasher_adapters::butter::Environment>(work.path(), "butter");
}
