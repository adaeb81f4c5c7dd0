//! `slasher-bench replay`: replay a fixture through the slasher on every backend and write a
//! report (what it reproduces and why: `docs/background.md` §1.4, §1.5 and §2.6).
//!
//! For each backend in turn the parent process re-executes itself as a child
//! (`slasher-bench replay --child-result FILE ...`) so that peak RSS, `/proc/self/io` counters and
//! allocator state belong to one backend alone. The child opens a fresh database with the
//! backend's concrete environment type (monomorphised through [`BackendVisitor`]), then streams
//! the fixture one batch at a time:
//!
//! 1. queue the batch's headers and attestations (hashing happens here, outside the timing, as
//!    in Lighthouse where it happens on the gossip threads);
//! 2. `process_queued(current_epoch)`: one write transaction;
//! 3. `prune_database(current_epoch)`: a second write transaction;
//! 4. record the wall time of 2–3, the commit times from `BatchStats`/`PruneStats`, the
//!    database size (sum of `filenames()` sizes), bytes written and the slashings found.
//!
//! Before the first batch the parent checks every directory it will use: `--out` and each
//! backend's `--db-dir` must exist or be creatable and be writable, none may be on tmpfs or ramfs,
//! and a backend that needs a filesystem ([`DatabaseBackend::required_filesystem`]) must be on
//! it. It then checks the
//! fixture once (which also puts it in the page cache for every backend alike), merges the
//! children's results, runs the correctness gate (every backend must find the same slashings in
//! every batch) and writes `report.json`, `batches.csv`, `report.md` and the charts.
//!
//! Interruptions ([`crate::interrupt`]): on SIGINT or SIGTERM the parent forwards the signal to
//! its child, the child finishes its current batch, removes its database (read-only snapshots
//! included) and hands back the batches done; the parent writes the report of those batches,
//! marked interrupted, and exits non-zero ([`Interrupted`]). A child dies with its parent
//! (parent-death signal). Leftovers of a run killed outright are removed with
//! `slasher-bench clean` ([`crate::clean`]).

use crate::clean::{create_db_dir, db_name, leftovers_in, remove_db_dir};
use crate::environment::{probe_fs, refuse_memory_fs, Build, FsInfo, Machine};
use crate::fixture::{ExpectedSlashing, FixtureReader, Manifest};
use crate::interrupt::Interrupt;
use crate::measure::{
    btrfs_metadata_used_bytes, current_rss_bytes, device_bytes_written, extent_count, files_size,
    fs_used_bytes, peak_rss_bytes, ProcIo, Summary,
};
use crate::report::{
    self, BackendResult, BatchRecord, ExpectedCheck, Failure, FixtureInfo, Report, Run, Sample,
    SlasherConfigInfo, SlashingRecord, SlashingsFound, VoteRecord,
};
use anyhow::{anyhow, bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};
use slasher_adapters::slasher::TileCodecKind;
use slasher_adapters::slasher::{
    AttesterSlashing, Config, IndexedAttestation, ProposerSlashing, Slasher,
};
use slasher_adapters::timed::Timed;
use slasher_adapters::{with_backend, BackendVisitor, DatabaseBackend, Durability, Environment};
use ssz::Encode;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
    /// Replay only the first N batches.
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
}

/// Slot duration on mainnet, seconds: one fixture batch per slot.
const SECONDS_PER_SLOT: u64 = 12;

/// The settings a Lighthouse operator gives the slasher (`--slasher-*` flags, same names
/// without the prefix, same units and defaults). The geometry (C, K, H) defaults to the
/// fixture's config hint, which is Lighthouse's default unless the fixture says otherwise.
#[derive(Debug, Clone, clap::Args)]
pub struct SlasherSettings {
    /// Epochs of history kept (Lighthouse `--slasher-history-length`, default 4096; default
    /// here: the fixture's hint).
    #[arg(long)]
    pub history_length: Option<usize>,
    /// Epochs per tile of the target arrays (`--slasher-chunk-size`, 16).
    #[arg(long)]
    pub chunk_size: Option<usize>,
    /// Validators per tile (`--slasher-validator-chunk-size`, 256).
    #[arg(long)]
    pub validator_chunk_size: Option<usize>,
    /// LMDB map size / MDBX size limit in GiB (`--slasher-max-db-size`, 512).
    #[arg(long, default_value_t = 512)]
    pub max_db_size: usize,
    /// Entries of the attestation-root LRU (`--slasher-att-cache-size`, 100,000).
    #[arg(long, default_value_t = 100_000)]
    pub att_cache_size: usize,
    /// Seconds between two batches (`--slasher-update-period`, 12): a multiple of the 12-second
    /// slot; every batch processes the slots since the previous one.
    #[arg(long, default_value_t = SECONDS_PER_SLOT)]
    pub update_period: u64,
    /// How tiles are compressed: `lighthouse` (zlib level 6, as Lighthouse) or `fast`
    /// (libdeflate level 1).
    #[arg(long, default_value = "lighthouse", value_parser = parse_tile_codec)]
    pub tile_codec: TileCodecKind,
}

impl Default for SlasherSettings {
    fn default() -> Self {
        Self {
            history_length: None,
            chunk_size: None,
            validator_chunk_size: None,
            max_db_size: 512,
            att_cache_size: 100_000,
            update_period: SECONDS_PER_SLOT,
            tile_codec: TileCodecKind::Lighthouse,
        }
    }
}

fn parse_tile_codec(name: &str) -> Result<TileCodecKind, String> {
    TileCodecKind::from_name(name)
        .ok_or_else(|| format!("unknown tile codec {name:?}; expected `lighthouse` or `fast`"))
}

impl SlasherSettings {
    /// Fixture batches (slots) per slasher batch.
    fn slots_per_batch(&self) -> u64 {
        self.update_period / SECONDS_PER_SLOT
    }

    /// The same settings as command-line arguments, for the child process.
    fn to_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (flag, value) in [
            ("--history-length", self.history_length),
            ("--chunk-size", self.chunk_size),
            ("--validator-chunk-size", self.validator_chunk_size),
        ] {
            if let Some(v) = value {
                out.extend([flag.to_string(), v.to_string()]);
            }
        }
        out.extend([
            "--max-db-size".into(),
            self.max_db_size.to_string(),
            "--att-cache-size".into(),
            self.att_cache_size.to_string(),
            "--update-period".into(),
            self.update_period.to_string(),
            "--tile-codec".into(),
            self.tile_codec.name().into(),
        ]);
        out
    }
}

/// `replay` was stopped by SIGINT or SIGTERM (after writing the report of the batches done).
#[derive(Debug, thiserror::Error)]
#[error("interrupted by {signal}: {detail}")]
pub struct Interrupted {
    /// `SIGINT` or `SIGTERM`.
    pub signal: &'static str,
    /// What had been done and where the report is.
    pub detail: String,
}

/// Run `slasher-bench replay`, re-executing the running binary for each backend.
///
/// # Errors
/// Bad arguments, a database directory on tmpfs/ramfs (or butter off btrfs), an unreadable
/// fixture, a backend that failed, or backends that disagree on the slashings found (the report
/// is written first in the last two cases).
pub fn run(args: ReplayArgs) -> anyhow::Result<()> {
    if let Some(result) = &args.child_result {
        let outcome = run_child(&args, result);
        if let Err(e) = &outcome {
            // The parent puts this text into the report's failure row.
            let _ = std::fs::write(error_file(result), crate::errors::chain_text(e));
        }
        return outcome;
    }
    let exe = std::env::current_exe().context("locating the slasher-bench executable")?;
    run_with_exe(&args, &exe)
}

/// One backend to run and where.
#[derive(Debug, Clone)]
struct Plan {
    backend: DatabaseBackend,
    root: PathBuf,
    fs: FsInfo,
}

/// Where a child writes its error text.
fn error_file(result_file: &Path) -> PathBuf {
    let mut name = result_file.as_os_str().to_owned();
    name.push(".error");
    PathBuf::from(name)
}

/// Parse `--backends` (not given: every compiled backend; given but empty: an error).
fn parse_backends(names: &[String]) -> anyhow::Result<Vec<DatabaseBackend>> {
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
fn parse_db_dirs(
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

/// Refuse memory filesystems and a directory on another filesystem than the backend needs;
/// returns the filesystem.
fn check_dir(backend: DatabaseBackend, dir: &Path) -> anyhow::Result<FsInfo> {
    let fs = probe_fs(dir)?;
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

/// Create `dir` if missing and check that files can be made in it (by making and removing one).
fn ensure_writable_dir(what: &str, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("{what} {} cannot be created", dir.display()))?;
    if !dir.is_dir() {
        bail!("{what} {} is not a directory", dir.display());
    }
    let probe = dir.join(format!(".slasher-bench-write-check-{}", std::process::id()));
    std::fs::File::create(&probe)
        .with_context(|| format!("{what} {} is not writable", dir.display()))?;
    std::fs::remove_file(&probe)
        .with_context(|| format!("{what} {}: removing {}", dir.display(), probe.display()))?;
    Ok(())
}

/// Every directory the run will use, checked before the fixture is read or anything runs:
/// `--out` and each backend's database directory exist (or are created) and are writable, and
/// each database directory is on a filesystem its backend accepts. Warns about databases that
/// earlier runs left behind.
fn prepare_dirs(
    out: &Path,
    backends: &[DatabaseBackend],
    dirs: &BTreeMap<DatabaseBackend, PathBuf>,
) -> anyhow::Result<Vec<Plan>> {
    ensure_writable_dir("--out", out)?;
    let mut plans = Vec::new();
    for backend in backends {
        let root = dirs.get(backend).cloned().unwrap_or_default();
        // The filesystem first: nothing is created on tmpfs, or for butter off btrfs.
        check_dir(*backend, &root)?;
        ensure_writable_dir(&format!("--db-dir for {backend}"), &root)?;
        let fs = check_dir(*backend, &root)?;
        plans.push(Plan {
            backend: *backend,
            root,
            fs,
        });
    }
    let mut warned = BTreeSet::new();
    for plan in &plans {
        let left = leftovers_in(&plan.root);
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
    Ok(plans)
}

/// How one child ended.
#[derive(Debug)]
enum ChildOutcome {
    Done(Box<BackendResult>),
    Failed(String),
}

/// Run one backend's child and wait for it, forwarding SIGINT/SIGTERM to it.
fn run_backend_child(
    exe: &Path,
    args: &ReplayArgs,
    plan: &Plan,
    db: &Path,
    result_file: &Path,
    batches: u64,
    interrupt: &Interrupt,
) -> anyhow::Result<ChildOutcome> {
    let errors = error_file(result_file);
    let _ = std::fs::remove_file(result_file);
    let _ = std::fs::remove_file(&errors);
    let mut cmd = Command::new(exe);
    cmd.arg("replay")
        .arg("--fixture")
        .arg(&args.fixture)
        .arg("--backends")
        .arg(plan.backend.name())
        .arg("--db-dir")
        .arg(db)
        .arg("--child-result")
        .arg(result_file)
        .arg("--parent-pid")
        .arg(std::process::id().to_string())
        .arg("--batches")
        .arg(batches.to_string())
        .args(args.settings.to_args())
        .stdin(Stdio::null())
        // Its own process group: a Ctrl-C at the terminal reaches the parent alone, which
        // forwards it once.
        .process_group(0);
    if args.non_durable {
        cmd.arg("--non-durable");
    }
    if args.no_progress {
        cmd.arg("--no-progress");
    }
    if let Some(n) = args.sample_every {
        cmd.arg("--sample-every").arg(n.to_string());
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("running {}", exe.display()))?;
    let mut forwarded = false;
    let status = loop {
        if let Some(status) = child.try_wait().context("waiting for the child")? {
            break status;
        }
        if interrupt.is_set() && !forwarded {
            forwarded = true;
            eprintln!(
                "{}: stopping {} after its current batch (a second signal ends slasher-bench at \
                 once)",
                interrupt.signal_name(),
                plan.backend
            );
            let pid = i32::try_from(child.id()).context("child pid")?;
            // The child may have exited meanwhile (ESRCH): nothing to do then.
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), interrupt.signal());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read_result = || -> anyhow::Result<BackendResult> {
        let bytes = std::fs::read(result_file)?;
        Ok(serde_json::from_slice(&bytes)?)
    };
    let outcome = if status.success() {
        match read_result() {
            Ok(r) => ChildOutcome::Done(Box::new(r)),
            Err(e) => ChildOutcome::Failed(format!(
                "reading {}: {}",
                result_file.display(),
                crate::errors::chain_text(&e)
            )),
        }
    } else {
        let reason = std::fs::read_to_string(&errors)
            .ok()
            .filter(|t| !t.trim().is_empty())
            .map_or_else(
                || "no reason given (see its output above)".to_string(),
                |t| t.trim().to_string(),
            );
        ChildOutcome::Failed(format!(
            "the {} child process failed ({status}): {reason}",
            plan.backend
        ))
    };
    let _ = std::fs::remove_file(result_file);
    let _ = std::fs::remove_file(&errors);
    Ok(outcome)
}

/// The parent: plan, check, run each backend in a child, merge, gate, write.
///
/// # Errors
/// As [`run`].
pub fn run_with_exe(args: &ReplayArgs, exe: &Path) -> anyhow::Result<()> {
    let interrupt =
        Interrupt::install_parent().context("installing the SIGINT/SIGTERM handlers")?;
    let out = args
        .out
        .clone()
        .ok_or_else(|| anyhow!("--out is required"))?;
    let backends = parse_backends(&args.backends)?;
    let dirs = parse_db_dirs(&args.db_dir, &backends)?;
    // Every directory is checked before the fixture is read or anything runs.
    let plans = prepare_dirs(&out, &backends, &dirs)?;

    let reader = FixtureReader::open(&args.fixture)
        .with_context(|| format!("opening fixture {}", args.fixture.display()))?;
    let manifest = reader.manifest().clone();
    eprintln!("checking fixture {} ...", args.fixture.display());
    let batch_count = reader
        .verify()
        .with_context(|| format!("checking fixture {}", args.fixture.display()))?;
    let batches_replayed = args.batches.map_or(batch_count, |n| n.min(batch_count));
    if batches_replayed == 0 {
        match args.batches {
            Some(0) => bail!("nothing to replay: --batches 0"),
            _ => bail!(
                "nothing to replay: the fixture {} has 0 batches",
                args.fixture.display()
            ),
        }
    }

    let machine = Machine::probe();
    let build = Build::probe();
    let config = slasher_config(&manifest, Path::new("."), args.non_durable, &args.settings)?;
    print_header(
        &args.fixture,
        &manifest,
        batches_replayed,
        &machine,
        &build,
        &plans,
    );
    if args.non_durable {
        eprintln!("--non-durable: only redb honours it; the other backends stay durable");
    }

    let started_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut results = Vec::new();
    let mut failures = Vec::new();
    let mut not_started = Vec::new();
    for plan in &plans {
        if interrupt.is_set() {
            not_started.push(plan.backend.name().to_string());
            continue;
        }
        let db = plan
            .root
            .join(db_name(plan.backend, std::process::id(), started_unix_s));
        if db.exists() {
            bail!(
                "{} already exists; remove it with `slasher-bench clean {}` or choose another \
                 --db-dir",
                db.display(),
                plan.root.display()
            );
        }
        create_db_dir(&db, plan.backend)
            .with_context(|| format!("creating the database directory {}", db.display()))?;
        let result_file = out.join(format!(".child-{}.json", plan.backend));
        eprintln!("== {} in {}", plan.backend, db.display());
        let outcome = run_backend_child(
            exe,
            args,
            plan,
            &db,
            &result_file,
            batches_replayed,
            &interrupt,
        );
        match outcome {
            Ok(ChildOutcome::Done(result)) => {
                eprintln!(
                    "   {}: first {:.1} ms, median {:.1} ms, p99 {:.1} ms, max {:.1} ms, total {:.2} s{}",
                    result.name,
                    result.first_batch_ms,
                    result.median_batch_ms,
                    result.p99_batch_ms,
                    result.max_batch_ms,
                    result.total_s,
                    if result.interrupted {
                        format!(
                            " (interrupted after {} of {batches_replayed} batches)",
                            result.batches.len()
                        )
                    } else {
                        String::new()
                    }
                );
                results.push(*result);
            }
            Ok(ChildOutcome::Failed(error)) => {
                eprintln!("   {}: FAILED: {error}", plan.backend);
                failures.push(Failure {
                    backend: plan.backend.name().into(),
                    error,
                });
            }
            Err(e) => {
                let _ = remove_db_dir(&db);
                return Err(e);
            }
        }
        // An interrupted run keeps nothing behind, whatever --keep-db says.
        if (interrupt.is_set() || !args.keep_db) && db.exists() {
            if let Err(e) = remove_db_dir(&db) {
                eprintln!("warning: {}", crate::errors::chain_text(&e));
            }
        }
    }

    let rows: Vec<&BackendResult> = results.iter().collect();
    let correctness = report::correctness(&rows);
    let interrupted_by = interrupt.is_set().then(|| interrupt.signal_name());
    let run = Run {
        started_unix_s,
        command: std::env::args().collect(),
        fixture: FixtureInfo {
            path: args.fixture.clone(),
            name: manifest.description.name.clone(),
            records_sha256: manifest.contents.records_sha256.clone(),
            batch_count,
            batches_replayed,
            manifest: serde_json::to_value(&manifest)?,
        },
        slasher_config: SlasherConfigInfo {
            chunk_size: config.chunk_size,
            validator_chunk_size: config.validator_chunk_size,
            history_length: config.history_length,
            attestation_root_cache_size: config.attestation_root_cache_size.get(),
            max_db_size_mbs: config.max_db_size_mbs,
            durability_requested: durability_name(config.durability).into(),
            tile_codec: config.tile_codec.name().into(),
            update_period_s: args.settings.update_period,
        },
        machine,
        build,
        notes: measurement_notes(),
        backends: results,
        failures,
        correctness,
        interrupted: interrupted_by.is_some(),
        interrupted_by: interrupted_by.map(str::to_string),
        not_started,
    };
    let report = Report {
        schema: report::REPORT_SCHEMA.into(),
        generated_by: crate::TOOL.into(),
        runs: vec![run],
    };
    let written = report::write_outputs(&report, &out)?;
    print!("{}", report::summary_table(&report));
    for f in &written {
        println!("wrote {}", f.display());
    }
    let run = report.runs.first().ok_or_else(|| anyhow!("no run"))?;
    if interrupted_by.is_some() {
        let done: Vec<String> = run
            .backends
            .iter()
            .map(|r| format!("{} {} batches", r.name, r.batches.len()))
            .collect();
        return Err(Interrupted {
            signal: interrupt.signal_name(),
            detail: format!(
                "report of the batches done ({}) in {}",
                if done.is_empty() {
                    "none".to_string()
                } else {
                    done.join(", ")
                },
                out.display()
            ),
        }
        .into());
    }
    if let Some(d) = &run.correctness.first_difference {
        bail!("correctness gate failed: {d} (report in {})", out.display());
    }
    if let Some(missed) = report::missing_expected(&report) {
        bail!(
            "expected slashings not found: {missed} (report in {})",
            out.display()
        );
    }
    if !run.failures.is_empty() {
        let names: Vec<&str> = run.failures.iter().map(|f| f.backend.as_str()).collect();
        bail!(
            "backends failed: {} (report in {})",
            names.join(", "),
            out.display()
        );
    }
    Ok(())
}

fn durability_name(d: Durability) -> &'static str {
    match d {
        Durability::Immediate => "immediate",
        Durability::Eventual => "eventual",
    }
}

/// The slasher configuration a fixture asks for, at `path`.
/// The slasher configuration a run uses: the settings given, else the fixture's hint, else
/// Lighthouse's defaults. Checked as Lighthouse checks it, plus the update period.
fn slasher_config(
    manifest: &Manifest,
    path: &Path,
    non_durable: bool,
    settings: &SlasherSettings,
) -> anyhow::Result<Config> {
    let hint = manifest.description.slasher_config;
    let from_hint = |v: u64, default: usize| usize::try_from(v).unwrap_or(default);
    let mut config = Config::new(path);
    config.chunk_size = settings
        .chunk_size
        .unwrap_or_else(|| from_hint(hint.chunk_size, config.chunk_size));
    config.validator_chunk_size = settings
        .validator_chunk_size
        .unwrap_or_else(|| from_hint(hint.validator_chunk_size, config.validator_chunk_size));
    config.history_length = settings
        .history_length
        .unwrap_or_else(|| from_hint(hint.history_length, config.history_length));
    config.max_db_size_mbs = settings
        .max_db_size
        .checked_mul(1024)
        .ok_or_else(|| anyhow!("--max-db-size {} GiB is too large", settings.max_db_size))?;
    config.attestation_root_cache_size = std::num::NonZeroUsize::new(settings.att_cache_size)
        .ok_or_else(|| anyhow!("invalid slasher settings: --att-cache-size must be at least 1"))?;
    config.tile_codec = settings.tile_codec;
    config.durability = if non_durable {
        Durability::Eventual
    } else {
        Durability::Immediate
    };
    config
        .validate()
        .map_err(|e| anyhow!("invalid slasher settings: {e}"))?;
    if settings.update_period == 0 || settings.update_period % SECONDS_PER_SLOT != 0 {
        bail!(
            "invalid slasher settings: --update-period {} must be a positive multiple of the \
             {SECONDS_PER_SLOT}-second slot (the fixture holds one batch per slot)",
            settings.update_period
        );
    }
    Ok(config)
}

fn print_header(
    fixture: &Path,
    manifest: &Manifest,
    batches: u64,
    machine: &Machine,
    build: &Build,
    plans: &[Plan],
) {
    eprintln!(
        "fixture {} ({}): {batches} of {} batches, {} validators",
        manifest.description.name,
        fixture.display(),
        manifest.contents.batch_count,
        manifest.description.validator_count
    );
    eprintln!(
        "machine: kernel {}, {} ({} CPUs available), RAM {:.1} GiB; {} build, git {}",
        machine.kernel.as_deref().unwrap_or("?"),
        machine.cpu_model.as_deref().unwrap_or("?"),
        machine.cpus_available.unwrap_or(0),
        machine.ram_bytes.unwrap_or(0) as f64 / f64::from(1u32 << 30),
        build.profile,
        build.git_revision.as_deref().unwrap_or("unknown"),
    );
    if build.profile != "release" {
        eprintln!("WARNING: this is a debug build; its times are not benchmarks");
    }
    for p in plans {
        eprintln!(
            "{}: {} is on {} (mounted on {} from {}, options {})",
            p.backend,
            p.root.display(),
            p.fs.label(),
            p.fs.mount_point
                .as_ref()
                .map_or("?".into(), |m| m.display().to_string()),
            p.fs.device.as_deref().unwrap_or("?"),
            p.fs.mount_options.as_deref().unwrap_or("?"),
        );
    }
}

/// What each quantity in the report means; stored in every run.
fn measurement_notes() -> Vec<String> {
    [
        "batch wall time (wall_ms) = process_queued(current_epoch) + prune_database(current_epoch), \
         two write transactions; queueing the batch (hashing) is timed separately (enqueue_ms) \
         and excluded, as in Lighthouse where it happens on the gossip threads",
        "commit_ms = the commit of process_queued + the commit of prune_database, as measured \
         inside the slasher (BatchStats.timings.commit_us + PruneStats.commit_us)",
        "first_batch_ms is batch 0 on a fresh database (the cold start); median, p99 (nearest \
         rank) and max are over all batches, batch 0 included; total_s is the sum of batch wall \
         times",
        "db_bytes = sum of the apparent sizes of the backend's filenames() after the batch, as \
         Lighthouse's size_of_dir counts; for butter_db that is the newest generation only (a \
         du of the directory would count every snapshot, sharing extents, again)",
        "bytes_written = /proc/self/io write_bytes of the child process from before open to \
         after the last batch: bytes the process dirtied in the page cache (write() or shared \
         mmap), counted when dirtied. It does not include filesystem metadata, the ext4 \
         journal or btrfs tree blocks written by kernel threads, and counts a page again each \
         time it is re-dirtied. butter_db's snapshot commit flushes synchronously, so its data \
         is attributed; for the others it is what the process dirtied, not what reached the disk",
        "device_bytes_written = sectors written to the database's block device \
         (/sys/class/block/DEV/stat) from before open to after the last batch and a final \
         syncfs; device-wide, so other writers on the same device are included: meaningful on a \
         dedicated loop device (scripts/bench.sh), noisy on a shared one",
        "sync_calls: not measured (null): counting fsync/fdatasync/msync would need tracing",
        "peak_rss_bytes = VmHWM of the child process that ran this backend alone (includes the \
         fixture reader's one-batch buffer, the same for every backend); each backend runs in \
         its own process so allocator state does not carry over; the fixture file is read once \
         by the parent before any backend runs, so it is in the page cache for all of them",
        "durable = Environment::durable() of the opened backend: true means a commit that \
         returned survives power loss (LMDB/MDBX synced commits, redb Durability::Immediate, \
         butter_db snapshot commits); non-durable rows are labelled and must not be compared \
         with durable ones",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

// ---- the child ---------------------------------------------------------------------------------

/// What the child needs.
#[derive(Debug)]
struct ChildJob<'a> {
    backend: DatabaseBackend,
    db: PathBuf,
    fs: FsInfo,
    fixture: &'a Path,
    batches: Option<u64>,
    non_durable: bool,
    settings: &'a SlasherSettings,
    progress: bool,
    sample_every: Option<u64>,
    interrupt: Interrupt,
}

struct ChildVisitor<'a>(&'a ChildJob<'a>);

impl BackendVisitor for ChildVisitor<'_> {
    type Output = anyhow::Result<BackendResult>;

    fn visit<E: Environment>(self) -> Self::Output {
        replay_backend::<E>(self.0)
    }
}

fn run_child(args: &ReplayArgs, result_file: &Path) -> anyhow::Result<()> {
    // Handlers first, then the parent-death signal, so that SIGTERM always finds a handler.
    let interrupt = Interrupt::install_child().context("installing the SIGINT/SIGTERM handlers")?;
    if let Some(parent) = args.parent_pid {
        interrupt
            .die_with_parent(parent)
            .context("prctl(PR_SET_PDEATHSIG)")?;
    }
    let backends = parse_backends(&args.backends)?;
    let [backend] = backends.as_slice() else {
        bail!("--child-result runs exactly one backend");
    };
    let db = PathBuf::from(&args.db_dir);
    let fs = check_dir(*backend, &db)?;
    let job = ChildJob {
        backend: *backend,
        db,
        fs,
        fixture: &args.fixture,
        batches: args.batches,
        non_durable: args.non_durable,
        settings: &args.settings,
        progress: !args.no_progress,
        sample_every: args.sample_every,
        interrupt,
    };
    let outcome = with_backend(*backend, ChildVisitor(&job)).map_err(anyhow::Error::from);
    let outcome = outcome.and_then(|r| r);
    if job.interrupt.is_set() {
        // Interrupted: leave nothing behind, read-only snapshots included.
        if let Err(e) = remove_db_dir(&job.db) {
            eprintln!("{}", crate::errors::chain_text(&e));
        }
    }
    let result = outcome?;
    std::fs::write(result_file, serde_json::to_vec(&result)?)
        .with_context(|| format!("writing {}", result_file.display()))?;
    Ok(())
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// Replay the fixture on backend `E` in this process. `E` is wrapped in `Timed` so that each
/// batch records the time spent inside storage calls (`storage_ms`).
fn replay_backend<E: Environment>(job: &ChildJob<'_>) -> anyhow::Result<BackendResult> {
    let mut reader = FixtureReader::open(job.fixture)?;
    let manifest = reader.manifest().clone();
    let limit = job
        .batches
        .unwrap_or(u64::MAX)
        .min(manifest.contents.batch_count);
    let config = slasher_config(&manifest, &job.db, job.non_durable, job.settings)?;
    let device = job.fs.device.clone().map(PathBuf::from);
    let device_before = device.as_deref().and_then(device_bytes_written);
    let io_before = ProcIo::read().context("reading /proc/self/io")?;
    let fs_used_before = fs_used_bytes(&job.db);

    let t = Instant::now();
    let slasher = Slasher::<Timed<E>>::create(config.clone())
        .with_context(|| format!("opening {} in {}", job.backend, job.db.display()))?;
    let open_ms = t.elapsed().as_secs_f64() * 1000.0;
    let durable = slasher.environment().durable();
    let name = format!(
        "{}{}@{}",
        job.backend,
        if durable { "" } else { "-nondurable" },
        job.fs.label()
    );

    let bar = if job.progress {
        let bar = ProgressBar::new(limit);
        if let Ok(style) = ProgressStyle::with_template(
            "{prefix:>16} [{bar:30}] {pos}/{len} batches {elapsed_precise} (eta {eta}) {msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(name.clone());
        bar
    } else {
        ProgressBar::hidden()
    };

    let mut batches = Vec::new();
    let mut samples = Vec::new();
    let mut found = SlashingsFound::default();
    let loop_start = Instant::now();
    let mut interrupted = false;
    // With an update period of k slots, k fixture batches are queued before each
    // process_queued, as Lighthouse's slasher service queues a period's worth of slots.
    let slots_per_batch = job.settings.slots_per_batch();
    let (mut headers, mut attestations, mut enqueue_ms, mut queued) = (0, 0, 0.0, 0);
    let mut io_start = ProcIo::read()?;
    for (position, batch) in reader
        .by_ref()
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
        .enumerate()
    {
        if job.interrupt.is_set() {
            interrupted = true;
            break;
        }
        let batch = batch?;
        if queued == 0 {
            io_start = ProcIo::read()?;
        }
        let t = Instant::now();
        headers += batch.headers.len();
        attestations += batch.attestations.len();
        for header in batch.headers {
            slasher.accept_block_header(header);
        }
        for attestation in batch.attestations {
            slasher.accept_attestation(attestation);
        }
        enqueue_ms += t.elapsed().as_secs_f64() * 1000.0;
        queued += 1;
        if queued < slots_per_batch && position as u64 + 1 < limit {
            continue;
        }

        let storage_before = slasher.environment().storage_time();
        let t = Instant::now();
        let stats = slasher
            .process_queued(batch.current_epoch)
            .with_context(|| format!("{name}: process_queued of batch {}", batch.index))?;
        let process_ms = t.elapsed().as_secs_f64() * 1000.0;
        let t_prune = Instant::now();
        let prune = slasher
            .prune_database(batch.current_epoch)
            .with_context(|| format!("{name}: prune_database of batch {}", batch.index))?;
        let prune_ms = t_prune.elapsed().as_secs_f64() * 1000.0;
        let wall_ms = t.elapsed().as_secs_f64() * 1000.0;
        let storage_ms =
            (slasher.environment().storage_time() - storage_before).as_secs_f64() * 1000.0;

        let size = files_size(&slasher.environment().filenames());
        let io_end = ProcIo::read()?;
        let attester = slasher.get_attester_slashings();
        let proposer = slasher.get_proposer_slashings();
        let digest = slashings_digest(&attester, &proposer);
        found.attester += attester.len();
        found.proposer += proposer.len();
        found
            .list
            .extend(summarise(batch.index, &attester, &proposer));

        bar.set_message(format!("last {wall_ms:.1} ms"));
        bar.inc(1);
        batches.push(BatchRecord {
            index: batch.index,
            slot: batch.slot,
            current_epoch: batch.current_epoch,
            headers,
            attestations,
            wall_ms,
            process_ms,
            prune_ms,
            storage_ms,
            commit_ms: ms(stats.timings.commit_us + prune.commit_us),
            process_commit_ms: ms(stats.timings.commit_us),
            prune_commit_ms: ms(prune.commit_us),
            enqueue_ms,
            db_bytes: size.apparent,
            bytes_written: io_end.since(&io_start).write_bytes,
            tiles_written: stats.attestation_stats.num_tiles_written,
            deferred: stats.attestation_stats.num_deferred,
            attester_slashings: attester.len(),
            proposer_slashings: proposer.len(),
            slashings_digest: digest,
        });
        (headers, attestations, enqueue_ms, queued) = (0, 0, 0.0, 0);
        let done = batches.len() as u64;
        let last = position as u64 + 1 == limit;
        if job.sample_every.is_some_and(|n| done % n == 0 || last) {
            samples.push(take_sample(
                batch.index,
                &job.db,
                &slasher.environment().filenames(),
                fs_used_before,
                device.as_deref().zip(device_before),
            ));
        }
    }
    let elapsed_s = loop_start.elapsed().as_secs_f64();
    bar.finish();

    let size = files_size(&slasher.environment().filenames());
    let io = ProcIo::read()?.since(&io_before);
    // Flush whatever a non-durable backend left in the page cache so that the device counter
    // covers all of this run's writes (outside every timed region).
    if let Ok(dir) = std::fs::File::open(&job.db) {
        let _ = rustix::fs::syncfs(&dir);
    }
    let device_after = device.as_deref().and_then(device_bytes_written);
    drop(slasher);

    let expected_slashings =
        expected_within(&manifest, batches.len() as u64).map(|e| check_expected(&e, &found.list));
    let walls: Vec<f64> = batches.iter().map(|b| b.wall_ms).collect();
    let commits: Vec<f64> = batches.iter().map(|b| b.commit_ms).collect();
    let wall = Summary::of(&walls);
    let commit = Summary::of(&commits);
    Ok(BackendResult {
        name,
        backend: job.backend.name().into(),
        filesystem: job.fs.label(),
        durable,
        durability: durability_name(config.durability).into(),
        fs: job.fs.clone(),
        db_dir: job.db.clone(),
        open_ms,
        first_batch_ms: batches.first().map_or(0.0, |b| b.wall_ms),
        median_batch_ms: wall.median,
        p99_batch_ms: wall.p99,
        max_batch_ms: wall.max,
        mean_batch_ms: wall.mean,
        total_s: wall.sum / 1000.0,
        elapsed_s,
        median_commit_ms: commit.median,
        p99_commit_ms: commit.p99,
        commit_total_s: commit.sum / 1000.0,
        db_bytes_final: size.apparent,
        db_allocated_bytes_final: size.allocated,
        bytes_written: io.write_bytes,
        proc_io: io,
        device_bytes_written: device_before
            .zip(device_after)
            .map(|(before, after)| after.saturating_sub(before)),
        sync_calls: None,
        peak_rss_bytes: peak_rss_bytes(),
        slashings: found,
        expected_slashings,
        batches,
        samples,
        interrupted,
    })
}

/// The soak's view of the database after batch `index`; see [`Sample`].
fn take_sample(
    index: u64,
    db: &Path,
    files: &[PathBuf],
    fs_used_before: Option<u64>,
    device: Option<(&Path, u64)>,
) -> Sample {
    let size = files_size(files);
    let snapshots = std::fs::read_dir(db).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("gen-"))
            .count() as u64
    });
    Sample {
        index,
        db_bytes: size.apparent,
        db_allocated_bytes: size.allocated,
        fs_growth_bytes: fs_used_before
            .zip(fs_used_bytes(db))
            .map(|(before, now)| now as i64 - before as i64),
        btrfs_metadata_used_bytes: btrfs_metadata_used_bytes(db),
        extents: extent_count(files),
        snapshots,
        rss_bytes: current_rss_bytes(),
        device_bytes_written: device.and_then(|(dev, before)| {
            device_bytes_written(dev).map(|after| after.saturating_sub(before))
        }),
    }
}

/// SHA-256 over the sorted, tagged SSZ encodings of a batch's slashings; `None` if there are
/// none. Equal sets give equal digests whatever order a backend found them in.
fn slashings_digest(
    attester: &HashSet<AttesterSlashing>,
    proposer: &HashSet<ProposerSlashing>,
) -> Option<String> {
    let mut encoded: Vec<Vec<u8>> = Vec::with_capacity(attester.len() + proposer.len());
    for s in attester {
        let mut bytes = vec![b'A'];
        bytes.extend(s.as_ssz_bytes());
        encoded.push(bytes);
    }
    for s in proposer {
        let mut bytes = vec![b'P'];
        bytes.extend(s.as_ssz_bytes());
        encoded.push(bytes);
    }
    digest_of_slashings(encoded)
}

/// The digest of one batch's slashings, each given as a tag byte (`A` attester, `P` proposer)
/// followed by its SSZ: SHA-256 over the sorted entries, each preceded by its length as a
/// little-endian u64; `None` when there are none. `client-compare` digests Lighthouse's
/// slashings with it too.
pub fn digest_of_slashings(mut entries: Vec<Vec<u8>>) -> Option<String> {
    if entries.is_empty() {
        return None;
    }
    entries.sort();
    let mut hasher = Sha256::new();
    for e in &entries {
        hasher.update((e.len() as u64).to_le_bytes());
        hasher.update(e);
    }
    Some(hex::encode(hasher.finalize()))
}

fn vote(a: &IndexedAttestation) -> VoteRecord {
    VoteRecord {
        source_epoch: a.data.source.epoch,
        target_epoch: a.data.target.epoch,
        data_root: format!("0x{}", hex::encode(a.data_root())),
    }
}

/// Human-readable summaries of one batch's slashings, in a deterministic order.
fn summarise(
    batch: u64,
    attester: &HashSet<AttesterSlashing>,
    proposer: &HashSet<ProposerSlashing>,
) -> Vec<SlashingRecord> {
    let mut out: Vec<SlashingRecord> = attester
        .iter()
        .map(|s| {
            let first: BTreeSet<u64> = s.attestation_1.attesting_indices.iter().copied().collect();
            let both = s
                .attestation_2
                .attesting_indices
                .iter()
                .filter(|v| first.contains(v))
                .copied()
                .collect::<BTreeSet<u64>>();
            let same_target =
                s.attestation_1.data.target.epoch == s.attestation_2.data.target.epoch;
            SlashingRecord {
                batch,
                kind: if same_target {
                    "double_vote"
                } else {
                    "surround_vote"
                }
                .into(),
                validators: both.into_iter().collect(),
                attestation_1: Some(vote(&s.attestation_1)),
                attestation_2: Some(vote(&s.attestation_2)),
                slot: None,
            }
        })
        .collect();
    out.extend(proposer.iter().map(|s| SlashingRecord {
        batch,
        kind: "double_proposal".into(),
        validators: vec![s.signed_header_1.message.proposer_index],
        attestation_1: None,
        attestation_2: None,
        slot: Some(s.signed_header_1.message.slot),
    }));
    out.sort_by(|a, b| {
        (
            &a.kind,
            &a.validators,
            &a.attestation_1,
            &a.attestation_2,
            a.slot,
        )
            .cmp(&(
                &b.kind,
                &b.validators,
                &b.attestation_1,
                &b.attestation_2,
                b.slot,
            ))
    });
    out
}

/// The manifest's expected slashings that a replay of the first `replayed` batches must have
/// found: all of them after a full replay; after a prefix, those whose completing batch
/// (`expected_from_batch`) is within it. `None` when there is nothing to check.
pub(crate) fn expected_within(manifest: &Manifest, replayed: u64) -> Option<Vec<ExpectedSlashing>> {
    let expected = manifest.description.expected_slashings.as_ref()?;
    if replayed >= manifest.contents.batch_count {
        return Some(expected.clone());
    }
    let from = manifest.description.expected_from_batch.as_ref()?;
    let within: Vec<ExpectedSlashing> = expected
        .iter()
        .zip(from)
        .filter(|(_, &at)| at < replayed)
        .map(|(e, _)| e.clone())
        .collect();
    (!within.is_empty()).then_some(within)
}

/// Match the manifest's injected slashings against what was found.
fn check_expected(expected: &[ExpectedSlashing], found: &[SlashingRecord]) -> ExpectedCheck {
    let mut matched = vec![false; found.len()];
    let mut missing = Vec::new();
    for e in expected {
        let hit = found
            .iter()
            .enumerate()
            .position(|(i, f)| !matched.get(i).copied().unwrap_or(true) && matches_expected(e, f));
        match hit {
            Some(i) => {
                if let Some(m) = matched.get_mut(i) {
                    *m = true;
                }
            }
            None => missing.push(describe_expected(e)),
        }
    }
    ExpectedCheck {
        expected: expected.len(),
        found: expected.len() - missing.len(),
        missing,
        unexpected: matched.iter().filter(|m| !**m).count(),
    }
}

fn matches_expected(e: &ExpectedSlashing, f: &SlashingRecord) -> bool {
    let roots = |a: Option<&VoteRecord>, b: Option<&VoteRecord>| {
        let mut r: Vec<String> = a
            .into_iter()
            .chain(b)
            .map(|v| v.data_root.clone())
            .collect();
        r.sort();
        r
    };
    match e {
        ExpectedSlashing::DoubleVote {
            validator_index,
            attestation_1,
            attestation_2,
        }
        | ExpectedSlashing::SurroundVote {
            validator_index,
            attestation_1,
            attestation_2,
        } => {
            let mut want = vec![
                attestation_1.data_root.clone(),
                attestation_2.data_root.clone(),
            ];
            want.sort();
            f.kind != "double_proposal"
                && f.validators.contains(validator_index)
                && roots(f.attestation_1.as_ref(), f.attestation_2.as_ref()) == want
        }
        ExpectedSlashing::DoubleProposal {
            proposer_index,
            slot,
        } => {
            f.kind == "double_proposal"
                && f.validators.first() == Some(proposer_index)
                && f.slot == Some(*slot)
        }
    }
}

fn describe_expected(e: &ExpectedSlashing) -> String {
    match e {
        ExpectedSlashing::DoubleVote {
            validator_index,
            attestation_1,
            ..
        } => format!(
            "double vote by {validator_index} at target {}",
            attestation_1.target_epoch
        ),
        ExpectedSlashing::SurroundVote {
            validator_index,
            attestation_1,
            attestation_2,
        } => {
            format!(
                "surround vote by {validator_index} ({}→{} around {}→{})",
                attestation_1.source_epoch,
                attestation_1.target_epoch,
                attestation_2.source_epoch,
                attestation_2.target_epoch
            )
        }
        ExpectedSlashing::DoubleProposal {
            proposer_index,
            slot,
        } => {
            format!("double proposal by {proposer_index} at slot {slot}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_dir_specs_parse() {
        let b = [DatabaseBackend::Lmdb, DatabaseBackend::Redb];
        let one = parse_db_dirs("/x", &b).expect("one dir");
        assert_eq!(one.get(&DatabaseBackend::Redb), Some(&PathBuf::from("/x")));
        let per = parse_db_dirs("lmdb=/a, redb=/b", &b).expect("per backend");
        assert_eq!(per.get(&DatabaseBackend::Lmdb), Some(&PathBuf::from("/a")));
        assert_eq!(per.get(&DatabaseBackend::Redb), Some(&PathBuf::from("/b")));
        let err = parse_db_dirs("lmdb=/a", &b).expect_err("redb missing");
        assert!(
            err.to_string().contains("no entry for backend redb"),
            "{err}"
        );
        assert!(parse_db_dirs("nosuch=/a", &b).is_err());
    }

    #[test]
    fn empty_batches_have_no_digest() {
        assert_eq!(slashings_digest(&HashSet::new(), &HashSet::new()), None);
    }
}
