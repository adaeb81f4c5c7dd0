//! The databases `replay` makes, how they are recognised and removed, and
//! `slasher-bench clean DIR`.
//!
//! `replay` gives each backend a fresh directory `slasher-bench-<backend>-<pid>-<unix time>`
//! inside its `--db-dir` and writes a marker file [`MARKER`] into it before the backend opens
//! it. `clean` removes a directory only if both hold: its name has that form (with a known
//! backend name and decimal pid and time) and it holds the marker, a regular file whose content
//! names slasher-bench (or, for butter, its marker is gone but it holds only the engine's
//! entries with the engine's identity: what `rm -rf` leaves). Anything else is left alone.
//!
//! butter_db keeps its generations in read-only btrfs snapshots, which `rm -rf` cannot delete
//! (`EROFS`, or `EPERM` for a user without `user_subvol_rm_allowed`). Removal deletes every
//! subvolume in the database with butter_db's own deletion first
//! (`BtrfsFs::delete_subvolume_reporting`: as root the subvolume ioctl; as the unprivileged owner
//! it clears the read-only flag, empties the subvolume and removes it), then the rest.
//!
//! Removal never goes through a path someone else can change: [`DbDir`] holds the database's
//! parent directory open with the database's name and identity (device, inode), and removes it
//! relative to that handle, refusing ([`DbReplaced`]) a name that leads to a symlink or another
//! directory now; below it, everything is reached through handles without following symlinks.
//! `clean` skips a database still in use (butter_db's lock held, or the process named in the
//! directory's name running since before the run started) and says so; a DIR with nothing to
//! clean is not an error.

use anyhow::{bail, Context};
use rustix::fs::{Mode, OFlags};
use slasher_adapters::DatabaseBackend;
use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Start of the name of every database directory `replay` makes.
pub const DB_PREFIX: &str = "slasher-bench-";

/// The marker file `replay` writes into each database directory it makes.
pub const MARKER: &str = ".slasher-bench-db";

/// What the marker starts with.
const MARKER_MAGIC: &str = "slasher-bench database";

/// The name `replay` gives the database of `backend` in a run of process `pid` started at
/// `started_unix_s`.
pub fn db_name(backend: DatabaseBackend, pid: u32, started_unix_s: u64) -> String {
    format!("{DB_PREFIX}{backend}-{pid}-{started_unix_s}")
}

/// Whether `name` has the form of [`db_name`].
pub fn is_db_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(DB_PREFIX) else {
        return false;
    };
    let mut parts = rest.rsplitn(3, '-');
    let (Some(time), Some(pid), Some(backend)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let decimal = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    decimal(time) && decimal(pid) && backend.parse::<DatabaseBackend>().is_ok()
}

/// A database directory `replay` made or `clean` found, held by a handle on its parent
/// directory, its name there and its identity (device and inode), so that nothing is ever
/// removed through a name someone else changed afterwards: a symlink or another directory put
/// in its place is refused ([`DbReplaced`]), never followed.
#[derive(Debug)]
pub struct DbDir {
    path: PathBuf,
    parent: OwnedFd,
    name: OsString,
    id: (u64, u64),
}

/// The database directory was replaced since `replay` made it (or `clean` checked it).
#[derive(Debug, thiserror::Error)]
#[error(
    "{} is no longer the database directory this run made (it was renamed away and a symlink or \
     another directory put in its place, by a user who can write {}); nothing was removed \
     through it. Look for who did this, and remove the database by hand if it still exists",
    path.display(),
    path.parent().unwrap_or(path).display()
)]
pub struct DbReplaced {
    /// The database directory's path.
    pub path: PathBuf,
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

impl DbDir {
    /// Create the database directory `db` (which must not exist; mode 0755 less the umask, so
    /// no other user can change what is in it) and write its marker, both relative to the
    /// handle on `db`'s parent, without following a symlink.
    ///
    /// # Errors
    /// I/O errors; `db` exists already.
    pub fn create(db: &Path, backend: DatabaseBackend) -> std::io::Result<DbDir> {
        let (parent, _) = open_parent(db)?;
        DbDir::create_in(parent, db, backend)
    }

    /// [`DbDir::create`] in the directory `parent` holds open (`db`'s parent, resolved once by
    /// the caller): the name is never looked up from `db`'s path, only `db`'s last component
    /// relative to the handle.
    ///
    /// # Errors
    /// I/O errors; `db` exists already; `db` has no file name.
    pub fn create_in(
        parent: OwnedFd,
        db: &Path,
        backend: DatabaseBackend,
    ) -> std::io::Result<DbDir> {
        let (_, name) = slasher_adapters::config::parent_and_name(db)?;
        rustix::fs::mkdirat(&parent, name, Mode::from_raw_mode(0o755))?;
        let dir = DbDir::at(db, parent, name)?;
        let handle = dir.handle()?;
        let text = format!(
            "{MARKER_MAGIC}: made by {} for backend {backend}; remove with `slasher-bench clean \
             {}`\n",
            crate::TOOL,
            db.parent().unwrap_or(db).display()
        );
        let marker = rustix::fs::openat(
            &handle,
            MARKER,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )?;
        std::fs::File::from(marker).write_all(text.as_bytes())?;
        Ok(dir)
    }

    /// Take hold of the existing directory `db` (not a symlink), remembering its identity.
    ///
    /// # Errors
    /// I/O errors; `db` is a symlink or not a directory (`ENOTDIR`).
    pub fn open(db: &Path) -> std::io::Result<DbDir> {
        let (parent, name) = open_parent(db)?;
        DbDir::at(db, parent, name)
    }

    /// Take hold of `db` as the directory `dir` (a handle on it) with identity `id` (device
    /// and inode) without looking `db`'s path up: a child handed the directory by its parent. Whatever the name
    /// leads to later is refused ([`DbReplaced`]) unless it is that directory.
    ///
    /// # Errors
    /// `dir`'s parent cannot be opened; `db` has no file name.
    pub fn with_id_below(db: &Path, dir: &OwnedFd, id: (u64, u64)) -> std::io::Result<DbDir> {
        let (_, name) = slasher_adapters::config::parent_and_name(db)?;
        // `..` of the directory itself: the directory that holds it now, found without
        // looking any name of `db`'s path up.
        let parent = rustix::fs::openat(
            dir,
            "..",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(DbDir {
            path: db.to_path_buf(),
            parent,
            name: name.to_os_string(),
            id,
        })
    }

    fn at(db: &Path, parent: OwnedFd, name: &OsStr) -> std::io::Result<DbDir> {
        let dir = rustix::fs::openat(&parent, name, DIR_FLAGS, Mode::empty())?;
        let st = rustix::fs::fstat(&dir)?;
        Ok(DbDir {
            path: db.to_path_buf(),
            parent,
            name: name.to_os_string(),
            id: (st.st_dev, st.st_ino),
        })
    }

    /// The path it was made or found at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A handle on the directory, opened again by its name: an error ([`DbReplaced`] inside the
    /// `io::Error`) if the name no longer leads to the same directory.
    ///
    /// # Errors
    /// I/O errors (`NotFound` if it is gone); it was replaced.
    pub fn handle(&self) -> std::io::Result<OwnedFd> {
        let replaced = || {
            std::io::Error::other(DbReplaced {
                path: self.path.clone(),
            })
        };
        let dir = match rustix::fs::openat(&self.parent, &self.name, DIR_FLAGS, Mode::empty()) {
            Ok(dir) => dir,
            Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => return Err(replaced()),
            Err(e) => return Err(e.into()),
        };
        let st = rustix::fs::fstat(&dir)?;
        if (st.st_dev, st.st_ino) != self.id {
            return Err(replaced());
        }
        Ok(dir)
    }

    /// A path that reaches the directory through `handle` (`/proc/self/fd/N/.`: the
    /// directory itself, not the link to it), so that the backends, which open paths, never
    /// look its name up again.
    pub fn path_through(handle: &OwnedFd) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}/.", handle.as_raw_fd()))
    }

    /// Delete the directory and everything in it, read-only btrfs snapshots included (see the
    /// module docs), relative to its parent's handle; `Ok` if it is gone already. Refuses with
    /// [`DbReplaced`] if its name leads somewhere else now.
    ///
    /// # Errors
    /// It was replaced; what removing failed with, with a pointer to `slasher-bench clean`.
    pub fn remove(&self) -> anyhow::Result<()> {
        match self.handle() {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => match e.into_inner().map(|inner| inner.downcast::<DbReplaced>()) {
                Some(Ok(replaced)) => return Err((*replaced).into()),
                Some(Err(other)) => return Err(anyhow::anyhow!(other)),
                None => bail!("{}: cannot open it", self.path.display()),
            },
        }
        slasher_adapters::config::destroy_database_dir_at(
            self.parent.as_fd(),
            &self.name,
            Some(self.id),
        )
        .with_context(|| {
            format!(
                "removing {} (it may hold read-only btrfs snapshots, which rm -rf cannot \
                 delete); remove it with `slasher-bench clean {}` as its owner or as root",
                self.path.display(),
                self.path.parent().unwrap_or(&self.path).display()
            )
        })
    }
}

/// Opens `path`'s parent directory (the caller's path, followed) and returns it with the
/// final name.
fn open_parent(path: &Path) -> std::io::Result<(OwnedFd, &OsStr)> {
    let (parent, name) = slasher_adapters::config::parent_and_name(path)?;
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    Ok((rustix::fs::open(parent, flags, Mode::empty())?, name))
}

/// Create the database directory `db` (which must not exist) and write its marker
/// ([`DbDir::create`]).
///
/// # Errors
/// I/O errors; `db` exists already.
pub fn create_db_dir(db: &Path, backend: DatabaseBackend) -> std::io::Result<()> {
    DbDir::create(db, backend).map(|_| ())
}

/// Whether `path` is a database directory `replay` made: a directory (not a symlink) named as
/// [`db_name`] holding the [`MARKER`] file.
pub fn is_benchmark_db(path: &Path) -> bool {
    let marker = path.join(MARKER);
    let marked = std::fs::symlink_metadata(&marker).is_ok_and(|m| m.is_file())
        && std::fs::read_to_string(&marker).is_ok_and(|t| t.starts_with(MARKER_MAGIC));
    is_named_db_dir(path) && marked
}

/// Whether `path` is a directory (not a symlink) named as [`db_name`].
fn is_named_db_dir(path: &Path) -> bool {
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(is_db_name);
    named && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// Whether `path` is what is left of a butter database `replay` made after its marker and
/// files were removed (e.g. by `rm -rf`, which cannot delete the read-only snapshots): named as
/// [`db_name`], and holding only the engine's entries, with its identity.
fn is_marker_less_remains(path: &Path) -> bool {
    is_named_db_dir(path)
        && !path.join(MARKER).exists()
        && slasher_adapters::config::holds_only_database_remains(path)
}

/// The databases `replay` made directly inside `dir`, sorted.
pub fn leftovers_in(dir: &Path) -> Vec<PathBuf> {
    entries_where(dir, is_benchmark_db).unwrap_or_default()
}

/// [`leftovers_in`] the directory `handle` holds open (looked at through
/// [`DbDir::path_through`], never by `shown`, its path), named as entries of `shown`.
pub fn leftovers_in_handle(handle: &OwnedFd, shown: &Path) -> Vec<PathBuf> {
    let through = DbDir::path_through(handle);
    leftovers_in(&through)
        .into_iter()
        .filter_map(|p| p.file_name().map(|n| shown.join(n)))
        .collect()
}

/// The entries of `dir` for which `keep` holds, sorted.
fn entries_where(dir: &Path, keep: fn(&Path) -> bool) -> std::io::Result<Vec<PathBuf>> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| keep(p))
        .collect();
    found.sort();
    Ok(found)
}

/// Delete a database directory, read-only btrfs snapshots included (see the module docs),
/// through handles ([`DbDir::remove`]); `Ok` if it does not exist.
///
/// # Errors
/// `dir` is a symlink; what removing failed with, with a pointer to `slasher-bench clean`.
pub fn remove_db_dir(dir: &Path) -> anyhow::Result<()> {
    match DbDir::open(dir) {
        Ok(db) => db.remove(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(anyhow::Error::from(e).context(format!(
            "removing {}: it is not a directory (a symlink is never followed)",
            dir.display()
        ))),
    }
}

/// Why a database is still in use, if it is: butter_db's writer lock is held, or the process
/// whose pid its name carries is running and started no later than the run did.
fn in_use(path: &Path) -> Option<String> {
    if slasher_adapters::config::database_lock_held(path) {
        return Some("its database lock is held by a running process".into());
    }
    let name = path.file_name()?.to_str()?;
    let mut parts = name.rsplitn(3, '-');
    let started: u64 = parts.next()?.parse().ok()?;
    let pid: u32 = parts.next()?.parse().ok()?;
    let process_start = process_start_unix_s(pid)?;
    // A later start means the pid was reused after the run ended.
    (process_start <= started + 1).then(|| format!("the run that made it (pid {pid}) is running"))
}

/// When process `pid` started (Unix seconds), from `/proc`; `None` if it does not exist.
fn process_start_unix_s(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 (starttime, clock ticks after boot) counts from the field after the command,
    // which is in parentheses and may hold spaces.
    let after_comm = &stat[stat.rfind(')')? + 1..];
    let ticks: u64 = after_comm.split_whitespace().nth(19)?.parse().ok()?;
    let boot: u64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let hz = rustix::param::clock_ticks_per_second();
    Some(boot + ticks / hz.max(1))
}

/// `slasher-bench clean`.
#[derive(Debug, clap::Args)]
pub struct CleanArgs {
    /// A database directory `replay` left behind (`slasher-bench-<backend>-<pid>-<time>`
    /// holding a `.slasher-bench-db` marker, or the read-only snapshots of a butter database
    /// whose marker and files were removed), or a `--db-dir` holding such directories. Only
    /// those are removed, read-only btrfs snapshots included (also as their unprivileged
    /// owner); a database still in use (its lock held, or the run that made it running) is
    /// skipped, and anything else is left alone.
    pub dir: PathBuf,
}

/// Run `slasher-bench clean`.
///
/// # Errors
/// `dir` is missing or not a directory, or a removal failed.
pub fn run(args: CleanArgs) -> anyhow::Result<()> {
    let dir = &args.dir;
    // DIR is looked up once, here; everything after goes through this handle (or its `..`),
    // so another user who can rename entries on DIR's path cannot point the removals at
    // another directory between the listing and the removal.
    let handle = match rustix::fs::open(dir, DIR_FLAGS, Mode::empty()) {
        Ok(h) => h,
        Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => bail!(
            "{} is not a directory (a symlink is never followed); nothing was removed",
            dir.display()
        ),
        Err(e) => {
            return Err(std::io::Error::from(e)).with_context(|| format!("clean {}", dir.display()))
        }
    };
    let own_name = dir
        .file_name()
        .and_then(OsStr::to_str)
        .filter(|n| is_db_name(n))
        .map(str::to_owned);
    // The directory the candidates are in (held open) and its path as the user gave it.
    let (base_handle, shown_base) = match &own_name {
        Some(_) => (
            rustix::fs::openat(&handle, "..", DIR_FLAGS, Mode::empty())
                .map_err(std::io::Error::from)
                .with_context(|| format!("opening the directory holding {}", dir.display()))?,
            dir.parent().unwrap_or(Path::new(".")).to_path_buf(),
        ),
        None => (handle, dir.clone()),
    };
    let base = DbDir::path_through(&base_handle);
    let candidates = match &own_name {
        Some(name) => vec![base.join(name)],
        None => entries_where(&base, is_named_db_dir)
            .with_context(|| format!("listing {}", dir.display()))?,
    };
    // What a path through the handle is called in messages: its name in the user's DIR.
    let base_text = base.display().to_string();
    let shown_text = shown_base.display().to_string();
    let shown = |p: &Path| match p.file_name() {
        Some(n) => shown_base.join(n),
        None => shown_base.clone(),
    };
    let targets: Vec<&PathBuf> = candidates
        .iter()
        .filter(|p| is_benchmark_db(p) || is_marker_less_remains(p))
        .collect();
    if targets.is_empty() {
        println!(
            "nothing to clean in {}: clean removes only directories named \
             {DB_PREFIX}<backend>-<pid>-<time> that hold a {MARKER} marker (what replay makes), \
             or the read-only snapshots of such a butter database whose marker was removed",
            dir.display()
        );
        return Ok(());
    }
    let mut failed = Vec::new();
    for target in targets {
        if let Some(why) = in_use(target) {
            println!("skipped {}: {why}", shown(target).display());
            continue;
        }
        match remove_db_dir(target) {
            Ok(()) => println!("removed {}", shown(target).display()),
            Err(e) => {
                eprintln!(
                    "could not remove {}: {}",
                    shown(target).display(),
                    format!("{e:#}").replace(&base_text, &shown_text)
                );
                failed.push(shown(target).display().to_string());
            }
        }
    }
    if !failed.is_empty() {
        bail!(
            "{} databases could not be removed: {}",
            failed.len(),
            failed.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_replay_names_match() {
        assert!(is_db_name(&db_name(
            DatabaseBackend::Lmdb,
            12,
            1_700_000_000
        )));
        assert!(is_db_name("slasher-bench-butter-1-2"));
        assert!(!is_db_name("slasher-bench-nosuch-1-2"));
        assert!(!is_db_name("slasher-bench-lmdb-1-"));
        assert!(!is_db_name("slasher-bench-lmdb-x-2"));
        assert!(!is_db_name("home"));
    }
}
