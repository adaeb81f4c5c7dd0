//! Removal relative to directory handles: every step below the first directory opens, checks
//! and removes an entry by its name in a directory that is already open, never by a path, and
//! never follows a symlink. A name that another user swaps for a symlink (or for another
//! directory) after a look is therefore never followed: opening it fails (`ENOTDIR` or
//! `ELOOP`), or its identity ([`FileId`]) no longer matches.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, CWD};

use super::btrfs::{destroy, refused, BtrfsFs, Deletion};
use crate::sys;

/// Which file an open handle or a directory entry is: its device and inode number. Two
/// handles with the same `FileId` are the same file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

impl FileId {
    /// The identity of the open file `fd` (`fstat`).
    pub fn of(fd: BorrowedFd<'_>) -> io::Result<FileId> {
        let st = rustix::fs::fstat(fd)?;
        Ok(FileId {
            dev: st.st_dev,
            ino: st.st_ino,
        })
    }
}

/// Whether the open directory `dir` is the directory `ancestor` or lies below it. Walks up
/// from the handle through `..` to the root, comparing identities: no path is looked up, so
/// a name swapped meanwhile changes nothing.
///
/// # Errors
/// Opening a `..` or `fstat` failed.
pub fn is_within(dir: BorrowedFd<'_>, ancestor: FileId) -> io::Result<bool> {
    const UP: OFlags = OFlags::PATH.union(OFlags::DIRECTORY).union(OFlags::CLOEXEC);
    let mut here = rustix::fs::openat(dir, ".", UP, Mode::empty())?;
    loop {
        let id = FileId::of(here.as_fd())?;
        if id == ancestor {
            return Ok(true);
        }
        let up = rustix::fs::openat(&here, "..", UP, Mode::empty())?;
        if FileId::of(up.as_fd())? == id {
            return Ok(false); // the root: its `..` is itself
        }
        here = up;
    }
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Opens the directory `name` in the open directory `parent` without following a symlink:
/// `ENOTDIR` for a symlink (Linux answers `O_NOFOLLOW|O_DIRECTORY` so) or anything else that is
/// not a directory.
pub fn open_dir_at(parent: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(parent, name, DIR_FLAGS, Mode::empty())?)
}

/// Opens the directory `path` (relative to the working directory, or absolute) without
/// following a symlink in its final component (`ENOTDIR`). Earlier components are the caller's.
pub fn open_dir_nofollow(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(CWD, path, DIR_FLAGS, Mode::empty())?)
}

/// The error for a name whose entry is no longer the one that was checked.
pub fn replaced_error(name: &OsStr) -> io::Error {
    io::Error::other(format!(
        "{}: the entry was replaced by another (a symlink or a different directory) since it \
         was made or checked; nothing was removed through it",
        name.to_string_lossy()
    ))
}

fn is_dot(name: &OsStr) -> bool {
    name == "." || name == ".."
}

impl BtrfsFs {
    /// Deletes every subvolume directly inside `dir` (a database's `live/` and its `gen-N`,
    /// which `rm -rf` cannot remove while they are read-only) with
    /// [`BtrfsFs::delete_subvolume_at`], leaving everything else, so that `dir` can then be
    /// removed like any other directory. `dir` itself must not be a symlink (`ENOTDIR`: nothing
    /// is deleted through it); below it everything is reached through handles. Goes on after
    /// a failure and returns the first error.
    pub fn delete_subvolumes_in(&self, dir: &Path) -> io::Result<()> {
        self.delete_subvolumes_in_fd(open_dir_nofollow(dir)?.as_fd())
    }

    /// Deletes the subvolume `name` in the open directory `parent` as
    /// [`BtrfsFs::delete_subvolume_reporting`] does, without following a symlink: `name` is
    /// opened (`O_NOFOLLOW`) and must be a subvolume root, and everything inside it is reached
    /// through handles.
    pub fn delete_subvolume_at(
        &self,
        parent: BorrowedFd<'_>,
        name: &OsStr,
    ) -> io::Result<Deletion> {
        sys::validate_subvolume_name(name)?;
        let root = open_dir_at(parent, name)?;
        if !sys::is_subvolume_root_fd(root.as_fd())? {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: is not a btrfs subvolume root", name.to_string_lossy()),
            ));
        }
        match self.destroy_with_nested(parent, name, root.as_fd()) {
            Ok(()) => {
                return Ok(Deletion::Destroyed {
                    cleared_readonly: false,
                })
            }
            Err(e) if refused(&e) => {}
            Err(e) => return Err(e),
        }
        let flags = sys::subvol_flags(root.as_fd())?;
        let cleared_readonly = flags & sys::BTRFS_SUBVOL_RDONLY != 0;
        if cleared_readonly {
            sys::set_subvol_flags(root.as_fd(), flags & !sys::BTRFS_SUBVOL_RDONLY)?;
            match self.destroy_with_nested(parent, name, root.as_fd()) {
                Ok(()) => return Ok(Deletion::Destroyed { cleared_readonly }),
                Err(e) if refused(&e) => {}
                Err(e) => return Err(e),
            }
        }
        self.remove_contents_at(root.as_fd(), false)?;
        drop(root);
        rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR)?;
        Ok(Deletion::EmptiedAndRemoved { cleared_readonly })
    }

    /// [`destroy`]; if the kernel answers `ENOTEMPTY` (the subvolume holds other subvolumes),
    /// deletes those (through the open `root`) and tries once more.
    fn destroy_with_nested(
        &self,
        parent: BorrowedFd<'_>,
        name: &OsStr,
        root: BorrowedFd<'_>,
    ) -> io::Result<()> {
        match destroy(parent, name) {
            Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => {
                self.remove_contents_at(root, true)?;
                destroy(parent, name)
            }
            other => other,
        }
    }

    /// Removes everything inside the open directory `dir`, or with `only_subvolumes` just the
    /// subvolumes anywhere below it. Nested subvolumes are deleted with
    /// [`BtrfsFs::delete_subvolume_at`]. Symlinks are removed, never followed; each directory
    /// is opened by name in its open parent (`O_NOFOLLOW`) before anything in it is touched.
    pub(super) fn remove_contents_at(
        &self,
        dir: BorrowedFd<'_>,
        only_subvolumes: bool,
    ) -> io::Result<()> {
        for entry in Dir::read_from(dir)? {
            let entry = entry?;
            let name = entry_name(&entry);
            if is_dot(name) {
                continue;
            }
            let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
            if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
                if !only_subvolumes {
                    rustix::fs::unlinkat(dir, name, AtFlags::empty())?;
                }
                continue;
            }
            let sub = open_dir_at(dir, name)?;
            if sys::is_subvolume_root_fd(sub.as_fd())? {
                drop(sub);
                self.delete_subvolume_at(dir, name)?;
            } else {
                self.remove_contents_at(sub.as_fd(), only_subvolumes)?;
                drop(sub);
                if !only_subvolumes {
                    rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?;
                }
            }
        }
        Ok(())
    }

    /// Deletes every subvolume directly inside the open directory `dir`, leaving everything
    /// else. Goes on after a failure and returns the first error.
    pub fn delete_subvolumes_in_fd(&self, dir: BorrowedFd<'_>) -> io::Result<()> {
        let mut first_error = None;
        for entry in Dir::read_from(dir)? {
            let deleted = entry.map_err(io::Error::from).and_then(|e| {
                let name = entry_name(&e);
                if is_dot(name) {
                    return Ok(());
                }
                let sub = match open_dir_at(dir, name) {
                    Ok(sub) => sub,
                    // Not a directory (a file, or a symlink, which is never followed).
                    Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) => {
                        return Ok(())
                    }
                    Err(e) => return Err(e),
                };
                if sys::is_subvolume_root_fd(sub.as_fd())? {
                    drop(sub);
                    self.delete_subvolume_at(dir, name)?;
                }
                Ok(())
            });
            if let Err(e) = deleted {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Removes the directory `name` in the open directory `parent` and everything in it,
    /// btrfs subvolumes (read-only ones included) with [`BtrfsFs::delete_subvolume_at`], all
    /// through handles: `name` is opened without following a symlink (a symlink is refused
    /// with `ENOTDIR`, never followed or removed), and with `expect` it must still be that very
    /// directory (else an error, see [`replaced_error`], and nothing is removed).
    pub fn remove_tree_at(
        &self,
        parent: BorrowedFd<'_>,
        name: &OsStr,
        expect: Option<FileId>,
    ) -> io::Result<()> {
        let dir = open_dir_at(parent, name)?;
        if expect.is_some_and(|want| FileId::of(dir.as_fd()).ok() != Some(want)) {
            return Err(replaced_error(name));
        }
        if sys::is_subvolume_root_fd(dir.as_fd())? {
            drop(dir);
            return self.delete_subvolume_at(parent, name).map(|_| ());
        }
        self.remove_contents_at(dir.as_fd(), false)?;
        drop(dir);
        Ok(rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR)?)
    }
}

/// A directory entry's name as an `OsStr`.
fn entry_name(entry: &rustix::fs::DirEntry) -> &OsStr {
    use std::os::unix::ffi::OsStrExt;
    OsStr::from_bytes(entry.file_name().to_bytes())
}
