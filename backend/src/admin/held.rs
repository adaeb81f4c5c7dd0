//! Directories given by the user, resolved once.
//!
//! A command that writes or deletes in a directory named on its command line opens it once
//! (`O_DIRECTORY | O_NOFOLLOW`), checks the open directory (a directory, on btrfs, writable by
//! nobody but the caller and root unless it is sticky and theirs), and from then on reaches
//! everything in it through that handle, never through the path again. The engine's path-based
//! helpers get `/proc/self/fd/N/.` for it: the kernel resolves that magic link to the open
//! directory itself, whatever happened to the name since, and every lookup below starts there.
//! Errors are given back naming the path the user gave ([`Held::shown`]).
//!
//! Threat model: another local user who can write a directory on the way to the one given (or
//! the directory itself) can rename entries and plant symlinks at any moment. A name looked up
//! twice can therefore lead to two different directories; a handle cannot.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType};

use crate::error::{Error, Result};
use crate::fs::{open_dir_at, open_dir_nofollow, FileId};

/// The group's and others' write bits (`S_IWGRP | S_IWOTH`).
const GROUP_OR_OTHERS_WRITE: u32 = 0o022;
/// `S_ISVTX`.
const STICKY: u32 = 0o1000;

/// Why the open directory `dir` may not be written in by this process: a user other than the
/// caller and root can write it. `None` if only they can (or it is sticky and theirs).
///
/// # Errors
/// `fstat` failed.
pub fn shared_reason(dir: BorrowedFd<'_>) -> io::Result<Option<String>> {
    let st = rustix::fs::fstat(dir)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
        return Ok(Some("it is not a directory".into()));
    }
    let me = rustix::process::geteuid().as_raw();
    let mode = st.st_mode & 0o7777;
    if st.st_uid != me && st.st_uid != 0 {
        return Ok(Some(format!(
            "it is owned by uid {}, not by you (uid {me}) or root, and its owner can write it",
            st.st_uid
        )));
    }
    if mode & GROUP_OR_OTHERS_WRITE != 0 && mode & STICKY == 0 {
        return Ok(Some(format!(
            "its group or everyone may write it (mode {mode:o}) and it has no sticky bit"
        )));
    }
    Ok(None)
}

/// A directory given by the user, open.
#[derive(Debug)]
pub(crate) struct Held {
    fd: OwnedFd,
    /// The path as the user gave it (for messages only).
    shown: PathBuf,
    /// `/proc/self/fd/N/.`: the directory through its handle.
    via: PathBuf,
}

impl Held {
    /// Opens `path` (no symlink as its final component: `ENOTDIR`/`ELOOP`).
    pub(crate) fn open(path: &Path) -> io::Result<Held> {
        Ok(Held::new(open_dir_nofollow(path)?, path))
    }

    /// Opens the directory `name` in the open directory `parent`, not following a symlink.
    pub(crate) fn open_at(parent: BorrowedFd<'_>, name: &OsStr, shown: &Path) -> io::Result<Held> {
        Ok(Held::new(open_dir_at(parent, name)?, shown))
    }

    fn new(fd: OwnedFd, shown: &Path) -> Held {
        let via = PathBuf::from(format!("/proc/self/fd/{}/.", fd.as_raw_fd()));
        Held {
            fd,
            shown: shown.to_path_buf(),
            via,
        }
    }

    /// The handle.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The directory for this process's path-based calls: `/proc/self/fd/N/.`.
    pub(crate) fn via(&self) -> &Path {
        &self.via
    }

    /// The directory for another process (`btrfs send`/`receive`): `/proc/<pid>/fd/N/.`.
    pub(crate) fn for_child(&self) -> PathBuf {
        PathBuf::from(format!(
            "/proc/{}/fd/{}/.",
            std::process::id(),
            self.fd.as_raw_fd()
        ))
    }

    /// The path the user gave.
    pub(crate) fn path(&self) -> &Path {
        &self.shown
    }

    /// `err`, naming the user's path instead of [`Held::via`].
    pub(crate) fn shown(&self, err: Error) -> Error {
        err.rebased(&self.via, &self.shown)
    }

    /// The directory's identity.
    pub(crate) fn id(&self) -> io::Result<FileId> {
        FileId::of(self.fd.as_fd())
    }

    /// Refuses ([`Error::SharedDirectory`]) a directory someone other than the caller and root
    /// can write.
    pub(crate) fn refuse_shared(&self) -> Result<()> {
        refuse_shared(self.fd.as_fd(), &self.shown)
    }
}

/// [`Held::refuse_shared`] for any open directory, named `shown` in the error.
pub(crate) fn refuse_shared(dir: BorrowedFd<'_>, shown: &Path) -> Result<()> {
    match shared_reason(dir).map_err(|e| Error::io("fstat", shown, e))? {
        None => Ok(()),
        Some(reason) => Err(Error::SharedDirectory {
            path: shown.to_path_buf(),
            reason,
        }),
    }
}

/// A path split into the directory that holds its final name (`.` for a bare name) and that
/// name; `None` for a path without a final name (`/`, `..`).
pub(crate) fn parent_and_name(path: &Path) -> Option<(PathBuf, OsString)> {
    let name = path.file_name()?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Some((parent, name.to_os_string()))
}

/// Removes the empty directory `name` in `parent` if the name still leads to the directory
/// `expect` (checked through a handle just before); otherwise leaves it and says so.
pub(crate) fn rmdir_if_same(
    parent: BorrowedFd<'_>,
    name: &OsStr,
    expect: FileId,
    shown: &Path,
) -> Result<()> {
    let same = open_dir_at(parent, name)
        .and_then(|fd| FileId::of(fd.as_fd()))
        .is_ok_and(|id| id == expect);
    if !same {
        return Err(Error::io(
            "rmdir",
            shown,
            io::Error::other(
                "the name no longer leads to the directory that was emptied (it was renamed or \
                 replaced meanwhile); that directory is left, empty, and nothing was removed \
                 through the name",
            ),
        ));
    }
    rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR)
        .map_err(|e| Error::io("rmdir", shown, e.into()))
}
