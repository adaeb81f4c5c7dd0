//! The butter_db adapter: Lighthouse's per-backend shape (`Environment`, `RwTransaction`,
//! `Database`, `Cursor`) over `butter_db`.
//!
//! butter_db's commits are always durable (the read-only snapshot that commits a transaction
//! is a btrfs transaction commit), so `Durability::Eventual` is accepted and ignored.
//! `max_db_size_mbs` is ignored: the store grows with the filesystem.
//!
//! The engine's block cache takes its default size from the memory available to the process
//! (butter_db's `memory::default_block_cache_bytes`: an eighth of its memory cgroup's limit,
//! or of the machine's RAM, between 8 MiB and 1 GiB). [`BackendConfig::butter_cache_bytes`]
//! sets it; when that is `None`, the operator's environment variable `BUTTER_DB_CACHE_MIB`
//! ([`BUTTER_CACHE_MIB_VAR`], in MiB) does, since Lighthouse's slasher configuration has no
//! setting for it. This module is the one place that reads the variable.
//!
//! Under memory pressure the engine tells the process's allocator to give freed memory back at
//! once, and when the pressure is gone that it may keep it again, through a function the
//! program registers once with [`set_on_memory_pressure`] (the allocator is the process's, so
//! the function is too); the replay and the Lighthouse glue each register one for jemalloc.
//! Without one, nothing is said.
//!
//! The adapter keeps the engine's statistics about its commits ([`crate::stats`]): each
//! commit's `butter_db::CommitInfo` is added to [`CommitStats`], which
//! [`backend::Environment::stats`] returns.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use parking_lot::Mutex;

use crate::backend;
use crate::config::{BackendConfig, BUTTER_CACHE_MIB_VAR};
use crate::error::Error;
use crate::stats::{CommitPeaks, CommitTotals, EngineStats};
use crate::tables::OpenDatabases;

/// The process's pressure function (see the module documentation).
static ON_MEMORY_PRESSURE: OnceLock<fn(bool)> = OnceLock::new();

/// Register `hook`, which tells the process's allocator to give freed memory back at once
/// (`true`) or that it may keep it again (`false`), for every environment opened from now on
/// (`butter_db::EnvBuilder::on_memory_pressure`). The first registration wins; it returns
/// `false` if one was already made.
pub fn set_on_memory_pressure(hook: fn(bool)) -> bool {
    ON_MEMORY_PRESSURE.set(hook).is_ok()
}

/// A butter_db environment.
#[derive(Debug)]
pub struct Environment {
    env: butter_db::Env,
    commits: CommitStats,
}

/// Every commit's `CommitInfo`, summed, and its peaks since they were last taken: the
/// [`EngineStats`] of a butter_db environment.
#[derive(Debug, Default)]
pub struct CommitStats(Mutex<(CommitTotals, CommitPeaks, LastMemory)>);

/// What [`EngineStats::memory`] reports: the accounting after the last commit, and the largest
/// transaction of the commits since it was last read.
#[derive(Debug, Default)]
struct LastMemory {
    after_last: Option<butter_db::budget::MemoryUse>,
    txn_peak: u64,
}

impl CommitStats {
    /// Takes in one commit. The named parts of its time go to the report by name: a new part
    /// of `CommitInfo` is one more line here.
    fn record(&self, info: &butter_db::CommitInfo) {
        let us = Duration::from_micros;
        let (totals, peaks, memory) = &mut *self.0.lock();
        totals.commits += 1;
        totals.add_part("build", us(info.build_us));
        totals.add_part("file", us(info.file_us));
        totals.add_part("write_back", us(info.write_back_us));
        let written = info.build_us + info.file_us + info.write_back_us;
        totals.add_part("manifest", us(info.write_us.saturating_sub(written)));
        totals.add_part("snapshot", us(info.snapshot_us));
        totals.commit_bytes += info.bytes_written;
        totals.merges += info.merges_installed as u64;
        totals.merged_bytes += info.merged_bytes;
        peaks.add(
            info.largest_merge_bytes,
            info.largest_merge_table_bytes,
            info.bytes_written,
        );
        memory.after_last = Some(info.memory);
        memory.txn_peak = memory.txn_peak.max(info.txn_peak_memory_bytes);
    }
}

impl EngineStats for CommitStats {
    fn commit_totals(&self) -> CommitTotals {
        self.0.lock().0.clone()
    }

    fn take_commit_peaks(&self) -> CommitPeaks {
        std::mem::take(&mut self.0.lock().1)
    }

    fn memory(&self) -> Vec<(&'static str, u64)> {
        let last = &mut self.0.lock().2;
        // The largest transaction starts again from the next commit.
        let txn_peak = std::mem::take(&mut last.txn_peak);
        let Some(m) = last.after_last else {
            return Vec::new();
        };
        let mut figures = vec![
            ("budget", m.budget_bytes),
            ("cache", m.cache_bytes),
            ("cache_room", m.cache_room_bytes),
            ("indexes", m.index_bytes),
            ("txn_peak", txn_peak),
            ("txn_budget", m.memtable_budget_bytes),
            ("pressure_level", u64::from(m.pressure_level)),
            ("releases", m.releases),
        ];
        // Only where a cgroup limit was read: without one there is nothing to show.
        figures.extend(m.cgroup_anon_bytes.map(|anon| ("cgroup_anon", anon)));
        figures
    }
}

/// A table handle.
#[derive(Debug, Clone, Copy)]
pub struct Database(butter_db::TableHandle);

/// The write transaction.
#[derive(Debug)]
pub struct RwTransaction<'env> {
    txn: butter_db::WriteTxn<'env>,
    commits: &'env CommitStats,
}

/// A cursor on one table of a write transaction.
#[derive(Debug)]
pub struct Cursor<'txn, 'env> {
    cursor: butter_db::Cursor<'txn, 'env>,
}

/// The block cache size `BUTTER_DB_CACHE_MIB` ([`BUTTER_CACHE_MIB_VAR`]) asks for: `None`
/// when it is unset.
///
/// # Errors
/// As [`parse_cache_mib`].
pub fn cache_bytes_from_env() -> Result<Option<usize>, Error> {
    std::env::var_os(BUTTER_CACHE_MIB_VAR)
        .map(|v| parse_cache_mib(&v))
        .transpose()
}

/// The size of the butter_db database in `path` for an operator's view (Lighthouse's
/// `slasher_database_size` gauge): the segments and manifest of its newest committed
/// generation and any merge output not yet swapped in (`butter_db::admin::database_bytes`);
/// `Ok(None)` when `path` holds no butter_db database, so that the caller can measure it its
/// own way. Reads the manifest alone, so it suits a gauge updated every few seconds.
///
/// # Errors
/// A butter_db database whose newest manifest cannot be read.
pub fn database_size(path: &std::path::Path) -> Result<Option<u64>, Error> {
    match butter_db::admin::database_bytes(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(butter_db::Error::NotADatabase { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// A value of `BUTTER_DB_CACHE_MIB`, in bytes.
///
/// # Errors
/// [`Error::BadEnvironmentVariable`] when it is not a whole number of MiB (surrounding spaces
/// allowed) whose bytes fit in the address space.
pub fn parse_cache_mib(value: &std::ffi::OsStr) -> Result<usize, Error> {
    value
        .to_str()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .and_then(|mib| mib.checked_mul(1 << 20))
        .ok_or_else(|| Error::BadEnvironmentVariable {
            name: BUTTER_CACHE_MIB_VAR,
            value: value.to_string_lossy().into_owned(),
            expected: "the block cache size as a whole number of MiB",
        })
}

impl Environment {
    /// The engine's environment (for statistics and tests).
    pub fn env(&self) -> &butter_db::Env {
        &self.env
    }
}

impl backend::Environment for Environment {
    const NAME: &'static str = "butter";
    type Database = Database;
    type RwTransaction<'env> = RwTransaction<'env>;

    fn open(config: &BackendConfig) -> Result<Self, Error> {
        let mut builder = butter_db::Env::builder(&config.path);
        let cache_bytes = match config.butter_cache_bytes {
            Some(bytes) => Some(bytes),
            None => cache_bytes_from_env()?,
        };
        if let Some(bytes) = cache_bytes {
            builder = builder.block_cache_bytes(bytes);
        }
        if let Some(&hook) = ON_MEMORY_PRESSURE.get() {
            builder = builder.on_memory_pressure(hook);
        }
        let env = builder.open()?;
        Ok(Environment {
            env,
            commits: CommitStats::default(),
        })
    }

    fn create_databases(&self) -> Result<OpenDatabases<Database>, Error> {
        let mut txn = self.env.begin_write()?;
        let dbs = OpenDatabases::try_from_fn(|name| txn.create_table(name).map(Database))?;
        txn.commit()?;
        Ok(dbs)
    }

    fn begin_rw_txn(&self) -> Result<RwTransaction<'_>, Error> {
        Ok(RwTransaction {
            txn: self.env.begin_write()?,
            commits: &self.commits,
        })
    }

    fn filenames(&self) -> Vec<PathBuf> {
        self.env.files()
    }

    fn durable(&self) -> bool {
        true
    }

    fn stats(&self) -> Option<&dyn EngineStats> {
        Some(&self.commits)
    }
}

impl<'env> backend::RwTransaction for RwTransaction<'env> {
    type Database = Database;
    type Cursor<'txn>
        = Cursor<'txn, 'env>
    where
        Self: 'txn;

    fn get(&self, db: Database, key: &[u8]) -> Result<Option<backend::Value<'_>>, Error> {
        Ok(self.txn.get(db.0, key)?)
    }

    fn put(&mut self, db: Database, key: &[u8], value: &[u8]) -> Result<(), Error> {
        Ok(self.txn.put(db.0, key, value)?)
    }

    fn del(&mut self, db: Database, key: &[u8]) -> Result<(), Error> {
        Ok(self.txn.delete(db.0, key)?)
    }

    fn cursor(&mut self, db: Database) -> Result<Cursor<'_, 'env>, Error> {
        Ok(Cursor {
            cursor: self.txn.cursor(db.0)?,
        })
    }

    fn commit(self) -> Result<(), Error> {
        let info = self.txn.commit()?;
        self.commits.record(&info);
        Ok(())
    }
}

impl backend::Cursor for Cursor<'_, '_> {
    fn first_key(&mut self) -> Result<Option<backend::Key>, Error> {
        Ok(self.cursor.first_key()?)
    }

    fn last_key(&mut self) -> Result<Option<backend::Key>, Error> {
        Ok(self.cursor.last_key()?)
    }

    fn next_key(&mut self) -> Result<Option<backend::Key>, Error> {
        self.cursor.next_key().map_err(cursor_error)
    }

    fn get_current(&mut self) -> Result<Option<(backend::Key, Vec<u8>)>, Error> {
        Ok(self.cursor.current()?)
    }

    fn delete_current(&mut self) -> Result<(), Error> {
        self.cursor.delete_current().map_err(cursor_error)
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        Ok(self.cursor.put(key, value)?)
    }
}

fn cursor_error(e: butter_db::Error) -> Error {
    match e {
        butter_db::Error::CursorUnpositioned => Error::CursorUnpositioned,
        e => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn cache_mib_values() {
        assert_eq!(parse_cache_mib(OsStr::new("16")).unwrap(), 16 << 20);
        assert_eq!(parse_cache_mib(OsStr::new(" 1024\n")).unwrap(), 1 << 30);
        assert_eq!(parse_cache_mib(OsStr::new("0")).unwrap(), 0);
        for bad in [
            "",
            "16M",
            "-1",
            "1.5",
            "17592186044416",
            "99999999999999999999",
        ] {
            let err = parse_cache_mib(OsStr::new(bad)).unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::BadEnvironmentVariable {
                        name: BUTTER_CACHE_MIB_VAR,
                        ..
                    }
                ),
                "{bad:?}: {err}"
            );
            assert!(err.to_string().contains("BUTTER_DB_CACHE_MIB"), "{err}");
        }
    }
}
