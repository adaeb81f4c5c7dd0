//! Removing database directories, snapshots included: [`destroy_database_dir`] for one
//! database, [`DatabaseDirGuard`] for a scratch directory (a test's) that is removed with the
//! databases in it when the guard is dropped, also while a failing test unwinds.

use std::path::{Path, PathBuf};

/// Remove a database directory made by any backend compiled into this build, and everything in
/// it; `Ok` if it does not exist. A butter_db directory holds read-only btrfs snapshots, which a
/// plain recursive removal cannot delete: they are deleted first with butter_db's own deletion
/// (also as their unprivileged owner). What cannot be removed is reported by the recursive
/// removal's error.
///
/// # Errors
/// The error of the recursive removal.
pub fn destroy_database_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(feature = "butter")]
    delete_subvolumes_in(dir);
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
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
