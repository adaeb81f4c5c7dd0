//! `slasher-bench migrate` (issue 59, item 1), through the built binary, on real btrfs (the
//! directory in `BUTTER_BTRFS_DIR`).
//!
//! The round trip: the first 40 batches of a small generated fixture (injected slashings, some
//! of whose first halves come before batch 40 and second halves after) are replayed into an
//! LMDB database; it is migrated to butter (into an existing empty directory, whose permissions
//! must survive); the two must agree entry for entry in all nine tables. The rest of the fixture
//! is then replayed on both: they must find the same slashings (and some), and agree entry for
//! entry again. Then the butter database goes back to a new LMDB one, which must equal it.
//!
//! Every backend pair the adapters build is then run in a chain, LMDB → MDBX → redb → butter →
//! LMDB, each copy compared with the first.
//!
//! The refusals: a non-empty destination, a source of another backend or none, a schema version
//! Lighthouse would refuse, a stored geometry it would refuse, a destination inside the source.
//! Each leaves the destination as it was and nothing beside it.

mod common;
use common::{path, run};

use std::collections::{BTreeMap, HashSet};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use slasher_adapters::backend::{Cursor, Environment, RwTransaction};
use slasher_adapters::cleanup::DatabaseDirGuard;
use slasher_adapters::slasher::keys::{
    encode_disk_config, encode_schema_version, METADATA_CONFIG_KEY, METADATA_SCHEMA_VERSION_KEY,
};
use slasher_adapters::slasher::{AttesterSlashing, Config, DiskConfig, ProposerSlashing, Slasher};
use slasher_adapters::tables::TABLE_NAMES;
use slasher_bench::fixtures::file::{Batch, FixtureReader};
use slasher_bench::fixtures::generate::{generate, GenerateOptions};

type Lmdb = slasher_adapters::lmdb::Environment;
type Butter = slasher_adapters::butter::Environment;
type Mdbx = slasher_adapters::mdbx::Environment;
type Redb = slasher_adapters::redb::Environment;

type Tables = BTreeMap<&'static str, Vec<(Vec<u8>, Vec<u8>)>>;

/// The batch before which the database is migrated.
const SPLIT: usize = 40;

fn work_dir(test: &str) -> Option<DatabaseDirGuard> {
    let base = butter_test_support::btrfs_base(test)?;
    Some(DatabaseDirGuard::new(
        tempfile::Builder::new()
            .prefix("migrate-")
            .tempdir_in(base)
            .expect("temp dir on btrfs")
            .keep(),
    ))
}

fn batches(dir: &Path) -> Vec<Batch> {
    let fixture = dir.join("small.fixture");
    generate(&GenerateOptions::new(512, 3, 11), &fixture).expect("generate");
    FixtureReader::open(&fixture)
        .expect("fixture")
        .map(|b| b.expect("batch"))
        .collect()
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
            entries.push(cursor.get_current().expect("get").expect("current entry"));
            key = cursor.next_key().expect("next");
        }
        tables.insert(name, entries);
    }
    tables
}

fn assert_equal(a: &Tables, b: &Tables, what: &str) {
    for name in TABLE_NAMES {
        let (x, y) = (&a[name], &b[name]);
        assert!(!x.is_empty(), "{what}: {name} is empty");
        if let Some(i) = (0..x.len().max(y.len())).find(|&i| x.get(i) != y.get(i)) {
            panic!(
                "{what}: {name} differs at entry {i} ({} vs {} entries)",
                x.len(),
                y.len()
            );
        }
    }
}

type Found = (HashSet<AttesterSlashing>, HashSet<ProposerSlashing>);

fn replay<E: Environment>(slasher: &Slasher<E>, batches: &[Batch]) -> Found {
    for batch in batches {
        for h in &batch.headers {
            slasher.accept_block_header(*h);
        }
        for a in &batch.attestations {
            slasher.accept_attestation(a.clone());
        }
        slasher
            .process_queued(batch.current_epoch)
            .expect("process");
        slasher.prune_database(batch.current_epoch).expect("prune");
    }
    (
        slasher.get_attester_slashings(),
        slasher.get_proposer_slashings(),
    )
}

fn migrate(from: &str, to: &str) -> std::process::Output {
    run(&["migrate", "--from", from, "--to", to, "--no-progress"])
}

fn loc(backend: &str, dir: &Path) -> String {
    format!("{backend}:{}", path(dir))
}

/// Names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn migrate_lmdb_to_butter_and_back() {
    let Some(work) = work_dir("migrate_lmdb_to_butter_and_back") else {
        return;
    };
    let batches = batches(work.path());
    let (before, after) = batches.split_at(SPLIT);
    let lmdb_dir = work.path().join("lmdb");
    let butter_dir = work.path().join("butter");
    let back_dir = work.path().join("back");

    let lmdb = Slasher::<Lmdb>::create(Config::new(&lmdb_dir)).expect("open lmdb");
    let early = replay(&lmdb, before);
    drop(lmdb);

    // Into an existing empty directory with permissions of its own.
    std::fs::create_dir(&butter_dir).expect("mkdir");
    std::fs::set_permissions(&butter_dir, std::fs::Permissions::from_mode(0o750)).expect("chmod");
    let out = migrate(&loc("lmdb", &lmdb_dir), &loc("butter", &butter_dir));
    assert!(out.status.success(), "migrate lmdb -> butter failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("schema version 3"), "{stdout}");
    assert!(stdout.contains("history_length 4096"), "{stdout}");
    assert_eq!(
        std::fs::metadata(&butter_dir)
            .expect("stat")
            .permissions()
            .mode()
            & 0o7777,
        0o750
    );
    assert_eq!(
        listing(work.path()),
        ["butter", "lmdb", "small.fixture"],
        "no staging directory left beside the destination"
    );

    let lmdb = Slasher::<Lmdb>::create(Config::new(&lmdb_dir)).expect("reopen lmdb");
    let butter = Slasher::<Butter>::create(Config::new(&butter_dir)).expect("open butter");
    assert_equal(&dump(&lmdb), &dump(&butter), "after lmdb -> butter");

    let on_lmdb = replay(&lmdb, after);
    let on_butter = replay(&butter, after);
    assert!(
        !on_lmdb.0.is_empty() && !on_lmdb.1.is_empty(),
        "the batches after the move find attester and proposer slashings (before: {} and {})",
        early.0.len(),
        early.1.len()
    );
    assert_eq!(on_lmdb.0, on_butter.0, "the same attester slashings");
    assert_eq!(on_lmdb.1, on_butter.1, "the same proposer slashings");
    let continued = dump(&butter);
    assert_equal(&dump(&lmdb), &continued, "after replaying the rest on both");
    drop(butter);

    let out = migrate(&loc("butter", &butter_dir), &loc("lmdb", &back_dir));
    assert!(out.status.success(), "migrate butter -> lmdb failed");
    let back = Slasher::<Lmdb>::create(Config::new(&back_dir)).expect("open the copy");
    assert_equal(&continued, &dump(&back), "after butter -> lmdb");
}

/// An LMDB slasher database holding a few batches, with `changes` put into `metadata`.
fn lmdb_source(dir: &Path, batches: &[Batch], changes: Vec<(u8, Vec<u8>)>) {
    let slasher = Slasher::<Lmdb>::create(Config::new(dir)).expect("open lmdb");
    replay(&slasher, batches);
    let mut txn = slasher.environment().begin_rw_txn().expect("txn");
    for (key, value) in changes {
        txn.put(slasher.databases().metadata_db, &[key], &value)
            .expect("put");
    }
    txn.commit().expect("commit");
}

/// `migrate` fails naming `expect`, and the destination's parent holds what it held before.
fn refused(from: &str, to: &Path, expect: &str) {
    let parent = to.parent().expect("parent");
    let before = listing(parent);
    let to_before = to.is_dir().then(|| listing(to));
    let out = migrate(from, &loc("butter", to));
    assert_eq!(out.status.code(), Some(1), "refused with status 1");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(expect), "{stderr:?} lacks {expect:?}");
    assert_eq!(
        listing(parent),
        before,
        "nothing created beside {}",
        to.display()
    );
    assert_eq!(to.is_dir().then(|| listing(to)), to_before);
}

#[test]
fn migrate_refusals() {
    let Some(work) = work_dir("migrate_refusals") else {
        return;
    };
    let batches = batches(work.path());
    let few = batches.get(..3).expect("3 batches");
    let good = work.path().join("good");
    lmdb_source(&good, few, Vec::new());
    let dest = work.path().join("dest");

    // A destination that holds something.
    std::fs::create_dir(&dest).expect("mkdir");
    std::fs::write(dest.join("keep-me"), b"operator's file").expect("write");
    refused(&loc("lmdb", &good), &dest, "is not empty");
    assert_eq!(
        std::fs::read(dest.join("keep-me")).expect("still there"),
        b"operator's file"
    );
    std::fs::remove_dir_all(&dest).expect("rm");

    // A destination that is a file.
    std::fs::write(&dest, b"x").expect("write");
    refused(&loc("lmdb", &good), &dest, "is not empty");
    std::fs::remove_file(&dest).expect("rm");

    // No source, an empty one, another backend's.
    refused(
        &loc("lmdb", &work.path().join("nothing")),
        &dest,
        "does not exist",
    );
    let empty = work.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    refused(
        &loc("lmdb", &empty),
        &dest,
        "is not a lmdb database: it has no data.mdb",
    );
    refused(
        &loc("butter", &good),
        &dest,
        "it holds data.mdb (a lmdb database?)",
    );
    assert!(
        !empty.join("data.mdb").exists(),
        "the empty source was not opened"
    );

    // Into itself.
    refused(&loc("lmdb", &good), &good.join("sub"), "overlap");

    // Schema version 4.
    let v4 = work.path().join("v4");
    lmdb_source(
        &v4,
        few,
        vec![(
            METADATA_SCHEMA_VERSION_KEY[0],
            encode_schema_version(4).to_vec(),
        )],
    );
    refused(&loc("lmdb", &v4), &dest, "schema version 4");

    // A geometry Lighthouse's Config::validate refuses (history not a multiple of the chunk).
    let bad = work.path().join("bad-geometry");
    let c = DiskConfig {
        chunk_size: 16,
        validator_chunk_size: 256,
        history_length: 100,
    };
    let config = encode_disk_config(&c).expect("encode");
    lmdb_source(&bad, few, vec![(METADATA_CONFIG_KEY[0], config)]);
    refused(
        &loc("lmdb", &bad),
        &dest,
        "must be a multiple of chunk_size",
    );

    // A stored geometry that does not decode.
    let garbled = work.path().join("garbled");
    lmdb_source(&garbled, few, vec![(METADATA_CONFIG_KEY[0], vec![1, 2, 3])]);
    refused(
        &loc("lmdb", &garbled),
        &dest,
        "Lighthouse would refuse to open it",
    );

    // The refused sources are unchanged: the good one still migrates.
    let out = migrate(&loc("lmdb", &good), &loc("butter", &dest));
    assert!(out.status.success());
}

/// Every backend pair the build has, in a chain: LMDB → MDBX → redb → butter → LMDB, each copy
/// equal to the first database entry for entry.
#[test]
fn migrate_through_every_backend() {
    let Some(work) = work_dir("migrate_through_every_backend") else {
        return;
    };
    let batches = batches(work.path());
    let first = work.path().join("0-lmdb");
    let lmdb = Slasher::<Lmdb>::create(Config::new(&first)).expect("open lmdb");
    replay(&lmdb, batches.get(..SPLIT).expect("batches"));
    let want = dump(&lmdb);
    drop(lmdb);
    let chain = ["mdbx", "redb", "butter", "lmdb"];
    let mut from = ("lmdb", first);
    for (i, backend) in chain.into_iter().enumerate() {
        let to = work.path().join(format!("{}-{backend}", i + 1));
        let out = migrate(&loc(from.0, &from.1), &loc(backend, &to));
        assert!(out.status.success(), "{} -> {backend}", from.0);
        let got = match backend {
            "mdbx" => dump(&Slasher::<Mdbx>::create(Config::new(&to)).expect("open")),
            "redb" => dump(&Slasher::<Redb>::create(Config::new(&to)).expect("open")),
            "butter" => dump(&Slasher::<Butter>::create(Config::new(&to)).expect("open")),
            _ => dump(&Slasher::<Lmdb>::create(Config::new(&to)).expect("open")),
        };
        assert_equal(&want, &got, &format!("{} -> {backend}", from.0));
        from = (backend, to);
    }
}
