//! The backend conformance suite (feature `test-utils`).
//!
//! Every check is a generic function over `E: Environment` taking a [`FreshDir`], a function
//! that returns a new, empty [`TempDir`] for the store.
//! [`conformance_tests!`](crate::conformance_tests) turns the whole list into one `#[test]` per
//! check for one backend:
//!
//! ```ignore
//! mod conformance {
//!     slasher_adapters::conformance_tests!(
//!         lmdb,
//!         slasher_adapters::lmdb::Environment,
//!         slasher_adapters::conformance::default_temp_dir
//!     );
//! }
//! ```
//!
//! which yields tests named `conformance::lmdb::<check>`. The directory function is up to the
//! caller, so a backend that needs a particular filesystem (butter_db needs btrfs) passes its
//! own; [`default_temp_dir`] uses `BUTTER_TEST_DIR` if set, else the system temp directory.
//!
//! What the checks pin, beyond the trait documentation, so that every backend behaves alike:
//! - after `delete_current`, the cursor stands before the successor of the deleted key: the
//!   next `get_current` or `next_key` returns that successor and moves onto it (LMDB's
//!   behaviour, which Lighthouse's own `delete_while` loops rely on);
//! - cursor `put` leaves the cursor on the key it wrote;
//! - once `next_key` (or `first_key`/`last_key` on an empty table) has returned `None`, there
//!   is no current entry: `get_current` is `None`, `next_key` stays `None`, and
//!   `delete_current`/`delete_while` are [`Error::CursorUnpositioned`];
//! - a value of zero bytes is stored and returned as `Some(empty)`, not as "missing".
//!
//! The model-based checks run seeded random operation sequences against a `BTreeMap` model.
//! They print their seed first; `CONFORMANCE_SEED=<n>` replays one.
//!
//! These functions panic (through assertions and `expect`) on any deviation: they are test
//! code.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
pub use tempfile::TempDir;

use crate::backend::{Cursor, Environment, Key, RwTransaction};
use crate::cleanup::DatabaseDirGuard;
use crate::config::{BackendConfig, Durability};
use crate::error::Error;
use crate::tables::{OpenDatabases, MAX_NUM_DBS, TABLE_NAMES};

/// Returns a fresh, empty directory for one store; it is deleted when dropped.
pub type FreshDir<'a> = &'a dyn Fn() -> TempDir;

/// Map size / geometry cap used by the suite: large enough for every check, small enough that
/// many environments can be open at once.
pub const TEST_MAX_DB_SIZE_MBS: usize = 2048;

/// Operations per run of the model-based checks.
pub const MODEL_OPS: usize = 12_000;

/// A fresh temporary directory under `BUTTER_TEST_DIR` if that variable is set, else under the
/// system temp directory.
///
/// # Panics
/// If the directory cannot be created.
pub fn default_temp_dir() -> TempDir {
    let mut builder = tempfile::Builder::new();
    builder.prefix("slasher-conformance-");
    let dir = match std::env::var_os("BUTTER_TEST_DIR") {
        Some(parent) => builder.tempdir_in(parent),
        None => builder.tempdir(),
    };
    dir.expect("should create a temporary directory for a conformance store")
}

/// The configuration the suite opens stores with (durable commits).
pub fn test_config(dir: &TempDir) -> BackendConfig {
    BackendConfig {
        max_db_size_mbs: TEST_MAX_DB_SIZE_MBS,
        ..BackendConfig::new(dir.path())
    }
}

/// One store under test: its directory, environment and table handles.
#[derive(Debug)]
pub struct Store<E: Environment> {
    // Declared before `dir` so the environment is dropped before the directory is removed.
    env: Option<E>,
    dbs: OpenDatabases<E::Database>,
    config: BackendConfig,
    /// Removes the store, snapshots included, when the store is dropped (also when a check
    /// fails): the `TempDir`'s own removal cannot delete a read-only snapshot.
    dir: DatabaseDirGuard,
}

impl<E: Environment> Store<E> {
    /// Open a new store in a fresh directory and create the nine tables.
    ///
    /// # Panics
    /// If opening fails.
    pub fn new(fresh: FreshDir<'_>) -> Self {
        let dir = fresh();
        let config = test_config(&dir);
        Self::with_config(dir, config)
    }

    /// Open a store in `dir` with `config` (whose path should be `dir`).
    ///
    /// # Panics
    /// If opening fails.
    pub fn with_config(dir: TempDir, config: BackendConfig) -> Self {
        // In charge of the directory before opening: an open that panics half-way through
        // still has what it made removed.
        let dir = DatabaseDirGuard::new(dir.keep());
        let env = E::open(&config).expect("Environment::open should succeed");
        let dbs = env
            .create_databases()
            .expect("create_databases should succeed");
        Self {
            env: Some(env),
            dbs,
            config,
            dir,
        }
    }

    /// The open environment.
    pub fn env(&self) -> &E {
        self.env.as_ref().expect("the store should be open")
    }

    /// The nine table handles.
    pub fn dbs(&self) -> OpenDatabases<E::Database> {
        self.dbs
    }

    /// The store's directory.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Begin a write transaction.
    ///
    /// # Panics
    /// If `begin_rw_txn` fails.
    pub fn txn(&self) -> E::RwTransaction<'_> {
        self.env()
            .begin_rw_txn()
            .expect("begin_rw_txn should succeed")
    }

    /// Close the environment and open it again (as on a restart), then re-create the tables.
    ///
    /// # Panics
    /// If reopening fails.
    pub fn reopen(&mut self) {
        drop(self.env.take());
        let env = E::open(&self.config).expect("reopening the environment should succeed");
        self.dbs = env
            .create_databases()
            .expect("create_databases after reopen should succeed");
        self.env = Some(env);
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

type Entries = Vec<(Key, Vec<u8>)>;

fn get<T: RwTransaction>(txn: &T, db: T::Database, key: &[u8]) -> Option<Vec<u8>> {
    txn.get(db, key)
        .expect("get should succeed")
        .map(|v| v.into_owned())
}

fn put<T: RwTransaction>(txn: &mut T, db: T::Database, key: &[u8], value: &[u8]) {
    txn.put(db, key, value).expect("put should succeed");
}

fn del<T: RwTransaction>(txn: &mut T, db: T::Database, key: &[u8]) {
    txn.del(db, key).expect("del should succeed");
}

/// Every entry of a table, walking with `first_key`, `get_current` and `next_key`.
fn scan<T: RwTransaction>(txn: &mut T, db: T::Database) -> Entries {
    let mut cursor = txn.cursor(db).expect("cursor should open");
    let mut out = Vec::new();
    let mut key = cursor.first_key().expect("first_key should succeed");
    while let Some(k) = key {
        let (ck, cv) = cursor
            .get_current()
            .expect("get_current should succeed")
            .expect("get_current should return the entry next_key/first_key landed on");
        assert_eq!(
            ck, k,
            "get_current must return the key the cursor was moved to"
        );
        out.push((ck, cv));
        key = cursor.next_key().expect("next_key should succeed");
    }
    out
}

fn scan_keys<T: RwTransaction>(txn: &mut T, db: T::Database) -> Vec<Key> {
    scan(txn, db).into_iter().map(|(k, _)| k).collect()
}

fn first_key<T: RwTransaction>(txn: &mut T, db: T::Database) -> Option<Key> {
    txn.cursor(db)
        .expect("cursor")
        .first_key()
        .expect("first_key should succeed")
}

fn last_key<T: RwTransaction>(txn: &mut T, db: T::Database) -> Option<Key> {
    txn.cursor(db)
        .expect("cursor")
        .last_key()
        .expect("last_key should succeed")
}

fn commit<T: RwTransaction>(txn: T) {
    txn.commit().expect("commit should succeed");
}

fn be(n: u64) -> Key {
    n.to_be_bytes().to_vec()
}

/// Lighthouse's 6-byte big-endian indexed-attestation id.
fn id48(n: u64) -> Key {
    n.to_be_bytes()[2..].to_vec()
}

/// A value that differs per (tag, key) and has the given length.
fn patterned(tag: u8, key: &[u8], len: usize) -> Vec<u8> {
    let seed = key
        .iter()
        .fold(u32::from(tag).wrapping_mul(2_654_435_761), |acc, b| {
            acc.rotate_left(5) ^ u32::from(*b).wrapping_mul(0x9E37_79B9)
        });
    (0..len)
        .map(|i| {
            let x = seed.wrapping_add(u32::try_from(i % 65_521).unwrap_or(0).wrapping_mul(31));
            x.to_le_bytes()[usize::from(x.to_le_bytes()[3]) % 3]
        })
        .collect()
}

fn to_map(entries: Entries) -> BTreeMap<Key, Vec<u8>> {
    entries.into_iter().collect()
}

fn assert_unpositioned<T: Debug>(result: Result<T, Error>, what: &str) {
    match result {
        Err(Error::CursorUnpositioned) => {}
        other => panic!("{what}: expected Err(CursorUnpositioned), got {other:?}"),
    }
}

/// Content written to table `i` by the multi-table checks: `count` entries unique to it.
fn table_content(i: usize, round: u8, count: usize) -> Entries {
    (0..count)
        .map(|n| {
            let key = vec![u8::try_from(n).unwrap_or(u8::MAX), round];
            let value = patterned(
                round.wrapping_mul(16).wrapping_add(i as u8),
                &key,
                1 + n * 7,
            );
            (key, value)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Basic reads and writes
// ---------------------------------------------------------------------------------------------

/// A new store: every table is empty (`get` is `None`, `first_key`/`last_key` are `None`).
pub fn empty_tables_are_empty<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let mut txn = store.txn();
    for (db, name) in store.dbs().all().into_iter().zip(TABLE_NAMES) {
        assert_eq!(get(&txn, db, &[0]), None, "get on empty table {name}");
        assert_eq!(get(&txn, db, &be(1)), None, "get on empty table {name}");
        assert_eq!(
            first_key(&mut txn, db),
            None,
            "first_key on empty table {name}"
        );
        assert_eq!(
            last_key(&mut txn, db),
            None,
            "last_key on empty table {name}"
        );
        assert!(scan(&mut txn, db).is_empty(), "scan of empty table {name}");
    }
}

/// `get` sees a `put` made earlier in the same transaction, before any commit.
pub fn get_sees_put_in_same_txn<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().attesters_max_targets_db;
    let mut txn = store.txn();
    put(&mut txn, db, &be(7), b"seven");
    assert_eq!(get(&txn, db, &be(7)).as_deref(), Some(&b"seven"[..]));
    assert_eq!(get(&txn, db, &be(8)), None);
    commit(txn);
    let txn = store.txn();
    assert_eq!(get(&txn, db, &be(7)).as_deref(), Some(&b"seven"[..]));
}

/// `last_key` includes a key `put` earlier in the same transaction (id allocation).
pub fn last_key_sees_put_in_same_txn<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_db;
    let mut txn = store.txn();
    assert_eq!(last_key(&mut txn, db), None);
    put(&mut txn, db, &id48(1), b"a");
    assert_eq!(last_key(&mut txn, db), Some(id48(1)));
    commit(txn);
    let mut txn = store.txn();
    put(&mut txn, db, &id48(2), b"b");
    assert_eq!(
        last_key(&mut txn, db),
        Some(id48(2)),
        "last_key must see the uncommitted put"
    );
    put(&mut txn, db, &id48(1_000_000), b"c");
    assert_eq!(last_key(&mut txn, db), Some(id48(1_000_000)));
    del(&mut txn, db, &id48(1_000_000));
    assert_eq!(
        last_key(&mut txn, db),
        Some(id48(2)),
        "last_key must see the uncommitted del"
    );
}

/// `first_key` includes a smaller key `put` earlier in the same transaction.
pub fn first_key_sees_put_in_same_txn<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().proposers_db;
    let mut txn = store.txn();
    put(&mut txn, db, &be(50), b"x");
    commit(txn);
    let mut txn = store.txn();
    assert_eq!(first_key(&mut txn, db), Some(be(50)));
    put(&mut txn, db, &be(10), b"y");
    assert_eq!(first_key(&mut txn, db), Some(be(10)));
    del(&mut txn, db, &be(10));
    del(&mut txn, db, &be(50));
    assert_eq!(
        first_key(&mut txn, db),
        None,
        "first_key after deleting everything"
    );
}

/// Deleting a key that does not exist is `Ok` (empty table, other keys present, after a
/// commit, and twice in a row).
pub fn del_missing_key_is_ok<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_db;
    let mut txn = store.txn();
    txn.del(db, &id48(1))
        .expect("del on an empty table must be Ok");
    put(&mut txn, db, &id48(2), b"v");
    txn.del(db, &id48(1))
        .expect("del of a missing key must be Ok");
    txn.del(db, &id48(3))
        .expect("del of a missing key must be Ok");
    commit(txn);
    let mut txn = store.txn();
    txn.del(db, &id48(2)).expect("del of an existing key");
    txn.del(db, &id48(2))
        .expect("second del of the same key must be Ok");
    assert_eq!(get(&txn, db, &id48(2)), None);
    commit(txn);
    let txn = store.txn();
    assert_eq!(get(&txn, db, &id48(2)), None);
}

/// `get` after `del` is `None`, in the same transaction and after commit.
pub fn get_after_del_is_none<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_id_db;
    let mut txn = store.txn();
    put(&mut txn, db, b"committed", b"1");
    commit(txn);
    let mut txn = store.txn();
    put(&mut txn, db, b"fresh", b"2");
    del(&mut txn, db, b"fresh");
    del(&mut txn, db, b"committed");
    assert_eq!(get(&txn, db, b"fresh"), None, "deleted uncommitted key");
    assert_eq!(get(&txn, db, b"committed"), None, "deleted committed key");
    assert!(scan(&mut txn, db).is_empty());
    commit(txn);
    let mut txn = store.txn();
    assert_eq!(get(&txn, db, b"committed"), None);
    assert!(scan(&mut txn, db).is_empty());
}

/// A zero-byte value is stored and read back as `Some(empty)`, distinct from a missing key.
pub fn empty_value_is_not_missing<E: Environment>(fresh: FreshDir<'_>) {
    let mut store = Store::<E>::new(fresh);
    let db = store.dbs().attesters_db;
    let mut txn = store.txn();
    put(&mut txn, db, b"k", b"");
    assert_eq!(get(&txn, db, b"k"), Some(Vec::new()));
    commit(txn);
    store.reopen();
    let db = store.dbs().attesters_db;
    let mut txn = store.txn();
    assert_eq!(get(&txn, db, b"k"), Some(Vec::new()));
    assert_eq!(scan(&mut txn, db), vec![(b"k".to_vec(), Vec::new())]);
}

/// Overwriting a key with growing and shrinking values keeps only the latest value.
pub fn overwrite_grows_and_shrinks_values<E: Environment>(fresh: FreshDir<'_>) {
    let mut store = Store::<E>::new(fresh);
    let sizes = [10, 200, 5_000, 100_000, 3, 0, 70_000, 1, 8_192, 6];
    let db = store.dbs().min_targets_db;
    for (round, size) in sizes.into_iter().enumerate() {
        let tag = round as u8;
        let mut txn = store.txn();
        let value = patterned(tag, b"chunk", size);
        put(&mut txn, db, b"chunk", &value);
        // A neighbour that must not be disturbed.
        put(&mut txn, db, b"chunk+", &[tag]);
        let got = get(&txn, db, b"chunk").expect("value present");
        assert!(
            got == value,
            "round {round}: same-txn value of len {} != {size}",
            got.len()
        );
        commit(txn);
        let txn = store.txn();
        let got = get(&txn, db, b"chunk").expect("value present");
        assert!(
            got == value,
            "round {round}: committed value of len {} != {size}",
            got.len()
        );
        assert_eq!(get(&txn, db, b"chunk+"), Some(vec![tag]));
    }
    // Overwrite several times inside one transaction too.
    let mut txn = store.txn();
    for size in [1, 50_000, 2, 0, 9] {
        put(&mut txn, db, b"chunk", &patterned(1, b"chunk", size));
    }
    assert_eq!(get(&txn, db, b"chunk"), Some(patterned(1, b"chunk", 9)));
    commit(txn);
    store.reopen();
    let db = store.dbs().min_targets_db;
    let mut txn = store.txn();
    assert_eq!(get(&txn, db, b"chunk"), Some(patterned(1, b"chunk", 9)));
    assert_eq!(
        scan_keys(&mut txn, db),
        vec![b"chunk".to_vec(), b"chunk+".to_vec()]
    );
}

/// Values from 0 bytes to just over 1 MiB (the largest Electra indexed attestation) round-trip
/// in the same transaction, after commit and after reopen.
pub fn value_sizes_zero_to_one_mib<E: Environment>(fresh: FreshDir<'_>) {
    let sizes: [usize; 13] = [
        0,
        1,
        6,
        208,
        511,
        512,
        4_095,
        4_096,
        4_097,
        65_536,
        300_000,
        1 << 20,
        1_048_804,
    ];
    let mut store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_db;
    let values: Vec<(Key, Vec<u8>)> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| (id48(i as u64 + 1), patterned(9, &be(n as u64), n)))
        .collect();
    let check = |txn: &E::RwTransaction<'_>, when: &str| {
        for (key, value) in &values {
            let got = get(txn, db, key).unwrap_or_else(|| panic!("{when}: missing {key:?}"));
            assert!(
                got == *value,
                "{when}: value of len {} read back as len {}",
                value.len(),
                got.len()
            );
        }
    };
    let mut txn = store.txn();
    for (key, value) in &values {
        put(&mut txn, db, key, value);
    }
    check(&txn, "same txn");
    commit(txn);
    check(&store.txn(), "after commit");
    store.reopen();
    let db2 = store.dbs().indexed_attestation_db;
    let mut txn = store.txn();
    for (key, value) in &values {
        let got = get(&txn, db2, key).unwrap_or_else(|| panic!("after reopen: missing {key:?}"));
        assert!(
            got == *value,
            "after reopen: len {} read back as len {}",
            value.len(),
            got.len()
        );
    }
    let scanned = scan(&mut txn, db2);
    assert_eq!(scanned.len(), values.len());
    assert!(scanned == values, "cursor scan of large values differs");
}

/// Keys of every length from 1 to 40 bytes are stored, found and ordered.
pub fn key_sizes_one_to_forty_bytes<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_id_db;
    let mut keys: Vec<Key> = Vec::new();
    for len in 1..=40usize {
        keys.push(vec![0x5a; len]);
        let mut k = vec![0u8; len];
        k[len - 1] = len as u8;
        keys.push(k);
        keys.push(vec![0xff; len]);
    }
    let mut txn = store.txn();
    for (i, key) in keys.iter().enumerate() {
        put(&mut txn, db, key, &be(i as u64));
    }
    commit(txn);
    let mut txn = store.txn();
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(
            get(&txn, db, key),
            Some(be(i as u64)),
            "key of length {}",
            key.len()
        );
    }
    let mut expected = keys.clone();
    expected.sort();
    expected.dedup();
    assert_eq!(scan_keys(&mut txn, db), expected);
}

/// Keys compare as unsigned bytes, lexicographically, a shorter prefix first.
pub fn keys_sort_bytewise_shorter_prefix_first<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().attesters_db;
    let expected: Vec<Key> = vec![
        vec![0x00],
        vec![0x00, 0x00],
        vec![0x00, 0x00, 0x00],
        vec![0x00, 0x01],
        vec![0x00, 0xff],
        vec![0x01],
        vec![0x01, 0x00],
        vec![0x7f],
        vec![0x7f, 0xff, 0xff],
        vec![0x80],
        vec![0x80, 0x00],
        vec![0xfe, 0xff],
        vec![0xff],
        vec![0xff, 0x00],
        vec![0xff, 0xff],
        vec![0xff, 0xff, 0xff],
    ];
    let mut txn = store.txn();
    // Insert in a scrambled order.
    for i in [7, 3, 15, 0, 12, 9, 1, 14, 5, 10, 2, 13, 8, 4, 11, 6] {
        put(&mut txn, db, &expected[i], &[i as u8]);
    }
    assert_eq!(
        scan_keys(&mut txn, db),
        expected,
        "order inside the writing transaction"
    );
    assert_eq!(first_key(&mut txn, db), Some(vec![0x00]));
    assert_eq!(last_key(&mut txn, db), Some(vec![0xff, 0xff, 0xff]));
    commit(txn);
    let mut txn = store.txn();
    assert_eq!(scan_keys(&mut txn, db), expected, "order after commit");
}

/// Big-endian integer keys (as the slasher writes them) iterate in numeric order.
pub fn big_endian_keys_iterate_numerically<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().proposers_db;
    let mut nums: Vec<u64> = vec![
        0,
        1,
        255,
        256,
        65_535,
        65_536,
        1 << 32,
        u64::MAX,
        42,
        1 << 56,
    ];
    let mut txn = store.txn();
    for n in &nums {
        // slot ‖ proposer index, both big-endian, as in `proposers`.
        let mut key = be(*n);
        key.extend_from_slice(&be(n % 7));
        put(&mut txn, db, &key, &be(*n));
    }
    nums.sort_unstable();
    let got: Vec<u64> = scan(&mut txn, db)
        .into_iter()
        .map(|(_, v)| u64::from_be_bytes(v.try_into().expect("8-byte value")))
        .collect();
    assert_eq!(got, nums);
}

/// Two tables are independent: the same key holds different values, and deleting or scanning
/// in one does not touch the other.
pub fn tables_are_independent<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let all = store.dbs().all();
    let mut txn = store.txn();
    for (i, db) in all.into_iter().enumerate() {
        put(&mut txn, db, b"shared", &[i as u8]);
    }
    for (i, db) in all.into_iter().enumerate() {
        assert_eq!(
            get(&txn, db, b"shared"),
            Some(vec![i as u8]),
            "table {}",
            TABLE_NAMES[i]
        );
    }
    del(&mut txn, all[3], b"shared");
    put(&mut txn, all[4], b"only-in-4", b"x");
    commit(txn);
    let mut txn = store.txn();
    for (i, db) in all.into_iter().enumerate() {
        let expected: Entries = match i {
            3 => vec![],
            4 => vec![
                (b"only-in-4".to_vec(), b"x".to_vec()),
                (b"shared".to_vec(), vec![4]),
            ],
            _ => vec![(b"shared".to_vec(), vec![i as u8])],
        };
        assert_eq!(scan(&mut txn, db), expected, "table {}", TABLE_NAMES[i]);
    }
}

/// Lighthouse's open sequence: a transaction that only reads `metadata` and is dropped, then
/// one that reads it and commits; then reopen and do it again.
pub fn lighthouse_open_sequence<E: Environment>(fresh: FreshDir<'_>) {
    let mut store = Store::<E>::new(fresh);
    for _ in 0..2 {
        let db = store.dbs().metadata_db;
        let txn = store.txn();
        assert_eq!(
            get(&txn, db, &[0x00]),
            None,
            "no schema version is ever written"
        );
        drop(txn);
        let txn = store.txn();
        assert_eq!(get(&txn, db, &[0x01]), None, "no config is ever written");
        commit(txn);
        store.reopen();
    }
}

/// `filenames()` lists files that exist after open, inside the store's directory.
pub fn filenames_exist<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().metadata_db;
    let mut txn = store.txn();
    put(&mut txn, db, &[0x01], b"cfg");
    commit(txn);
    let files = store.env().filenames();
    assert!(
        !files.is_empty(),
        "filenames() must list the backend's files"
    );
    for file in &files {
        assert!(
            file.starts_with(store.dir()),
            "{} is outside {}",
            file.display(),
            store.dir().display()
        );
        assert!(
            file.exists(),
            "{} listed by filenames() does not exist",
            file.display()
        );
    }
    let mut unique = files.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), files.len(), "filenames() lists a file twice");
}

/// With `Durability::Immediate` (the default) the environment reports itself durable.
pub fn durable_with_immediate_durability<E: Environment>(fresh: FreshDir<'_>) {
    let dir = fresh();
    let config = BackendConfig {
        durability: Durability::Immediate,
        ..test_config(&dir)
    };
    let store = Store::<E>::with_config(dir, config);
    assert!(
        store.env().durable(),
        "{} must be durable with Durability::Immediate",
        E::NAME
    );
}

/// A backend that reports where its commits spend their time counts each commit once, and
/// the parts fit inside the commit's wall time. butter_db (alone or timed) must report it; the
/// others report nothing.
pub fn commit_split_counts_each_commit<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let before = store.env().commit_split();
    assert_eq!(
        before.is_some(),
        E::NAME == "butter",
        "{}: commit_split is reported by butter_db alone",
        E::NAME
    );
    let Some(before) = before else {
        return;
    };
    let db = store.dbs().attesters_db;
    let mut txn = store.txn();
    for k in 0..1000u64 {
        put(&mut txn, db, &be(k), &patterned(1, &be(k), 100));
    }
    let started = std::time::Instant::now();
    commit(txn);
    let wall = started.elapsed();
    let split = store
        .env()
        .commit_split()
        .expect("reported once, reported always")
        .since(&before);
    assert_eq!(split.commits, 1, "{split:?}");
    assert!(
        split.snapshot > std::time::Duration::ZERO,
        "a commit that wrote takes its snapshot: {split:?}"
    );
    let parts = split.build + split.file + split.write_back + split.snapshot;
    assert!(
        parts <= wall,
        "parts {parts:?} exceed the commit's {wall:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Cursors
// ---------------------------------------------------------------------------------------------

fn fill<T: RwTransaction>(txn: &mut T, db: T::Database, keys: &[u64]) {
    for k in keys {
        put(
            txn,
            db,
            &be(*k),
            &patterned(3, &be(*k), 10 + (*k as usize % 50)),
        );
    }
}

fn value_of(k: u64) -> Vec<u8> {
    patterned(3, &be(k), 10 + (k as usize % 50))
}

/// `next_key` walks the keys in order, never returns the current key again, and returns
/// `None` at the end; afterwards there is no current entry and `next_key` stays `None`.
pub fn next_key_walks_in_order_then_none<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().attesters_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[10, 20, 30]);
    let mut c = txn.cursor(db).expect("cursor");
    assert_eq!(c.first_key().expect("first"), Some(be(10)));
    assert_eq!(
        c.next_key().expect("next"),
        Some(be(20)),
        "next_key is exclusive of the current key"
    );
    assert_eq!(c.next_key().expect("next"), Some(be(30)));
    assert_eq!(
        c.next_key().expect("next"),
        None,
        "next_key past the last key"
    );
    assert_eq!(
        c.get_current().expect("get_current"),
        None,
        "no current entry past the end"
    );
    assert_eq!(
        c.next_key().expect("next"),
        None,
        "next_key stays None past the end"
    );
    assert_unpositioned(c.delete_current(), "delete_current past the end");
    // Repositioning works after running off the end.
    assert_eq!(c.last_key().expect("last"), Some(be(30)));
    assert_eq!(
        c.get_current().expect("get_current"),
        Some((be(30), value_of(30)))
    );
    assert_eq!(
        c.next_key().expect("next"),
        None,
        "next_key from the last key"
    );
    drop(c);
    commit(txn);
}

/// `next_key` from a key in the middle returns the following key; with a single key it
/// returns `None`.
pub fn next_key_is_exclusive_of_current<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().proposers_db;
    let mut txn = store.txn();
    put(&mut txn, db, &be(5), b"only");
    {
        let mut c = txn.cursor(db).expect("cursor");
        assert_eq!(c.first_key().expect("first"), Some(be(5)));
        assert_eq!(
            c.next_key().expect("next"),
            None,
            "single key: next_key must not repeat it"
        );
    }
    {
        let mut c = txn.cursor(db).expect("cursor");
        assert_eq!(c.last_key().expect("last"), Some(be(5)));
        assert_eq!(c.next_key().expect("next"), None);
    }
    fill(&mut txn, db, &[1, 9]);
    let mut c = txn.cursor(db).expect("cursor");
    c.put(&be(5), b"again").expect("cursor put");
    assert_eq!(
        c.next_key().expect("next"),
        Some(be(9)),
        "next_key after cursor put"
    );
}

/// A new cursor is unpositioned: `get_current` is `None`; `next_key`, `delete_current` and
/// `delete_while` are `Err(CursorUnpositioned)` and change nothing.
pub fn fresh_cursor_is_unpositioned<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[1, 2, 3]);
    {
        let mut c = txn.cursor(db).expect("cursor");
        assert_eq!(c.get_current().expect("get_current"), None);
        assert_unpositioned(c.next_key(), "next_key on a fresh cursor");
    }
    {
        let mut c = txn.cursor(db).expect("cursor");
        assert_unpositioned(c.delete_current(), "delete_current on a fresh cursor");
    }
    {
        let mut c = txn.cursor(db).expect("cursor");
        let mut calls = 0;
        let result = c.delete_while(&mut |_| {
            calls += 1;
            Ok(true)
        });
        assert_unpositioned(result, "delete_while on a fresh cursor");
        assert_eq!(calls, 0, "the predicate must not be called");
    }
    assert_eq!(
        scan_keys(&mut txn, db),
        vec![be(1), be(2), be(3)],
        "nothing was deleted"
    );
}

/// On an empty table `first_key`/`last_key` are `None` and leave no current entry:
/// `delete_while` is `Err(CursorUnpositioned)` (callers return early on `None`).
pub fn cursor_on_empty_table<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().proposers_db;
    let mut txn = store.txn();
    let mut c = txn.cursor(db).expect("cursor");
    assert_eq!(c.first_key().expect("first"), None);
    assert_eq!(c.get_current().expect("get_current"), None);
    assert_eq!(c.next_key().expect("next"), None);
    assert_unpositioned(
        c.delete_while(&mut |_| Ok(true)),
        "delete_while on an empty table",
    );
    assert_eq!(c.last_key().expect("last"), None);
    assert_unpositioned(c.delete_current(), "delete_current on an empty table");
}

/// `delete_current` leaves the cursor before the successor: `get_current` returns the
/// successor's entry; at the last key it returns `None`.
pub fn delete_current_then_get_current_is_successor<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().attesters_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[1, 2, 3, 4]);
    commit(txn);
    let mut txn = store.txn();
    {
        let mut c = txn.cursor(db).expect("cursor");
        assert_eq!(c.first_key().expect("first"), Some(be(1)));
        assert_eq!(c.next_key().expect("next"), Some(be(2)));
        c.delete_current().expect("delete 2");
        assert_eq!(
            c.get_current().expect("get_current"),
            Some((be(3), value_of(3)))
        );
        assert_eq!(
            c.get_current().expect("get_current"),
            Some((be(3), value_of(3))),
            "stable"
        );
        assert_eq!(
            c.next_key().expect("next"),
            Some(be(4)),
            "after get_current the cursor is on 3"
        );
        c.delete_current().expect("delete 4 (the last key)");
        assert_eq!(
            c.get_current().expect("get_current"),
            None,
            "no successor of the last key"
        );
        assert_eq!(c.next_key().expect("next"), None);
        assert_unpositioned(c.delete_current(), "delete_current with no current entry");
    }
    assert_eq!(scan_keys(&mut txn, db), vec![be(1), be(3)]);
    assert_eq!(get(&txn, db, &be(2)), None);
    commit(txn);
    let mut txn = store.txn();
    assert_eq!(scan_keys(&mut txn, db), vec![be(1), be(3)]);
}

/// Right after `delete_current`, `next_key` returns the successor of the deleted key (it does
/// not skip it), as LMDB's `MDB_NEXT` does.
pub fn next_key_after_delete_current_returns_successor<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[1, 2, 3, 4, 5]);
    {
        let mut c = txn.cursor(db).expect("cursor");
        assert_eq!(c.first_key().expect("first"), Some(be(1)));
        c.delete_current().expect("delete 1");
        assert_eq!(
            c.next_key().expect("next"),
            Some(be(2)),
            "the successor is not skipped"
        );
        c.delete_current().expect("delete 2");
        c.delete_current()
            .expect("delete 3 (the successor) without moving first");
        assert_eq!(
            c.get_current().expect("get_current"),
            Some((be(4), value_of(4)))
        );
        assert_eq!(c.next_key().expect("next"), Some(be(5)));
        c.delete_current().expect("delete 5");
        assert_eq!(c.next_key().expect("next"), None);
    }
    assert_eq!(scan_keys(&mut txn, db), vec![be(4)]);
}

/// Lighthouse's LMDB/MDBX prune loop, driven by hand: `get_current`, delete, `next_key`.
pub fn manual_delete_loop_visits_every_key<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().proposers_db;
    let keys: Vec<u64> = (0..200).map(|i| i * 3).collect();
    let mut txn = store.txn();
    fill(&mut txn, db, &keys);
    commit(txn);
    let mut txn = store.txn();
    let mut seen = Vec::new();
    {
        let mut c = txn.cursor(db).expect("cursor");
        c.first_key().expect("first");
        while let Some((k, v)) = c.get_current().expect("get_current") {
            let n = u64::from_be_bytes(k.as_slice().try_into().expect("8 bytes"));
            if n >= 300 {
                break;
            }
            assert_eq!(v, value_of(n));
            c.delete_current().expect("delete_current");
            seen.push(n);
            if c.next_key().expect("next_key").is_none() {
                break;
            }
        }
    }
    let expected: Vec<u64> = keys.iter().copied().filter(|n| *n < 300).collect();
    assert_eq!(
        seen, expected,
        "the loop must visit (and delete) every key below 300 once"
    );
    let rest: Vec<Key> = keys.iter().filter(|n| **n >= 300).map(|n| be(*n)).collect();
    assert_eq!(scan_keys(&mut txn, db), rest);
}

/// Cursor `put` writes through the transaction and leaves the cursor on the written key;
/// the `last_key() + 1` id allocation of `store_indexed_attestation` works repeatedly in one
/// transaction.
pub fn cursor_put_allocates_sequential_ids<E: Environment>(fresh: FreshDir<'_>) {
    let mut store = Store::<E>::new(fresh);
    let alloc = |txn: &mut E::RwTransaction<'_>, db: E::Database, round: u8| -> u64 {
        let mut c = txn.cursor(db).expect("cursor");
        let next = match c.last_key().expect("last_key") {
            Some(k) => {
                let mut buf = [0u8; 8];
                buf[2..].copy_from_slice(&k);
                u64::from_be_bytes(buf) + 1
            }
            None => 1,
        };
        let value = patterned(round, &id48(next), 228 + 8 * (next as usize % 10));
        c.put(&id48(next), &value).expect("cursor put");
        assert_eq!(
            c.get_current().expect("get_current"),
            Some((id48(next), value))
        );
        next
    };
    for round in 0..3u8 {
        // Handles belong to one environment; take them afresh after every reopen.
        let db = store.dbs().indexed_attestation_db;
        let mut txn = store.txn();
        for i in 0..50u64 {
            let id = alloc(&mut txn, db, round);
            assert_eq!(id, u64::from(round) * 50 + i + 1, "ids must be consecutive");
        }
        commit(txn);
        store.reopen();
    }
    let mut txn = store.txn();
    let db = store.dbs().indexed_attestation_db;
    let keys = scan_keys(&mut txn, db);
    assert_eq!(keys, (1..=150).map(id48).collect::<Vec<_>>());
    for (i, key) in keys.iter().enumerate() {
        let round = (i / 50) as u8;
        let n = i as u64 + 1;
        assert_eq!(
            get(&txn, db, key),
            Some(patterned(round, &id48(n), 228 + 8 * (n as usize % 10)))
        );
    }
}

/// Cursor `put` overwrites an existing key and the overwrite is visible to `get`.
pub fn cursor_put_overwrites<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().metadata_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[1, 2, 3]);
    {
        let mut c = txn.cursor(db).expect("cursor");
        c.put(&be(2), &[7; 5000]).expect("cursor put grows");
        assert_eq!(
            c.get_current().expect("get_current"),
            Some((be(2), vec![7; 5000]))
        );
        c.put(&be(2), b"s").expect("cursor put shrinks");
        assert_eq!(c.next_key().expect("next"), Some(be(3)));
        c.put(&be(0), b"new first").expect("cursor put new key");
        assert_eq!(
            c.get_current().expect("get_current"),
            Some((be(0), b"new first".to_vec()))
        );
        assert_eq!(c.next_key().expect("next"), Some(be(1)));
    }
    assert_eq!(get(&txn, db, &be(2)), Some(b"s".to_vec()));
    assert_eq!(scan_keys(&mut txn, db), vec![be(0), be(1), be(2), be(3)]);
    commit(txn);
    let txn = store.txn();
    assert_eq!(get(&txn, db, &be(0)), Some(b"new first".to_vec()));
}

// ---------------------------------------------------------------------------------------------
// delete_while
// ---------------------------------------------------------------------------------------------

/// `delete_while` stops at the first key the predicate rejects, even when later keys would
/// match again (a non-monotone predicate); it leaves the cursor on that key.
pub fn delete_while_stops_at_first_false<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().proposers_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[1, 2, 3, 4, 5, 6, 7, 8]);
    commit(txn);
    let mut txn = store.txn();
    let mut asked = Vec::new();
    let deleted = {
        let mut c = txn.cursor(db).expect("cursor");
        c.first_key().expect("first");
        let deleted = c
            .delete_while(&mut |k| {
                let n = u64::from_be_bytes(k.try_into().expect("8 bytes"));
                asked.push(n);
                Ok(matches!(n, 1 | 2 | 3 | 5 | 6 | 8))
            })
            .expect("delete_while");
        assert_eq!(
            c.get_current().expect("get_current"),
            Some((be(4), value_of(4)))
        );
        deleted
    };
    assert_eq!(
        asked,
        vec![1, 2, 3, 4],
        "the predicate is asked in key order up to the first false"
    );
    assert_eq!(deleted, vec![value_of(1), value_of(2), value_of(3)]);
    assert_eq!(
        scan_keys(&mut txn, db),
        vec![be(4), be(5), be(6), be(7), be(8)]
    );
    commit(txn);
    let mut txn = store.txn();
    assert_eq!(
        scan_keys(&mut txn, db),
        vec![be(4), be(5), be(6), be(7), be(8)]
    );
}

/// `delete_while` returns the deleted values in key order, whatever the insertion order, and
/// also deletes keys written earlier in the same transaction.
pub fn delete_while_returns_values_in_key_order<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_db;
    let order = [17u64, 3, 250, 99, 1, 64, 128, 7, 200, 42];
    let mut txn = store.txn();
    fill(&mut txn, db, &order[..5]);
    commit(txn);
    let mut txn = store.txn();
    fill(&mut txn, db, &order[5..]);
    let deleted = {
        let mut c = txn.cursor(db).expect("cursor");
        c.first_key().expect("first");
        c.delete_while(&mut |k| Ok(u64::from_be_bytes(k.try_into().expect("8 bytes")) < 200))
            .expect("delete_while")
    };
    let mut sorted: Vec<u64> = order.iter().copied().filter(|n| *n < 200).collect();
    sorted.sort_unstable();
    assert_eq!(
        deleted,
        sorted.iter().map(|n| value_of(*n)).collect::<Vec<_>>()
    );
    assert_eq!(scan_keys(&mut txn, db), vec![be(200), be(250)]);
}

/// The values returned by `delete_while` are owned copies: they stay correct after further
/// writes that reuse the freed space (Lighthouse PR #6211).
pub fn delete_while_values_owned_after_writes<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_db;
    let other = store.dbs().attesters_db;
    let big = |n: u64| patterned(5, &be(n), 500 + (n as usize * 997) % 6_000);
    let mut txn = store.txn();
    for n in 0..40 {
        put(&mut txn, db, &be(n), &big(n));
    }
    commit(txn);
    let mut txn = store.txn();
    // Dirty some of the pages first, so values come from both clean and dirty pages.
    for n in (0..40).step_by(3) {
        put(&mut txn, db, &be(n), &big(n + 1_000));
    }
    let expected: Vec<Vec<u8>> = (0..30)
        .map(|n| if n % 3 == 0 { big(n + 1_000) } else { big(n) })
        .collect();
    let deleted = {
        let mut c = txn.cursor(db).expect("cursor");
        c.first_key().expect("first");
        c.delete_while(&mut |k| Ok(u64::from_be_bytes(k.try_into().expect("8 bytes")) < 30))
            .expect("delete_while")
    };
    // Reuse the freed space with different bytes, in the same and another table.
    for n in 0..30 {
        put(&mut txn, db, &be(n), &vec![0xee; 7_000]);
        put(&mut txn, other, &be(n), &vec![0x11; 7_000]);
    }
    for n in 0..30 {
        del(&mut txn, db, &be(n));
    }
    assert_eq!(deleted.len(), expected.len());
    for (i, (got, want)) in deleted.iter().zip(&expected).enumerate() {
        assert!(
            got == want,
            "deleted value {i} changed after later writes (len {})",
            got.len()
        );
    }
    commit(txn);
    let txn = store.txn();
    assert_eq!(get(&txn, db, &be(35)), Some(big(35)));
}

/// `delete_while` started in the middle (after `next_key`) deletes from there only.
pub fn delete_while_from_middle<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().attesters_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[1, 2, 3, 4, 5]);
    let deleted = {
        let mut c = txn.cursor(db).expect("cursor");
        c.first_key().expect("first");
        c.next_key().expect("next");
        let deleted = c.delete_while(&mut |_| Ok(true)).expect("delete_while");
        assert_eq!(
            c.get_current().expect("get_current"),
            None,
            "ran off the end"
        );
        deleted
    };
    assert_eq!(
        deleted,
        vec![value_of(2), value_of(3), value_of(4), value_of(5)]
    );
    assert_eq!(scan_keys(&mut txn, db), vec![be(1)]);
}

/// `delete_while` right after `delete_current` starts at the successor.
pub fn delete_while_after_delete_current<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().attesters_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[1, 2, 3, 4, 5]);
    let deleted = {
        let mut c = txn.cursor(db).expect("cursor");
        c.first_key().expect("first");
        c.delete_current().expect("delete 1");
        c.delete_while(&mut |k| Ok(k != be(4).as_slice()))
            .expect("delete_while")
    };
    assert_eq!(deleted, vec![value_of(2), value_of(3)]);
    assert_eq!(scan_keys(&mut txn, db), vec![be(4), be(5)]);
}

/// An error from the predicate stops `delete_while` and is returned; entries deleted before it
/// stay deleted in the transaction, later ones are untouched, and the cursor is usable.
pub fn delete_while_predicate_error_propagates<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_id_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[1, 2, 3, 4, 5]);
    {
        let mut c = txn.cursor(db).expect("cursor");
        c.first_key().expect("first");
        let result = c.delete_while(&mut |k| {
            if k == be(3).as_slice() {
                Err(Error::Other("predicate failed on purpose".into()))
            } else {
                Ok(true)
            }
        });
        match result {
            Err(Error::Other(msg)) => assert_eq!(msg, "predicate failed on purpose"),
            other => panic!("expected the predicate's error, got {other:?}"),
        }
        assert_eq!(
            c.get_current().expect("get_current"),
            Some((be(3), value_of(3)))
        );
    }
    assert_eq!(scan_keys(&mut txn, db), vec![be(3), be(4), be(5)]);
    commit(txn);
    let mut txn = store.txn();
    assert_eq!(scan_keys(&mut txn, db), vec![be(3), be(4), be(5)]);
}

/// Lighthouse's pruning shape (`first_key`, then `delete_while(key < bound)`) and its
/// test-only reset (`delete_while(|_| true)` on all nine tables).
pub fn delete_while_prune_and_reset<E: Environment>(fresh: FreshDir<'_>) {
    let mut store = Store::<E>::new(fresh);
    let all = store.dbs().all();
    let mut txn = store.txn();
    for (i, db) in all.into_iter().enumerate() {
        for (k, v) in table_content(i, 1, 20 + i) {
            put(&mut txn, db, &k, &v);
        }
    }
    commit(txn);
    let mut txn = store.txn();
    let proposers = store.dbs().proposers_db;
    let pruned = {
        let mut c = txn.cursor(proposers).expect("cursor");
        assert!(c.first_key().expect("first").is_some());
        c.delete_while(&mut |k| Ok(k[0] < 10)).expect("prune")
    };
    assert_eq!(pruned.len(), 10);
    assert_eq!(scan(&mut txn, proposers).len(), 20 + 7 - 10);
    commit(txn);
    store.reopen();
    let all = store.dbs().all();
    let mut txn = store.txn();
    for db in all {
        let mut c = txn.cursor(db).expect("cursor");
        if c.first_key().expect("first").is_some() {
            c.delete_while(&mut |_| Ok(true)).expect("reset");
        }
    }
    commit(txn);
    let mut txn = store.txn();
    for (i, db) in all.into_iter().enumerate() {
        assert!(
            scan(&mut txn, db).is_empty(),
            "table {} not empty after reset",
            TABLE_NAMES[i]
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Transactions
// ---------------------------------------------------------------------------------------------

/// Dropping a transaction aborts it: puts, overwrites, deletes, cursor puts and `delete_while`
/// in all nine tables are discarded, before and after reopen.
pub fn abort_by_drop_discards_all_nine_tables<E: Environment>(fresh: FreshDir<'_>) {
    let mut store = Store::<E>::new(fresh);
    let all = store.dbs().all();
    let mut txn = store.txn();
    for (i, db) in all.into_iter().enumerate() {
        for (k, v) in table_content(i, 1, 5 + i) {
            put(&mut txn, db, &k, &v);
        }
    }
    commit(txn);
    let baseline: Vec<Entries> = {
        let mut txn = store.txn();
        all.into_iter().map(|db| scan(&mut txn, db)).collect()
    };
    for (i, entries) in baseline.iter().enumerate() {
        assert_eq!(
            *entries,
            table_content(i, 1, 5 + i),
            "committed table {}",
            TABLE_NAMES[i]
        );
    }
    let mut txn = store.txn();
    for (i, db) in all.into_iter().enumerate() {
        put(&mut txn, db, b"new", b"uncommitted");
        put(&mut txn, db, &baseline[i][0].0, b"overwritten");
        del(&mut txn, db, &baseline[i][1].0);
        let mut c = txn.cursor(db).expect("cursor");
        c.put(&[0xff, 0xff], b"cursor put").expect("cursor put");
        c.first_key().expect("first");
        c.delete_while(&mut |k| Ok(k[0] < 2)).expect("delete_while");
        drop(c);
        assert_eq!(
            get(&txn, db, b"new"),
            Some(b"uncommitted".to_vec()),
            "own write visible"
        );
    }
    drop(txn);
    let mut txn = store.txn();
    for (i, db) in all.into_iter().enumerate() {
        assert_eq!(
            scan(&mut txn, db),
            baseline[i],
            "table {} after abort",
            TABLE_NAMES[i]
        );
    }
    drop(txn);
    store.reopen();
    let all = store.dbs().all();
    let mut txn = store.txn();
    for (i, db) in all.into_iter().enumerate() {
        assert_eq!(
            scan(&mut txn, db),
            baseline[i],
            "table {} after abort + reopen",
            TABLE_NAMES[i]
        );
    }
}

/// A committed transaction is visible to the next one, and after closing and reopening the
/// environment, in all nine tables; a later commit after reopen is too.
pub fn reopen_after_commit_sees_all_nine_tables<E: Environment>(fresh: FreshDir<'_>) {
    let mut store = Store::<E>::new(fresh);
    let mut expected: Vec<BTreeMap<Key, Vec<u8>>> = vec![BTreeMap::new(); MAX_NUM_DBS];
    for round in 1..=3u8 {
        let all = store.dbs().all();
        let mut txn = store.txn();
        for (i, db) in all.into_iter().enumerate() {
            for (k, v) in table_content(i, round, 3 * i + usize::from(round)) {
                put(&mut txn, db, &k, &v);
                expected[i].insert(k, v);
            }
            if round == 3 {
                let k = table_content(i, 1, 1).remove(0).0;
                del(&mut txn, db, &k);
                expected[i].remove(&k);
            }
        }
        commit(txn);
        let mut txn = store.txn();
        for (i, db) in all.into_iter().enumerate() {
            assert_eq!(
                to_map(scan(&mut txn, db)),
                expected[i],
                "round {round}, table {}",
                TABLE_NAMES[i]
            );
        }
        drop(txn);
        store.reopen();
        let all = store.dbs().all();
        let mut txn = store.txn();
        for (i, db) in all.into_iter().enumerate() {
            let got = to_map(scan(&mut txn, db));
            assert_eq!(
                got, expected[i],
                "round {round} after reopen, table {}",
                TABLE_NAMES[i]
            );
            for (k, v) in &expected[i] {
                assert_eq!(get(&txn, db, k).as_ref(), Some(v));
            }
        }
    }
}

/// Many keys (20,000 in random order) in one transaction: a full cursor scan returns them all,
/// in order, before and after commit and reopen.
pub fn many_keys_full_scan<E: Environment>(fresh: FreshDir<'_>) {
    let mut store = Store::<E>::new(fresh);
    let db = store.dbs().current_epochs_db;
    let mut rng = ChaCha8Rng::seed_from_u64(20_000);
    let mut ids: Vec<u64> = (0..20_000u64).map(|i| i * 7 + 3).collect();
    // Fisher-Yates with our seeded RNG.
    for i in (1..ids.len()).rev() {
        let j = rng.gen_range(0..=i);
        ids.swap(i, j);
    }
    let mut txn = store.txn();
    for id in &ids {
        put(&mut txn, db, &be(*id), &id.to_le_bytes());
    }
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    let expected: Entries = sorted
        .iter()
        .map(|id| (be(*id), id.to_le_bytes().to_vec()))
        .collect();
    assert!(
        scan(&mut txn, db) == expected,
        "scan inside the writing transaction"
    );
    commit(txn);
    store.reopen();
    let db = store.dbs().current_epochs_db;
    let mut txn = store.txn();
    let got = scan(&mut txn, db);
    assert_eq!(got.len(), expected.len());
    assert!(got == expected, "scan after reopen");
    assert_eq!(first_key(&mut txn, db), Some(be(sorted[0])));
    assert_eq!(last_key(&mut txn, db), sorted.last().map(|n| be(*n)));
}

enum SecondWriter {
    Calling,
    Began,
    Saw(Option<Vec<u8>>),
    Failed(String),
}

fn second_writer_waits<E: Environment>(fresh: FreshDir<'_>, first_commits: bool) {
    let store = Arc::new(Store::<E>::new(fresh));
    let db = store.dbs().metadata_db;
    let mut txn = store.txn();
    put(&mut txn, db, b"k", b"from the first writer");
    let (tx, rx) = mpsc::channel();
    let thread_store = Arc::clone(&store);
    // Set just before the first transaction ends: a second writer that began with it unset
    // began while the first was open, however the threads were scheduled.
    let first_ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let thread_first_ended = Arc::clone(&first_ended);
    let handle = std::thread::spawn(move || {
        let _ = tx.send(SecondWriter::Calling);
        let message = match thread_store.env().begin_rw_txn() {
            Ok(mut txn2) => {
                if !thread_first_ended.load(std::sync::atomic::Ordering::SeqCst) {
                    let _ = tx.send(SecondWriter::Failed(
                        "began while the first transaction was open".into(),
                    ));
                    return;
                }
                let _ = tx.send(SecondWriter::Began);
                let seen = get(&txn2, db, b"k");
                put(&mut txn2, db, b"second", b"yes");
                commit(txn2);
                SecondWriter::Saw(seen)
            }
            Err(e) => SecondWriter::Failed(format!("{e}")),
        };
        let _ = tx.send(message);
    });
    // The window below starts only once the thread is about to call begin_rw_txn.
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(SecondWriter::Calling) => {}
        _ => panic!("the second writer thread never started"),
    }
    match rx.recv_timeout(Duration::from_millis(300)) {
        Err(mpsc::RecvTimeoutError::Timeout) => {}
        Ok(SecondWriter::Failed(e)) => {
            panic!("second begin_rw_txn failed instead of blocking: {e}")
        }
        Ok(_) => panic!("second begin_rw_txn returned while the first transaction was open"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("second writer thread died"),
    }
    first_ended.store(true, std::sync::atomic::Ordering::SeqCst);
    if first_commits {
        commit(txn);
    } else {
        drop(txn);
    }
    let mut began = false;
    let seen = loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(SecondWriter::Began) => began = true,
            Ok(SecondWriter::Calling) => {}
            Ok(SecondWriter::Saw(seen)) => break seen,
            Ok(SecondWriter::Failed(e)) => panic!("second begin_rw_txn failed: {e}"),
            Err(e) => panic!("second writer did not proceed after the first ended: {e}"),
        }
    };
    assert!(began);
    handle.join().expect("second writer thread");
    let expected = first_commits.then(|| b"from the first writer".to_vec());
    assert_eq!(seen, expected, "what the second writer saw of the first");
    let txn = store.txn();
    assert_eq!(get(&txn, db, b"second"), Some(b"yes".to_vec()));
    assert_eq!(get(&txn, db, b"k"), expected);
}

/// A second `begin_rw_txn` from another thread blocks (does not fail) while the first
/// transaction is open, and proceeds once it commits, seeing its writes.
pub fn second_writer_blocks_until_commit<E: Environment>(fresh: FreshDir<'_>) {
    second_writer_waits::<E>(fresh, true);
}

/// As above, but the first transaction is dropped: the second proceeds and sees nothing of it.
pub fn second_writer_blocks_until_abort<E: Environment>(fresh: FreshDir<'_>) {
    second_writer_waits::<E>(fresh, false);
}

/// Several threads each run many short write transactions (read-modify-write of a counter):
/// transactions are serialised, so no increment is lost.
pub fn concurrent_writers_are_serialised<E: Environment>(fresh: FreshDir<'_>) {
    let store = Arc::new(Store::<E>::new(fresh));
    let db = store.dbs().metadata_db;
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for _ in 0..25 {
                    let mut txn = store.txn();
                    let n = get(&txn, db, b"counter")
                        .map_or(0, |v| u64::from_be_bytes(v.try_into().expect("8 bytes")));
                    put(&mut txn, db, b"counter", &be(n + 1));
                    commit(txn);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer thread");
    }
    let txn = store.txn();
    assert_eq!(get(&txn, db, b"counter"), Some(be(100)));
}

// ---------------------------------------------------------------------------------------------
// Model-based checks
// ---------------------------------------------------------------------------------------------

/// Tables the model exercises (indices into [`OpenDatabases::all`]).
const MODEL_TABLES: [usize; 4] = [0, 2, 7, 8];
/// Key bytes: few, and including both extremes, so keys collide and order edge cases occur.
const KEY_ALPHABET: [u8; 4] = [0x00, 0x01, 0x80, 0xff];

type Map = BTreeMap<Key, Vec<u8>>;

/// The model of a cursor position (see the module docs for the semantics).
#[derive(Debug, Clone, PartialEq, Eq)]
enum ModelPos {
    Fresh,
    On(Key),
    AfterDelete(Key),
    End,
}

#[derive(Debug)]
struct ModelCursor<'a> {
    map: &'a mut Map,
    pos: ModelPos,
}

impl ModelCursor<'_> {
    fn land(&mut self, entry: Option<(Key, Vec<u8>)>) -> Option<(Key, Vec<u8>)> {
        self.pos = match &entry {
            Some((k, _)) => ModelPos::On(k.clone()),
            None => ModelPos::End,
        };
        entry
    }

    fn after(&self, key: &[u8]) -> Option<(Key, Vec<u8>)> {
        use std::ops::Bound;
        self.map
            .range::<[u8], _>((Bound::Excluded(key), Bound::Unbounded))
            .next()
            .map(|(k, v)| (k.clone(), v.clone()))
    }

    fn first_key(&mut self) -> Option<Key> {
        let e = self.map.iter().next().map(|(k, v)| (k.clone(), v.clone()));
        self.land(e).map(|(k, _)| k)
    }

    fn last_key(&mut self) -> Option<Key> {
        let e = self
            .map
            .iter()
            .next_back()
            .map(|(k, v)| (k.clone(), v.clone()));
        self.land(e).map(|(k, _)| k)
    }

    fn next_key(&mut self) -> Result<Option<Key>, Error> {
        let from = match &self.pos {
            ModelPos::Fresh => return Err(Error::CursorUnpositioned),
            ModelPos::End => return Ok(None),
            ModelPos::On(k) | ModelPos::AfterDelete(k) => k.clone(),
        };
        let e = self.after(&from);
        Ok(self.land(e).map(|(k, _)| k))
    }

    fn get_current(&mut self) -> Option<(Key, Vec<u8>)> {
        match self.pos.clone() {
            ModelPos::Fresh | ModelPos::End => None,
            ModelPos::On(k) => {
                let v = self.map.get(&k).cloned().expect("model: cursor key exists");
                Some((k, v))
            }
            ModelPos::AfterDelete(k) => {
                let e = self.after(&k);
                self.land(e)
            }
        }
    }

    fn delete_current(&mut self) -> Result<(), Error> {
        let Some((k, _)) = self.get_current() else {
            return Err(Error::CursorUnpositioned);
        };
        self.map.remove(&k);
        self.pos = ModelPos::AfterDelete(k);
        Ok(())
    }

    fn put(&mut self, key: &[u8], value: &[u8]) {
        self.map.insert(key.to_vec(), value.to_vec());
        self.pos = ModelPos::On(key.to_vec());
    }

    fn delete_while(
        &mut self,
        f: &mut dyn FnMut(&[u8]) -> Result<bool, Error>,
    ) -> Result<Vec<Vec<u8>>, Error> {
        let mut deleted = Vec::new();
        let mut current = self.get_current();
        if current.is_none() {
            return Err(Error::CursorUnpositioned);
        }
        while let Some((k, v)) = current {
            if !f(&k)? {
                break;
            }
            self.delete_current()?;
            deleted.push(v);
            current = self.get_current();
        }
        Ok(deleted)
    }
}

/// How a random `delete_while` predicate decides.
#[derive(Debug, Clone)]
enum Predicate {
    /// `key < bound` (monotone, like Lighthouse's).
    Below(Key),
    /// A scattered, non-monotone subset of keys.
    Scattered(u8),
    /// Always true (Lighthouse's reset).
    All,
    /// True, except an error at this key.
    FailAt(Key),
}

impl Predicate {
    fn decide(&self, key: &[u8]) -> Result<bool, Error> {
        match self {
            Predicate::Below(bound) => Ok(key < bound.as_slice()),
            Predicate::Scattered(salt) => {
                let h = key
                    .iter()
                    .fold(u32::from(*salt), |a, b| a.wrapping_mul(31) ^ u32::from(*b));
                Ok(h % 4 != 0)
            }
            Predicate::All => Ok(true),
            Predicate::FailAt(bad) if key == bad.as_slice() => {
                Err(Error::Other(format!("injected predicate error at {bad:?}")))
            }
            Predicate::FailAt(_) => Ok(true),
        }
    }
}

fn same_outcome<T: PartialEq + Debug>(got: &Result<T, Error>, want: &Result<T, Error>) -> bool {
    match (got, want) {
        (Ok(a), Ok(b)) => a == b,
        (Err(Error::CursorUnpositioned), Err(Error::CursorUnpositioned)) => true,
        (Err(Error::Other(a)), Err(Error::Other(b))) => a == b,
        _ => false,
    }
}

fn random_key(rng: &mut ChaCha8Rng) -> Key {
    let len = if rng.gen_bool(0.6) { 1 } else { 2 };
    (0..len)
        .map(|_| KEY_ALPHABET[rng.gen_range(0..KEY_ALPHABET.len())])
        .collect()
}

fn random_value(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let len = match rng.gen_range(0..40) {
        0..=2 => 0,
        3 => rng.gen_range(2_000..12_000),
        _ => rng.gen_range(1..40),
    };
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

fn random_predicate(rng: &mut ChaCha8Rng) -> Predicate {
    match rng.gen_range(0..4) {
        0 => Predicate::Below(random_key(rng)),
        1 => Predicate::Scattered(rng.gen()),
        2 => Predicate::All,
        _ => Predicate::FailAt(random_key(rng)),
    }
}

/// The seed for a model run: `CONFORMANCE_SEED` if set (decimal or `0x` hex), else `default`.
fn model_seed(default: Option<u64>) -> u64 {
    if let Some(text) = std::env::var_os("CONFORMANCE_SEED") {
        let text = text.to_string_lossy().trim().to_string();
        let parsed = match text.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => text.parse(),
        };
        return parsed.unwrap_or_else(|e| panic!("CONFORMANCE_SEED={text:?} is not a u64: {e}"));
    }
    default.unwrap_or_else(rand::random)
}

/// Outcome of one write transaction in the model run.
enum TxnEnd {
    Commit,
    Abort,
    Reopen { commit_first: bool },
}

struct ModelRun {
    seed: u64,
    op: usize,
    /// The operations of the current cursor session, for failure messages.
    trail: Vec<String>,
}

impl ModelRun {
    fn ctx(&self, what: &str) -> String {
        format!(
            "seed {} (CONFORMANCE_SEED={}), op {}: {what}\ncursor session so far: {:?}",
            self.seed, self.seed, self.op, self.trail
        )
    }
}

fn check_tables<T: RwTransaction>(
    txn: &mut T,
    dbs: &[T::Database],
    model: &[Map],
    run: &ModelRun,
    when: &str,
) {
    for (t, db) in dbs.iter().enumerate() {
        let got = scan(txn, *db);
        let want: Entries = model[t]
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert!(
            got == want,
            "{}",
            run.ctx(&format!("{when}: table {t} is {got:?}, model {want:?}"))
        );
    }
}

/// One cursor session on table `t`: a few random cursor operations, each checked against the
/// model cursor.
fn cursor_session<T: RwTransaction>(
    txn: &mut T,
    db: T::Database,
    map: &mut Map,
    rng: &mut ChaCha8Rng,
    run: &mut ModelRun,
) {
    let mut cursor = txn.cursor(db).expect("cursor should open");
    let mut model = ModelCursor {
        map,
        pos: ModelPos::Fresh,
    };
    let steps = rng.gen_range(1..=12);
    run.trail.clear();
    for _ in 0..steps {
        run.op += 1;
        let choice = rng.gen_range(0..100);
        let name = match choice {
            0..=14 => "first_key",
            15..=24 => "last_key",
            25..=44 => "next_key",
            45..=59 => "get_current",
            60..=74 => "delete_current",
            75..=87 => "put",
            _ => "delete_while",
        };
        run.trail.push(format!("{name} from {:?}", model.pos));
        match choice {
            0..=14 => {
                let got = cursor.first_key().expect("first_key");
                let want = model.first_key();
                assert_eq!(got, want, "{}", run.ctx("first_key"));
            }
            15..=24 => {
                let got = cursor.last_key().expect("last_key");
                let want = model.last_key();
                assert_eq!(got, want, "{}", run.ctx("last_key"));
            }
            25..=44 => {
                let pos = model.pos.clone();
                let got = cursor.next_key();
                let want = model.next_key();
                assert!(
                    same_outcome(&got, &want),
                    "{}",
                    run.ctx(&format!(
                        "next_key from {pos:?}: got {got:?}, want {want:?}"
                    ))
                );
            }
            45..=59 => {
                let pos = model.pos.clone();
                let got = cursor.get_current().expect("get_current");
                let want = model.get_current();
                assert_eq!(
                    got,
                    want,
                    "{}",
                    run.ctx(&format!("get_current from {pos:?}"))
                );
            }
            60..=74 => {
                let pos = model.pos.clone();
                let got = cursor.delete_current();
                let want = model.delete_current();
                assert!(
                    same_outcome(&got, &want),
                    "{}",
                    run.ctx(&format!(
                        "delete_current from {pos:?}: got {got:?}, want {want:?}"
                    ))
                );
            }
            75..=87 => {
                let key = random_key(rng);
                let value = random_value(rng);
                cursor.put(&key, &value).expect("cursor put");
                model.put(&key, &value);
            }
            _ => {
                let pos = model.pos.clone();
                let predicate = random_predicate(rng);
                let mut asked_got = Vec::new();
                let got = cursor.delete_while(&mut |k| {
                    asked_got.push(k.to_vec());
                    predicate.decide(k)
                });
                let mut asked_want = Vec::new();
                let want = model.delete_while(&mut |k| {
                    asked_want.push(k.to_vec());
                    predicate.decide(k)
                });
                assert!(
                    same_outcome(&got, &want),
                    "{}",
                    run.ctx(&format!(
                        "delete_while({predicate:?}) from {pos:?}: got {got:?}, want {want:?}"
                    ))
                );
                assert_eq!(
                    asked_got,
                    asked_want,
                    "{}",
                    run.ctx(&format!(
                        "keys passed to the delete_while({predicate:?}) predicate"
                    ))
                );
            }
        }
    }
}

fn run_model<E: Environment>(fresh: FreshDir<'_>, seed: u64, ops: usize) {
    println!(
        "conformance model ({}): seed {seed}; replay with CONFORMANCE_SEED={seed}",
        E::NAME
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut run = ModelRun {
        seed,
        op: 0,
        trail: Vec::new(),
    };
    let mut store = Store::<E>::new(fresh);
    let mut committed: Vec<Map> = vec![Map::new(); MODEL_TABLES.len()];
    let (mut commits, mut aborts, mut reopens) = (0usize, 0usize, 0usize);
    while run.op < ops {
        let all = store.dbs().all();
        let dbs: Vec<E::Database> = MODEL_TABLES.iter().map(|&i| all[i]).collect();
        let mut working = committed.clone();
        let mut txn = store.txn();
        let end = loop {
            if run.op >= ops {
                break TxnEnd::Commit;
            }
            run.op += 1;
            run.trail.clear();
            let t = rng.gen_range(0..dbs.len());
            match rng.gen_range(0..1000) {
                0..=249 => {
                    let key = random_key(&mut rng);
                    let got = get(&txn, dbs[t], &key);
                    assert_eq!(
                        got.as_ref(),
                        working[t].get(&key),
                        "{}",
                        run.ctx(&format!("get {key:?} in table {t}"))
                    );
                }
                250..=479 => {
                    let key = random_key(&mut rng);
                    let value = random_value(&mut rng);
                    put(&mut txn, dbs[t], &key, &value);
                    working[t].insert(key, value);
                }
                480..=599 => {
                    let key = random_key(&mut rng);
                    txn.del(dbs[t], &key)
                        .unwrap_or_else(|e| panic!("{}", run.ctx(&format!("del: {e}"))));
                    working[t].remove(&key);
                }
                600..=899 => cursor_session(&mut txn, dbs[t], &mut working[t], &mut rng, &mut run),
                900..=929 => check_tables(&mut txn, &dbs, &working, &run, "full scan"),
                930..=969 => break TxnEnd::Commit,
                970..=989 => break TxnEnd::Abort,
                _ => {
                    break TxnEnd::Reopen {
                        commit_first: rng.gen_bool(0.5),
                    }
                }
            }
        };
        let reopen = match end {
            TxnEnd::Commit => {
                txn.commit()
                    .unwrap_or_else(|e| panic!("{}", run.ctx(&format!("commit: {e}"))));
                committed = working;
                commits += 1;
                false
            }
            TxnEnd::Abort => {
                drop(txn);
                aborts += 1;
                false
            }
            TxnEnd::Reopen { commit_first } => {
                if commit_first {
                    txn.commit()
                        .unwrap_or_else(|e| panic!("{}", run.ctx(&format!("commit: {e}"))));
                    committed = working;
                } else {
                    drop(txn);
                }
                true
            }
        };
        if reopen {
            store.reopen();
            reopens += 1;
        }
        // After every transaction boundary the store holds exactly the committed model.
        let all = store.dbs().all();
        let dbs: Vec<E::Database> = MODEL_TABLES.iter().map(|&i| all[i]).collect();
        let mut txn = store.txn();
        check_tables(&mut txn, &dbs, &committed, &run, "after transaction end");
        // Tables outside the model were never written.
        for (i, db) in all.into_iter().enumerate() {
            if !MODEL_TABLES.contains(&i) {
                assert!(
                    scan(&mut txn, db).is_empty(),
                    "{}",
                    run.ctx("untouched table")
                );
            }
        }
    }
    println!(
        "conformance model ({}): {} ops, {commits} commits, {aborts} aborts, {reopens} reopens",
        E::NAME,
        run.op
    );
    assert!(
        commits > 10 && aborts > 5 && reopens > 2,
        "the run should exercise every ending"
    );
}

/// Model-based check with a fresh random seed each run (printed; `CONFORMANCE_SEED` replays):
/// over 10,000 random gets, puts, deletes, cursor walks, cursor puts, `delete_current`s,
/// `delete_while`s, commits, aborts and reopens across four tables, each result compared with a
/// `BTreeMap` model.
pub fn model_random_seed<E: Environment>(fresh: FreshDir<'_>) {
    run_model::<E>(fresh, model_seed(None), MODEL_OPS);
}

/// The same model-based check with a fixed seed (unless `CONFORMANCE_SEED` is set), so every
/// run covers at least one known sequence.
pub fn model_fixed_seed<E: Environment>(fresh: FreshDir<'_>) {
    run_model::<E>(fresh, model_seed(Some(0x5EED_B077E2)), MODEL_OPS);
}

// ---------------------------------------------------------------------------------------------
// The test generator
// ---------------------------------------------------------------------------------------------

/// Expands to one `#[test]` per conformance check, inside `mod $name`, for the environment
/// type `$env`, with `$fresh` (a `Fn() -> TempDir`, e.g. [`default_temp_dir`]) providing each
/// store's directory. Invoke it inside a `mod conformance { ... }` so that test names read
/// `conformance::<backend>::<check>`.
#[macro_export]
macro_rules! conformance_tests {
    ($name:ident, $env:ty, $fresh:expr $(,)?) => {
        $crate::conformance_tests!($name, $env, $fresh, available = || true);
    };
    ($name:ident, $env:ty, $fresh:expr, available = $available:expr $(,)?) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $crate::__conformance_test_fns!(
                $env,
                $fresh,
                $available;
                empty_tables_are_empty,
                get_sees_put_in_same_txn,
                last_key_sees_put_in_same_txn,
                first_key_sees_put_in_same_txn,
                del_missing_key_is_ok,
                get_after_del_is_none,
                empty_value_is_not_missing,
                overwrite_grows_and_shrinks_values,
                value_sizes_zero_to_one_mib,
                key_sizes_one_to_forty_bytes,
                keys_sort_bytewise_shorter_prefix_first,
                big_endian_keys_iterate_numerically,
                tables_are_independent,
                lighthouse_open_sequence,
                filenames_exist,
                durable_with_immediate_durability,
                commit_split_counts_each_commit,
                next_key_walks_in_order_then_none,
                next_key_is_exclusive_of_current,
                fresh_cursor_is_unpositioned,
                cursor_on_empty_table,
                delete_current_then_get_current_is_successor,
                next_key_after_delete_current_returns_successor,
                manual_delete_loop_visits_every_key,
                cursor_put_allocates_sequential_ids,
                cursor_put_overwrites,
                delete_while_stops_at_first_false,
                delete_while_returns_values_in_key_order,
                delete_while_values_owned_after_writes,
                delete_while_from_middle,
                delete_while_after_delete_current,
                delete_while_predicate_error_propagates,
                delete_while_prune_and_reset,
                abort_by_drop_discards_all_nine_tables,
                reopen_after_commit_sees_all_nine_tables,
                many_keys_full_scan,
                second_writer_blocks_until_commit,
                second_writer_blocks_until_abort,
                concurrent_writers_are_serialised,
                model_random_seed,
                model_fixed_seed,
            );
        }
    };
}

/// Implementation detail of [`conformance_tests!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_test_fns {
    ($env:ty, $fresh:expr, $available:expr; $($check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                // `$available` returns false (after printing why) when the backend cannot run
                // here, e.g. no btrfs mount outside CI.
                if !($available)() {
                    return;
                }
                $crate::conformance::$check::<$env>(&$fresh);
            }
        )*
    };
}
