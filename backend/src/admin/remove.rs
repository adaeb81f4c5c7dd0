//! Removing a database directory with its read-only snapshots, which `rm -rf` cannot delete.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};

use crate::error::{Error, Result};
use crate::fs::{BtrfsFs, Fs};
use crate::root::{
    self, parse_gen_name, Kind, COMPACT_DIR, ID_FILE, ID_TMP_FILE, LIVE_DIR, LOCK_FILE,
};

use super::held::{parent_and_name, rmdir_if_same, Held};
use super::names::{INCOMPLETE_MARKER, RECEIVE_DIR, SCRATCH_DB, STAGING_SUBVOLUME};

/// What [`remove_database`] deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removed {
    /// Generation snapshots.
    pub generations: usize,
    /// Other subvolumes (`live/`, a copy's staging subvolume, received streams).
    pub other_subvolumes: usize,
    /// Background merge outputs in `compact/`.
    pub merge_outputs: usize,
}

fn not_a_database(dir: &Path, reason: impl Into<String>) -> Error {
    Error::NotADatabase {
        path: dir.into(),
        reason: reason.into(),
    }
}

/// Deletes the database in `dir` and `dir` itself: its generations and `live/` (with the
/// engine's subvolume deletion, which works without root), `compact/` and its files.
///
/// `dir` is opened once (`O_DIRECTORY | O_NOFOLLOW`) and everything below is reached through
/// that handle: a name swapped for a symlink or another directory meanwhile is never followed.
/// A directory someone other than the caller and root can write is refused
/// ([`Error::SharedDirectory`]). At the end `dir` is removed by its name in its parent only if
/// the name still leads to the directory emptied.
///
/// Refuses, changing nothing, a directory that holds anything but the engine's names (and the
/// `butter` tool's: [`INCOMPLETE_MARKER`], [`STAGING_SUBVOLUME`], [`RECEIVE_DIR`],
/// [`SCRATCH_DB`]), one with
/// neither `butter.id` nor the marker (unless its generations, all carrying one identity, are
/// what `rm -rf` left of it), a generation of another database, an entry of the wrong
/// type, and a database whose writer's lock a process holds. The lock is held until the end.
/// The identity is renamed to the marker first, so that a removal stopped half-way leaves a
/// directory the engine refuses to open and this function removes.
///
/// # Errors
/// [`Error::NotADatabase`], [`Error::ForeignEntry`], [`Error::Locked`],
/// [`Error::SharedDirectory`], I/O.
pub fn remove_database(dir: &Path) -> Result<Removed> {
    let Some((parent_path, name)) = parent_and_name(dir) else {
        return Err(not_a_database(
            dir,
            "give the database directory by a path ending in its name",
        ));
    };
    let parent = rustix::fs::open(
        &parent_path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::NOENT => not_a_database(dir, "no such directory"),
        e => Error::io("open", &parent_path, e.into()),
    })?;
    let held = match Held::open_at(parent.as_fd(), &name, dir) {
        Ok(held) => held,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(not_a_database(dir, "no such directory"))
        }
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) => {
            // A symlink or a file: say which, as a look (nothing is followed).
            root::check_kind(dir, Kind::DirOrSubvolume)?;
            return Err(not_a_database(dir, "it is not a directory"));
        }
        Err(e) => return Err(Error::io("open", dir, e)),
    };
    held.refuse_shared()?;
    let expect = held.id().map_err(|e| Error::io("fstat", dir, e))?;
    let removed = remove_contents(&held).map_err(|e| held.shown(e))?;
    drop(held);
    rmdir_if_same(parent.as_fd(), &name, expect, dir)?;
    Ok(removed)
}

/// What a database directory holds, surveyed before anything in it changes.
struct Found {
    generations: Vec<u64>,
    /// `butter.receive/` is there (a restore from streams).
    receive: bool,
    /// `butter.scratch/` is there (a compacting copy's database under construction).
    scratch: bool,
    /// `butter.incomplete` is there (a copy being made, or a removal under way).
    marked: bool,
}

/// [`remove_database`] below the open directory `held`: everything in it, not the directory.
/// Everything is checked first ([`survey`], the received subvolumes, `compact/`); then the
/// identity becomes the marker and the parts go, subvolumes before files.
pub(crate) fn remove_contents(held: &Held) -> Result<Removed> {
    let dir = held.via();
    let found = survey(dir)?;
    let received = if found.receive {
        Some(open_received(held)?)
    } else {
        None
    };
    let compact = if root::check_kind(&dir.join(COMPACT_DIR), Kind::Dir)? {
        let c = Held::open_at(held.fd(), COMPACT_DIR.as_ref(), &dir.join(COMPACT_DIR))
            .map_err(|e| Error::io("open", dir.join(COMPACT_DIR), e))?;
        let outputs = merge_outputs_at(&c)?;
        Some((c, outputs))
    } else {
        None
    };
    let _lock = take_lock(dir)?;
    let fd = held.fd();
    // From here on the engine refuses the directory (no identity) and this function takes it.
    if root::check_kind(&dir.join(ID_FILE), Kind::File)? {
        rustix::fs::renameat(fd, ID_FILE, fd, INCOMPLETE_MARKER)
            .map_err(|e| Error::io("rename", dir.join(INCOMPLETE_MARKER), e.into()))?;
    }
    let mut removed = Removed {
        generations: found.generations.len(),
        ..Removed::default()
    };
    if let Some(r) = received {
        let expect = r.id().map_err(|e| Error::io("fstat", r.path(), e))?;
        removed.other_subvolumes += std::fs::read_dir(r.via()).map_or(0, Iterator::count);
        drop(r);
        BtrfsFs
            .remove_tree_at(fd, RECEIVE_DIR.as_ref(), Some(expect))
            .map_err(|e| Error::io("remove", dir.join(RECEIVE_DIR), e))?;
    }
    if found.scratch {
        remove_scratch(fd, dir, found.marked)?;
    }
    for name in [LIVE_DIR, STAGING_SUBVOLUME] {
        removed.other_subvolumes +=
            usize::from(root::check_kind(&dir.join(name), Kind::Subvolume)?);
    }
    BtrfsFs
        .delete_subvolumes_in_fd(fd)
        .map_err(|e| Error::io("delete subvolume", dir, e))?;
    if let Some((c, outputs)) = compact {
        removed.merge_outputs = outputs.len();
        for name in &outputs {
            rustix::fs::unlinkat(c.fd(), name.as_str(), AtFlags::empty())
                .map_err(|e| Error::io("unlink", c.path().join(name), e.into()))?;
        }
        let expect = c.id().map_err(|e| Error::io("fstat", c.path(), e))?;
        let shown = c.path().to_path_buf();
        drop(c);
        rmdir_if_same(fd, COMPACT_DIR.as_ref(), expect, &shown)?;
    }
    for name in [ID_TMP_FILE, LOCK_FILE, INCOMPLETE_MARKER] {
        let path = dir.join(name);
        if root::check_kind(&path, Kind::File)? {
            rustix::fs::unlinkat(fd, name, AtFlags::empty())
                .map_err(|e| Error::io("unlink", &path, e.into()))?;
        }
    }
    Ok(removed)
}

/// Lists `dir` (a database directory, through its handle's path) and checks that it holds
/// only the engine's entries, each of its kind, and one identity: in `butter.id`, or, where
/// `rm -rf` took that, in every generation alike. Touches nothing.
fn survey(dir: &Path) -> Result<Found> {
    let mut generations = Vec::new();
    let mut receive = false;
    let mut scratch = false;
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io("list", dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let name = entry.file_name();
        let name = name.to_str().unwrap_or("");
        let path = entry.path();
        let kind = match name {
            ID_FILE | ID_TMP_FILE | LOCK_FILE | INCOMPLETE_MARKER => Kind::File,
            LIVE_DIR | STAGING_SUBVOLUME => Kind::Subvolume,
            COMPACT_DIR => Kind::Dir,
            SCRATCH_DB => {
                scratch = true;
                Kind::Dir
            }
            RECEIVE_DIR => {
                receive = true;
                // A subvolume; a directory where a version before the private mount made it.
                Kind::DirOrSubvolume
            }
            _ => match parse_gen_name(name) {
                Some(g) => {
                    generations.push(g);
                    Kind::Subvolume
                }
                None => {
                    return Err(not_a_database(
                        dir,
                        format!("it holds {name:?}, which butter_db does not make"),
                    ))
                }
            },
        };
        root::check_kind(&path, kind)?;
    }
    let id = root::read_id(&dir.join(ID_FILE))?;
    let marked = root::check_kind(&dir.join(INCOMPLETE_MARKER), Kind::File)?;
    // `rm -rf` run on a database removes its files and fails on the read-only generations,
    // identity included: generations that all carry one identity are still the database's.
    let id = match (id, generations.first()) {
        (Some(id), _) => Some(id),
        (None, Some(&g)) if !marked => root::read_id(&dir.join(root::gen_name(g)).join(ID_FILE))?,
        (None, _) => None,
    };
    if id.is_none() && !marked {
        return Err(not_a_database(
            dir,
            format!("it has neither {ID_FILE} nor {INCOMPLETE_MARKER}"),
        ));
    }
    if let Some(id) = &id {
        for &g in &generations {
            root::check_generation_id(&dir.join(root::gen_name(g)), id)?;
        }
    }
    Ok(Found {
        generations,
        receive,
        scratch,
        marked,
    })
}

/// `butter.receive/` of the database `held`, opened, holding only subvolumes (those `btrfs
/// receive` made).
fn open_received(held: &Held) -> Result<Held> {
    let dir = held.via();
    let r = Held::open_at(held.fd(), RECEIVE_DIR.as_ref(), &dir.join(RECEIVE_DIR))
        .map_err(|e| Error::io("open", dir.join(RECEIVE_DIR), e))?;
    for entry in std::fs::read_dir(r.via()).map_err(|e| Error::io("list", r.path(), e))? {
        let path = entry.map_err(|e| Error::io("list", r.path(), e))?.path();
        root::check_kind(&path, Kind::Subvolume).map_err(|e| r.shown(e))?;
    }
    Ok(r)
}

/// Removes `butter.scratch/`, a compacting copy's database under construction: a database of
/// its own, removed through its own handle. Killed while the engine was creating it, it has no
/// identity yet; inside a copy being made (`marked`: the outer directory carried the marker)
/// it is the copy's all the same, so it is marked as such first.
fn remove_scratch(fd: BorrowedFd<'_>, dir: &Path, marked: bool) -> Result<()> {
    let shown = dir.join(SCRATCH_DB);
    let inner =
        Held::open_at(fd, SCRATCH_DB.as_ref(), &shown).map_err(|e| Error::io("open", &shown, e))?;
    let inner_marker = inner.via().join(INCOMPLETE_MARKER);
    if marked
        && !root::check_kind(&inner.via().join(ID_FILE), Kind::File)?
        && !root::check_kind(&inner_marker, Kind::File)?
    {
        BtrfsFs
            .write_new_file(
                &inner_marker,
                b"the scratch database of a compacting copy, being removed\n",
                0o600,
            )
            .map_err(|e| inner.shown(Error::io("write", &inner_marker, e)))?;
    }
    remove_contents(&inner).map_err(|e| inner.shown(e))?;
    let expect = inner.id().map_err(|e| Error::io("fstat", &shown, e))?;
    drop(inner);
    rmdir_if_same(fd, SCRATCH_DB.as_ref(), expect, &shown)
}

/// The names of the merge outputs in the open `compact/` directory `c`; anything else there
/// (another name, a symlink, a directory) is [`Error::ForeignEntry`]. Touches nothing.
fn merge_outputs_at(c: &Held) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let list = |e: rustix::io::Errno| Error::io("list", c.path(), e.into());
    for entry in Dir::read_from(c.fd()).map_err(list)? {
        let entry = entry.map_err(list)?;
        let bytes = entry.file_name().to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let name = String::from_utf8_lossy(bytes).into_owned();
        let path = c.path().join(&name);
        let st = rustix::fs::statat(c.fd(), entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| Error::io("lstat", &path, e.into()))?;
        let file = FileType::from_raw_mode(st.st_mode) == FileType::RegularFile;
        if !file || !root::is_merge_output(&name) || name.as_bytes() != bytes {
            return Err(Error::foreign(
                path,
                "compact/ holds only background merge outputs named <16 hex digits>.seg",
            ));
        }
        names.push(name);
    }
    Ok(names)
}

/// The writer's lock, taken as the engine takes it ([`root::lock_exclusive`]), if the
/// lock file exists; `None` if it does not (no process has the database open).
fn take_lock(dir: &Path) -> Result<Option<File>> {
    let path = dir.join(LOCK_FILE);
    let Some(file) =
        root::open_existing_lock(dir).map_err(|e| Error::io("open lock file", &path, e))?
    else {
        return Ok(None);
    };
    // The lock is held by the open file and released when it is closed.
    match root::lock_exclusive(&file) {
        Ok(true) => Ok(Some(file)),
        Ok(false) => Err(Error::Locked {
            path: dir.into(),
            lock: path,
        }),
        Err(e) => Err(Error::io("lock", &path, e)),
    }
}
