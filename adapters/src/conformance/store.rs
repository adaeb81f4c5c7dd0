//! The store a check runs on: a fresh directory, its environment and table handles.

use std::fmt::Debug;

pub use tempfile::TempDir;

use crate::backend::Environment;
use crate::cleanup::DatabaseDirGuard;
use crate::config::BackendConfig;
use crate::tables::OpenDatabases;

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
