//! The storage interface the slasher is written against.
//!
//! It has the shape of Lighthouse's `slasher::database::interface` (an environment, nine named
//! tables, one read-write transaction at a time, cursors), expressed as traits with static
//! dispatch instead of Lighthouse's four parallel enums. Every backend module (`lmdb`, `mdbx`,
//! `redb`, `butter`) provides types named like Lighthouse's per-backend modules —
//! `Environment`, `RwTransaction<'env>`, `Database`, `Cursor<'txn>` — and implements these
//! traits for them.
//!
//! See the crate documentation for the contract in prose and where it deliberately differs
//! from a Lighthouse backend.

use std::borrow::Cow;
use std::fmt::Debug;
use std::path::PathBuf;

use crate::config::BackendConfig;
use crate::error::Error;
use crate::stats::EngineStats;
use crate::tables::OpenDatabases;

/// A key as returned by a cursor. Always owned: the slasher parses keys after further writes.
pub type Key = Vec<u8>;

/// A value returned by `get`; it may borrow the transaction.
pub type Value<'a> = Cow<'a, [u8]>;

/// One storage engine behind the slasher interface.
///
/// `Environment::open` is Lighthouse's `Environment::new`, `create_databases` opens the nine
/// tables once (their handles stay valid for the life of the environment), and
/// `begin_rw_txn` starts the single write transaction.
pub trait Environment: Sized + Send + Sync + Debug + 'static {
    /// Lowercase name, as accepted by `--slasher-backend` (`"lmdb"`, `"butter"`, ...).
    const NAME: &'static str;

    /// A table handle: cheap to copy, opened once by `create_databases`.
    type Database: Copy + Send + Sync + Debug + 'static;

    /// The read-write transaction type.
    type RwTransaction<'env>: RwTransaction<Database = Self::Database>
    where
        Self: 'env;

    /// Open or create the store inside `config.path` (the directory must exist).
    ///
    /// # Errors
    /// Whatever the engine reports (permissions, wrong filesystem, corrupt files, a second
    /// process holding the database, ...).
    fn open(config: &BackendConfig) -> Result<Self, Error>;

    /// Create (if missing) and open the nine slasher tables.
    ///
    /// # Errors
    /// Engine errors.
    fn create_databases(&self) -> Result<OpenDatabases<Self::Database>, Error>;

    /// Begin the read-write transaction. Blocks (never fails) while another one is open.
    ///
    /// # Errors
    /// Engine errors, or a poisoned environment after a failed commit.
    fn begin_rw_txn(&self) -> Result<Self::RwTransaction<'_>, Error>;

    /// The files this backend created in its directory.
    fn filenames(&self) -> Vec<PathBuf>;

    /// Whether a commit that returned `Ok` survives power loss with this configuration.
    fn durable(&self) -> bool;

    /// The engine's own statistics about its commits, for a backend that keeps them
    /// (butter_db); `None` otherwise. A capability, not part of the interface: see
    /// [`crate::stats`].
    fn stats(&self) -> Option<&dyn EngineStats> {
        None
    }
}

/// A read-write transaction. Dropping it without `commit` aborts it.
///
/// Reads see the transaction's own uncommitted writes.
pub trait RwTransaction: Sized {
    /// The table handle type of the owning environment.
    type Database: Copy;

    /// The cursor type; it borrows the transaction mutably.
    type Cursor<'txn>: Cursor
    where
        Self: 'txn;

    /// Point lookup; a missing key is `Ok(None)`.
    ///
    /// # Errors
    /// Engine errors.
    fn get(&self, db: Self::Database, key: &[u8]) -> Result<Option<Value<'_>>, Error>;

    /// Insert or overwrite.
    ///
    /// # Errors
    /// Engine errors (e.g. the map is full).
    fn put(&mut self, db: Self::Database, key: &[u8], value: &[u8]) -> Result<(), Error>;

    /// Delete a key. Deleting a missing key is `Ok(())` on every backend.
    ///
    /// # Errors
    /// Engine errors.
    fn del(&mut self, db: Self::Database, key: &[u8]) -> Result<(), Error>;

    /// An unpositioned cursor on one table.
    ///
    /// # Errors
    /// Engine errors.
    fn cursor(&mut self, db: Self::Database) -> Result<Self::Cursor<'_>, Error>;

    /// Atomically publish every write to all nine tables.
    ///
    /// # Errors
    /// Engine errors; nothing of this transaction is visible afterwards unless the error says
    /// the outcome is unknown (see each engine's documentation).
    fn commit(self) -> Result<(), Error>;
}

/// A cursor over one table inside a read-write transaction.
pub trait Cursor {
    /// Position on the smallest key and return it; `None` for an empty table.
    ///
    /// # Errors
    /// Engine errors.
    fn first_key(&mut self) -> Result<Option<Key>, Error>;

    /// Position on the largest key (including keys put earlier in this transaction).
    ///
    /// # Errors
    /// Engine errors.
    fn last_key(&mut self) -> Result<Option<Key>, Error>;

    /// Advance to the next key and return it; `None` at the end (the cursor is then
    /// unpositioned).
    ///
    /// # Errors
    /// [`Error::CursorUnpositioned`] if the cursor was never positioned; engine errors.
    fn next_key(&mut self) -> Result<Option<Key>, Error>;

    /// The entry under the cursor, or `None` if it is unpositioned or past the end.
    ///
    /// # Errors
    /// Engine errors.
    fn get_current(&mut self) -> Result<Option<(Key, Vec<u8>)>, Error>;

    /// Delete the entry under the cursor. The cursor then sits on the successor, so
    /// `get_current` returns the next entry (LMDB's behaviour).
    ///
    /// # Errors
    /// [`Error::CursorUnpositioned`] without a current entry; engine errors.
    fn delete_current(&mut self) -> Result<(), Error>;

    /// Insert or overwrite through the cursor.
    ///
    /// # Errors
    /// Engine errors.
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), Error>;

    /// From the current position: while `f(key)` is true, delete the entry, keep its value and
    /// advance. Stops at the first false (even for a non-monotone predicate) or at the end.
    /// Returns the deleted values, owned, in key order. An error from `f` stops the loop and is
    /// returned; entries deleted before it stay deleted in this transaction.
    ///
    /// # Errors
    /// [`Error::CursorUnpositioned`] if the cursor is not positioned; errors from `f`; engine
    /// errors.
    fn delete_while(
        &mut self,
        f: &mut dyn FnMut(&[u8]) -> Result<bool, Error>,
    ) -> Result<Vec<Vec<u8>>, Error> {
        let mut deleted = Vec::new();
        let mut current = self.get_current()?;
        if current.is_none() {
            return Err(Error::CursorUnpositioned);
        }
        while let Some((key, value)) = current {
            if !f(&key)? {
                break;
            }
            self.delete_current()?;
            deleted.push(value);
            current = self.get_current()?;
        }
        Ok(deleted)
    }
}

/// Shared by the adapters' unit tests: a fresh store in a temporary directory creates exactly
/// `expected` files (by name, in `filenames()` order), they exist, and commits are durable.
#[cfg(all(test, any(feature = "lmdb", feature = "mdbx", feature = "redb")))]
pub(crate) fn check_files_and_durability<E: Environment>(expected: &[&str]) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = BackendConfig {
        max_db_size_mbs: 64,
        ..BackendConfig::new(dir.path())
    };
    let env = E::open(&config).expect("open");
    env.create_databases().expect("tables");
    let names: Vec<_> = env
        .filenames()
        .iter()
        .map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    let expected: Vec<_> = expected.iter().map(|n| Some(n.to_string())).collect();
    assert_eq!(names, expected);
    for file in env.filenames() {
        assert!(file.exists(), "{} missing", file.display());
    }
    assert!(env.durable());
}
