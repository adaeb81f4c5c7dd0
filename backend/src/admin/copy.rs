//! Copies of a database as new databases: each a directory holding one generation, made from
//! the source generation by btrfs snapshots (instant, no data copied, allowed without root on
//! the same filesystem), with an identity of its own.
//!
//! The steps, in `DEST` (design.md §9):
//! 1. `DEST` must not exist (its parent must) or be an empty directory; `butter.incomplete` is
//!    written first. From here until step 6 the directory has no `butter.id`, so the engine
//!    refuses to open it (`NotADatabase`, for the marker), and `butter remove` recognises it by the marker.
//!    `DEST` is opened once here and checked; every step below goes through that handle
//!    (`admin/held.rs`), so another user renaming `DEST` or a directory above it, or putting a
//!    symlink in its place, redirects nothing.
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

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, Mode, OFlags};

use crate::error::{Error, Result};
use crate::fs::{is_within, open_dir_at, BtrfsFs, FileId, Fs};
use crate::root::{self, gen_name, DbId, Kind, ID_FILE, ID_TMP_FILE};

use super::held::{self, parent_and_name, rmdir_if_same, Held};
use super::names::{INCOMPLETE_MARKER, RECEIVE_DIR, SCRATCH_DB, STAGING_SUBVOLUME};
use super::remove::{remove_contents, remove_database};
use super::snapshot::{still_readonly, Snapshot, Verified};

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
///
/// `DEST` is resolved once: opened (`O_DIRECTORY | O_NOFOLLOW`), or created in its parent and
/// opened there, then checked (a directory of the caller's or root's that nobody else can
/// write unless it is sticky, on btrfs, empty). Every later step reaches it through that
/// handle, never through the path: a name swapped for a symlink meanwhile is not followed.
#[derive(Debug)]
pub struct NewCopy {
    held: Held,
    /// DEST's parent, its name there and its identity, when this copy created it (to remove it
    /// again if the copy fails, only if the name still leads to it).
    created: Option<(OwnedFd, OsString, FileId)>,
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

/// Opens `parent`, the directory that holds `dest` (the user's own path, followed as given),
/// as a handle to look `dest` up in and make it in (`O_PATH`: no read permission needed); a
/// missing one is a [`Error::BadDestination`] for `dest`.
fn open_parent(parent: &Path, dest: &Path) -> Result<OwnedFd> {
    rustix::fs::open(
        parent,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR => {
            bad_dest(dest, "its parent directory does not exist")
        }
        e => Error::io("open", parent, e.into()),
    })
}

impl NewCopy {
    /// Claims `dest` for a copy: it must not exist (its parent must) or be an empty directory,
    /// on btrfs, and neither it (if it exists) nor its parent (if it is created) may be writable
    /// by a user other than the caller and root, unless sticky. Writes the marker.
    ///
    /// # Errors
    /// [`Error::BadDestination`], [`Error::SharedDirectory`], [`Error::NotBtrfs`], I/O.
    pub fn create(dest: &Path) -> Result<NewCopy> {
        NewCopy::claim(dest, None)
    }

    /// [`NewCopy::create`] for a copy of the database whose directory is open as `source`:
    /// a `dest` that is that directory or lies inside it is refused
    /// ([`Error::BadDestination`]) before anything is made. The test walks up from `dest`'s
    /// handle (or its parent's) through `..` ([`crate::fs::is_within`]), so it looks up no
    /// path a second time.
    ///
    /// # Errors
    /// As [`NewCopy::create`].
    pub fn create_outside(dest: &Path, source: BorrowedFd<'_>) -> Result<NewCopy> {
        let source = FileId::of(source).map_err(|e| Error::io("fstat", dest, e))?;
        NewCopy::claim(dest, Some(source))
    }

    fn claim(dest: &Path, outside: Option<FileId>) -> Result<NewCopy> {
        let refuse_inside = |dir: BorrowedFd<'_>| match outside {
            Some(source) if is_within(dir, source).map_err(|e| Error::io("open", dest, e))? => Err(
                bad_dest(dest, "it is inside the database directory being copied"),
            ),
            _ => Ok(()),
        };
        // DEST's parent is looked up once, and DEST by its name in it (a path without a
        // final name, `/` or `..`, is opened as it is).
        let parent = match parent_and_name(dest) {
            Some((parent_path, name)) => {
                Some((open_parent(&parent_path, dest)?, parent_path, name))
            }
            None => None,
        };
        let opened = match &parent {
            Some((fd, _, name)) => Held::open_at(fd.as_fd(), name, dest),
            None => Held::open(dest),
        };
        let (held, created) = match opened {
            Ok(held) => {
                refuse_inside(held.fd())?;
                (held, None)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let Some((parent, parent_path, name)) = parent else {
                    return Err(bad_dest(dest, "it does not name a directory"));
                };
                refuse_inside(parent.as_fd())?;
                held::refuse_shared(parent.as_fd(), &parent_path)?;
                rustix::fs::mkdirat(&parent, &name, Mode::from_raw_mode(DIR_MODE))
                    .map_err(|e| Error::io("create directory", dest, e.into()))?;
                let held = Held::open_at(parent.as_fd(), &name, dest)
                    .map_err(|e| Error::io("open", dest, e))?;
                let id = held.id().map_err(|e| Error::io("fstat", dest, e))?;
                (held, Some((parent, name, id)))
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) => {
                return Err(bad_dest(
                    dest,
                    "it exists and is not a directory (a symlink is not followed)",
                ))
            }
            Err(e) => return Err(Error::io("open", dest, e)),
        };
        let mut copy = NewCopy {
            held,
            created,
            installed: None,
            id: None,
            finished: false,
        };
        if copy.created.is_none() {
            // Checked before anything is written; nothing is removed on refusal.
            let refused = copy.held.refuse_shared().and_then(|()| {
                let mut rd =
                    std::fs::read_dir(copy.held.via()).map_err(|e| Error::io("list", dest, e))?;
                if rd.next().is_some() {
                    return Err(bad_dest(dest, "it is not empty"));
                }
                Ok(())
            });
            if let Err(e) = refused {
                copy.finished = true;
                return Err(e);
            }
        }
        let fs_type = crate::sys::filesystem_type_fd(copy.held.fd())
            .map_err(|e| Error::io("statfs", dest, e))?;
        if !fs_type.is_btrfs() {
            return Err(Error::NotBtrfs {
                path: dest.to_path_buf(),
                found: fs_type.name,
                magic: fs_type.magic,
            });
        }
        let marker = copy.held.via().join(INCOMPLETE_MARKER);
        BtrfsFs
            .write_new_file(
                &marker,
                b"a copy by the butter tool is being made here\n",
                FILE_MODE,
            )
            .map_err(|e| copy.held.shown(Error::io("write", &marker, e)))?;
        Ok(copy)
    }

    /// The directory, as given.
    pub fn dest(&self) -> &Path {
        self.held.path()
    }

    /// The destination as another process (`btrfs send`, `btrfs receive`) reaches it through
    /// this process's handle: `/proc/<pid>/fd/N/.`, valid while this copy lives. A path below
    /// it is looked up from the open directory, not from the path given.
    pub fn for_child(&self) -> PathBuf {
        self.held.for_child()
    }

    /// Creates `DEST/butter.receive`, a subvolume of its own, for `btrfs receive` (or finds
    /// the one an earlier stream of this restore made) and returns it opened. `btrfs receive`
    /// is given it mounted in a namespace of its own ([`crate::fs::output_in_private_mount`]),
    /// so no path it uses leads through a directory another user can write; it is a subvolume
    /// so that `btrfs receive` finds an incremental stream's parent inside that mount.
    ///
    /// # Errors
    /// I/O; [`Error::ForeignEntry`] if something else has the name.
    pub fn receive_subvolume(&self) -> Result<OwnedFd> {
        let dir = self.held.via().join(RECEIVE_DIR);
        let shown = |e| self.held.shown(e);
        if !root::check_kind(&dir, Kind::Subvolume).map_err(shown)? {
            crate::sys::subvol_create(self.held.fd(), RECEIVE_DIR.as_ref())
                .map_err(|e| shown(Error::io("create subvolume", &dir, e)))?;
        }
        let fd = crate::fs::open_dir_at(self.held.fd(), RECEIVE_DIR.as_ref())
            .map_err(|e| shown(Error::io("open", &dir, e)))?;
        if !crate::sys::is_subvolume_root_fd(fd.as_fd())
            .map_err(|e| shown(Error::io("fstat", &dir, e)))?
        {
            return Err(shown(Error::foreign(
                &dir,
                "it is not the subvolume this restore made",
            )));
        }
        Ok(fd)
    }

    /// The subvolumes in `DEST/butter.receive/`, by name.
    ///
    /// # Errors
    /// I/O.
    pub fn received(&self) -> Result<Vec<OsString>> {
        let dir = self.held.via().join(RECEIVE_DIR);
        let rd =
            std::fs::read_dir(&dir).map_err(|e| self.held.shown(Error::io("list", &dir, e)))?;
        let mut names = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| self.held.shown(Error::io("list", &dir, e)))?;
            names.push(entry.file_name());
        }
        Ok(names)
    }

    /// Opens the received subvolume `name` (of [`NewCopy::received`]) as a generation, through
    /// the destination's handle. Its [`Snapshot::dir`] is valid while this copy lives.
    ///
    /// # Errors
    /// As [`Snapshot::open_generation`].
    pub fn open_received(&self, name: &OsStr) -> Result<Snapshot> {
        Snapshot::open_generation(&self.held.via().join(RECEIVE_DIR).join(name))
            .map_err(|e| self.held.shown(e))
    }

    /// Reads the copied generation whole ([`Snapshot::verify`]) through the destination's
    /// handle.
    ///
    /// # Errors
    /// Nothing was copied yet ([`Error::BadDestination`]); as [`Snapshot::verify`].
    pub fn verify(&self) -> Result<Verified> {
        self.open_copied()?.verify().map_err(|e| self.held.shown(e))
    }

    /// Opens the copied generation through the destination's handle. Its [`Snapshot::dir`]
    /// is valid while this copy lives.
    ///
    /// # Errors
    /// Nothing was copied yet ([`Error::BadDestination`]); as [`Snapshot::open_generation`].
    pub fn open_copied(&self) -> Result<Snapshot> {
        let Some(info) = &self.installed else {
            return Err(bad_dest(self.dest(), "no generation was copied into it"));
        };
        Snapshot::open_generation(&self.held.via().join(gen_name(info.generation)))
            .map_err(|e| self.held.shown(e))
    }

    /// The copied generation's subvolume, opened through the destination's handle (for
    /// `butter_db::fs::send`).
    ///
    /// # Errors
    /// Nothing was copied yet ([`Error::BadDestination`]); I/O.
    pub fn open_generation_dir(&self) -> Result<OwnedFd> {
        let Some(info) = &self.installed else {
            return Err(bad_dest(self.dest(), "no generation was copied into it"));
        };
        let name = gen_name(info.generation);
        open_dir_at(self.held.fd(), name.as_ref())
            .map_err(|e| Error::io("open", self.held.path().join(&name), e))
    }

    /// Makes the copy's generation from the newest committed one of the database `db`, which a
    /// writer may be committing to meanwhile.
    ///
    /// # Errors
    /// [`Error::BadDestination`] (not on `db`'s filesystem), as [`Snapshot::open`], I/O.
    pub fn install_newest_of(&mut self, db: &Path) -> Result<&CopyInfo> {
        for _ in 0..MAX_ATTEMPTS {
            let source = Snapshot::open(db)?;
            if self.install_from(&source).map_err(|e| self.held.shown(e))? {
                return self
                    .installed
                    .as_ref()
                    .ok_or_else(|| bad_dest(self.held.path(), "nothing was copied"));
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
        if !self.install_from(source).map_err(|e| self.held.shown(e))? {
            return Err(self.held.shown(Error::corrupted(
                source.dir(),
                "it stopped being read-only while it was copied",
            )));
        }
        self.installed
            .as_ref()
            .ok_or_else(|| bad_dest(self.held.path(), "nothing was copied"))
    }

    /// Steps 2–4; `Ok(false)` if the source was being deleted (nothing is left of the attempt).
    /// Errors name the handle's path (the callers give them the user's).
    fn install_from(&mut self, source: &Snapshot) -> Result<bool> {
        let dest = self.held.via().to_path_buf();
        if self.installed.is_some() {
            return Err(bad_dest(&dest, "it already holds a copied generation"));
        }
        let staging = dest.join(STAGING_SUBVOLUME);
        match BtrfsFs.snapshot(source.dir(), &staging, false) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EXDEV) => {
                return Err(bad_dest(
                    &dest,
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
    /// one by one (`butter restore --plain`), and returns its path (through the handle).
    /// [`NewCopy::install_staged`] then makes what was written there the copy's generation.
    ///
    /// # Errors
    /// [`Error::BadDestination`] if a generation is installed already; I/O.
    pub fn stage(&mut self) -> Result<PathBuf> {
        if self.installed.is_some() {
            return Err(bad_dest(
                self.dest(),
                "it already holds a copied generation",
            ));
        }
        let staging = self.held.via().join(STAGING_SUBVOLUME);
        BtrfsFs
            .create_subvolume(&staging)
            .map_err(|e| self.held.shown(Error::io("create subvolume", &staging, e)))?;
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
        let staging = self.held.via().join(STAGING_SUBVOLUME);
        let sealed = Snapshot::open_generation(&staging).and_then(|staged| {
            let (generation, identity) = (staged.generation(), staged.identity());
            drop(staged);
            self.seal_staging(&staging, generation, identity)
        });
        sealed.map_err(|e| self.held.shown(e))?;
        self.installed
            .as_ref()
            .ok_or_else(|| bad_dest(self.held.path(), "nothing was copied"))
    }

    /// Where a compacting copy builds its new database: `DEST/butter.scratch` (through the
    /// handle; not created here: the engine creates it when it opens it). [`NewCopy::finish`]
    /// removes it, and so does dropping the copy.
    pub fn scratch_dir(&self) -> PathBuf {
        self.held.via().join(SCRATCH_DB)
    }

    /// Steps 3–4 on the staging subvolume holding generation `generation` of the database
    /// `source_identity`.
    fn seal_staging(
        &mut self,
        staging: &Path,
        generation: u64,
        source_identity: String,
    ) -> Result<()> {
        let dest = self.held.via().to_path_buf();
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
        let gen_dir = dest.join(gen_name(generation));
        BtrfsFs
            .snapshot(staging, &gen_dir, true)
            .map_err(|e| Error::io("snapshot", &gen_dir, e))?;
        delete_subvolume(staging)?;
        self.installed = Some(CopyInfo {
            generation,
            source_identity,
            identity: id.to_hex_string(),
            generation_dir: self.held.path().join(gen_name(generation)),
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
            return Err(bad_dest(self.dest(), "no generation was copied into it"));
        };
        self.finish_steps(id).map_err(|e| self.held.shown(e))?;
        Ok(info)
    }

    fn finish_steps(&mut self, id: DbId) -> Result<()> {
        let dest = self.held.via().to_path_buf();
        let received = dest.join(RECEIVE_DIR);
        if root::check_kind(&received, Kind::DirOrSubvolume)? {
            BtrfsFs
                .remove_tree_at(self.held.fd(), RECEIVE_DIR.as_ref(), None)
                .map_err(|e| Error::io("remove", &received, e))?;
        }
        let scratch = dest.join(SCRATCH_DB);
        if root::check_kind(&scratch, Kind::Dir)? {
            remove_database(&scratch)?;
        }
        let tmp = dest.join(ID_TMP_FILE);
        let dst = dest.join(ID_FILE);
        BtrfsFs
            .write_new_file(&tmp, &id.encode(), FILE_MODE)
            .map_err(|e| Error::io("write", &tmp, e))?;
        rustix::fs::renameat(self.held.fd(), ID_TMP_FILE, self.held.fd(), ID_FILE)
            .map_err(|e| Error::io("rename", &dst, e.into()))?;
        self.finished = true;
        let marker = dest.join(INCOMPLETE_MARKER);
        rustix::fs::unlinkat(self.held.fd(), INCOMPLETE_MARKER, AtFlags::empty())
            .map_err(|e| Error::io("unlink", &marker, e.into()))
    }
}

impl Drop for NewCopy {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // Everything in DEST is this copy's: the marker makes it removable as a database. All
        // of it is reached through the handle.
        let marked = self.held.via().join(INCOMPLETE_MARKER).exists();
        let mut outcome = if marked {
            remove_contents(&self.held)
                .map(|_| ())
                .map_err(|e| self.held.shown(e))
        } else {
            Ok(())
        };
        if let (Ok(()), Some((parent, name, id))) = (&outcome, &self.created) {
            outcome = rmdir_if_same(parent.as_fd(), name, *id, self.held.path());
        }
        if let Err(e) = outcome {
            log::warn!(
                "removing the unfinished copy {}: {e}",
                self.held.path().display()
            );
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
/// [`Error::BadDestination`]: `dest` inside `db`, not empty, or on another filesystem;
/// [`Error::SharedDirectory`]; as [`Snapshot::open`]; I/O. Nothing is left in `dest` after an
/// error.
pub fn backup(db: &Path, dest: &Path) -> Result<CopyInfo> {
    prepare_backup(db, dest)?.finish()
}

/// [`backup`] up to its last step: the copy's generation is in `dest`, which the engine does
/// not open yet. [`NewCopy::finish`] completes it; dropping the copy removes it.
///
/// # Errors
/// As [`backup`].
pub fn prepare_backup(db: &Path, dest: &Path) -> Result<NewCopy> {
    // The source is looked at before anything is made (its errors, by path); then it is
    // opened once, and what is checked against DEST and copied is what that handle reaches.
    Snapshot::open(db)?;
    let source = rustix::fs::open(
        db,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Error::io("open", db, e.into()))?;
    let via = PathBuf::from(format!("/proc/self/fd/{}/.", source.as_raw_fd()));
    let mut copy = NewCopy::create_outside(dest, source.as_fd())?;
    copy.install_newest_of(&via)
        .map_err(|e| e.rebased(&via, db))?;
    Ok(copy)
}
