//! A database directory a command only reads (`stat`, `check` and `dump` DIR, `backup` SRC in
//! each form, `restore` SOURCE) is looked up once. The command then reaches it only through
//! the open handle, as `/proc/self/fd/N/.`, so another user who can rename an entry on the
//! path cannot swap in another database between two of the command's lookups
//! (docs/reliability.md §4.1).

use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use butter_db::admin::Snapshot;
use rustix::fs::{Mode, OFlags};

use crate::{Result, ToolError};

/// `dir`, open, and the path that reaches it through the handle.
#[derive(Debug)]
pub struct Held {
    fd: OwnedFd,
    /// `/proc/self/fd/N/.`: the directory itself, whatever has happened to its name since.
    pub via: PathBuf,
}

/// Opens `dir` once (a symlink given as the path is followed then, as the user meant it).
///
/// # Errors
/// [`ToolError::NotADirectory`]; for a missing or unreadable path, the engine's own error
/// (it says "not a butter_db database", or names what it could not read).
pub(crate) fn hold(dir: &Path) -> Result<Held> {
    let fd = match rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOTDIR) => return Err(ToolError::NotADirectory(dir.to_path_buf())),
        Err(e) => {
            Snapshot::open(dir)?;
            return Err(ToolError::StreamFile {
                op: "open",
                path: dir.into(),
                source: e.into(),
            });
        }
    };
    Ok(Held::from_fd(fd))
}

/// Opens `path` once to read it, following a symlink given as the path, and says whether it
/// is a directory. The open does not wait for a writer if the path is a FIFO (`O_NONBLOCK`,
/// cleared once open, so that reads wait for data as usual).
///
/// # Errors
/// `open`, `fstat` or `fcntl` failed.
pub(crate) fn open_to_read(path: &Path) -> std::io::Result<(OwnedFd, bool)> {
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rustix::fs::fcntl_setfl(&fd, rustix::fs::fcntl_getfl(&fd)? - OFlags::NONBLOCK)?;
    let st = rustix::fs::fstat(&fd)?;
    let is_dir = rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory;
    Ok((fd, is_dir))
}

impl Held {
    /// A directory already open as `fd`.
    pub(crate) fn from_fd(fd: OwnedFd) -> Held {
        let via = PathBuf::from(format!("/proc/self/fd/{}/.", fd.as_raw_fd()));
        Held { fd, via }
    }

    /// The handle.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The directory's identity.
    ///
    /// # Errors
    /// [`ToolError::StreamFile`] if `fstat` fails.
    pub fn id(&self) -> Result<butter_db::fs::FileId> {
        butter_db::fs::FileId::of(self.fd()).map_err(|source| ToolError::StreamFile {
            op: "fstat",
            path: self.via.clone(),
            source,
        })
    }

    /// `e` with the handle's path (`/proc/self/fd/N/.`) in an engine error replaced by `dir`,
    /// the path the user gave.
    pub fn name_as_given(&self, e: ToolError, dir: &Path) -> ToolError {
        match e {
            ToolError::Engine(e) => ToolError::Engine(e.rebased(&self.via, dir)),
            other => other,
        }
    }
}

/// Runs `f` on `dir` held ([`hold`]; `f` reaches it at [`Held::via`]); the engine's errors
/// name `dir`, not the handle's path.
///
/// # Errors
/// As [`hold`] and `f`.
pub fn through_handle<T>(dir: &Path, f: impl FnOnce(&Held) -> Result<T>) -> Result<T> {
    let held = hold(dir)?;
    f(&held).map_err(|e| held.name_as_given(e, dir))
}
