//! LMDB through `lmdb-rkv` (feature `lmdb`): Lighthouse's default backend.
//!
//! Files: `data.mdb` and `lock.mdb` in the configured directory. The environment is opened
//! with default flags, so every commit is synced, room for the nine named tables, and a map
//! size of `max_db_size_mbs` MiB (a hard cap: beyond it `put` or `commit` fails with
//! `MapFull`). Each table is created once with default flags (byte-wise key order).
//!
//! LMDB serialises write transactions with a lock in `lock.mdb`, so a second
//! [`begin_rw_txn`](crate::Environment::begin_rw_txn) from another thread waits for the first
//! transaction to end.
//!
//! Cursors are native LMDB write cursors. Every key and value handed out by a cursor is copied
//! out of the map at once: LMDB may reuse a dirty page's memory on the next write, which is the
//! use-after-mutation bug Lighthouse fixed in PR #6211. The adapter tracks whether the cursor
//! was ever positioned and whether it ran off the end, because LMDB itself treats `MDB_NEXT` on
//! a fresh cursor as `MDB_FIRST` and keeps answering `MDB_GET_CURRENT` with the last entry
//! after `MDB_NEXT` reported the end.

use std::borrow::Cow;
use std::os::raw::c_uint;
use std::path::PathBuf;

use lmdb::{Cursor as _, Transaction as _};

use crate::backend::{self, Key, Value};
use crate::config::BackendConfig;
use crate::error::Error;
use crate::tables::{OpenDatabases, MAX_NUM_DBS};

/// The data file LMDB creates in the database directory.
pub const DATA_FILENAME: &str = "data.mdb";
/// The lock file LMDB creates in the database directory.
pub const LOCK_FILENAME: &str = "lock.mdb";

/// File mode of newly created files: owner read/write only, as in Lighthouse.
const FILE_MODE: u32 = 0o600;

// Cursor operations, values of `MDB_cursor_op` in `lmdb.h` (`lmdb-rkv` does not re-export the
// sys crate). The enum is part of LMDB's stable C ABI.
const MDB_FIRST: c_uint = 0;
const MDB_GET_CURRENT: c_uint = 4;
const MDB_LAST: c_uint = 6;
const MDB_NEXT: c_uint = 8;
const MDB_SET: c_uint = 15;

/// An open LMDB environment holding the slasher's tables.
#[derive(Debug)]
pub struct Environment {
    env: lmdb::Environment,
    dir: PathBuf,
    /// The flags the environment was opened with; `durable()` reads them.
    flags: lmdb::EnvironmentFlags,
}

/// Whether commits under these flags are synced before they return: none of LMDB's three ways
/// of skipping or deferring the sync is set.
fn flags_are_durable(flags: lmdb::EnvironmentFlags) -> bool {
    use lmdb::EnvironmentFlags as F;
    !flags.intersects(F::NO_SYNC | F::NO_META_SYNC | F::MAP_ASYNC)
}

/// A table handle: LMDB's database index, valid for the life of the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Database(lmdb::Database);

/// The single LMDB write transaction. Dropping it aborts it.
#[derive(Debug)]
pub struct RwTransaction<'env> {
    txn: lmdb::RwTransaction<'env>,
}

/// Where a cursor stands, as far as the adapter's contract is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Position {
    /// Never positioned: `next_key`, `delete_current` and `delete_while` are errors.
    Fresh,
    /// On an entry, or (right after `delete_current`) on the gap LMDB leaves before the
    /// successor; LMDB answers both `MDB_GET_CURRENT` and `MDB_NEXT` with the successor there.
    Valid,
    /// Past the end (or the table was empty): there is no current entry.
    End,
}

/// A native LMDB write cursor on one table.
#[derive(Debug)]
pub struct Cursor<'txn> {
    inner: lmdb::RwCursor<'txn>,
    position: Position,
    /// The last operation was `delete_current`. If that emptied the table, LMDB marks the
    /// cursor uninitialised and answers `MDB_GET_CURRENT` with `EINVAL`, which then means
    /// "no successor".
    just_deleted: bool,
}

impl Environment {
    /// The directory holding the LMDB files.
    pub fn path(&self) -> &std::path::Path {
        &self.dir
    }
}

impl backend::Environment for Environment {
    const NAME: &'static str = "lmdb";

    type Database = Database;

    type RwTransaction<'env> = RwTransaction<'env>;

    fn open(config: &BackendConfig) -> Result<Self, Error> {
        let map_size = config.max_db_size_bytes()?;
        let max_dbs = c_uint::try_from(MAX_NUM_DBS)
            .map_err(|_| Error::Other("MAX_NUM_DBS does not fit in a C unsigned int".into()))?;
        // Lighthouse's flags: none, so every commit syncs.
        let flags = lmdb::EnvironmentFlags::empty();
        let env = lmdb::Environment::new()
            .set_flags(flags)
            .set_max_dbs(max_dbs)
            .set_map_size(map_size)
            .open_with_permissions(&config.path, FILE_MODE)?;
        Ok(Self {
            env,
            dir: config.path.clone(),
            flags,
        })
    }

    fn create_databases(&self) -> Result<OpenDatabases<Database>, Error> {
        OpenDatabases::try_from_fn(|name| {
            self.env
                .create_db(Some(name), lmdb::DatabaseFlags::empty())
                .map(Database)
                .map_err(Error::from)
        })
    }

    fn begin_rw_txn(&self) -> Result<RwTransaction<'_>, Error> {
        Ok(RwTransaction {
            txn: self.env.begin_rw_txn()?,
        })
    }

    fn filenames(&self) -> Vec<PathBuf> {
        vec![self.dir.join(DATA_FILENAME), self.dir.join(LOCK_FILENAME)]
    }

    fn durable(&self) -> bool {
        flags_are_durable(self.flags)
    }
}

impl backend::RwTransaction for RwTransaction<'_> {
    type Database = Database;

    type Cursor<'txn>
        = Cursor<'txn>
    where
        Self: 'txn;

    fn get(&self, db: Database, key: &[u8]) -> Result<Option<Value<'_>>, Error> {
        // Borrowing is sound here: the slice lives as long as `&self`, and any write needs
        // `&mut self`, so LMDB cannot touch the page while the borrow exists.
        match self.txn.get(db.0, &key) {
            Ok(value) => Ok(Some(Cow::Borrowed(value))),
            Err(lmdb::Error::NotFound) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn put(&mut self, db: Database, key: &[u8], value: &[u8]) -> Result<(), Error> {
        Ok(self
            .txn
            .put(db.0, &key, &value, lmdb::WriteFlags::empty())?)
    }

    fn del(&mut self, db: Database, key: &[u8]) -> Result<(), Error> {
        match self.txn.del(db.0, &key, None) {
            Ok(()) | Err(lmdb::Error::NotFound) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn cursor(&mut self, db: Database) -> Result<Cursor<'_>, Error> {
        Ok(Cursor {
            inner: self.txn.open_rw_cursor(db.0)?,
            position: Position::Fresh,
            just_deleted: false,
        })
    }

    fn commit(self) -> Result<(), Error> {
        Ok(self.txn.commit()?)
    }
}

impl Cursor<'_> {
    /// Run a positioning operation and copy out the key (and the value if asked for).
    /// `NotFound` becomes `None` and moves the cursor to [`Position::End`].
    fn step(&mut self, op: c_uint, with_value: bool) -> Result<Option<(Key, Vec<u8>)>, Error> {
        let just_deleted = std::mem::take(&mut self.just_deleted);
        match self.inner.get(None, None, op) {
            Ok((Some(key), value)) => {
                self.position = Position::Valid;
                let value = if with_value {
                    value.to_vec()
                } else {
                    Vec::new()
                };
                Ok(Some((key.to_vec(), value)))
            }
            // Every operation used here reports the key; LMDB not doing so is a bug.
            Ok((None, _)) => Err(Error::MissingKey),
            Err(lmdb::Error::NotFound) => {
                self.position = Position::End;
                Ok(None)
            }
            Err(lmdb::Error::Other(code))
                if just_deleted
                    && std::io::Error::from_raw_os_error(code).kind()
                        == std::io::ErrorKind::InvalidInput =>
            {
                self.position = Position::End;
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }
}

impl backend::Cursor for Cursor<'_> {
    fn first_key(&mut self) -> Result<Option<Key>, Error> {
        Ok(self.step(MDB_FIRST, false)?.map(|(k, _)| k))
    }

    fn last_key(&mut self) -> Result<Option<Key>, Error> {
        Ok(self.step(MDB_LAST, false)?.map(|(k, _)| k))
    }

    fn next_key(&mut self) -> Result<Option<Key>, Error> {
        match self.position {
            Position::Fresh => Err(Error::CursorUnpositioned),
            Position::End => Ok(None),
            // Right after a delete LMDB returns the successor without skipping it.
            Position::Valid => Ok(self.step(MDB_NEXT, false)?.map(|(k, _)| k)),
        }
    }

    fn get_current(&mut self) -> Result<Option<(Key, Vec<u8>)>, Error> {
        match self.position {
            Position::Fresh | Position::End => Ok(None),
            Position::Valid => self.step(MDB_GET_CURRENT, true),
        }
    }

    fn delete_current(&mut self) -> Result<(), Error> {
        if self.position != Position::Valid || self.step(MDB_GET_CURRENT, false)?.is_none() {
            return Err(Error::CursorUnpositioned);
        }
        // LMDB leaves the cursor so that MDB_GET_CURRENT and MDB_NEXT both return the
        // successor (lmdb.h, mdb_cursor_del).
        self.inner.del(lmdb::WriteFlags::empty())?;
        self.just_deleted = true;
        Ok(())
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.inner.put(&key, &value, lmdb::WriteFlags::empty())?;
        // mdb_cursor_put leaves the cursor on the new item, but when the key is new it can
        // keep a stale end-of-table flag from an earlier MDB_LAST, after which MDB_NEXT
        // wrongly reports the end. Seeking to the key (now present) clears that flag.
        self.just_deleted = false;
        match self.inner.get(Some(key), None, MDB_SET) {
            Ok(_) => {
                self.position = Position::Valid;
                Ok(())
            }
            // The key was just written, so it must be found.
            Err(lmdb::Error::NotFound) => Err(Error::MissingKey),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_durability() {
        crate::backend::check_files_and_durability::<Environment>(&[DATA_FILENAME, LOCK_FILENAME]);
    }

    #[test]
    fn any_deferred_sync_flag_is_not_durable() {
        use lmdb::EnvironmentFlags as F;
        assert!(flags_are_durable(F::empty()));
        assert!(flags_are_durable(F::NO_SUB_DIR | F::NO_TLS));
        for f in [F::NO_SYNC, F::NO_META_SYNC, F::MAP_ASYNC] {
            assert!(!flags_are_durable(f), "{f:?} counted as durable");
        }
    }
}
