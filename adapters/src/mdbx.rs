//! MDBX through `libmdbx` (feature `mdbx`).
//!
//! Files: `mdbx.dat` and `mdbx.lck` in the configured directory. The environment is opened
//! without a write map (`NoWriteMap`), with durable sync mode (every commit is synced), room
//! for the nine named tables, and a geometry growing from 0 up to `max_db_size_mbs` MiB in
//! steps of 256 MiB (shrinking left at MDBX's default).
//!
//! `libmdbx` admits one write transaction per environment at a time and makes a second
//! [`begin_rw_txn`](crate::Environment::begin_rw_txn) wait for the first to end.
//!
//! Table handles: `libmdbx` ties its `Table` values to a borrow of a transaction, so the
//! `Copy` [`Database`] handle stores the table's index and MDBX `dbi`. Each write transaction
//! obtains the nine `Table` values once, when it begins, from a short read-only transaction
//! that re-binds the already open handles to the environment's lifetime; no table is
//! reopened per operation.

use std::borrow::Cow;
use std::fmt;
use std::path::PathBuf;

use libmdbx::{NoWriteMap, WriteFlags, RW};

use crate::backend::{self, Key, Value};
use crate::config::BackendConfig;
use crate::error::Error;
use crate::tables::{OpenDatabases, MAX_NUM_DBS, TABLE_NAMES};

/// The data file MDBX creates in the database directory.
pub const DATA_FILENAME: &str = "mdbx.dat";
/// The lock file MDBX creates in the database directory.
pub const LOCK_FILENAME: &str = "mdbx.lck";

/// Growth step of the data file, as in Lighthouse.
pub const GROWTH_STEP_BYTES: isize = 256 * (1 << 20);

/// File mode of newly created files: owner read/write only, as in Lighthouse.
const FILE_MODE: u32 = 0o600;

/// An open MDBX environment holding the slasher's tables.
pub struct Environment {
    db: libmdbx::Database<NoWriteMap>,
    dir: PathBuf,
    /// The sync mode the database was opened with; `durable()` reads it.
    sync_mode: libmdbx::SyncMode,
}

impl fmt::Debug for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("mdbx::Environment")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// A table handle: the table's position in [`TABLE_NAMES`] and its MDBX `dbi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Database {
    index: usize,
    dbi: u32,
}

/// The single MDBX write transaction. Dropping it aborts it.
#[derive(Debug)]
pub struct RwTransaction<'env> {
    txn: libmdbx::Transaction<'env, RW, NoWriteMap>,
    /// The nine tables, in [`TABLE_NAMES`] order.
    tables: Vec<libmdbx::Table<'env>>,
}

/// Where a cursor stands, as far as the adapter's contract is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Position {
    /// Never positioned: `next_key`, `delete_current` and `delete_while` are errors.
    Fresh,
    /// On an entry, or right after `delete_current` on the gap before the successor.
    Valid,
    /// Past the end (or the table was empty): there is no current entry.
    End,
}

/// A native MDBX cursor on one table.
#[derive(Debug)]
pub struct Cursor<'txn> {
    inner: libmdbx::Cursor<'txn, RW>,
    position: Position,
    /// The key deleted by the last `delete_current`, while the cursor has not moved since.
    /// The successor is then found by seeking past it, which does not depend on how MDBX
    /// positions a cursor after a delete.
    deleted: Option<Key>,
}

impl Environment {
    /// The directory holding the MDBX files.
    pub fn path(&self) -> &std::path::Path {
        &self.dir
    }
}

impl backend::Environment for Environment {
    const NAME: &'static str = "mdbx";

    type Database = Database;

    type RwTransaction<'env> = RwTransaction<'env>;

    fn open(config: &BackendConfig) -> Result<Self, Error> {
        // Fits in an isize: `max_db_size_bytes` checks it.
        let max_size = isize::try_from(config.max_db_size_bytes()?).unwrap_or(isize::MAX);
        let sync_mode = libmdbx::SyncMode::Durable;
        let options = libmdbx::DatabaseOptions {
            permissions: Some(FILE_MODE),
            max_tables: Some(MAX_NUM_DBS as u64),
            mode: libmdbx::Mode::ReadWrite(libmdbx::ReadWriteOptions {
                sync_mode,
                min_size: Some(0),
                max_size: Some(max_size),
                growth_step: Some(GROWTH_STEP_BYTES),
                shrink_threshold: None,
            }),
            ..Default::default()
        };
        let db = libmdbx::Database::open_with_options(&config.path, options)?;
        Ok(Self {
            db,
            dir: config.path.clone(),
            sync_mode,
        })
    }

    fn create_databases(&self) -> Result<OpenDatabases<Database>, Error> {
        let txn = self.db.begin_rw_txn()?;
        let mut index = 0;
        let handles = OpenDatabases::try_from_fn(|name| {
            let table = txn.create_table(Some(name), libmdbx::TableFlags::empty())?;
            let handle = Database {
                index,
                dbi: table.dbi(),
            };
            index += 1;
            Ok::<_, Error>(handle)
        })?;
        txn.commit()?;
        Ok(handles)
    }

    fn begin_rw_txn(&self) -> Result<RwTransaction<'_>, Error> {
        // Re-bind the (already created and committed) tables to the environment's lifetime.
        let ro = self.db.begin_ro_txn()?;
        for name in TABLE_NAMES {
            let table = ro.open_table(Some(name))?;
            ro.prime_for_permaopen(table);
        }
        let (_, tables) = ro.commit_and_rebind_open_dbs()?;
        if tables.len() != MAX_NUM_DBS {
            return Err(Error::Other(format!(
                "MDBX re-bound {} tables, expected {MAX_NUM_DBS}",
                tables.len()
            )));
        }
        let txn = self.db.begin_rw_txn()?;
        Ok(RwTransaction { txn, tables })
    }

    fn filenames(&self) -> Vec<PathBuf> {
        vec![self.dir.join(DATA_FILENAME), self.dir.join(LOCK_FILENAME)]
    }

    fn durable(&self) -> bool {
        // Only SyncMode::Durable flushes data and meta page before a commit returns.
        matches!(self.sync_mode, libmdbx::SyncMode::Durable)
    }
}

impl<'env> RwTransaction<'env> {
    fn table(&self, db: Database) -> Result<&libmdbx::Table<'env>, Error> {
        match self.tables.get(db.index) {
            Some(table) if table.dbi() == db.dbi => Ok(table),
            _ => Err(Error::Other(format!(
                "MDBX table handle {db:?} does not belong to this environment"
            ))),
        }
    }
}

impl backend::RwTransaction for RwTransaction<'_> {
    type Database = Database;

    type Cursor<'txn>
        = Cursor<'txn>
    where
        Self: 'txn;

    fn get(&self, db: Database, key: &[u8]) -> Result<Option<Value<'_>>, Error> {
        // In a write transaction libmdbx copies the value (pages may move on later writes).
        let value: Option<Cow<'_, [u8]>> = self.txn.get(self.table(db)?, key)?;
        Ok(value)
    }

    fn put(&mut self, db: Database, key: &[u8], value: &[u8]) -> Result<(), Error> {
        Ok(self
            .txn
            .put(self.table(db)?, key, value, WriteFlags::empty())?)
    }

    fn del(&mut self, db: Database, key: &[u8]) -> Result<(), Error> {
        // `false` means the key was not there, which is fine.
        self.txn.del(self.table(db)?, key, None)?;
        Ok(())
    }

    fn cursor(&mut self, db: Database) -> Result<Cursor<'_>, Error> {
        let inner = self.txn.cursor(self.table(db)?)?;
        Ok(Cursor {
            inner,
            position: Position::Fresh,
            deleted: None,
        })
    }

    fn commit(self) -> Result<(), Error> {
        self.txn.commit()?;
        Ok(())
    }
}

impl Cursor<'_> {
    /// Record the outcome of a positioning operation.
    fn land<T>(&mut self, found: Option<T>) -> Option<T> {
        self.deleted = None;
        self.position = if found.is_some() {
            Position::Valid
        } else {
            Position::End
        };
        found
    }

    /// Move onto the successor of the key deleted last, and return it.
    fn seek_past_deleted(&mut self, deleted: &[u8]) -> Result<Option<(Key, Vec<u8>)>, Error> {
        // The deleted key is gone, so the first key >= it is its successor.
        let found = self.inner.set_range::<Vec<u8>, Vec<u8>>(deleted)?;
        Ok(self.land(found))
    }
}

impl backend::Cursor for Cursor<'_> {
    fn first_key(&mut self) -> Result<Option<Key>, Error> {
        let found = self.inner.first::<Vec<u8>, ()>()?;
        Ok(self.land(found).map(|(k, ())| k))
    }

    fn last_key(&mut self) -> Result<Option<Key>, Error> {
        let found = self.inner.last::<Vec<u8>, ()>()?;
        Ok(self.land(found).map(|(k, ())| k))
    }

    fn next_key(&mut self) -> Result<Option<Key>, Error> {
        match self.position {
            Position::Fresh => Err(Error::CursorUnpositioned),
            Position::End => Ok(None),
            Position::Valid => {
                if let Some(deleted) = self.deleted.take() {
                    // Right after a delete the successor is the next key (as on LMDB).
                    return Ok(self.seek_past_deleted(&deleted)?.map(|(k, _)| k));
                }
                let found = self.inner.next::<Vec<u8>, ()>()?;
                Ok(self.land(found).map(|(k, ())| k))
            }
        }
    }

    fn get_current(&mut self) -> Result<Option<(Key, Vec<u8>)>, Error> {
        match self.position {
            Position::Fresh | Position::End => Ok(None),
            Position::Valid => {
                if let Some(deleted) = self.deleted.take() {
                    return self.seek_past_deleted(&deleted);
                }
                let found = self.inner.get_current::<Vec<u8>, Vec<u8>>()?;
                Ok(self.land(found))
            }
        }
    }

    fn delete_current(&mut self) -> Result<(), Error> {
        let Some((key, _)) = self.get_current()? else {
            return Err(Error::CursorUnpositioned);
        };
        self.inner.del(WriteFlags::empty())?;
        self.deleted = Some(key);
        Ok(())
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.inner.put(key, value, WriteFlags::empty())?;
        // mdbx_cursor_put leaves the cursor on the new item.
        self.deleted = None;
        self.position = Position::Valid;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_durability() {
        crate::backend::check_files_and_durability::<Environment>(&[DATA_FILENAME, LOCK_FILENAME]);
    }
}
