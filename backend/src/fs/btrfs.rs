//! [`BtrfsFs`], the [`Fs`] of every real run: btrfs's ioctls and handle-relative deletion.

use std::ffi::OsStr;
use std::fs::File;
use std::fs::OpenOptions;
use std::io::Write;
use std::io::{self, IoSlice};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::ops::Fs;
use crate::sys::{self, validate_subvolume_name};

/// At most this many pieces go to one `writev` (Linux's `IOV_MAX`).
const MAX_PIECES_PER_WRITE: usize = 1024;

/// `write_all` over several buffers (`writev`, repeated after a short write).
fn write_all_vectored(file: &mut File, pieces: &[IoSlice<'_>]) -> io::Result<()> {
    let mut owned: Vec<IoSlice<'_>> = pieces.iter().filter(|p| !p.is_empty()).copied().collect();
    let mut bufs = owned.as_mut_slice();
    while !bufs.is_empty() {
        match file.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// How [`BtrfsFs::delete_subvolume_reporting`] removed a subvolume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Deletion {
    /// `SNAP_DESTROY` removed it: the process has `CAP_SYS_ADMIN`, or the filesystem is mounted
    /// with `user_subvol_rm_allowed`.
    Destroyed {
        /// The subvolume was read-only and its read-only flag was cleared first, because the
        /// kernel refuses to destroy a read-only subvolume for an unprivileged caller.
        cleared_readonly: bool,
    },
    /// `SNAP_DESTROY` was refused (no `CAP_SYS_ADMIN`, no `user_subvol_rm_allowed`): the
    /// subvolume's contents were removed and the empty subvolume was `rmdir`ed (Linux ≥ 4.18).
    EmptiedAndRemoved {
        /// The subvolume was read-only and its read-only flag was cleared first.
        cleared_readonly: bool,
    },
}

/// [`Fs`] on btrfs, through the kernel's ioctls. The implementation every test and CI run uses.
///
/// Subvolume creation and snapshots of one's own subvolumes work without privileges. Deletion
/// works without privileges too, by falling back to emptying and `rmdir` (see
/// [`BtrfsFs::delete_subvolume_reporting`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct BtrfsFs;

fn invalid_path(path: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{}: {why}", path.display()),
    )
}

/// Splits `path` into its parent directory (`.` for a bare name) and its final name, which must
/// be a valid subvolume name.
fn parent_and_name(path: &Path) -> io::Result<(&Path, &OsStr)> {
    let name = path
        .file_name()
        .ok_or_else(|| invalid_path(path, "has no final name"))?;
    validate_subvolume_name(name)?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((parent, name))
}

/// Creates the new file `path` for writing with permission bits `mode`: fails if anything,
/// a symlink included, is already there (`O_EXCL` never follows a final symlink).
fn create_new(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Opens `path` for reading, refusing (`ELOOP`) a symlink.
fn open_nofollow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

fn open_dir(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(path)
}

/// `SNAP_DESTROY_V2`, or the v1 ioctl on kernels older than 5.7 that do not know V2.
pub(super) fn destroy(parent: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    match sys::snap_destroy_v2(parent, name) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTTY) => sys::snap_destroy_v1(parent, name),
        other => other,
    }
}

/// Whether a destroy error means "not allowed for this caller" (so a fallback may work):
/// `EPERM`/`EACCES` without privileges, `EROFS` for a read-only subvolume under
/// `user_subvol_rm_allowed`.
pub(super) fn refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPERM | libc::EACCES | libc::EROFS)
    )
}

impl BtrfsFs {
    /// Deletes the subvolume at `path` as [`Fs::delete_subvolume`] does, and says how.
    ///
    /// 1. `SNAP_DESTROY_V2` (v1 on old kernels). Tried first because, when it is allowed, it
    ///    needs no transaction commit (clearing the read-only flag would commit one).
    /// 2. If refused and the subvolume is read-only: clear its read-only flag (allowed for the
    ///    owner) and try `SNAP_DESTROY_V2` again.
    /// 3. If still refused: remove everything inside it (nested subvolumes recursively, in the
    ///    same way) and `rmdir` it.
    ///
    /// Subvolumes nested inside it are deleted first when `SNAP_DESTROY` reports `ENOTEMPTY`.
    /// Refuses with [`io::ErrorKind::InvalidInput`] if `path` is not a subvolume root, so the
    /// fallback never empties an ordinary directory, and with `ENOTDIR` if it is a symlink.
    /// `path`'s parent is opened once; the subvolume and everything inside it are then reached
    /// through handles, never through a path or a symlink ([`BtrfsFs::delete_subvolume_at`]).
    /// Not durable by itself.
    pub fn delete_subvolume_reporting(&self, path: &Path) -> io::Result<Deletion> {
        let (parent_path, name) = parent_and_name(path)?;
        let parent = open_dir(parent_path)?;
        self.delete_subvolume_at(parent.as_fd(), name)
    }

    /// Removes the directory `path` and everything in it, read-only btrfs subvolumes included,
    /// as [`BtrfsFs::remove_tree_at`] does in `path`'s parent directory: a symlink at `path`
    /// is refused (`ENOTDIR`), never followed or removed.
    pub fn remove_tree(&self, path: &Path) -> io::Result<()> {
        let (parent_path, name) = parent_and_name(path)?;
        let parent = open_dir(parent_path)?;
        self.remove_tree_at(parent.as_fd(), name, None)
    }

    /// Whether the subvolume rooted at `path` is read-only (`SUBVOL_GETFLAGS`).
    pub fn is_readonly(&self, path: &Path) -> io::Result<bool> {
        let root = open_dir(path)?;
        Ok(sys::subvol_flags(root.as_fd())? & sys::BTRFS_SUBVOL_RDONLY != 0)
    }

    /// Makes the subvolume rooted at `path` read-only or writable (`SUBVOL_SETFLAGS`; allowed
    /// for its owner; commits a transaction when the flag changes).
    pub fn set_readonly(&self, path: &Path, readonly: bool) -> io::Result<()> {
        let root = open_dir(path)?;
        let flags = sys::subvol_flags(root.as_fd())?;
        let new = if readonly {
            flags | sys::BTRFS_SUBVOL_RDONLY
        } else {
            flags & !sys::BTRFS_SUBVOL_RDONLY
        };
        if new == flags {
            return Ok(());
        }
        sys::set_subvol_flags(root.as_fd(), new)
    }

    /// Starts committing the filesystem that `path` is on without waiting
    /// (`BTRFS_IOC_START_SYNC`); returns the btrfs transaction id to pass to
    /// [`BtrfsFs::wait_sync`].
    pub fn start_sync(&self, path: &Path) -> io::Result<u64> {
        sys::start_sync(File::open(path)?.as_fd())
    }

    /// Waits until the btrfs transaction `transid` of the filesystem that `path` is on has been
    /// committed (`BTRFS_IOC_WAIT_SYNC`).
    pub fn wait_sync(&self, path: &Path, transid: u64) -> io::Result<()> {
        sys::wait_sync(File::open(path)?.as_fd(), transid)
    }

    /// Makes `dest` (open for writing) a reflink copy of `source` (`FICLONE`): no data is
    /// copied, both files share extents. Same filesystem only; durable only after a commit.
    pub fn reflink(&self, source: &File, dest: &File) -> io::Result<()> {
        sys::ficlone(dest, source)
    }

    /// Makes `len` bytes of `dest` at `dest_offset` a reflink copy of `source` at
    /// `source_offset` (`FICLONERANGE`; `len` 0 means to the end of `source`). Offsets and
    /// length must be block-aligned, except a range ending at the end of `source`.
    pub fn reflink_range(
        &self,
        source: &File,
        source_offset: u64,
        dest: &File,
        dest_offset: u64,
        len: u64,
    ) -> io::Result<()> {
        sys::ficlone_range(dest, source, source_offset, len, dest_offset)
    }
}

impl Fs for BtrfsFs {
    fn create_subvolume(&self, path: &Path) -> io::Result<()> {
        let (parent, name) = parent_and_name(path)?;
        sys::subvol_create(open_dir(parent)?.as_fd(), name)
    }

    fn snapshot(&self, src: &Path, dst: &Path, readonly: bool) -> io::Result<()> {
        let (parent, name) = parent_and_name(dst)?;
        let source = open_dir(src)?;
        sys::snap_create(open_dir(parent)?.as_fd(), source.as_fd(), name, readonly)
    }

    fn delete_subvolume(&self, path: &Path) -> io::Result<()> {
        self.delete_subvolume_reporting(path).map(|_| ())
    }

    fn write_new_file(&self, path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
        let mut file = create_new(path, mode)?;
        file.write_all(data)?;
        sys::write_back(file.as_fd())
    }

    fn create_new_file(&self, path: &Path, mode: u32) -> io::Result<File> {
        create_new(path, mode)
    }

    fn append_nowait(&self, file: &mut File, start: u64, pieces: &[IoSlice<'_>]) -> io::Result<()> {
        let mut bytes = 0u64;
        for run in pieces.chunks(MAX_PIECES_PER_WRITE) {
            write_all_vectored(file, run)?;
            bytes += run.iter().map(|p| p.len() as u64).sum::<u64>();
        }
        if bytes == 0 {
            // A length of 0 would ask for everything from `start` to the end of the file.
            return Ok(());
        }
        sys::start_write_back(file.as_fd(), start, bytes)
    }

    fn write_back(&self, path: &Path) -> io::Result<()> {
        sys::write_back(open_nofollow(path)?.as_fd())
    }

    fn clone_file(&self, src: &Path, dst: &Path, mode: u32) -> io::Result<()> {
        let source = open_nofollow(src)?;
        let dest = create_new(dst, mode)?;
        // btrfs refuses (EINVAL) to clone between a file with data checksums and one without,
        // and a new file takes nodatacow (`chattr +C`) from its directory, so the two can
        // differ. Give the empty destination the source's flag.
        let want = sys::inode_flags(source.as_fd())? & sys::FS_NOCOW_FL;
        let have = sys::inode_flags(dest.as_fd())?;
        if have & sys::FS_NOCOW_FL != want {
            sys::set_inode_flags(dest.as_fd(), (have & !sys::FS_NOCOW_FL) | want)?;
        }
        sys::ficlone(&dest, &source)
    }

    fn create_dir(&self, path: &Path, mode: u32) -> io::Result<()> {
        std::fs::DirBuilder::new().mode(mode).create(path)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn open_lock_file(&self, path: &Path, mode: u32) -> io::Result<File> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
    }

    fn set_mode(&self, path: &Path, mode: u32) -> io::Result<()> {
        if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
            return Err(invalid_path(path, "is a symlink"));
        }
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn sync(&self, path: &Path) -> io::Result<()> {
        sys::sync(File::open(path)?.as_fd())
    }
}
