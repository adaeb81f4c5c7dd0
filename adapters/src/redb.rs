//! redb 2.x (feature `redb`).
//!
//! File: `slasher.redb` in the configured directory. `max_db_size_mbs` is ignored (redb has
//! no size cap). Commits use `redb::Durability::Immediate` (fsynced before `commit` returns)
//! unless the configuration asks for [`Durability::Eventual`], Lighthouse's setting, and then
//! [`durable`](crate::Environment::durable) reports `false`.
//!
//! redb lets one write transaction exist at a time: `begin_write` waits for the previous one
//! to end, so a second [`begin_rw_txn`](crate::Environment::begin_rw_txn) blocks.
//!
//! Differences from Lighthouse's redb backend:
//! - the nine tables are opened once when the transaction begins and kept open next to it
//!   (Lighthouse reopens the table on every operation);
//! - cursors are emulated over the open table with O(log n) point and range queries;
//!   `first_key`/`last_key` use `first()`/`last()`; `next_key` returns the first key strictly
//!   after the current one; after `delete_current`, `get_current` and `next_key` return the
//!   successor, like LMDB;
//! - `delete_while` stops at the first key the predicate rejects, and predicate errors are
//!   returned (Lighthouse uses `extract_from_if`, which deletes every match to the end of the
//!   table and treats errors as "no").

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Bound;
use std::path::PathBuf;

use ::redb::{ReadableTable, TableDefinition};

use crate::backend::{self, Key, Value};
use crate::config::{BackendConfig, Durability};
use crate::error::Error;
use crate::tables::{OpenDatabases, MAX_NUM_DBS, TABLE_NAMES};

/// The file redb creates in the database directory.
pub const FILENAME: &str = "slasher.redb";

/// Keys and values are raw bytes; redb orders `&[u8]` keys byte-wise, shorter prefix first.
type RawTable<'txn> = ::redb::Table<'txn, &'static [u8], &'static [u8]>;

/// The nine tables of one write transaction, in [`TABLE_NAMES`] order.
type OpenTables<'txn> = Vec<RawTable<'txn>>;

self_cell::self_cell!(
    /// A redb write transaction together with the nine tables opened in it (the tables
    /// borrow the transaction, so they must live next to it and be dropped first).
    struct TxnCell {
        owner: ::redb::WriteTransaction,
        #[covariant]
        dependent: OpenTables,
    }
);

fn redb_error(e: impl Into<::redb::Error>) -> Error {
    Error::from(e.into())
}

fn definition(name: &str) -> TableDefinition<'_, &'static [u8], &'static [u8]> {
    TableDefinition::new(name)
}

/// An open redb database holding the slasher's tables.
pub struct Environment {
    db: ::redb::Database,
    dir: PathBuf,
    durability: Durability,
}

impl fmt::Debug for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("redb::Environment")
            .field("dir", &self.dir)
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}

/// A table handle: the table's position in [`TABLE_NAMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Database {
    index: usize,
}

/// The single redb write transaction with its nine open tables. Dropping it aborts it.
pub struct RwTransaction<'env> {
    cell: TxnCell,
    _env: PhantomData<&'env Environment>,
}

impl fmt::Debug for RwTransaction<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("redb::RwTransaction")
            .finish_non_exhaustive()
    }
}

/// Where an emulated cursor stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Position {
    /// Never positioned: `next_key`, `delete_current` and `delete_while` are errors.
    Fresh,
    /// On this (existing) key.
    On(Key),
    /// This key was just deleted; the current entry is its successor, if any.
    AfterDelete(Key),
    /// Past the end (or the table was empty): there is no current entry.
    End,
}

/// A cursor emulated over one open table of the transaction.
pub struct Cursor<'txn> {
    cell: &'txn mut TxnCell,
    index: usize,
    position: Position,
}

impl fmt::Debug for Cursor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("redb::Cursor")
            .field("table", &TABLE_NAMES.get(self.index))
            .field("position", &self.position)
            .finish_non_exhaustive()
    }
}

impl Environment {
    /// The directory holding `slasher.redb`.
    pub fn path(&self) -> &std::path::Path {
        &self.dir
    }

    fn redb_durability(&self) -> ::redb::Durability {
        match self.durability {
            Durability::Immediate => ::redb::Durability::Immediate,
            Durability::Eventual => ::redb::Durability::Eventual,
        }
    }

    fn begin_write(&self) -> Result<::redb::WriteTransaction, Error> {
        let mut txn = self.db.begin_write().map_err(redb_error)?;
        txn.set_durability(self.redb_durability());
        Ok(txn)
    }
}

impl backend::Environment for Environment {
    const NAME: &'static str = "redb";

    type Database = Database;

    type RwTransaction<'env> = RwTransaction<'env>;

    fn open(config: &BackendConfig) -> Result<Self, Error> {
        let db = ::redb::Database::create(config.path.join(FILENAME)).map_err(redb_error)?;
        Ok(Self {
            db,
            dir: config.path.clone(),
            durability: config.durability,
        })
    }

    fn create_databases(&self) -> Result<OpenDatabases<Database>, Error> {
        let txn = self.begin_write()?;
        for name in TABLE_NAMES {
            txn.open_table(definition(name)).map_err(redb_error)?;
        }
        txn.commit().map_err(redb_error)?;
        let mut index = 0;
        OpenDatabases::try_from_fn(|_name| {
            let handle = Database { index };
            index += 1;
            Ok(handle)
        })
    }

    fn begin_rw_txn(&self) -> Result<RwTransaction<'_>, Error> {
        let txn = self.begin_write()?;
        let cell = TxnCell::try_new(txn, |txn| {
            TABLE_NAMES
                .iter()
                .map(|name| txn.open_table(definition(name)).map_err(redb_error))
                .collect::<Result<OpenTables<'_>, Error>>()
        })?;
        Ok(RwTransaction {
            cell,
            _env: PhantomData,
        })
    }

    fn filenames(&self) -> Vec<PathBuf> {
        vec![self.dir.join(FILENAME)]
    }

    fn durable(&self) -> bool {
        self.durability == Durability::Immediate
    }
}

fn bad_handle(db: Database) -> Error {
    Error::Other(format!(
        "redb table handle {db:?} is out of range (expected < {MAX_NUM_DBS})"
    ))
}

impl backend::RwTransaction for RwTransaction<'_> {
    type Database = Database;

    type Cursor<'txn>
        = Cursor<'txn>
    where
        Self: 'txn;

    fn get(&self, db: Database, key: &[u8]) -> Result<Option<Value<'_>>, Error> {
        let table = self
            .cell
            .borrow_dependent()
            .get(db.index)
            .ok_or_else(|| bad_handle(db))?;
        let value = table.get(key).map_err(redb_error)?;
        Ok(value.map(|guard| Cow::Owned(guard.value().to_vec())))
    }

    fn put(&mut self, db: Database, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.cell.with_dependent_mut(|_, tables| {
            let table = tables.get_mut(db.index).ok_or_else(|| bad_handle(db))?;
            table.insert(key, value).map_err(redb_error)?;
            Ok(())
        })
    }

    fn del(&mut self, db: Database, key: &[u8]) -> Result<(), Error> {
        self.cell.with_dependent_mut(|_, tables| {
            let table = tables.get_mut(db.index).ok_or_else(|| bad_handle(db))?;
            // `None` means the key was not there, which is fine.
            table.remove(key).map_err(redb_error)?;
            Ok(())
        })
    }

    fn cursor(&mut self, db: Database) -> Result<Cursor<'_>, Error> {
        if db.index >= MAX_NUM_DBS {
            return Err(bad_handle(db));
        }
        Ok(Cursor {
            cell: &mut self.cell,
            index: db.index,
            position: Position::Fresh,
        })
    }

    fn commit(self) -> Result<(), Error> {
        // Closes the nine tables, then commits.
        self.cell.into_owner().commit().map_err(redb_error)
    }
}

impl Cursor<'_> {
    fn table(&self) -> Result<&RawTable<'_>, Error> {
        self.cell
            .borrow_dependent()
            .get(self.index)
            .ok_or_else(|| bad_handle(Database { index: self.index }))
    }

    /// The first entry strictly after `key`, copied out.
    fn entry_after(&self, key: &[u8]) -> Result<Option<(Key, Vec<u8>)>, Error> {
        let mut range = self
            .table()?
            .range::<&[u8]>((Bound::Excluded(key), Bound::Unbounded))
            .map_err(redb_error)?;
        match range.next() {
            Some(Ok((k, v))) => Ok(Some((k.value().to_vec(), v.value().to_vec()))),
            Some(Err(e)) => Err(redb_error(e)),
            None => Ok(None),
        }
    }

    /// Set the position from the entry the cursor moved to, and return it.
    fn land(&mut self, found: Option<(Key, Vec<u8>)>) -> Option<(Key, Vec<u8>)> {
        self.position = match &found {
            Some((k, _)) => Position::On(k.clone()),
            None => Position::End,
        };
        found
    }

    /// The entry under the cursor (moving onto the successor after a delete).
    fn current(&mut self) -> Result<Option<(Key, Vec<u8>)>, Error> {
        match &self.position {
            Position::Fresh | Position::End => Ok(None),
            Position::On(key) => match self.table()?.get(key.as_slice()).map_err(redb_error)? {
                Some(value) => Ok(Some((key.clone(), value.value().to_vec()))),
                // Only this cursor writes while it lives, so its key cannot vanish.
                None => Err(Error::MissingKey),
            },
            Position::AfterDelete(deleted) => {
                let found = self.entry_after(deleted)?;
                Ok(self.land(found))
            }
        }
    }

    fn remove(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let index = self.index;
        self.cell.with_dependent_mut(|_, tables| {
            let table = tables
                .get_mut(index)
                .ok_or_else(|| bad_handle(Database { index }))?;
            let old = table.remove(key).map_err(redb_error)?;
            Ok(old.map(|guard| guard.value().to_vec()))
        })
    }
}

impl backend::Cursor for Cursor<'_> {
    fn first_key(&mut self) -> Result<Option<Key>, Error> {
        let found = self
            .table()?
            .first()
            .map_err(redb_error)?
            .map(|(k, _)| (k.value().to_vec(), Vec::new()));
        Ok(self.land(found).map(|(k, _)| k))
    }

    fn last_key(&mut self) -> Result<Option<Key>, Error> {
        let found = self
            .table()?
            .last()
            .map_err(redb_error)?
            .map(|(k, _)| (k.value().to_vec(), Vec::new()));
        Ok(self.land(found).map(|(k, _)| k))
    }

    fn next_key(&mut self) -> Result<Option<Key>, Error> {
        let after = match &self.position {
            Position::Fresh => return Err(Error::CursorUnpositioned),
            Position::End => return Ok(None),
            // Exclusive: the current key is never returned again. After a delete the
            // successor of the deleted key is the next key, as on LMDB.
            Position::On(key) | Position::AfterDelete(key) => key.clone(),
        };
        let found = self.entry_after(&after)?;
        Ok(self.land(found).map(|(k, _)| k))
    }

    fn get_current(&mut self) -> Result<Option<(Key, Vec<u8>)>, Error> {
        self.current()
    }

    fn delete_current(&mut self) -> Result<(), Error> {
        let Some((key, _)) = self.current()? else {
            return Err(Error::CursorUnpositioned);
        };
        self.remove(&key)?;
        self.position = Position::AfterDelete(key);
        Ok(())
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let index = self.index;
        self.cell.with_dependent_mut(|_, tables| {
            let table = tables
                .get_mut(index)
                .ok_or_else(|| bad_handle(Database { index }))?;
            table.insert(key, value).map_err(redb_error)?;
            Ok::<(), Error>(())
        })?;
        self.position = Position::On(key.to_vec());
        Ok(())
    }

    fn delete_while(
        &mut self,
        f: &mut dyn FnMut(&[u8]) -> Result<bool, Error>,
    ) -> Result<Vec<Vec<u8>>, Error> {
        // Same loop as the trait's default, with one lookup fewer per entry: `remove` hands
        // back the value, so only the key of the current entry is looked up.
        let mut key = match self.current()? {
            Some((key, _)) => key,
            None => return Err(Error::CursorUnpositioned),
        };
        let mut deleted = Vec::new();
        loop {
            if !f(&key)? {
                break;
            }
            let value = self.remove(&key)?.ok_or(Error::MissingKey)?;
            deleted.push(value);
            self.position = Position::AfterDelete(key.clone());
            match self.current()? {
                Some((next, _)) => key = next,
                None => break,
            }
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Environment as _;

    #[test]
    fn files_and_durability() {
        crate::backend::check_files_and_durability::<Environment>(&[FILENAME]);
    }

    #[test]
    fn eventual_durability_is_reported_non_durable() {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = BackendConfig {
            durability: Durability::Eventual,
            ..BackendConfig::new(dir.path())
        };
        let env = Environment::open(&config).expect("open");
        let dbs = env.create_databases().expect("tables");
        assert!(!env.durable());
        let mut txn = env.begin_rw_txn().expect("txn");
        backend::RwTransaction::put(&mut txn, dbs.metadata_db, b"k", b"v").expect("put");
        backend::RwTransaction::commit(txn).expect("commit");
    }
}
