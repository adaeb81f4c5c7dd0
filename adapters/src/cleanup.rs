//! Removing database directories, snapshots included: [`destroy_database_dir`] for one
//! database, [`DatabaseDirGuard`] for a scratch directory (a test's) that is removed with the
//! databases in it when the guard is dropped, also while a failing test unwinds.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

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

/// Deletes the btrfs subvolumes directly in `dir` (a butter_db database's `live/` and its
/// read-only `gen-N`) with butter_db's own deletion, so that the directory can then be removed
/// like any other; `rm -rf` cannot delete a read-only snapshot. Anything that is not a
/// subvolume is left alone, and failures are ignored: what is left makes the caller's removal
/// of `dir` fail with its own error.
#[cfg(feature = "butter")]
fn delete_subvolumes_in(dir: &Path) {
    let _ = butter_db::fs::BtrfsFs.delete_subvolumes_in(dir);
}

/// A scratch directory that its creator hands over for removal: when the guard is dropped
/// (at the end of a test, or while a failing one unwinds), every database in it, the
/// directory itself or one level down (`dir/db1`, `dir/db2`, ...), is removed with
/// [`destroy_database_dir`], snapshots included, then the directory. What cannot be removed
/// is named on stderr (a drop cannot fail; scripts/test.sh then finds it left behind).
///
/// It removes everything in the directory: give it only a directory you created for it.
#[derive(Debug)]
pub struct DatabaseDirGuard {
    dir: PathBuf,
}

impl DatabaseDirGuard {
    /// Takes charge of `dir`, a directory the caller created (e.g. a kept temporary directory).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for DatabaseDirGuard {
    fn drop(&mut self) {
        // The directory as a database first (its own `live/` and `gen-N`), then the databases
        // one level down, then whatever else is in it.
        #[cfg(feature = "butter")]
        delete_subvolumes_in(&self.dir);
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    let _ = destroy_database_dir(&entry.path());
                }
            }
        }
        if let Err(e) = destroy_database_dir(&self.dir) {
            eprintln!("warning: could not remove {}: {e}", self.dir.display());
        }
    }
}
