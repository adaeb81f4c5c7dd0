//! The arguments of `slasher-bench replay`.

use super::settings::SlasherSettings;
use std::path::PathBuf;

/// `slasher-bench replay`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// Fixture file to replay.
    #[arg(long)]
    pub fixture: PathBuf,
    /// Backends to run, comma-separated, in this order (default: every compiled backend).
    #[arg(long, value_delimiter = ',')]
    pub backends: Vec<String>,
    /// Where the databases go: one DIR for every backend, or `lmdb=PATH,mdbx=PATH,...`. Each
    /// backend gets a fresh subdirectory, deleted after its run unless `--keep-db`. Must not be
    /// on tmpfs or ramfs; butter needs btrfs.
    #[arg(long)]
    pub db_dir: String,
    /// Output directory for report.json, batches.csv, report.md and the charts.
    #[arg(long, required_unless_present = "child_result")]
    pub out: Option<PathBuf>,
    /// Replay only the first N batches (0 only with --fill-epochs and --keep-db: fill a
    /// database and keep it, replaying nothing).
    #[arg(long)]
    pub batches: Option<u64>,
    /// Ask for non-durable commits (redb `Durability::Eventual`, as Lighthouse configures redb).
    /// Only redb honours it; every row reports the durability its backend actually had.
    #[arg(long)]
    pub non_durable: bool,
    /// Keep each backend's database directory after its run.
    #[arg(long)]
    pub keep_db: bool,
    /// No progress bars.
    #[arg(long)]
    pub no_progress: bool,
    /// Every N batches (and after the last), record the state of the database and its
    /// filesystem: sizes, extents, live snapshots, metadata, RSS, device writes (the soak's
    /// samples; outside the timed part of a batch).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub sample_every: Option<u64>,
    /// butter_db's block cache in MiB (default: the engine's, an eighth of the memory
    /// available to the process, 8 MiB to 1 GiB, or the operator's `BUTTER_DB_CACHE_MIB`);
    /// passed to the child, which puts it in the backend's configuration.
    #[arg(long)]
    pub butter_cache_mib: Option<usize>,
    /// Before the measured batches, fill each row's new database with the state the slasher
    /// leaves after N epochs of a regular chain that ends where the fixture starts (every
    /// validator of the fixture attesting once an epoch; `slasher-bench fill`). Not timed as
    /// batches; the row reports how long it took. For the full history window, N = the history
    /// length (or more, so that the window has wrapped).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub fill_epochs: Option<u64>,
    /// The slasher's settings (Lighthouse's defaults).
    #[command(flatten)]
    pub settings: SlasherSettings,
    /// Internal: run one backend in this process (`--db-dir` is then the database directory)
    /// and write its result as JSON to this file (its error, if it fails, to FILE.error).
    #[arg(long, hide = true)]
    pub child_result: Option<PathBuf>,
    /// Internal: the parent's pid (the child dies with it).
    #[arg(long, hide = true)]
    pub parent_pid: Option<u32>,
    /// Internal: the database directory as a descriptor the parent opened and the child
    /// inherited; the child reaches the directory through it and never looks `--db-dir` up
    /// to find it.
    #[arg(long, hide = true)]
    pub db_dir_fd: Option<i32>,
    /// Internal: the child's result, batch stream and error as three inherited descriptors
    /// (`R,S,E`) of unnamed files the parent made in --out (`O_TMPFILE`): nothing of the
    /// child's is ever named in --out, so nothing is left there however the run ends. Without
    /// it the child makes named files beside `--child-result`.
    #[arg(long, hide = true, value_delimiter = ',')]
    pub child_fds: Option<Vec<i32>>,
}
