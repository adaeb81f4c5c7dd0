//! Writing reports into a directory other users may reach: through a handle on the directory,
//! each file written to a new temporary file and renamed over its name, so that a symlink (or
//! anything else) another user put there is replaced, never written through.

use anyhow::{bail, Context};
use rustix::fs::{AtFlags, Mode, OFlags};
use std::io::Write as _;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// An output directory, held open.
#[derive(Debug)]
pub struct OutDir {
    path: PathBuf,
    dir: OwnedFd,
}

/// The write bit for others (`S_IWOTH`) and the sticky bit (`S_ISVTX`).
const OTHERS_WRITE: u32 = 0o002;
const STICKY: u32 = 0o1000;

impl OutDir {
    /// Open the directory `dir`, which must exist and be safe to write reports in: owned by
    /// the user running this, and not writable by others unless it has the sticky bit (so no
    /// other user can rename or remove the files written there). A symlink as `dir` itself is
    /// followed (it is the user's own path); the check is made on the directory reached.
    ///
    /// # Errors
    /// `dir` is missing, not a directory, owned by another user, or writable by others
    /// without the sticky bit.
    pub fn open(dir: &Path) -> anyhow::Result<OutDir> {
        let fd = rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .with_context(|| format!("opening the output directory {}", dir.display()))?;
        let st = rustix::fs::fstat(&fd)?;
        let me = rustix::process::geteuid().as_raw();
        if st.st_uid != me {
            bail!(
                "{} is owned by uid {}, not by you (uid {me}); another user could replace the \
                 reports written there: give --out a directory of your own",
                dir.display(),
                st.st_uid
            );
        }
        if st.st_mode & OTHERS_WRITE != 0 && st.st_mode & STICKY == 0 {
            bail!(
                "{} is writable by every user and has no sticky bit (mode {:o}); another user \
                 could replace the reports written there: give --out a directory of your own \
                 (chmod o-w, or chmod +t)",
                dir.display(),
                st.st_mode & 0o7777
            );
        }
        Ok(OutDir {
            path: dir.to_path_buf(),
            dir: fd,
        })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write `data` as the file `name` in the directory: into a new temporary file (created
    /// exclusively, never through a symlink), renamed over `name`. Whatever was at `name` (a
    /// symlink included) is replaced, not followed. Returns the file's path.
    ///
    /// # Errors
    /// I/O errors (the temporary file is removed).
    pub fn write(&self, name: &str, data: &[u8]) -> anyhow::Result<PathBuf> {
        let path = self.path.join(name);
        let tmp = format!(".{name}.{}.tmp", std::process::id());
        let written = self.write_tmp(&tmp, data).and_then(|()| {
            rustix::fs::renameat(&self.dir, tmp.as_str(), &self.dir, name).map_err(Into::into)
        });
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&self.dir, tmp.as_str(), AtFlags::empty());
            return Err(anyhow::Error::from(e).context(format!("writing {}", path.display())));
        }
        Ok(path)
    }

    fn write_tmp(&self, tmp: &str, data: &[u8]) -> std::io::Result<()> {
        let fd = rustix::fs::openat(
            self.dir.as_fd(),
            tmp,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )?;
        std::fs::File::from(fd).write_all(data)
    }
}

/// Write `data` as the file `path` with [`OutDir::write`] in `path`'s directory (which is
/// checked as [`OutDir::open`] does).
///
/// # Errors
/// As [`OutDir::open`] and [`OutDir::write`]; `path` has no file name or is not UTF-8.
pub fn write_file(path: &Path, data: impl AsRef<[u8]>) -> anyhow::Result<PathBuf> {
    let (dir, name) = slasher_adapters::config::parent_and_name(path)?;
    let name = name
        .to_str()
        .with_context(|| format!("{}: the file name is not UTF-8", path.display()))?;
    OutDir::open(dir)?.write(name, data.as_ref())
}
