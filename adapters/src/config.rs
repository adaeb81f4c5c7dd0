//! Backend selection and the storage part of the slasher's configuration.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::error::Error;

/// Re-exported where it used to live: removing a database directory is [`crate::cleanup`]'s.
pub use crate::cleanup::{
    database_lock_held, destroy_database_dir, destroy_database_dir_at, holds_only_database_remains,
    parent_and_name,
};

/// Lighthouse's default `max_db_size_mbs` (512 GiB).
pub const DEFAULT_MAX_DB_SIZE_MBS: usize = 512 * 1024;

/// The environment variable that sets butter_db's block cache size in MiB for the butter
/// backend when [`BackendConfig::butter_cache_bytes`] does not (unset: the engine's default,
/// from the memory available to the process): the operator's knob, since Lighthouse's slasher
/// configuration has no such setting. Read by the butter adapter alone.
pub const BUTTER_CACHE_MIB_VAR: &str = "BUTTER_DB_CACHE_MIB";

/// Which storage engine to use. Parsed from / displayed as lowercase names, like Lighthouse's
/// `--slasher-backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DatabaseBackend {
    /// LMDB through `lmdb-rkv` (feature `lmdb`).
    Lmdb,
    /// MDBX through `libmdbx` (feature `mdbx`).
    Mdbx,
    /// redb 2.x (feature `redb`).
    Redb,
    /// butter_db (feature `butter`).
    Butter,
}

impl DatabaseBackend {
    /// Every backend, compiled in or not.
    pub const ALL: [DatabaseBackend; 4] = [
        DatabaseBackend::Lmdb,
        DatabaseBackend::Mdbx,
        DatabaseBackend::Redb,
        DatabaseBackend::Butter,
    ];

    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            DatabaseBackend::Lmdb => "lmdb",
            DatabaseBackend::Mdbx => "mdbx",
            DatabaseBackend::Redb => "redb",
            DatabaseBackend::Butter => "butter",
        }
    }

    /// The cargo feature of `slasher-adapters` that compiles this backend in.
    pub fn cargo_feature(self) -> &'static str {
        match self {
            DatabaseBackend::Lmdb => "lmdb",
            DatabaseBackend::Mdbx => "mdbx",
            DatabaseBackend::Redb => "redb",
            DatabaseBackend::Butter => "butter",
        }
    }

    /// The filesystem (its `statfs` name, as `stat -f -c %T` prints it) the backend's directory
    /// must be on, if it needs one: butter_db keeps its data in btrfs subvolumes.
    pub fn required_filesystem(self) -> Option<&'static str> {
        match self {
            DatabaseBackend::Butter => Some("btrfs"),
            DatabaseBackend::Lmdb | DatabaseBackend::Mdbx | DatabaseBackend::Redb => None,
        }
    }

    /// Whether this build has the backend compiled in.
    pub fn is_compiled(self) -> bool {
        match self {
            DatabaseBackend::Lmdb => cfg!(feature = "lmdb"),
            DatabaseBackend::Mdbx => cfg!(feature = "mdbx"),
            DatabaseBackend::Redb => cfg!(feature = "redb"),
            DatabaseBackend::Butter => cfg!(feature = "butter"),
        }
    }

    /// The backends compiled into this build.
    pub fn compiled() -> Vec<DatabaseBackend> {
        Self::ALL.into_iter().filter(|b| b.is_compiled()).collect()
    }

    /// Fail with a message naming the cargo feature if this backend is not compiled in.
    ///
    /// # Errors
    /// [`Error::BackendNotCompiled`].
    pub fn ensure_compiled(self) -> Result<Self, Error> {
        if self.is_compiled() {
            Ok(self)
        } else {
            Err(Error::BackendNotCompiled {
                backend: self.name(),
                feature: self.cargo_feature(),
            })
        }
    }
}

impl fmt::Display for DatabaseBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DatabaseBackend {
    type Err = Error;

    /// Parses a lowercase name. Does not check that the backend is compiled in: use
    /// [`DatabaseBackend::ensure_compiled`] for that.
    fn from_str(s: &str) -> Result<Self, Error> {
        Self::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| Error::UnknownBackend(s.to_string()))
    }
}

/// Commit durability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// A commit that returned `Ok` survives power loss (LMDB/MDBX synced commits, redb
    /// `Durability::Immediate`, butter_db snapshots). The default.
    #[default]
    Immediate,
    /// Lighthouse's redb setting (`Durability::Eventual`): commits may be lost on power loss but
    /// the store stays consistent. Only redb honours it; every report labels it non-durable.
    Eventual,
}

/// How to open one backend.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// Directory holding the backend's files (must exist).
    pub path: PathBuf,
    /// Lighthouse's `max_db_size_mbs`: LMDB map size, MDBX upper geometry; others ignore it.
    pub max_db_size_mbs: usize,
    /// Commit durability.
    pub durability: Durability,
    /// butter_db's block cache in bytes; `None`: [`BUTTER_CACHE_MIB_VAR`] if set, else the
    /// engine's default. Other backends ignore it.
    pub butter_cache_bytes: Option<usize>,
}

impl BackendConfig {
    /// `max_db_size_mbs` in bytes (LMDB's map size, MDBX's upper geometry).
    ///
    /// # Errors
    /// [`Error::Other`] if it does not fit in the address space.
    pub fn max_db_size_bytes(&self) -> Result<usize, Error> {
        self.max_db_size_mbs
            .checked_mul(1 << 20)
            .filter(|&bytes| isize::try_from(bytes).is_ok())
            .ok_or_else(|| {
                Error::Other(format!(
                    "max_db_size_mbs = {} MiB does not fit in the address space",
                    self.max_db_size_mbs
                ))
            })
    }

    /// A durable configuration with Lighthouse's default size cap.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            max_db_size_mbs: DEFAULT_MAX_DB_SIZE_MBS,
            durability: Durability::Immediate,
            butter_cache_bytes: None,
        }
    }
}
