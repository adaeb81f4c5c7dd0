//! Shared code of the `slasher_*` integration tests: an in-memory reference backend, per-backend
//! temporary directories, attestation/header builders and the per-backend test macro.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, MutexGuard};
use slasher_adapters::backend::{Cursor, Environment, Key, RwTransaction, Value};
use slasher_adapters::slasher::{
    AttestationData, AttesterSlashing, BeaconBlockHeader, Checkpoint, Config, Hash256,
    IndexedAttestation, SignedBeaconBlockHeader, Slasher,
};
use slasher_adapters::{BackendConfig, DatabaseDirGuard, Error, OpenDatabases, MAX_NUM_DBS};
use tempfile::TempDir;

type Table = BTreeMap<Vec<u8>, Vec<u8>>;
type Tables = Vec<Table>;

/// Databases of the memory backend, by path, so that re-opening a path sees its data.
fn registry() -> &'static Mutex<HashMap<PathBuf, Arc<Mutex<Tables>>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<Tables>>>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

/// A trivially correct in-memory backend (a `BTreeMap` per table, copied at the start of each
/// write transaction and swapped in at commit). It runs the slasher tests without any engine.
#[derive(Debug)]
pub struct MemEnv {
    state: Arc<Mutex<Tables>>,
}

/// A transaction of [`MemEnv`]: holds the environment lock, works on a copy.
#[derive(Debug)]
pub struct MemTxn<'env> {
    guard: MutexGuard<'env, Tables>,
    working: Tables,
}

/// A cursor of [`MemTxn`].
#[derive(Debug)]
pub struct MemCursor<'txn> {
    table: &'txn mut Table,
    pos: Option<Vec<u8>>,
}

impl Environment for MemEnv {
    const NAME: &'static str = "memory";
    type Database = usize;
    type RwTransaction<'env> = MemTxn<'env>;

    fn open(config: &BackendConfig) -> Result<Self, Error> {
        let state = registry()
            .lock()
            .entry(config.path.clone())
            .or_insert_with(|| Arc::new(Mutex::new(vec![Table::new(); MAX_NUM_DBS])))
            .clone();
        Ok(Self { state })
    }

    fn create_databases(&self) -> Result<OpenDatabases<usize>, Error> {
        let mut next = 0;
        OpenDatabases::try_from_fn(|_| {
            next += 1;
            Ok::<_, Error>(next - 1)
        })
    }

    fn begin_rw_txn(&self) -> Result<MemTxn<'_>, Error> {
        let guard = self.state.lock();
        let working = guard.clone();
        Ok(MemTxn { guard, working })
    }

    fn filenames(&self) -> Vec<PathBuf> {
        Vec::new()
    }

    fn durable(&self) -> bool {
        false
    }
}

impl MemTxn<'_> {
    fn table(&self, db: usize) -> Result<&Table, Error> {
        self.working
            .get(db)
            .ok_or_else(|| Error::Other(format!("no table {db}")))
    }
    fn table_mut(&mut self, db: usize) -> Result<&mut Table, Error> {
        self.working
            .get_mut(db)
            .ok_or_else(|| Error::Other(format!("no table {db}")))
    }
}

impl RwTransaction for MemTxn<'_> {
    type Database = usize;
    type Cursor<'txn>
        = MemCursor<'txn>
    where
        Self: 'txn;

    fn get(&self, db: usize, key: &[u8]) -> Result<Option<Value<'_>>, Error> {
        Ok(self
            .table(db)?
            .get(key)
            .map(|v| Value::Borrowed(v.as_slice())))
    }

    fn put(&mut self, db: usize, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.table_mut(db)?.insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    fn del(&mut self, db: usize, key: &[u8]) -> Result<(), Error> {
        self.table_mut(db)?.remove(key);
        Ok(())
    }

    fn cursor(&mut self, db: usize) -> Result<MemCursor<'_>, Error> {
        Ok(MemCursor {
            table: self.table_mut(db)?,
            pos: None,
        })
    }

    fn commit(mut self) -> Result<(), Error> {
        *self.guard = std::mem::take(&mut self.working);
        Ok(())
    }
}

impl MemCursor<'_> {
    fn successor(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.table
            .range::<[u8], _>((Bound::Excluded(key), Bound::Unbounded))
            .next()
            .map(|(k, _)| k.clone())
    }
}

impl Cursor for MemCursor<'_> {
    fn first_key(&mut self) -> Result<Option<Key>, Error> {
        self.pos = self.table.keys().next().cloned();
        Ok(self.pos.clone())
    }

    fn last_key(&mut self) -> Result<Option<Key>, Error> {
        self.pos = self.table.keys().next_back().cloned();
        Ok(self.pos.clone())
    }

    fn next_key(&mut self) -> Result<Option<Key>, Error> {
        let current = self.pos.take().ok_or(Error::CursorUnpositioned)?;
        self.pos = self.successor(&current);
        Ok(self.pos.clone())
    }

    fn get_current(&mut self) -> Result<Option<(Key, Vec<u8>)>, Error> {
        Ok(self
            .pos
            .as_ref()
            .and_then(|k| self.table.get(k).map(|v| (k.clone(), v.clone()))))
    }

    fn delete_current(&mut self) -> Result<(), Error> {
        let current = self.pos.take().ok_or(Error::CursorUnpositioned)?;
        self.table.remove(&current);
        self.pos = self.successor(&current);
        Ok(())
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.table.insert(key.to_vec(), value.to_vec());
        Ok(())
    }
}

/// The temporary directory of one backend instance, or `None` (after a loud SKIP line) when
/// butter_db has no btrfs directory outside CI.
pub fn backend_dir(backend: &str) -> Option<TempDir> {
    if backend.starts_with("butter") {
        let dir = butter_test_support::btrfs_base(&format!("slasher test on {backend}"))?;
        Some(
            tempfile::Builder::new()
                .prefix("slasher-test-")
                .tempdir_in(dir)
                .expect("create a temporary directory inside BUTTER_BTRFS_DIR"),
        )
    } else {
        Some(tempfile::tempdir().expect("create a temporary directory"))
    }
}

/// One test's context on one backend: a temporary directory handing out fresh database paths.
#[derive(Debug)]
pub struct TestCtx {
    /// Removes the test's databases, snapshots included, when the test ends or fails: the
    /// `TempDir`'s own removal cannot delete a butter_db database's read-only snapshots.
    dir: DatabaseDirGuard,
    /// The backend's name.
    pub backend: &'static str,
    next: Mutex<u32>,
}

impl TestCtx {
    /// A fresh database directory path with a default (Lighthouse) configuration.
    pub fn config(&self) -> Config {
        let mut n = self.next.lock();
        *n += 1;
        let mut config = Config::new(self.dir.path().join(format!("db{n}")));
        // LMDB maps the whole size up front; keep it small for tests.
        config.max_db_size_mbs = 1024;
        config
    }

    /// Open a slasher (creating the directory).
    pub fn open<E: Environment>(&self, config: Config) -> Slasher<E> {
        Slasher::create(config).unwrap_or_else(|e| panic!("open slasher on {}: {e}", self.backend))
    }
}

/// Run `test` on backend `E` in a fresh temporary directory (or skip, for butter without btrfs).
pub fn run<E: Environment>(test: fn(&TestCtx)) {
    let Some(dir) = backend_dir(E::NAME) else {
        return;
    };
    let ctx = TestCtx {
        dir: DatabaseDirGuard::new(dir.keep()),
        backend: E::NAME,
        next: Mutex::new(0),
    };
    test(&ctx);
}

/// Instantiate generic test functions `fn name<E: Environment>(ctx: &TestCtx)` once per
/// compiled backend (plus the in-memory reference backend).
#[macro_export]
macro_rules! per_backend {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $( #[test] fn $name() { $crate::slasher_support::run::<$crate::slasher_support::MemEnv>(super::$name::<$crate::slasher_support::MemEnv>) } )*
        }
        #[cfg(feature = "lmdb")]
        mod lmdb {
            $( #[test] fn $name() { $crate::slasher_support::run::<slasher_adapters::lmdb::Environment>(super::$name::<slasher_adapters::lmdb::Environment>) } )*
        }
        #[cfg(feature = "mdbx")]
        mod mdbx {
            $( #[test] fn $name() { $crate::slasher_support::run::<slasher_adapters::mdbx::Environment>(super::$name::<slasher_adapters::mdbx::Environment>) } )*
        }
        #[cfg(feature = "redb")]
        mod redb {
            $( #[test] fn $name() { $crate::slasher_support::run::<slasher_adapters::redb::Environment>(super::$name::<slasher_adapters::redb::Environment>) } )*
        }
        #[cfg(feature = "butter")]
        mod butter {
            $( #[test] fn $name() { $crate::slasher_support::run::<slasher_adapters::butter::Environment>(super::$name::<slasher_adapters::butter::Environment>) } )*
        }
    };
}

/// A 32-byte root whose last 8 bytes are `n` big-endian (Lighthouse's `from_low_u64_be`).
pub fn root(n: u64) -> Hash256 {
    let mut bytes = [0u8; 32];
    bytes[24..].copy_from_slice(&n.to_be_bytes());
    Hash256::from(bytes)
}

/// An attestation like Lighthouse's test helper: slot 0, index 0, zero block root, source root
/// zero, target root `root(target_root)`, all-zero signature.
pub fn att(indices: &[u64], source: u64, target: u64, target_root: u64) -> IndexedAttestation {
    let data = AttestationData {
        slot: 0,
        index: 0,
        beacon_block_root: Hash256::ZERO,
        source: Checkpoint {
            epoch: source,
            root: Hash256::ZERO,
        },
        target: Checkpoint {
            epoch: target,
            root: root(target_root),
        },
    };
    IndexedAttestation::new(indices.to_vec(), data, [0; 96]).expect("few indices")
}

/// An attester slashing.
pub fn slashing(a1: &IndexedAttestation, a2: &IndexedAttestation) -> AttesterSlashing {
    AttesterSlashing {
        attestation_1: a1.clone(),
        attestation_2: a2.clone(),
    }
}

/// A signed header for `slot` by `proposer`, made distinct by `body`.
pub fn block(slot: u64, proposer: u64, body: u64) -> SignedBeaconBlockHeader {
    SignedBeaconBlockHeader {
        message: BeaconBlockHeader {
            slot,
            proposer_index: proposer,
            parent_root: Hash256::ZERO,
            state_root: Hash256::ZERO,
            body_root: root(body),
        },
        signature: [0; 96],
    }
}
