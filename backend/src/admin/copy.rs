//! Copies of a database as new databases: each a directory holding one generation, made from
//! the source generation by btrfs snapshots (instant, no data copied, allowed without root on
//! the same filesystem), with an identity of its own.
//!
//! The steps, in `DEST` (design.md §9):
//! 1. `DEST` must not exist (its parent must) or be an empty directory; `butter.incomplete` is
//!    written first. From here until step 6 the directory has no `butter.id`, so the engine
//!    refuses to open it (`NotADatabase`, for the marker), and `butter remove` recognises it by the marker.
//! 2. A writable snapshot of the source generation as `DEST/butter.staging` (or, for a restore
//!    from plain files, a new subvolume there that the files are written into); then the source
//!    must still be read-only (a writer deleting it without privileges clears the flag before
//!    it unlinks anything), else the staging copy is deleted and the newest generation is
//!    taken instead.
//! 3. `butter.id` inside the staging copy is replaced by a new identity.
//! 4. The staging copy is opened as a generation (manifest and every segment present, with
//!    their lengths, footers and indexes) and snapshotted read-only as `DEST/gen-N`, then
//!    deleted.
//! 5. (`butter restore` from streams: the received subvolumes in `butter.receive/` go; a
//!    compacting copy: the database it built in `butter.scratch/` goes.)
//! 6. `DEST/butter.id` (written as `butter.id.tmp` and renamed): the engine now opens `DEST`.
//! 7. The marker goes.
//!
//! Why a new identity: the identity is how the engine refuses a generation that is not its own
//! database's history. A copy and its original diverge as soon as either commits, so a
//! generation of one moved into the other must be refused, as any foreign one is.

use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fs::{BtrfsFs, Fs};
use crate::root::{self, gen_name, DbId, Kind, ID_FILE, ID_TMP_FILE};

use super::names::{INCOMPLETE_MARKER, RECEIVE_DIR, SCRATCH_DB, STAGING_SUBVOLUME};
use super::remove::{remove_database, remove_received};
use super::snapshot::{still_readonly, Snapshot};

const DIR_MODE: u32 = 0o700;
/// How many times a copy starts again on a newer generation (as [`Snapshot::open`]).
const MAX_ATTEMPTS: usize = 1000;
const FILE_MODE: u32 = 0o600;

/// What a copy holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyInfo {
    /// The generation copied (the copy's `gen-N` has the same number).
    pub generation: u64,
    /// The identity of the database it was copied from.
    pub source_identity: String,
    /// The copy's own identity.
    pub identity: String,
    /// The copy's generation snapshot, `DEST/gen-N`.
    pub generation_dir: PathBuf,
    /// Bytes of segment files in it (shared with the source, not copied).
    pub bytes: u64,
}

/// A directory being made into a database copy. Dropped before [`NewCopy::finish`], it
/// removes what it made (and the directory, if it created it).
#[derive(Debug)]
pub struct NewCopy {
    dest: PathBuf,
    created_dir: bool,
    installed: Option<CopyInfo>,
    /// The copy's identity, written to `DEST/butter.id` by [`NewCopy::finish`].
    id: Option<DbId>,
    finished: bool,
}

fn bad_dest(dest: &Path, reason: impl Into<String>) -> Error {
    Error::BadDestination {
        path: dest.into(),
        reason: reason.into(),
    }
}

impl NewCopy {
    /// Claims `dest` for a copy: it must not exist (its parent must) or be an empty directory,
    /// on btrfs. Writes the marker.
    ///
    /// # Errors
    /// [`Error::BadDestination`], [`Error::NotBtrfs`], I/O.
    pub fn create(dest: &Path) -> Result<NewCopy> {
        let created_dir = match std::fs::symlink_metadata(dest) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                BtrfsFs
                    .create_dir(dest, DIR_MODE)
                    .map_err(|e| Error::io("create directory", dest, e))?;
                true
            }
            Err(e) => return Err(Error::io("lstat", dest, e)),
            Ok(m) if !m.file_type().is_dir() => {
                return Err(bad_dest(dest, "it exists and is not a directory"))
            }
            Ok(_) => {
                let mut rd = std::fs::read_dir(dest).map_err(|e| Error::io("list", dest, e))?;
                if rd.next().is_some() {
                    return Err(bad_dest(dest, "it is not empty"));
                }
                false
            }
        };
        let copy = NewCopy {
            dest: dest.into(),
            created_dir,
            installed: None,
            id: None,
            finished: false,
        };
        let fs_type =
            crate::sys::filesystem_type(dest).map_err(|e| Error::io("statfs", dest, e))?;
        if !fs_type.is_btrfs() {
            return Err(Error::NotBtrfs {
                path: copy.dest.clone(),
                found: fs_type.name,
                magic: fs_type.magic,
            });
        }
        let marker = dest.join(INCOMPLETE_MARKER);
        BtrfsFs
            .write_new_file(
                &marker,
                b"a copy by the butter tool is being made here\n",
                FILE_MODE,
            )
            .map_err(|e| Error::io("write", &marker, e))?;
        Ok(copy)
    }

    /// The directory.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Creates `DEST/butter.receive/` for `btrfs receive` and returns its path.
    ///
    /// # Errors
    /// I/O.
    pub fn receive_dir(&self) -> Result<PathBuf> {
        let dir = self.dest.join(RECEIVE_DIR);
        if !root::check_kind(&dir, Kind::Dir)? {
            BtrfsFs
                .create_dir(&dir, DIR_MODE)
                .map_err(|e| Error::io("create directory", &dir, e))?;
        }
        Ok(dir)
    }

    /// Makes the copy's generation from the newest committed one of the database `db`, which a
    /// writer may be committing to meanwhile.
    ///
    /// # Errors
    /// [`Error::BadDestination`] (not on `db`'s filesystem), as [`Snapshot::open`], I/O.
    pub fn install_newest_of(&mut self, db: &Path) -> Result<&CopyInfo> {
        for _ in 0..MAX_ATTEMPTS {
            let source = Snapshot::open(db)?;
            if self.install_from(&source)? {
                return self
                    .installed
                    .as_ref()
                    .ok_or_else(|| bad_dest(&self.dest, "nothing was copied"));
            }
            log::debug!(
                "generation {} went away while it was copied; again",
                source.generation()
            );
        }
        Err(Error::Io {
            op: "copy the newest generation",
            path: db.into(),
            source: io::Error::other(format!(
                "a writer deleted it {MAX_ATTEMPTS} times while it was being copied"
            )),
        })
    }

    /// Makes the copy's generation from `source` (a generation opened by itself, such as a
    /// received stream's). Fails if the source stops being read-only meanwhile.
    ///
    /// # Errors
    /// As [`NewCopy::install_newest_of`].
    pub fn install(&mut self, source: &Snapshot) -> Result<&CopyInfo> {
        if !self.install_from(source)? {
            return Err(Error::corrupted(
                source.dir(),
                "it stopped being read-only while it was copied",
            ));
        }
        self.installed
            .as_ref()
            .ok_or_else(|| bad_dest(&self.dest, "nothing was copied"))
    }

    /// Steps 2–4; `Ok(false)` if the source was being deleted (nothing is left of the attempt).
    fn install_from(&mut self, source: &Snapshot) -> Result<bool> {
        if self.installed.is_some() {
            return Err(bad_dest(&self.dest, "it already holds a copied generation"));
        }
        let staging = self.dest.join(STAGING_SUBVOLUME);
        match BtrfsFs.snapshot(source.dir(), &staging, false) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                return Err(bad_dest(
                    &self.dest,
                    format!(
                        "it is not on the btrfs filesystem of {} (a copy is a snapshot; to copy \
                         elsewhere use `butter backup --plain`, or a stream)",
                        source.dir().display()
                    ),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(Error::io("snapshot", &staging, e)),
        }
        if !still_readonly(source.dir()) {
            delete_subvolume(&staging)?;
            return Ok(false);
        }
        self.seal_staging(&staging, source.generation(), source.identity())?;
        Ok(true)
    }

    /// Creates the writable subvolume `DEST/butter.staging`, for a generation's files written
    /// one by one (`butter restore --plain`), and returns its path. [`NewCopy::install_staged`]
    /// then makes what was written there the copy's generation.
    ///
    /// # Errors
    /// [`Error::BadDestination`] if a generation is installed already; I/O.
    pub fn stage(&mut self) -> Result<PathBuf> {
        if self.installed.is_some() {
            return Err(bad_dest(&self.dest, "it already holds a copied generation"));
        }
        let staging = self.dest.join(STAGING_SUBVOLUME);
        BtrfsFs
            .create_subvolume(&staging)
            .map_err(|e| Error::io("create subvolume", &staging, e))?;
        Ok(staging)
    }

    /// Makes the files written in the staging subvolume ([`NewCopy::stage`]) the copy's
    /// generation: they must be a whole generation (identity, manifest, every segment it lists
    /// with its length, footer and index), which then gets the copy's own identity, as any copy.
    /// The segments' blocks are not read here: [`Snapshot::verify`] the result.
    ///
    /// # Errors
    /// As [`Snapshot::open_generation`]: what was written is not a generation; I/O.
    pub fn install_staged(&mut self) -> Result<&CopyInfo> {
        let staging = self.dest.join(STAGING_SUBVOLUME);
        let staged = Snapshot::open_generation(&staging)?;
        let (generation, identity) = (staged.generation(), staged.identity());
        drop(staged);
        self.seal_staging(&staging, generation, identity)?;
        self.installed
            .as_ref()
            .ok_or_else(|| bad_dest(&self.dest, "nothing was copied"))
    }

    /// Where a compacting copy builds its new database: `DEST/butter.scratch` (not created
    /// here; the engine creates it when it opens it). [`NewCopy::finish`] removes it, and so
    /// does dropping the copy.
    pub fn scratch_dir(&self) -> PathBuf {
        self.dest.join(SCRATCH_DB)
    }

    /// Steps 3–4 on the staging subvolume holding generation `generation` of the database
    /// `source_identity`.
    fn seal_staging(
        &mut self,
        staging: &Path,
        generation: u64,
        source_identity: String,
    ) -> Result<()> {
        let id = DbId::generate()?;
        let staged_id = staging.join(ID_FILE);
        BtrfsFs
            .remove_file(&staged_id)
            .map_err(|e| Error::io("unlink", &staged_id, e))?;
        BtrfsFs
            .write_new_file(&staged_id, &id.encode(), FILE_MODE)
            .map_err(|e| Error::io("write", &staged_id, e))?;
        let staged = Snapshot::open_generation(staging)?;
        if staged.generation() != generation {
            return Err(Error::corrupted(staging, "the copy's manifest differs"));
        }
        let bytes = staged
            .tables()
            .iter()
            .flat_map(|t| t.segments.iter().map(|s| s.file_len))
            .sum();
        drop(staged);
        let gen_dir = self.dest.join(gen_name(generation));
        BtrfsFs
            .snapshot(staging, &gen_dir, true)
            .map_err(|e| Error::io("snapshot", &gen_dir, e))?;
        delete_subvolume(staging)?;
        self.installed = Some(CopyInfo {
            generation,
            source_identity,
            identity: id.to_hex_string(),
            generation_dir: gen_dir,
            bytes,
        });
        self.id = Some(id);
        Ok(())
    }

    /// Steps 5–7: deletes what was received, writes the identity (the engine opens the copy
    /// from here on) and removes the marker.
    ///
    /// # Errors
    /// I/O; then the copy is removed as by drop.
    pub fn finish(mut self) -> Result<CopyInfo> {
        let (Some(info), Some(id)) = (self.installed.clone(), self.id) else {
            return Err(bad_dest(&self.dest, "no generation was copied into it"));
        };
        let received = self.dest.join(RECEIVE_DIR);
        if root::check_kind(&received, Kind::Dir)? {
            remove_received(&received)?;
        }
        let scratch = self.dest.join(SCRATCH_DB);
        if root::check_kind(&scratch, Kind::Dir)? {
            remove_database(&scratch)?;
        }
        let tmp = self.dest.join(ID_TMP_FILE);
        let dst = self.dest.join(ID_FILE);
        BtrfsFs
            .write_new_file(&tmp, &id.encode(), FILE_MODE)
            .map_err(|e| Error::io("write", &tmp, e))?;
        BtrfsFs
            .rename(&tmp, &dst)
            .map_err(|e| Error::io("rename", &dst, e))?;
        self.finished = true;
        let marker = self.dest.join(INCOMPLETE_MARKER);
        BtrfsFs
            .remove_file(&marker)
            .map_err(|e| Error::io("unlink", &marker, e))?;
        Ok(info)
    }
}

impl Drop for NewCopy {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // Everything in DEST is this copy's: the marker makes it removable as a database.
        let outcome = if self.dest.join(INCOMPLETE_MARKER).exists() {
            remove_database(&self.dest).map(|_| ())
        } else if self.created_dir {
            std::fs::remove_dir(&self.dest).map_err(|e| Error::io("rmdir", &self.dest, e))
        } else {
            Ok(())
        };
        if let Err(e) = outcome {
            log::warn!("removing the unfinished copy {}: {e}", self.dest.display());
        } else if !self.created_dir && !self.dest.exists() {
            // The directory was the caller's (empty): give it back empty.
            if let Err(e) = BtrfsFs.create_dir(&self.dest, DIR_MODE) {
                log::warn!("recreating {}: {e}", self.dest.display());
            }
        }
    }
}

fn delete_subvolume(path: &Path) -> Result<()> {
    BtrfsFs
        .delete_subvolume(path)
        .map_err(|e| Error::io("delete subvolume", path, e))
}

/// Copies the newest committed generation of the database `db` into the new database `dest`
/// (the steps above), while a writer may be committing to `db`.
///
/// # Errors
/// [`Error::BadDestination`]: `dest` inside `db`, not empty, or on another filesystem; as
/// [`Snapshot::open`]; I/O. Nothing is left in `dest` after an error.
pub fn backup(db: &Path, dest: &Path) -> Result<CopyInfo> {
    refuse_inside(db, dest)?;
    // The source is looked at before anything is made.
    Snapshot::open(db)?;
    let mut copy = NewCopy::create(dest)?;
    copy.install_newest_of(db)?;
    copy.finish()
}

/// Refuses a destination inside the database directory (or the directory itself).
pub(crate) fn refuse_inside(db: &Path, dest: &Path) -> Result<()> {
    let db_real = db.canonicalize().map_err(|e| Error::io("resolve", db, e))?;
    // The destination may not exist yet: resolve its nearest existing ancestor.
    let mut probe = dest.to_path_buf();
    let mut rest = Vec::new();
    let real = loop {
        match probe.canonicalize() {
            Ok(p) => break p,
            Err(_) => match (probe.file_name(), probe.parent()) {
                (Some(name), Some(parent)) => {
                    rest.push(name.to_os_string());
                    probe = if parent.as_os_str().is_empty() {
                        PathBuf::from(".")
                    } else {
                        parent.to_path_buf()
                    };
                }
                _ => return Err(bad_dest(dest, "its path does not resolve")),
            },
        }
    };
    let full = rest.iter().rev().fold(real, |p, n| p.join(n));
    if full.starts_with(&db_real) {
        return Err(bad_dest(
            dest,
            format!("it is inside the database directory {}", db.display()),
        ));
    }
    Ok(())
}
