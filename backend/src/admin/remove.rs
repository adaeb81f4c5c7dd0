//! Removing a database directory with its read-only snapshots, which `rm -rf` cannot delete.

use std::fs::File;
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

use crate::error::{Error, Result};
use crate::fs::{BtrfsFs, Fs};
use crate::root::{
    self, parse_gen_name, Kind, COMPACT_DIR, ID_FILE, ID_TMP_FILE, LIVE_DIR, LOCK_FILE,
};

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
/// [`Error::NotADatabase`], [`Error::ForeignEntry`], [`Error::Locked`], I/O.
pub fn remove_database(dir: &Path) -> Result<Removed> {
    if !root::check_kind(dir, Kind::DirOrSubvolume)? {
        return Err(not_a_database(dir, "no such directory"));
    }
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
                Kind::Dir
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
    let incomplete = dir.join(INCOMPLETE_MARKER);
    let marked = root::check_kind(&incomplete, Kind::File)?;
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
    if receive {
        // Only subvolumes that `btrfs receive` made.
        let r = dir.join(RECEIVE_DIR);
        for entry in std::fs::read_dir(&r).map_err(|e| Error::io("list", &r, e))? {
            let path = entry.map_err(|e| Error::io("list", &r, e))?.path();
            root::check_kind(&path, Kind::Subvolume)?;
        }
    }
    let _lock = take_lock(dir)?;
    // From here on the engine refuses the directory (no identity) and this function takes it.
    if root::check_kind(&dir.join(ID_FILE), Kind::File)? {
        BtrfsFs
            .rename(&dir.join(ID_FILE), &incomplete)
            .map_err(|e| Error::io("rename", &incomplete, e))?;
    }
    let mut removed = Removed {
        generations: generations.len(),
        ..Removed::default()
    };
    if receive {
        let r = dir.join(RECEIVE_DIR);
        removed.other_subvolumes += std::fs::read_dir(&r).map_or(0, Iterator::count);
        remove_received(&r)?;
    }
    if scratch {
        // A compacting copy's database under construction: a database of its own. Killed
        // while the engine was creating it, it has no identity yet; inside a copy being made
        // (this directory carried the marker) it is the copy's all the same, so it is marked
        // as such and removed.
        let inner = dir.join(SCRATCH_DB);
        let inner_marker = inner.join(INCOMPLETE_MARKER);
        if marked
            && !root::check_kind(&inner.join(ID_FILE), Kind::File)?
            && !root::check_kind(&inner_marker, Kind::File)?
        {
            BtrfsFs
                .write_new_file(
                    &inner_marker,
                    b"the scratch database of a compacting copy, being removed\n",
                    0o600,
                )
                .map_err(|e| Error::io("write", &inner_marker, e))?;
        }
        remove_database(&inner)?;
    }
    for name in [LIVE_DIR, STAGING_SUBVOLUME] {
        removed.other_subvolumes += usize::from(dir.join(name).exists());
    }
    BtrfsFs
        .delete_subvolumes_in(dir)
        .map_err(|e| Error::io("delete subvolume", dir, e))?;
    let compact = dir.join(COMPACT_DIR);
    if root::check_kind(&compact, Kind::Dir)? {
        removed.merge_outputs = std::fs::read_dir(&compact).map_or(0, Iterator::count);
        // Deletes only merge outputs, and none if anything else is there.
        root::clear_compact_dir(&BtrfsFs, &compact, 0o700)?;
        std::fs::remove_dir(&compact).map_err(|e| Error::io("rmdir", &compact, e))?;
    }
    for name in [ID_TMP_FILE, LOCK_FILE, INCOMPLETE_MARKER] {
        let path = dir.join(name);
        if root::check_kind(&path, Kind::File)? {
            BtrfsFs
                .remove_file(&path)
                .map_err(|e| Error::io("unlink", &path, e))?;
        }
    }
    std::fs::remove_dir(dir).map_err(|e| Error::io("rmdir", dir, e))?;
    Ok(removed)
}

/// The writer's lock, taken as the engine takes it (`flock` exclusive, not waiting), if the
/// lock file exists; `None` if it does not (no process has the database open).
fn take_lock(dir: &Path) -> Result<Option<Flock<File>>> {
    let path = dir.join(LOCK_FILE);
    let Some(file) =
        root::open_existing_lock(dir).map_err(|e| Error::io("open lock file", &path, e))?
    else {
        return Ok(None);
    };
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(l) => Ok(Some(l)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(Error::Locked {
            path: dir.into(),
            lock: path,
        }),
        Err((_, e)) => Err(Error::io("lock", &path, e.into())),
    }
}

/// Deletes the subvolumes `btrfs receive` made in `dir`, then `dir`.
pub(crate) fn remove_received(dir: &Path) -> Result<()> {
    BtrfsFs
        .delete_subvolumes_in(dir)
        .map_err(|e| Error::io("delete subvolume", dir, e))?;
    std::fs::remove_dir(dir).map_err(|e| Error::io("rmdir", dir, e))
}
