//! Every filesystem side effect of the engine goes through [`Fs`], so tests can inject faults
//! (fail the N-th operation, stop making anything durable) without touching engine code.
//! Reads (open, read, list) go straight to `std::fs`: they have no side effects.

use std::fmt::Debug;
use std::io;
use std::path::Path;

/// The filesystem operations that change state.
///
/// Paths are absolute or relative to the process's working directory. All methods return
/// plain `io::Error`s; the engine adds context (operation and path).
pub trait Fs: Send + Sync + Debug {
    /// Create an empty btrfs subvolume at `path` (its parent must exist).
    fn create_subvolume(&self, path: &Path) -> io::Result<()>;

    /// Snapshot the subvolume `src` to the new path `dst`, read-only or writable. A read-only
    /// snapshot's creation is a btrfs transaction commit: durable when this returns.
    fn snapshot(&self, src: &Path, dst: &Path, readonly: bool) -> io::Result<()>;

    /// Destroy the subvolume at `path`, read-only or not, with or without `CAP_SYS_ADMIN`
    /// (falls back to clearing the read-only flag, emptying it and `rmdir` when
    /// `SNAP_DESTROY` is refused). Not durable by itself.
    fn delete_subvolume(&self, path: &Path) -> io::Result<()>;

    /// Create a new file (fails if it exists) holding exactly `data`. No fsync.
    fn write_new_file(&self, path: &Path, data: &[u8]) -> io::Result<()>;

    /// Rename a file, replacing the destination.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Remove a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;

    /// Commit the whole filesystem (`BTRFS_IOC_SYNC`), making earlier deletions durable.
    fn sync(&self, path: &Path) -> io::Result<()>;
}
