//! `slasher-bench migrate --from BACKEND:DIR --to BACKEND:DIR`: move a slasher database from one
//! storage backend to another, history included.
//!
//! Every backend stores the same keys and values under Lighthouse's schema, so a move is a copy
//! of the nine tables, entry for entry, through the adapters' generic [`Environment`]: one
//! read-write transaction on the source (never committed, so nothing is written there) with a
//! cursor per table, and on the destination transactions of at most `commit_entries` entries or
//! `commit_bytes` bytes of keys and values each. Memory stays bounded by one destination
//! transaction, whatever the database's size.
//!
//! **Refusals, before anything is created:** a source directory that does not exist or does not
//! hold the named backend's file; a source whose `metadata` table holds a schema version other
//! than [`CURRENT_SCHEMA_VERSION`] or a stored geometry that does not decode or that
//! Lighthouse's `Config::validate` would refuse (Lighthouse itself continues when the schema
//! version is absent, and so does the move: the destination then lacks it too); a destination
//! that exists and is not an empty directory, is a mount point, or lies inside the source (or
//! the source inside it); a butter destination that is not on btrfs.
//!
//! **All or nothing.** The destination is built under a new name in its parent directory,
//! `.NAME.migrating-PID-NANOS`, and renamed to NAME only after the last commit and a
//! verification pass that reads both databases again and compares every entry. Until then NAME
//! does not exist (or stays the empty directory it was), so a node can never be started on half
//! a database. On an error the partial copy is removed (it is ours: made by this process, with
//! the identity it had when made); a copy left by a killed process keeps its `.migrating` name
//! and can be removed with `butter remove` (butter) or `rm -r` (the others). A destination that
//! was an existing empty directory is replaced by the new one with the old one's permissions.

use std::ffi::OsString;
use std::fmt;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use indicatif::{ProgressBar, ProgressStyle};
use rustix::fs::{Mode, OFlags, RenameFlags};
use slasher_adapters::backend::{Cursor, Environment, RwTransaction};
use slasher_adapters::config::DEFAULT_MAX_DB_SIZE_MBS;
use slasher_adapters::slasher::keys::{
    decode_disk_config, decode_schema_version, METADATA_CONFIG_KEY, METADATA_SCHEMA_VERSION_KEY,
};
use slasher_adapters::slasher::{Config, DiskConfig, CURRENT_SCHEMA_VERSION};
use slasher_adapters::{
    with_backend, BackendConfig, BackendVisitor, DatabaseBackend, Durability, OpenDatabases,
    MAX_NUM_DBS, TABLE_NAMES,
};

/// Default: a destination transaction commits after this many entries…
pub const DEFAULT_COMMIT_ENTRIES: u64 = 1_000_000;
/// …or this many bytes of keys and values, whichever comes first.
pub const DEFAULT_COMMIT_MIB: u64 = 64;

/// A backend and the directory of its database: `lmdb:/var/lib/slasher`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The backend.
    pub backend: DatabaseBackend,
    /// The database directory.
    pub dir: PathBuf,
}

impl FromStr for Location {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let names = || {
            DatabaseBackend::ALL
                .iter()
                .map(|b| b.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let Some((backend, dir)) = s.split_once(':') else {
            return Err(format!(
                "expected BACKEND:DIR (BACKEND one of {}), e.g. lmdb:/var/lib/lighthouse/slasher_db",
                names()
            ));
        };
        let backend = backend
            .parse::<DatabaseBackend>()
            .map_err(|_| format!("unknown backend {backend:?}: expected one of {}", names()))?;
        if dir.is_empty() {
            return Err(format!("{s}: the directory is empty"));
        }
        Ok(Location {
            backend,
            dir: PathBuf::from(dir),
        })
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.backend, self.dir.display())
    }
}

/// Why a migration was refused or failed. Every refusal comes before the destination is
/// created; a failure after it removes the partial copy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrateError {
    /// The source directory does not exist.
    #[error("source {dir} does not exist")]
    SourceMissing {
        /// The directory.
        dir: PathBuf,
    },
    /// The source directory does not hold the named backend's database.
    #[error("source {dir} is not a {backend} database: it has no {file}{hint}")]
    SourceNotDatabase {
        /// The directory.
        dir: PathBuf,
        /// The backend named.
        backend: DatabaseBackend,
        /// The file that backend keeps there.
        file: &'static str,
        /// Which other backend's file is there, if any.
        hint: String,
    },
    /// The source's schema version is not the one Lighthouse reads.
    #[error(
        "source {dir} has slasher schema version {found}; Lighthouse (and this tool) only read \
         version {supported}, so it is not moved"
    )]
    SchemaVersion {
        /// The directory.
        dir: PathBuf,
        /// The version stored.
        found: u64,
        /// [`CURRENT_SCHEMA_VERSION`].
        supported: u64,
    },
    /// The source's `metadata` cannot be decoded, or its geometry would be refused.
    #[error("source {dir}: {reason}; Lighthouse would refuse to open it, so it is not moved")]
    BadMetadata {
        /// The directory.
        dir: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The destination exists and is not an empty directory.
    #[error(
        "destination {dir} is not empty (or not a directory); migrate only into a new name or \
         an empty directory, nothing was changed"
    )]
    DestinationNotEmpty {
        /// The directory.
        dir: PathBuf,
    },
    /// The destination is a mount point: the database is built beside it and renamed into
    /// place, which cannot cross filesystems.
    #[error(
        "destination {dir} is a mount point; migrate into a new directory inside it (e.g. \
         {dir}/slasher), nothing was changed"
    )]
    DestinationIsMountPoint {
        /// The directory.
        dir: PathBuf,
    },
    /// Source and destination are the same directory, or one lies inside the other.
    #[error("source {from} and destination {to} overlap; choose a destination outside the source")]
    Overlap {
        /// The source.
        from: PathBuf,
        /// The destination.
        to: PathBuf,
    },
    /// The destination backend needs another filesystem.
    #[error("destination {dir} is on {found}; the {backend} backend needs {needed}")]
    DestinationFilesystem {
        /// The directory.
        dir: PathBuf,
        /// The backend.
        backend: DatabaseBackend,
        /// The filesystem it needs.
        needed: &'static str,
        /// The filesystem found.
        found: String,
    },
    /// After the copy, the two databases differ (a bug or a failing disk): the copy is removed.
    #[error("verification failed: {table}: {detail}; the copy was removed")]
    Mismatch {
        /// The table.
        table: &'static str,
        /// Where.
        detail: String,
    },
    /// A storage engine failed.
    #[error("{what}")]
    Storage {
        /// What was being done.
        what: String,
        /// The engine's error.
        #[source]
        source: slasher_adapters::Error,
    },
    /// A file-system operation failed.
    #[error("{what} {}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// On what.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// How to migrate.
#[derive(Debug, Clone)]
pub struct MigrateOptions {
    /// A destination transaction commits after this many entries…
    pub commit_entries: u64,
    /// …or this many bytes of keys and values.
    pub commit_bytes: u64,
    /// LMDB's map size / MDBX's upper geometry for both databases, MiB.
    pub max_db_size_mbs: usize,
    /// Show a progress bar (counting the entries first, for its ETA).
    pub progress: bool,
}

impl Default for MigrateOptions {
    fn default() -> Self {
        Self {
            commit_entries: DEFAULT_COMMIT_ENTRIES,
            commit_bytes: DEFAULT_COMMIT_MIB << 20,
            max_db_size_mbs: DEFAULT_MAX_DB_SIZE_MBS,
            progress: false,
        }
    }
}

/// One table's share of a migration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableCount {
    /// Entries copied.
    pub entries: u64,
    /// Bytes of keys and values copied.
    pub bytes: u64,
}

/// What a migration did.
#[derive(Debug, Clone)]
pub struct MigrateReport {
    /// Per table, in [`TABLE_NAMES`] order.
    pub tables: [TableCount; MAX_NUM_DBS],
    /// Destination transactions committed.
    pub commits: u64,
    /// The schema version stored in the source (and now the destination), if any.
    pub schema_version: Option<u64>,
    /// The geometry stored in the source (and now the destination), if any.
    pub disk_config: Option<DiskConfig>,
    /// Seconds spent copying, and verifying.
    pub copy_s: f64,
    /// See `copy_s`.
    pub verify_s: f64,
}

/// The file each backend keeps directly in its directory, by which a source is recognised
/// before it is opened (opening an empty directory would create a database there).
pub fn database_file(backend: DatabaseBackend) -> &'static str {
    match backend {
        DatabaseBackend::Lmdb => "data.mdb",
        DatabaseBackend::Mdbx => "mdbx.dat",
        DatabaseBackend::Redb => "slasher.redb",
        DatabaseBackend::Butter => "butter.id",
    }
}

fn io_err<'p>(
    what: &'static str,
    path: &'p Path,
) -> impl FnOnce(std::io::Error) -> MigrateError + 'p {
    move |source| MigrateError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

fn storage(what: impl Into<String>) -> impl FnOnce(slasher_adapters::Error) -> MigrateError {
    let what = what.into();
    move |source| MigrateError::Storage { what, source }
}

/// The checks on the source directory that need no engine.
fn check_source(from: &Location) -> Result<PathBuf, MigrateError> {
    let meta = match std::fs::metadata(&from.dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(MigrateError::SourceMissing {
                dir: from.dir.clone(),
            })
        }
        Err(e) => return Err(io_err("reading", &from.dir)(e)),
    };
    let file = database_file(from.backend);
    if !meta.is_dir() || !from.dir.join(file).exists() {
        let others: Vec<String> = DatabaseBackend::ALL
            .into_iter()
            .filter(|b| *b != from.backend && from.dir.join(database_file(*b)).exists())
            .map(|b| format!("{} (a {b} database?)", database_file(b)))
            .collect();
        let hint = if others.is_empty() {
            String::new()
        } else {
            format!("; it holds {}", others.join(", "))
        };
        return Err(MigrateError::SourceNotDatabase {
            dir: from.dir.clone(),
            backend: from.backend,
            file,
            hint,
        });
    }
    std::fs::canonicalize(&from.dir).map_err(io_err("resolving", &from.dir))
}

/// Where the destination goes: its parent (open), its name, and whether it exists now (as an
/// empty directory).
struct DestinationPlan {
    parent: OwnedFd,
    parent_path: PathBuf,
    name: OsString,
    existing: Option<std::fs::Metadata>,
}

fn check_destination(
    to: &Location,
    source_canonical: &Path,
) -> Result<DestinationPlan, MigrateError> {
    let (parent_path, name) =
        slasher_adapters::config::parent_and_name(&to.dir).map_err(io_err("naming", &to.dir))?;
    let parent_canonical =
        std::fs::canonicalize(parent_path).map_err(io_err("opening the parent of", &to.dir))?;
    let target = parent_canonical.join(name);
    if target.starts_with(source_canonical) || source_canonical.starts_with(&target) {
        return Err(MigrateError::Overlap {
            from: source_canonical.to_path_buf(),
            to: target,
        });
    }
    let parent = rustix::fs::open(
        &parent_canonical,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_err("opening the parent of", &to.dir)(e.into()))?;
    let parent_meta =
        std::fs::metadata(&parent_canonical).map_err(io_err("reading", &parent_canonical))?;
    let existing = match std::fs::symlink_metadata(&target) {
        Ok(meta) => {
            let empty = meta.is_dir()
                && std::fs::read_dir(&target)
                    .map_err(io_err("reading", &target))?
                    .next()
                    .is_none();
            if !empty {
                return Err(MigrateError::DestinationNotEmpty {
                    dir: to.dir.clone(),
                });
            }
            if meta.dev() != parent_meta.dev() {
                return Err(MigrateError::DestinationIsMountPoint {
                    dir: to.dir.clone(),
                });
            }
            Some(meta)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_err("reading", &to.dir)(e)),
    };
    if let Some(needed) = to.backend.required_filesystem() {
        let info = crate::system::environment::probe_fs(&parent_canonical).map_err(|e| {
            MigrateError::Io {
                what: "statfs",
                path: parent_canonical.clone(),
                source: std::io::Error::other(e.to_string()),
            }
        })?;
        if info.fs_type != needed {
            return Err(MigrateError::DestinationFilesystem {
                dir: to.dir.clone(),
                backend: to.backend,
                needed,
                found: info.label(),
            });
        }
    }
    Ok(DestinationPlan {
        parent,
        parent_path: parent_canonical,
        name: name.to_os_string(),
        existing,
    })
}

/// The directory the copy is built in, removed on drop unless [`Staging::keep`] was called.
struct Staging<'a> {
    plan: &'a DestinationPlan,
    name: OsString,
    path: PathBuf,
    id: (u64, u64),
    keep: bool,
}

impl<'a> Staging<'a> {
    fn create(plan: &'a DestinationPlan) -> Result<Self, MigrateError> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mut name = OsString::from(".");
        name.push(&plan.name);
        name.push(format!(".migrating-{}-{nanos}", std::process::id()));
        let path = plan.parent_path.join(&name);
        rustix::fs::mkdirat(&plan.parent, name.as_os_str(), Mode::from_raw_mode(0o755))
            .map_err(|e| io_err("creating", &path)(e.into()))?;
        let st = rustix::fs::statat(
            &plan.parent,
            name.as_os_str(),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .map_err(|e| io_err("reading", &path)(e.into()))?;
        Ok(Self {
            plan,
            name,
            path,
            #[allow(clippy::useless_conversion)]
            id: (u64::from(st.st_dev), u64::from(st.st_ino)),
            keep: false,
        })
    }

    /// Rename the finished copy to the destination's name.
    fn finish(mut self, to: &Path) -> Result<(), MigrateError> {
        if let Some(old) = &self.plan.existing {
            // Keep the permissions the operator gave the empty directory.
            std::fs::set_permissions(&self.path, old.permissions())
                .map_err(io_err("setting the permissions of", &self.path))?;
        }
        let flags = if self.plan.existing.is_some() {
            // Replaces only an empty directory (ENOTEMPTY otherwise).
            RenameFlags::empty()
        } else {
            RenameFlags::NOREPLACE
        };
        match rustix::fs::renameat_with(
            &self.plan.parent,
            self.name.as_os_str(),
            &self.plan.parent,
            self.plan.name.as_os_str(),
            flags,
        ) {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST | rustix::io::Errno::NOTEMPTY) => {
                return Err(MigrateError::DestinationNotEmpty {
                    dir: to.to_path_buf(),
                })
            }
            Err(e) => return Err(io_err("renaming the copy to", to)(e.into())),
        }
        self.keep = true;
        rustix::fs::fsync(&self.plan.parent)
            .map_err(|e| io_err("syncing the parent of", to)(e.into()))?;
        Ok(())
    }
}

impl Drop for Staging<'_> {
    fn drop(&mut self) {
        if !self.keep {
            if let Err(e) = slasher_adapters::cleanup::destroy_database_dir_at(
                self.plan.parent.as_fd(),
                &self.name,
                Some(self.id),
            ) {
                eprintln!(
                    "could not remove the partial copy {}: {e}; remove it by hand",
                    self.path.display()
                );
            }
        }
    }
}

/// Move the database at `from` to a new database at `to`. See the module documentation.
///
/// # Errors
/// [`MigrateError`]; on any error the destination is as it was.
pub fn migrate(
    from: &Location,
    to: &Location,
    opts: &MigrateOptions,
) -> Result<MigrateReport, MigrateError> {
    from.backend.ensure_compiled().map_err(storage("source"))?;
    to.backend
        .ensure_compiled()
        .map_err(storage("destination"))?;
    let source = check_source(from)?;
    let plan = check_destination(to, &source)?;
    let visitor = SourceVisitor {
        from,
        to,
        opts,
        plan: &plan,
    };
    with_backend(from.backend, visitor).map_err(storage("source"))?
}

struct SourceVisitor<'a> {
    from: &'a Location,
    to: &'a Location,
    opts: &'a MigrateOptions,
    plan: &'a DestinationPlan,
}

impl BackendVisitor for SourceVisitor<'_> {
    type Output = Result<MigrateReport, MigrateError>;

    fn visit<S: Environment>(self) -> Self::Output {
        let config = BackendConfig {
            max_db_size_mbs: self.opts.max_db_size_mbs,
            durability: Durability::Immediate,
            ..BackendConfig::new(&self.from.dir)
        };
        let env = S::open(&config).map_err(storage(format!("opening {}", self.from)))?;
        let dbs = env
            .create_databases()
            .map_err(storage(format!("opening the tables of {}", self.from)))?;
        let mut txn = env
            .begin_rw_txn()
            .map_err(storage(format!("reading {}", self.from)))?;
        let (schema_version, disk_config) = check_metadata(&txn, &dbs, &self.from.dir)?;
        let source = Source::<S> {
            txn: &mut txn,
            dbs: &dbs,
            schema_version,
            disk_config,
        };
        with_backend(
            self.to.backend,
            DestVisitor {
                source,
                to: self.to,
                opts: self.opts,
                plan: self.plan,
            },
        )
        .map_err(storage("destination"))?
        // `txn` is dropped uncommitted: nothing is written to the source.
    }
}

/// The schema version and geometry the source stores, checked as Lighthouse checks them.
fn check_metadata<T: RwTransaction>(
    txn: &T,
    dbs: &OpenDatabases<T::Database>,
    dir: &Path,
) -> Result<(Option<u64>, Option<DiskConfig>), MigrateError> {
    let bad = |reason: String| MigrateError::BadMetadata {
        dir: dir.to_path_buf(),
        reason,
    };
    let read = storage(format!("reading the metadata of {}", dir.display()));
    let version = match txn
        .get(dbs.metadata_db, &METADATA_SCHEMA_VERSION_KEY)
        .map_err(read)?
    {
        Some(bytes) => {
            let v = decode_schema_version(&bytes).map_err(|e| bad(e.to_string()))?;
            if v != CURRENT_SCHEMA_VERSION {
                return Err(MigrateError::SchemaVersion {
                    dir: dir.to_path_buf(),
                    found: v,
                    supported: CURRENT_SCHEMA_VERSION,
                });
            }
            Some(v)
        }
        None => None,
    };
    let read = storage(format!("reading the metadata of {}", dir.display()));
    let disk_config = match txn
        .get(dbs.metadata_db, &METADATA_CONFIG_KEY)
        .map_err(read)?
    {
        Some(bytes) => {
            let c = decode_disk_config(&bytes).map_err(|e| bad(e.to_string()))?;
            let mut config = Config::new(dir);
            config.chunk_size = c.chunk_size;
            config.validator_chunk_size = c.validator_chunk_size;
            config.history_length = c.history_length;
            config
                .validate()
                .map_err(|e| bad(format!("its stored geometry {c:?}: {e}")))?;
            Some(c)
        }
        None => None,
    };
    Ok((version, disk_config))
}

struct Source<'t, 'e, S: Environment> {
    txn: &'t mut S::RwTransaction<'e>,
    dbs: &'t OpenDatabases<S::Database>,
    schema_version: Option<u64>,
    disk_config: Option<DiskConfig>,
}

struct DestVisitor<'t, 'e, 'a, S: Environment> {
    source: Source<'t, 'e, S>,
    to: &'a Location,
    opts: &'a MigrateOptions,
    plan: &'a DestinationPlan,
}

impl<S: Environment> BackendVisitor for DestVisitor<'_, '_, '_, S> {
    type Output = Result<MigrateReport, MigrateError>;

    fn visit<D: Environment>(self) -> Self::Output {
        let Source {
            txn,
            dbs,
            schema_version,
            disk_config,
        } = self.source;
        let bar = progress(self.opts.progress);
        let total = if self.opts.progress {
            Some(count_entries::<S>(txn, dbs, &bar)?)
        } else {
            None
        };
        let staging = Staging::create(self.plan)?;
        let config = BackendConfig {
            max_db_size_mbs: self.opts.max_db_size_mbs,
            durability: Durability::Immediate,
            ..BackendConfig::new(&staging.path)
        };
        let what = format!("{}:{}", self.to.backend, staging.path.display());
        let env = D::open(&config).map_err(storage(format!("creating {what}")))?;
        let ddbs = env
            .create_databases()
            .map_err(storage(format!("creating the tables of {what}")))?;
        let t = Instant::now();
        if let Some(total) = total {
            start_copy_bar(&bar, total);
        }
        let (tables, commits) = copy::<S, D>(txn, dbs, &env, &ddbs, self.opts, &bar, &what)?;
        let copy_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        bar.set_message("verifying");
        verify::<S, D>(txn, dbs, &env, &ddbs, &tables, &what)?;
        let verify_s = t.elapsed().as_secs_f64();
        bar.finish_and_clear();
        drop(env);
        staging.finish(&self.to.dir)?;
        Ok(MigrateReport {
            tables,
            commits,
            schema_version,
            disk_config,
            copy_s,
            verify_s,
        })
    }
}

fn progress(show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template("{prefix:>16} {spinner} {pos} entries {msg}") {
        bar.set_style(style);
    }
    bar.set_prefix("counting");
    bar
}

fn start_copy_bar(bar: &ProgressBar, total: u64) {
    bar.set_length(total);
    bar.set_position(0);
    bar.reset_eta();
    bar.set_prefix("migrating");
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:>16} [{bar:30}] {pos}/{len} entries {elapsed_precise} (eta {eta}) {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
}

/// Entries per table in the source, for the progress bar's length.
fn count_entries<S: Environment>(
    txn: &mut S::RwTransaction<'_>,
    dbs: &OpenDatabases<S::Database>,
    bar: &ProgressBar,
) -> Result<u64, MigrateError> {
    let mut total = 0u64;
    for (name, db) in TABLE_NAMES.iter().zip(dbs.all()) {
        bar.set_message(*name);
        let err = || storage(format!("counting the entries of {name} in the source"));
        let mut cursor = txn.cursor(db).map_err(err())?;
        let mut key = cursor.first_key().map_err(err())?;
        while key.is_some() {
            total += 1;
            if total % 65_536 == 0 {
                bar.set_position(total);
            }
            key = cursor.next_key().map_err(err())?;
        }
    }
    Ok(total)
}

/// The copy itself: every table in key order, committing the destination in bounded
/// transactions.
fn copy<S: Environment, D: Environment>(
    stxn: &mut S::RwTransaction<'_>,
    sdbs: &OpenDatabases<S::Database>,
    env: &D,
    ddbs: &OpenDatabases<D::Database>,
    opts: &MigrateOptions,
    bar: &ProgressBar,
    what: &str,
) -> Result<([TableCount; MAX_NUM_DBS], u64), MigrateError> {
    let mut tables = [TableCount::default(); MAX_NUM_DBS];
    let mut commits = 0u64;
    let mut done = 0u64;
    let write_err = || storage(format!("writing {what}"));
    let mut dtxn = env.begin_rw_txn().map_err(write_err())?;
    let (mut pending_entries, mut pending_bytes) = (0u64, 0u64);
    for (i, (sdb, ddb)) in sdbs.all().into_iter().zip(ddbs.all()).enumerate() {
        let name = TABLE_NAMES.get(i).copied().unwrap_or_default();
        bar.set_message(name);
        let read_err = || storage(format!("reading {name} from the source"));
        let mut cursor = stxn.cursor(sdb).map_err(read_err())?;
        let mut key = cursor.first_key().map_err(read_err())?;
        let count = tables.get_mut(i).ok_or_else(|| {
            storage("tables")(slasher_adapters::Error::Other("table index".into()))
        })?;
        while key.is_some() {
            let (k, v) = cursor.get_current().map_err(read_err())?.ok_or_else(|| {
                read_err()(slasher_adapters::Error::Other(
                    "the cursor is positioned but has no current entry".into(),
                ))
            })?;
            dtxn.put(ddb, &k, &v).map_err(write_err())?;
            let bytes = (k.len() + v.len()) as u64;
            count.entries += 1;
            count.bytes += bytes;
            pending_entries += 1;
            pending_bytes += bytes;
            done += 1;
            if pending_entries >= opts.commit_entries || pending_bytes >= opts.commit_bytes {
                dtxn.commit().map_err(write_err())?;
                commits += 1;
                dtxn = env.begin_rw_txn().map_err(write_err())?;
                (pending_entries, pending_bytes) = (0, 0);
            }
            if done % 4096 == 0 {
                bar.set_position(done);
            }
            key = cursor.next_key().map_err(read_err())?;
        }
    }
    dtxn.commit().map_err(write_err())?;
    commits += 1;
    bar.set_position(done);
    Ok((tables, commits))
}

/// Both databases read again, side by side: every entry must be equal.
fn verify<S: Environment, D: Environment>(
    stxn: &mut S::RwTransaction<'_>,
    sdbs: &OpenDatabases<S::Database>,
    env: &D,
    ddbs: &OpenDatabases<D::Database>,
    copied: &[TableCount; MAX_NUM_DBS],
    what: &str,
) -> Result<(), MigrateError> {
    let mut dtxn = env
        .begin_rw_txn()
        .map_err(storage(format!("reading {what}")))?;
    for (i, (sdb, ddb)) in sdbs.all().into_iter().zip(ddbs.all()).enumerate() {
        let table = TABLE_NAMES.get(i).copied().unwrap_or_default();
        let err = || storage(format!("verifying {table}"));
        let mut scur = stxn.cursor(sdb).map_err(err())?;
        let mut dcur = dtxn.cursor(ddb).map_err(err())?;
        let mut skey = scur.first_key().map_err(err())?;
        let mut dkey = dcur.first_key().map_err(err())?;
        let mut n = 0u64;
        loop {
            let (a, b) = match (&skey, &dkey) {
                (None, None) => break,
                (Some(_), Some(_)) => (
                    scur.get_current().map_err(err())?,
                    dcur.get_current().map_err(err())?,
                ),
                (s, d) => {
                    return Err(MigrateError::Mismatch {
                        table,
                        detail: format!(
                            "entry {n}: source key {:?}, destination key {:?}",
                            s.as_ref().map(hex::encode),
                            d.as_ref().map(hex::encode)
                        ),
                    })
                }
            };
            if a != b {
                return Err(MigrateError::Mismatch {
                    table,
                    detail: format!(
                        "entry {n}: source key {:?}, destination key {:?} (or their values \
                         differ)",
                        a.map(|(k, _)| hex::encode(k)),
                        b.map(|(k, _)| hex::encode(k))
                    ),
                });
            }
            n += 1;
            skey = scur.next_key().map_err(err())?;
            dkey = dcur.next_key().map_err(err())?;
        }
        let expected = copied.get(i).map_or(0, |c| c.entries);
        if n != expected {
            return Err(MigrateError::Mismatch {
                table,
                detail: format!("{n} entries read back, {expected} copied"),
            });
        }
    }
    // Dropped uncommitted: verification writes nothing.
    Ok(())
}

/// `slasher-bench migrate`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Stop the node first: the source is read in one transaction, which on \
    LMDB and MDBX also holds the writer lock for the whole copy. The destination is built \
    under a temporary name beside it (.NAME.migrating-PID-NANOS) and renamed to NAME only once \
    every entry has been copied and read back equal: all or nothing. Exit status 0 on success, \
    1 on any refusal or error (the destination is then as it was)."
)]
pub struct MigrateArgs {
    /// The database to read: BACKEND:DIR, e.g. lmdb:/var/lib/lighthouse/beacon/slasher_db.
    #[arg(long)]
    pub from: Location,
    /// The database to create: BACKEND:DIR. DIR must not exist or be an empty directory.
    #[arg(long)]
    pub to: Location,
    /// Commit the destination after this many entries…
    #[arg(long, default_value_t = DEFAULT_COMMIT_ENTRIES)]
    pub commit_entries: u64,
    /// …or after this many MiB of keys and values, whichever comes first.
    #[arg(long, default_value_t = DEFAULT_COMMIT_MIB)]
    pub commit_mib: u64,
    /// LMDB's map size / MDBX's upper geometry, MiB (Lighthouse's --slasher-max-db-size).
    #[arg(long, default_value_t = DEFAULT_MAX_DB_SIZE_MBS)]
    pub max_db_size_mbs: usize,
    /// No progress bar (no counting pass either).
    #[arg(long)]
    pub no_progress: bool,
}

/// Run `slasher-bench migrate`.
///
/// # Errors
/// [`MigrateError`].
pub fn run(args: MigrateArgs) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let opts = MigrateOptions {
        commit_entries: args.commit_entries.max(1),
        commit_bytes: args.commit_mib.max(1) << 20,
        max_db_size_mbs: args.max_db_size_mbs,
        progress: !args.no_progress && std::io::stderr().is_terminal(),
    };
    let report = migrate(&args.from, &args.to, &opts)?;
    println!("migrated {} to {}", args.from, args.to);
    let mut entries = 0;
    let mut bytes = 0;
    for (name, c) in TABLE_NAMES.iter().zip(report.tables) {
        println!(
            "  {name:<24} {:>12} entries {:>15} bytes",
            c.entries, c.bytes
        );
        entries += c.entries;
        bytes += c.bytes;
    }
    println!(
        "  {:<24} {entries:>12} entries {bytes:>15} bytes in {} commits",
        "total", report.commits
    );
    println!(
        "  schema version {}, geometry {}",
        report
            .schema_version
            .map_or_else(|| "not stored".to_string(), |v| v.to_string()),
        report.disk_config.map_or_else(
            || "not stored".to_string(),
            |c| format!(
                "chunk_size {}, validator_chunk_size {}, history_length {}",
                c.chunk_size, c.validator_chunk_size, c.history_length
            )
        )
    );
    println!(
        "  copied in {:.1} s, verified in {:.1} s",
        report.copy_s, report.verify_s
    );
    Ok(())
}
