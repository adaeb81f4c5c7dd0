//! The backends and directories of a run, checked before any backend starts.

use crate::system::clean::leftovers_in_handle;
use crate::system::environment::{probe_fs_fd, refuse_memory_fs, FsInfo};
use anyhow::{anyhow, bail, Context};
use slasher_adapters::DatabaseBackend;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Parse `--backends` (not given: every compiled backend; given but empty: an error).
pub(super) fn parse_backends(names: &[String]) -> anyhow::Result<Vec<DatabaseBackend>> {
    if names.is_empty() {
        let all = DatabaseBackend::compiled();
        if all.is_empty() {
            bail!(
                "this build has no backend compiled in (cargo features lmdb, mdbx, redb, butter)"
            );
        }
        return Ok(all);
    }
    let mut out = Vec::new();
    for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        let backend: DatabaseBackend = name.parse()?;
        backend.ensure_compiled()?;
        if out.contains(&backend) {
            bail!("--backends names {name} twice");
        }
        out.push(backend);
    }
    if out.is_empty() {
        bail!(
            "--backends names no backend; give a comma-separated list of {} (or leave --backends \
             out to run every compiled backend)",
            DatabaseBackend::compiled()
                .iter()
                .map(|b| b.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(out)
}

/// Parse `--db-dir`: `DIR`, or `name=PATH,...` with an entry for every backend.
pub(super) fn parse_db_dirs(
    spec: &str,
    backends: &[DatabaseBackend],
) -> anyhow::Result<BTreeMap<DatabaseBackend, PathBuf>> {
    if !spec.contains('=') {
        return Ok(backends.iter().map(|b| (*b, PathBuf::from(spec))).collect());
    }
    let mut given = BTreeMap::new();
    for entry in spec.split(',').filter(|e| !e.trim().is_empty()) {
        let (name, path) = entry
            .split_once('=')
            .ok_or_else(|| anyhow!("--db-dir entry {entry:?} is not NAME=PATH"))?;
        let backend: DatabaseBackend = name.trim().parse()?;
        given.insert(backend, PathBuf::from(path.trim()));
    }
    backends
        .iter()
        .map(|b| {
            given
                .get(b)
                .map(|p| (*b, p.clone()))
                .ok_or_else(|| anyhow!("--db-dir has no entry for backend {b} (give {b}=PATH)"))
        })
        .collect()
}

/// Refuse memory filesystems and a filesystem other than the backend needs, for the directory
/// `dir` holds open (`shown`: its path, for messages), without looking a name up; returns the
/// filesystem.
pub(super) fn check_dir_fd(
    backend: DatabaseBackend,
    dir: std::os::fd::BorrowedFd<'_>,
    shown: &Path,
) -> anyhow::Result<FsInfo> {
    let fs = probe_fs_fd(dir, shown)?;
    check_fs(backend, shown, fs)
}

fn check_fs(backend: DatabaseBackend, dir: &Path, fs: FsInfo) -> anyhow::Result<FsInfo> {
    refuse_memory_fs(dir, &fs)?;
    if let Some(needed) = backend.required_filesystem() {
        if fs.fs_type != needed {
            bail!(
                "{} is on {}; the {backend} backend needs {needed} (give it a {needed} directory \
                 with --db-dir {backend}=PATH,...)",
                dir.display(),
                fs.label()
            );
        }
    }
    Ok(fs)
}

/// Whether [`ensure_writable_dir`] refuses a directory that users other than the caller and
/// root can write (`--db-dir`: the run's database directories are made there, and whoever can
/// rename or replace entries there could swap them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shared {
    Allowed,
    Refused,
}

/// How many unpredictable names the write check tries before giving up on `EEXIST`.
const PROBE_TRIES: usize = 8;

/// Create `dir` if missing and check that files can be made in it (by making and removing one,
/// under an unpredictable name, `O_EXCL | O_NOFOLLOW` relative to a handle on `dir`, so that a
/// name another user planted is neither followed nor in the way). With [`Shared::Refused`], a
/// directory someone other than the caller and root can write (unless it is sticky) is refused
/// before anything is made in it.
pub(super) fn ensure_writable_dir(
    what: &str,
    dir: &Path,
    shared: Shared,
    before_create: &mut dyn FnMut(std::os::fd::BorrowedFd<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{AtFlags, Mode, OFlags};
    // Created and opened in one walk of the path (each name looked up once), and used only
    // through this handle from here on.
    let fd = crate::system::outdir::open_dir_creating(dir, before_create)
        .with_context(|| format!("{what} {} cannot be created or opened", dir.display()))?;
    if shared == Shared::Refused {
        if let Some(reason) = butter_db::admin::shared_reason(std::os::fd::AsFd::as_fd(&fd))
            .with_context(|| format!("{what} {}", dir.display()))?
        {
            bail!(
                "{what} {} is refused: {reason}; another user could rename or replace the run's \
                 database directory there. Nothing was created in it (use a directory only you \
                 or root can write: chmod go-w, or chmod +t on one of your own)",
                dir.display()
            );
        }
    }
    let mut last = None;
    for _ in 0..PROBE_TRIES {
        let name = crate::system::outdir::unpredictable_name(".slasher-bench-write-check-", "");
        match rustix::fs::openat(
            &fd,
            name.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(probe) => {
                drop(probe);
                rustix::fs::unlinkat(&fd, name.as_str(), AtFlags::empty())
                    .map_err(std::io::Error::from)
                    .with_context(|| format!("{what} {}: removing {name}", dir.display()))?;
                return Ok(fd);
            }
            Err(rustix::io::Errno::EXIST) => last = Some(rustix::io::Errno::EXIST),
            Err(e) => {
                return Err(std::io::Error::from(e))
                    .with_context(|| format!("{what} {} is not writable", dir.display()))
            }
        }
    }
    Err(std::io::Error::from(
        last.unwrap_or(rustix::io::Errno::EXIST),
    ))
    .with_context(|| format!("{what} {}: every write-check name was taken", dir.display()))
}

/// Every directory the run will use, checked before the fixture is read or anything runs:
/// `--out` and each backend's database directory exist (or are created) and are writable, and
/// each database directory is on a filesystem its backend accepts. Warns about databases that
/// earlier runs left behind.
pub(super) fn prepare_dirs(
    out: &Path,
    backends: &[DatabaseBackend],
    dirs: &BTreeMap<DatabaseBackend, PathBuf>,
) -> anyhow::Result<(crate::system::outdir::OutDir, Vec<Plan>)> {
    // --out gets its own owner and mode check (OutDir::from_handle).
    let out_fd = ensure_writable_dir("--out", out, Shared::Allowed, &mut |_| Ok(()))?;
    let out_dir = crate::system::outdir::OutDir::from_handle(out, out_fd)?;
    let mut plans = Vec::new();
    for backend in backends {
        let root = dirs.get(backend).cloned().unwrap_or_default();
        // The filesystem first: nothing is created on tmpfs, or for butter off btrfs (checked
        // on the deepest existing directory before anything is made below it).
        let handle = ensure_writable_dir(
            &format!("--db-dir for {backend}"),
            &root,
            Shared::Refused,
            &mut |existing| check_dir_fd(*backend, existing, &root).map(|_| ()),
        )?;
        let fs = check_dir_fd(*backend, std::os::fd::AsFd::as_fd(&handle), &root)?;
        plans.push(Plan {
            backend: *backend,
            root,
            handle: std::sync::Arc::new(handle),
            fs,
        });
    }
    let mut warned = BTreeSet::new();
    for plan in &plans {
        let left = leftovers_in_handle(&plan.handle, &plan.root);
        if !left.is_empty() && warned.insert(plan.root.clone()) {
            eprintln!(
                "warning: {} holds {} database(s) left by earlier runs (e.g. {}); remove them with \
                 `slasher-bench clean {}`",
                plan.root.display(),
                left.len(),
                left.first().map_or(String::new(), |p| p.display().to_string()),
                plan.root.display()
            );
        }
    }
    Ok((out_dir, plans))
}

/// One backend to run and where.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) backend: DatabaseBackend,
    pub(super) root: PathBuf,
    /// `root`, held open since it was checked: the run's database directory is made in it
    /// through this handle, never by looking `root` up again.
    pub(super) handle: std::sync::Arc<std::os::fd::OwnedFd>,
    pub(super) fs: FsInfo,
}
