//! The SQLite table format (`TableFormat::Sqlite`, backend `butter-sqlite`): one SQLite file per
//! table in `live/`, with SQLite's own journal and syncs turned off. Atomicity and durability
//! come from the same read-only snapshot per commit as the segment format; this module only
//! applies a committed memtable to a file and answers reads.
//!
//! It answers the open question of the original prototype's author: is a single-file database
//! with no atomicity of its own, plus a snapshot per transaction, good enough?

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use crate::error::{Error, Result};
use crate::memtable::Memtable;

/// File name of table number `index` (names are not used: they may hold any character).
pub(crate) fn file_name(index: usize) -> String {
    format!("table-{index:04}.sqlite")
}

/// One table's SQLite file, opened read-write in `live/` or read-only in a `gen-N/` snapshot.
#[derive(Debug)]
pub(crate) struct SqliteTable {
    path: PathBuf,
    conn: Connection,
}

fn sql_err<'a>(path: &'a Path, op: &'static str) -> impl Fn(rusqlite::Error) -> Error + 'a {
    move |e| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DiskFull) => Error::DiskFull {
            op,
            path: path.into(),
        },
        Some(rusqlite::ErrorCode::NotADatabase) | Some(rusqlite::ErrorCode::DatabaseCorrupt) => {
            Error::corrupted(path, format!("{op}: {e}"))
        }
        _ => Error::Sqlite {
            op,
            path: path.into(),
            source: e,
        },
    }
}

impl SqliteTable {
    /// Open (creating if `create`) the writable file of a table in `live/`.
    pub(crate) fn open_live(path: PathBuf, create: bool) -> Result<SqliteTable> {
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        } else if !path.exists() {
            return Err(Error::corrupted(
                &path,
                "table file listed by the manifest is missing",
            ));
        }
        let conn = Connection::open_with_flags(&path, flags).map_err(sql_err(&path, "open"))?;
        // No journal and no syncs: the snapshot that commits the generation is the only
        // atomicity and durability mechanism. A failed commit poisons the environment, and
        // reopening restores live/ from the last snapshot.
        conn.execute_batch(
            "PRAGMA journal_mode = OFF;
             PRAGMA synchronous = OFF;
             PRAGMA locking_mode = EXCLUSIVE;
             PRAGMA cache_size = -16384;
             CREATE TABLE IF NOT EXISTS kv (key BLOB PRIMARY KEY, value BLOB NOT NULL)
                 WITHOUT ROWID;",
        )
        .map_err(sql_err(&path, "configure"))?;
        Ok(SqliteTable { path, conn })
    }

    /// Open a table's file inside a read-only snapshot.
    pub(crate) fn open_snapshot(path: PathBuf) -> Result<SqliteTable> {
        let uri = format!("file:{}?immutable=1", path.display());
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(uri, flags).map_err(sql_err(&path, "open"))?;
        Ok(SqliteTable { path, conn })
    }

    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut st = self
            .conn
            .prepare_cached("SELECT value FROM kv WHERE key = ?1")
            .map_err(sql_err(&self.path, "prepare"))?;
        st.query_row(params![key], |r| r.get(0))
            .optional()
            .map_err(sql_err(&self.path, "get"))
    }

    /// The smallest key >= `key` (> if `!inclusive`), or the first key for `None`.
    pub(crate) fn seek_ge(&self, key: Option<&[u8]>, inclusive: bool) -> Result<Option<Vec<u8>>> {
        let sql = match (key, inclusive) {
            (None, _) => "SELECT key FROM kv ORDER BY key LIMIT 1",
            (Some(_), true) => "SELECT key FROM kv WHERE key >= ?1 ORDER BY key LIMIT 1",
            (Some(_), false) => "SELECT key FROM kv WHERE key > ?1 ORDER BY key LIMIT 1",
        };
        self.one_key(sql, key)
    }

    /// The largest key < `key`, or the last key for `None`.
    pub(crate) fn seek_lt(&self, key: Option<&[u8]>) -> Result<Option<Vec<u8>>> {
        let sql = match key {
            None => "SELECT key FROM kv ORDER BY key DESC LIMIT 1",
            Some(_) => "SELECT key FROM kv WHERE key < ?1 ORDER BY key DESC LIMIT 1",
        };
        self.one_key(sql, key)
    }

    fn one_key(&self, sql: &str, key: Option<&[u8]>) -> Result<Option<Vec<u8>>> {
        let mut st = self
            .conn
            .prepare_cached(sql)
            .map_err(sql_err(&self.path, "prepare"))?;
        let r = match key {
            Some(k) => st.query_row(params![k], |r| r.get(0)).optional(),
            None => st.query_row([], |r| r.get(0)).optional(),
        };
        r.map_err(sql_err(&self.path, "seek"))
    }

    /// Apply a committed memtable to the file (one SQLite transaction, no journal).
    pub(crate) fn apply(&mut self, mem: &Memtable) -> Result<u64> {
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(sql_err(&path, "begin"))?;
        let mut bytes = 0u64;
        {
            let mut put = tx
                .prepare_cached("INSERT OR REPLACE INTO kv (key, value) VALUES (?1, ?2)")
                .map_err(sql_err(&path, "prepare"))?;
            let mut del = tx
                .prepare_cached("DELETE FROM kv WHERE key = ?1")
                .map_err(sql_err(&path, "prepare"))?;
            for (k, v) in mem {
                match v {
                    Some(v) => {
                        put.execute(params![k, v]).map_err(sql_err(&path, "put"))?;
                        bytes += (k.len() + v.len()) as u64;
                    }
                    None => {
                        del.execute(params![k]).map_err(sql_err(&path, "delete"))?;
                    }
                }
            }
        }
        tx.commit().map_err(sql_err(&path, "commit"))?;
        Ok(bytes)
    }
}
