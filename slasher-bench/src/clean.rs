//! The databases `replay` makes, how they are recognised and removed, and
//! `slasher-bench clean DIR`.
//!
//! `replay` gives each backend a fresh directory `slasher-bench-<backend>-<pid>-<unix time>`
//! inside its `--db-dir` and writes a marker file [`MARKER`] into it before the backend opens
//! it. `clean` removes a directory only if both hold: its name has that form (with a known
//! backend name and decimal pid and time) and it holds the marker, a regular file whose content
//! names slasher-bench. Anything else is left alone; a DIR that is not such a database and
//! holds none is refused with an error.
//!
//! butter_db keeps its generations in read-only btrfs snapshots, which `rm -rf` cannot delete
//! (`EROFS`, or `EPERM` for a user without `user_subvol_rm_allowed`). Removal deletes every
//! subvolume in the database with butter_db's own deletion first
//! (`BtrfsFs::delete_subvolume_reporting`: as root the subvolume ioctl; as the unprivileged owner
//! it clears the read-only flag, empties the subvolume and removes it), then the rest.

use anyhow::{bail, Context};
use slasher_adapters::DatabaseBackend;
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

/// Create the database directory `db` (which must not exist) and write its marker.
///
/// # Errors
/// I/O errors; `db` exists already.
pub fn create_db_dir(db: &Path, backend: DatabaseBackend) -> std::io::Result<()> {
    std::fs::create_dir(db)?;
    let text = format!(
        "{MARKER_MAGIC}: made by {} for backend {backend}; remove with `slasher-bench clean {}`\n",
        crate::TOOL,
        db.parent().unwrap_or(db).display()
    );
    std::fs::write(db.join(MARKER), text)
}

/// Whether `path` is a database directory `replay` made: a directory (not a symlink) named as
/// [`db_name`] holding the [`MARKER`] file.
pub fn is_benchmark_db(path: &Path) -> bool {
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(is_db_name);
    let is_dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
    let marker = path.join(MARKER);
    let marked = std::fs::symlink_metadata(&marker).is_ok_and(|m| m.is_file())
        && std::fs::read_to_string(&marker).is_ok_and(|t| t.starts_with(MARKER_MAGIC));
    named && is_dir && marked
}

/// The databases `replay` made directly inside `dir`, sorted.
pub fn leftovers_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| is_benchmark_db(p))
        .collect();
    found.sort();
    found
}

/// Delete a database directory, read-only btrfs snapshots included (see the module docs).
///
/// # Errors
/// What removing failed with, with a pointer to `slasher-bench clean`.
pub fn remove_db_dir(dir: &Path) -> anyhow::Result<()> {
    slasher_adapters::config::destroy_database_dir(dir).with_context(|| {
        format!(
            "removing {} (it may hold read-only btrfs snapshots, which rm -rf cannot delete); \
                 remove it with `slasher-bench clean {}` as its owner or as root",
            dir.display(),
            dir.parent().unwrap_or(dir).display()
        )
    })
}

/// `slasher-bench clean`.
#[derive(Debug, clap::Args)]
pub struct CleanArgs {
    /// A database directory `replay` left behind (`slasher-bench-<backend>-<pid>-<time>`
    /// holding a `.slasher-bench-db` marker), or a `--db-dir` holding such directories. Only
    /// those are removed, read-only btrfs snapshots included (also as their unprivileged
    /// owner); anything else is left alone, and a DIR that is not one and holds none is refused.
    pub dir: PathBuf,
}

/// Run `slasher-bench clean`.
///
/// # Errors
/// `dir` is missing, is not a benchmark database and holds none, or a removal failed.
pub fn run(args: CleanArgs) -> anyhow::Result<()> {
    let dir = &args.dir;
    let meta =
        std::fs::symlink_metadata(dir).with_context(|| format!("clean {}", dir.display()))?;
    let targets = if is_benchmark_db(dir) {
        vec![dir.clone()]
    } else if meta.is_dir() {
        leftovers_in(dir)
    } else {
        Vec::new()
    };
    if targets.is_empty() {
        bail!(
            "{} is not a slasher-bench database and holds none; clean removes only directories \
             named {DB_PREFIX}<backend>-<pid>-<time> that hold a {MARKER} marker (what replay \
             makes). Nothing was removed",
            dir.display()
        );
    }
    let mut failed = Vec::new();
    for target in &targets {
        match remove_db_dir(target) {
            Ok(()) => println!("removed {}", target.display()),
            Err(e) => {
                eprintln!("could not remove {}: {e:#}", target.display());
                failed.push(target.display().to_string());
            }
        }
    }
    if !failed.is_empty() {
        bail!(
            "{} of {} databases could not be removed: {}",
            failed.len(),
            targets.len(),
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
