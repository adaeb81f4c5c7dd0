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

/// The write bits for the group and for others (`S_IWGRP | S_IWOTH`) and the sticky bit
/// (`S_ISVTX`).
const GROUP_OR_OTHERS_WRITE: u32 = 0o022;
const STICKY: u32 = 0o1000;

/// A name no other user can guess ahead: `prefix`, 16 random hex digits, `suffix`. The
/// randomness is the standard library's per-process hash keys (from the OS's random source).
pub fn unpredictable_name(prefix: &str, suffix: &str) -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{prefix}{:016x}{suffix}", hasher.finish())
}

/// How many unpredictable names are tried before giving up on `EEXIST`.
const NAME_TRIES: usize = 8;

/// Open the directory `dir`, creating it and any missing parents (mode 0777 less the umask,
/// as `mkdir -p`), with every component looked up once: each is opened relative to the handle
/// on the one before it (a symlink the user's path goes through is followed, as the kernel
/// would), a missing one made with `mkdirat` there and opened without following a symlink. A
/// path is never walked twice, so another user who can write one of the directories on the
/// way cannot swap a name between the check and the use. `before_create` is called once with
/// the deepest existing directory, before the first `mkdirat` (to refuse a filesystem before
/// anything is made on it).
///
/// # Errors
/// I/O errors (a component that is not a directory: `ENOTDIR`); what `before_create` returns.
pub fn open_dir_creating(
    dir: &Path,
    before_create: &mut dyn FnMut(std::os::fd::BorrowedFd<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<OwnedFd> {
    use std::path::Component;
    const FLAGS: OFlags = OFlags::RDONLY
        .union(OFlags::DIRECTORY)
        .union(OFlags::CLOEXEC);
    let start = if dir.is_absolute() { "/" } else { "." };
    let mut cur = rustix::fs::open(start, FLAGS, Mode::empty())
        .with_context(|| format!("opening {start} for {}", dir.display()))?;
    let mut created = false;
    for c in dir.components() {
        let name = match c {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => continue,
            Component::ParentDir => std::ffi::OsStr::new(".."),
            Component::Normal(n) => n,
        };
        let next = match rustix::fs::openat(&cur, name, FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => {
                if !created {
                    before_create(cur.as_fd())?;
                    created = true;
                }
                match rustix::fs::mkdirat(&cur, name, Mode::from_raw_mode(0o777)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => {
                        return Err(std::io::Error::from(e))
                            .with_context(|| format!("creating {}", dir.display()))
                    }
                }
                rustix::fs::openat(&cur, name, FLAGS | OFlags::NOFOLLOW, Mode::empty())
                    .with_context(|| format!("opening {}", dir.display()))?
            }
            Err(e) => {
                return Err(std::io::Error::from(e))
                    .with_context(|| format!("opening {}", dir.display()))
            }
        };
        cur = next;
    }
    Ok(cur)
}

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
        OutDir::from_handle(dir, fd)
    }

    /// [`OutDir::open`] for the directory `fd` holds open (`dir` is its path, for messages):
    /// the same checks, made on the handle.
    ///
    /// # Errors
    /// As [`OutDir::open`].
    pub fn from_handle(dir: &Path, fd: OwnedFd) -> anyhow::Result<OutDir> {
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
        if st.st_mode & GROUP_OR_OTHERS_WRITE != 0 && st.st_mode & STICKY == 0 {
            bail!(
                "{} is writable by other users (its group or everyone) and has no sticky bit \
                 (mode {:o}); another user could replace the reports written there: give --out \
                 a directory of your own (chmod go-w, or chmod +t)",
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

    /// Whether anything (a symlink included, not followed) is at `name` in the directory.
    pub fn holds(&self, name: &str) -> bool {
        rustix::fs::statat(&self.dir, name, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// Write `data` as the file `name` in the directory: into a new temporary file (created
    /// exclusively, never through a symlink), renamed over `name`. Whatever was at `name` (a
    /// symlink included) is replaced, not followed. Returns the file's path.
    ///
    /// # Errors
    /// I/O errors (the temporary file is removed).
    pub fn write(&self, name: &str, data: &[u8]) -> anyhow::Result<PathBuf> {
        let path = self.path.join(name);
        let (tmp, mut file) = self
            .create_unpredictable(&format!(".{name}."), ".tmp")
            .with_context(|| format!("writing {}", path.display()))?;
        let written = file.write_all(data).and_then(|()| {
            rustix::fs::renameat(&self.dir, tmp.as_str(), &self.dir, name).map_err(Into::into)
        });
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&self.dir, tmp.as_str(), AtFlags::empty());
            return Err(anyhow::Error::from(e).context(format!("writing {}", path.display())));
        }
        Ok(path)
    }

    /// Create the new file `name` in the directory: `O_CREAT | O_EXCL | O_NOFOLLOW` relative
    /// to the handle, so that nothing already there (a symlink another user planted
    /// included) is opened, followed or truncated.
    ///
    /// # Errors
    /// I/O errors (`AlreadyExists` if anything is at `name`).
    pub fn create_new(&self, name: &str) -> std::io::Result<std::fs::File> {
        let fd = rustix::fs::openat(
            self.dir.as_fd(),
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )?;
        Ok(std::fs::File::from(fd))
    }

    /// A new file in the directory that has no name (`O_TMPFILE`), for reading and writing:
    /// nobody can open, replace or plant it, and it is gone when its last descriptor closes.
    ///
    /// # Errors
    /// I/O errors (`EOPNOTSUPP` where the filesystem has no `O_TMPFILE`).
    pub fn create_unnamed(&self) -> std::io::Result<std::fs::File> {
        let fd = rustix::fs::openat(
            self.dir.as_fd(),
            ".",
            OFlags::RDWR | OFlags::TMPFILE | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        Ok(std::fs::File::from(fd))
    }

    /// [`OutDir::create_new`] under a name no other user can guess (`prefix`, random hex,
    /// `suffix`); a name taken meanwhile is passed over for another. Returns the name.
    ///
    /// # Errors
    /// I/O errors; every name tried was taken.
    pub fn create_unpredictable(
        &self,
        prefix: &str,
        suffix: &str,
    ) -> std::io::Result<(String, std::fs::File)> {
        let mut last = None;
        for _ in 0..NAME_TRIES {
            let name = unpredictable_name(prefix, suffix);
            match self.create_new(&name) {
                Ok(file) => return Ok((name, file)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| std::io::Error::other("no free name")))
    }

    /// The contents of `name` if it is a regular file this user owns (opened without
    /// following a symlink and without blocking on a FIFO); `None` otherwise.
    pub fn read_own(&self, name: &str) -> Option<Vec<u8>> {
        let fd = rustix::fs::openat(
            self.dir.as_fd(),
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let st = rustix::fs::fstat(&fd).ok()?;
        let regular =
            rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile;
        if !regular || st.st_uid != rustix::process::geteuid().as_raw() {
            return None;
        }
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut std::fs::File::from(fd), &mut data).ok()?;
        Some(data)
    }

    /// Unlink `name` (relative to the handle; a symlink is removed, never followed) if it is
    /// a regular file this user owns; anything else is left alone.
    pub fn remove_own(&self, name: &str) {
        let own = rustix::fs::statat(&self.dir, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|st| {
            (rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile)
                && st.st_uid == rustix::process::geteuid().as_raw()
        });
        if own {
            let _ = rustix::fs::unlinkat(&self.dir, name, AtFlags::empty());
        }
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
