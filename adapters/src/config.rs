//! Backend selection and the storage part of the slasher's configuration.

use std::ffi::OsStr;
use std::fmt;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::error::Error;

/// Lighthouse's default `max_db_size_mbs` (512 GiB).
pub const DEFAULT_MAX_DB_SIZE_MBS: usize = 512 * 1024;

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

/// Remove a database directory made by any backend compiled into this build, and everything in
/// it; `Ok` if it does not exist. A butter_db directory holds read-only btrfs snapshots, which a
/// plain recursive removal cannot delete: they are deleted with butter_db's own deletion (also
/// as their unprivileged owner). `dir` itself must not be a symlink (refused, never followed
/// nor removed); below it everything is reached through directory handles, never by a path
/// (see [`destroy_database_dir_at`]).
///
/// # Errors
/// The first removal that failed; `dir` is a symlink or not a directory.
pub fn destroy_database_dir(dir: &Path) -> std::io::Result<()> {
    let (parent, name) = parent_and_name(dir)?;
    match std::fs::File::open(parent) {
        Ok(parent) => destroy_database_dir_at(parent.as_fd(), name, None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Splits `path` into its parent directory (`.` for a bare name) and its final name.
///
/// # Errors
/// `InvalidInput` if `path` has no final name (it is empty, or ends in `..`).
pub fn parent_and_name(path: &Path) -> std::io::Result<(&Path, &OsStr)> {
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{}: has no final name", path.display()),
        )
    })?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((parent, name))
}

/// [`destroy_database_dir`] for the directory `name` in the open directory `parent`. `name`
/// is opened without following a symlink; with `expect` (its `(st_dev, st_ino)` when it was
/// made) it must still be that directory, else nothing is removed and the error says it was
/// replaced. `Ok` if nothing is there.
///
/// # Errors
/// The first removal that failed; `name` is a symlink, not a directory, or was replaced.
pub fn destroy_database_dir_at(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    expect: Option<(u64, u64)>,
) -> std::io::Result<()> {
    #[cfg(feature = "butter")]
    let removed = butter_db::fs::BtrfsFs.remove_tree_at(
        parent,
        name,
        expect.map(|(dev, ino)| butter_db::fs::FileId { dev, ino }),
    );
    #[cfg(not(feature = "butter"))]
    let removed = remove_plain_dir_at(parent, name, expect);
    match removed {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Whether a process holds the database in `dir` open for writing, as far as this build can
/// tell: butter_db's writer lock (`false` without the butter feature, or if it cannot be
/// checked).
pub fn database_lock_held(dir: &Path) -> bool {
    #[cfg(feature = "butter")]
    return butter_db::lock_held(dir).unwrap_or(false);
    #[cfg(not(feature = "butter"))]
    {
        let _ = dir;
        false
    }
}

/// Whether `dir` holds only what is left of a butter_db database after the rest was removed
/// (read-only snapshots carrying the engine's identity, which `rm -rf` cannot delete); `false`
/// without the butter feature.
pub fn holds_only_database_remains(dir: &Path) -> bool {
    #[cfg(feature = "butter")]
    return butter_db::holds_only_database_remains(dir);
    #[cfg(not(feature = "butter"))]
    {
        let _ = dir;
        false
    }
}

/// Without butter_db: the directory is reached through the handle's `/proc/self/fd` link (no
/// component of the caller's path is looked up again), and std's recursive removal opens every
/// entry relative to its parent without following symlinks.
#[cfg(not(feature = "butter"))]
fn remove_plain_dir_at(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    expect: Option<(u64, u64)>,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let path = Path::new("/proc/self/fd")
        .join(parent.as_raw_fd().to_string())
        .join(name);
    let meta = std::fs::symlink_metadata(&path)?;
    if !meta.is_dir() || expect.is_some_and(|id| id != (meta.dev(), meta.ino())) {
        return Err(std::io::Error::other(format!(
            "{}: is not the directory that was made or checked (a symlink or another entry \
             was put in its place); nothing was removed through it",
            name.to_string_lossy()
        )));
    }
    std::fs::remove_dir_all(&path)
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
        }
    }
}
