//! The [`Fs`] trait: every filesystem operation of the engine that changes state.

use std::fmt::Debug;
use std::fs::File;
use std::io::{self, IoSlice};
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

    /// Create a new file (fails if it exists) holding exactly `data`, and write it back to the
    /// device so that a write error is reported here, before the snapshot (btrfs's snapshot
    /// writes back dirty data too, but does not fail when that write-back does). No fsync.
    /// The file gets permission bits `mode` (before the umask) and is never reached through a
    /// symlink.
    fn write_new_file(&self, path: &Path, data: &[u8], mode: u32) -> io::Result<()>;

    /// Create a new, empty file (fails if it exists) for [`Fs::append_nowait`]. Permission
    /// bits and symlinks as for [`Fs::write_new_file`].
    fn create_new_file(&self, path: &Path, mode: u32) -> io::Result<File>;

    /// Append the `pieces`, one after the other, to a file made by [`Fs::create_new_file`]
    /// whose length is `start`, and start writing them back to the device without waiting, so
    /// the device works while the caller goes on. Write errors are reported by a later
    /// [`Fs::write_back`] of the same path, which the caller must make before relying on the
    /// file.
    fn append_nowait(&self, file: &mut File, start: u64, pieces: &[IoSlice<'_>]) -> io::Result<()>;

    /// Write back a file written with [`Fs::append_nowait`], waiting for it and reporting write
    /// errors, as `write_new_file` does for its own files.
    fn write_back(&self, path: &Path) -> io::Result<()>;

    /// Create the new file `dst` (fails if it exists) as a reflink copy of `src` (`FICLONE`):
    /// both share `src`'s extents, no data is copied. Both on the same btrfs filesystem, in
    /// the same subvolume or not. `src` must have been written back already ([`Fs::write_back`]);
    /// the copy is durable with the next snapshot of the subvolume holding `dst`.
    /// `dst` gets permission bits `mode`; neither path is followed through a symlink.
    fn clone_file(&self, src: &Path, dst: &Path, mode: u32) -> io::Result<()>;

    /// Create the directory `path` (its parent must exist) with permission bits `mode`.
    fn create_dir(&self, path: &Path, mode: u32) -> io::Result<()>;

    /// Create `path` and every missing ancestor as plain directories (`mkdir -p`, default
    /// permissions less the umask); `Ok` if it exists as a directory already.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;

    /// Open the lock file `path` for reading and writing, creating it empty with permission
    /// bits `mode` if it is missing; a symlink is refused (`ELOOP`), never followed.
    fn open_lock_file(&self, path: &Path, mode: u32) -> io::Result<File>;

    /// Set the permission bits of `path` (not followed if it is a symlink: refused).
    fn set_mode(&self, path: &Path, mode: u32) -> io::Result<()>;

    /// Rename a file, replacing the destination.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Remove a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;

    /// Commit the whole filesystem (`BTRFS_IOC_SYNC`), making earlier deletions durable.
    fn sync(&self, path: &Path) -> io::Result<()>;
}
