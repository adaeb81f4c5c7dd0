//! The child process: one backend's replay of the fixture, batch by batch, measured.

use super::args::ReplayArgs;
use super::dirs::{check_dir_fd, parse_backends};
use super::partial::{batches_name, BatchStream};
use super::run_info::{durability_name, slasher_config};
use super::settings::SlasherSettings;
use super::summary::{check_expected, expected_within, summarise, BatchSlashings};
use crate::fixtures::file::{FixtureReader, Manifest};
use crate::replay::fill::RegularChain;
use crate::report::{
    BackendResult, BatchMerges, BatchRecord, CommitParts, FillSummary, Sample, SlashingsFound,
};
use crate::system::clean::DbDir;
use crate::system::environment::FsInfo;
use crate::system::interrupt::Interrupt;
use crate::system::measure::{
    btrfs_metadata_used_bytes, current_rss_bytes, device_bytes_written, extent_count, files_size,
    fs_used_bytes, peak_rss_bytes, CpuTimes, ProcIo, Summary,
};
use crate::system::outdir::OutDir;
use anyhow::{anyhow, bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use slasher_adapters::slasher::{Config, Slasher};
use slasher_adapters::timed::Timed;
use slasher_adapters::{with_backend, BackendVisitor, CommitTotals, DatabaseBackend, Environment};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What the child needs.
#[derive(Debug)]
pub(super) struct ChildJob<'a> {
    backend: DatabaseBackend,
    db: PathBuf,
    fs: FsInfo,
    fixture: &'a Path,
    batches: Option<u64>,
    non_durable: bool,
    settings: &'a SlasherSettings,
    progress: bool,
    sample_every: Option<u64>,
    fill_epochs: Option<u64>,
    /// `--butter-cache-mib`, for the backend's configuration.
    butter_cache_mib: Option<usize>,
    interrupt: Interrupt,
    /// The run's output directory and the database, held open (`partial.rs` streams each
    /// finished batch into `files.stream` there).
    files: &'a ChildFiles,
    /// The parent's pid, checked before each batch (`None`: no parent to watch).
    parent: Option<u32>,
}

impl ChildJob<'_> {
    /// Whether the parent this child was started by has died (the child is re-parented).
    fn parent_gone(&self) -> bool {
        self.parent
            .is_some_and(|p| std::os::unix::process::parent_id() != p)
    }
}

/// The database directory the parent made, reached through the descriptor it handed down
/// (`--db-dir-fd`), and a [`DbDir`] for removing it, which refuses
/// ([`crate::system::clean::DbReplaced`]) if the name no longer leads to that directory (another user
/// swapped it). Without a descriptor (a child started by hand) the path is taken once.
fn inherited_db_dir(args: &ReplayArgs) -> anyhow::Result<(DbDir, std::os::fd::OwnedFd)> {
    let path = Path::new(&args.db_dir);
    let Some(fd) = args.db_dir_fd else {
        let db_dir = DbDir::open(path)
            .with_context(|| format!("opening the database directory {}", path.display()))?;
        let handle = db_dir.handle()?;
        return Ok((db_dir, handle));
    };
    // The inherited descriptor, opened again through its /proc link: that follows the open
    // file itself, not a name another user can change.
    let handle = rustix::fs::open(
        format!("/proc/self/fd/{fd}"),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .with_context(|| {
        format!(
            "the database directory {} handed down as descriptor {fd}",
            path.display()
        )
    })?;
    let st = rustix::fs::fstat(&handle)?;
    // Its parent through the handle (`..` of the directory itself), not by the name the
    // parent process resolved: the removal checks the name there against this identity.
    let db_dir = DbDir::with_id_below(path, &handle, (st.st_dev, st.st_ino))
        .with_context(|| format!("opening the parent of {}", path.display()))?;
    Ok((db_dir, handle))
}

/// How often the watchdog looks for the parent.
const PARENT_POLL: Duration = Duration::from_millis(200);
/// How long an orphaned child lets its current batch end on its own (the batch loop stops,
/// removes the database and exits) before the watchdog removes the database and ends it.
const ORPHAN_GRACE: Duration = Duration::from_secs(2);

/// What the child made and must not leave behind, shared with the watchdog.
#[derive(Debug)]
pub(super) struct ChildFiles {
    db_dir: DbDir,
    /// `--out` as given (for messages).
    out_path: PathBuf,
    /// `--out`, held open, when the child writes named files there (no `--child-fds`).
    out: Option<OutDir>,
    stream: String,
    /// The result and stream files the parent handed down unnamed (`--child-fds`); `None`:
    /// named files in `out`.
    unnamed: Option<(std::fs::File, std::fs::File)>,
    /// Held by whichever of the main thread and the watchdog removes the files.
    cleanup: std::sync::Mutex<()>,
}

impl ChildFiles {
    /// `--out`, where a child without `--child-fds` writes its named files.
    fn named_out(&self) -> anyhow::Result<&OutDir> {
        self.out
            .as_ref()
            .ok_or_else(|| anyhow!("{}: not opened", self.out_path.display()))
    }

    /// Remove the database and the batch stream; errors are printed.
    fn remove(&self) {
        if let Err(e) = self.db_dir.remove() {
            eprintln!("{}", crate::errors::chain_text(&e));
        }
        if let Some(out) = &self.out {
            out.remove_own(&self.stream);
        }
    }
}

/// Watch the parent: PR_SET_PDEATHSIG sets the interrupt flag when it dies, but a batch can
/// run for hours and the second signal that would end the child never comes. Once the parent
/// is gone this sets the flag (so the batch loop stops at its next check), gives the current
/// batch [`ORPHAN_GRACE`], then removes the database and the stream and ends the process.
fn watch_parent(parent: u32, interrupt: Interrupt, files: std::sync::Arc<ChildFiles>) {
    std::thread::spawn(move || {
        while std::os::unix::process::parent_id() == parent {
            std::thread::sleep(PARENT_POLL);
        }
        interrupt.set_terminated();
        std::thread::sleep(ORPHAN_GRACE);
        // The main thread may be removing the files itself: then this waits, and the process
        // ends when the main thread returns.
        let _held = files.cleanup.lock();
        eprintln!(
            "the parent process {parent} is gone and the current batch has not ended: removing \
             the database {} and stopping",
            files.db_dir.path().display()
        );
        files.remove();
        std::process::exit(143);
    });
}

pub(super) struct ChildVisitor<'a>(&'a ChildJob<'a>);

impl BackendVisitor for ChildVisitor<'_> {
    type Output = anyhow::Result<BackendResult>;

    fn visit<E: Environment>(self) -> Self::Output {
        replay_backend::<E>(self.0)
    }
}

pub(super) fn run_child(args: &ReplayArgs, result_file: &Path) -> anyhow::Result<()> {
    run_child_through_handle(args, result_file).map_err(|e| {
        match name_db_dir(&crate::errors::chain_text(&e), Path::new(&args.db_dir)) {
            Some(text) => anyhow::Error::msg(text),
            None => e,
        }
    })
}

/// `text` with each `/proc/self/fd/N/.` (how the child reaches the database directory, through
/// its handle) replaced by `db_dir`, the path the run was given, so that errors name a path
/// the user knows; `None` if `text` holds none.
pub(super) fn name_db_dir(text: &str, db_dir: &Path) -> Option<String> {
    const PREFIX: &str = "/proc/self/fd/";
    if !text.contains(PREFIX) {
        return None;
    }
    let shown = db_dir.display().to_string();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        out.push_str(&rest[..at]);
        let after = &rest[at + PREFIX.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let tail = &after[digits..];
        if digits > 0 && tail.starts_with("/.") && !tail[2..].starts_with('.') {
            out.push_str(&shown);
            rest = &tail[2..];
        } else {
            out.push_str(PREFIX);
            rest = after;
        }
    }
    out.push_str(rest);
    Some(out)
}

fn run_child_through_handle(args: &ReplayArgs, result_file: &Path) -> anyhow::Result<()> {
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
    // Held open for the whole run: the backend reaches the database through this handle, so
    // its name cannot be swapped for a symlink under the run.
    let (db_dir, handle) = inherited_db_dir(args)?;
    let (out_path, result_name) = slasher_adapters::config::parent_and_name(result_file)?;
    let result_name = result_name
        .to_str()
        .ok_or_else(|| anyhow!("{}: the name is not UTF-8", result_file.display()))?
        .to_string();
    let unnamed = match args.child_fds.as_deref() {
        Some(&[result, stream, _error]) => Some((inherited_file(result)?, inherited_file(stream)?)),
        Some(_) => bail!("--child-fds takes three descriptors"),
        None => None,
    };
    // With the files handed down unnamed the child never looks --out up (the parent resolved
    // it once); only a child with named files opens it.
    let out = match unnamed {
        Some(_) => None,
        None => Some(OutDir::open(out_path)?),
    };
    let files = std::sync::Arc::new(ChildFiles {
        db_dir,
        out_path: out_path.to_path_buf(),
        out,
        stream: batches_name(&result_name),
        unnamed,
        cleanup: std::sync::Mutex::new(()),
    });
    if let Some(parent) = args.parent_pid {
        watch_parent(parent, interrupt.clone(), std::sync::Arc::clone(&files));
    }
    let db = DbDir::path_through(&handle);
    let fs = check_dir_fd(
        *backend,
        std::os::fd::AsFd::as_fd(&handle),
        Path::new(&args.db_dir),
    )?;
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
        fill_epochs: args.fill_epochs,
        butter_cache_mib: args.butter_cache_mib,
        interrupt,
        files: &files,
        parent: args.parent_pid,
    };
    let outcome = with_backend(*backend, ChildVisitor(&job)).map_err(anyhow::Error::from);
    let outcome = outcome.and_then(|r| r);
    let _held = files.cleanup.lock();
    if job.parent_gone() {
        // Nobody will read a result: leave nothing behind, the stream included.
        files.remove();
        std::process::exit(143);
    }
    if job.interrupt.is_set() {
        // Interrupted: leave nothing behind, read-only snapshots included.
        if let Err(e) = files.db_dir.remove() {
            eprintln!("{}", crate::errors::chain_text(&e));
        }
    }
    let result = outcome?;
    match &files.unnamed {
        Some((file, _)) => {
            let mut file: &std::fs::File = file;
            file.write_all(&serde_json::to_vec(&result)?)
                .with_context(|| format!("writing {}", result_file.display()))?;
        }
        None => {
            files
                .named_out()?
                .write(&result_name, &serde_json::to_vec(&result)?)?;
        }
    }
    Ok(())
}

/// The file the parent handed down as descriptor `fd`, opened again for writing through its
/// `/proc` link (which follows the open file itself, not a name).
pub(super) fn inherited_file(fd: i32) -> anyhow::Result<std::fs::File> {
    let file = rustix::fs::open(
        format!("/proc/self/fd/{fd}"),
        rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .with_context(|| format!("the file handed down as descriptor {fd}"))?;
    Ok(std::fs::File::from(file))
}

pub(super) fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// The named parts of a batch's commits in milliseconds, as the engine names them.
fn commit_parts(totals: &CommitTotals) -> CommitParts {
    totals
        .parts
        .iter()
        .map(|&(name, d)| (name, d.as_secs_f64() * 1000.0))
        .collect()
}

/// Replay the fixture on backend `E` in this process. `E` is wrapped in `Timed` so that each
/// batch records the time spent inside storage calls (`storage_ms`). The steps: read the
/// counters the run is measured against, open the slasher, replay the batches, then measure the
/// end state into the row's result.
pub(super) fn replay_backend<E: Environment>(job: &ChildJob<'_>) -> anyhow::Result<BackendResult> {
    let mut reader = FixtureReader::open(job.fixture)?;
    let manifest = reader.manifest().clone();
    let limit = job
        .batches
        .unwrap_or(u64::MAX)
        .min(manifest.contents.batch_count);
    let mut config = slasher_config(&manifest, &job.db, job.non_durable, job.settings)?;
    config.butter_cache_bytes = job
        .butter_cache_mib
        .map(|mib| {
            mib.checked_mul(1 << 20)
                .ok_or_else(|| anyhow!("--butter-cache-mib {mib} does not fit in memory"))
        })
        .transpose()?;
    let mut before = Before::read(job)?;
    let opened = open_slasher::<E>(job, &config)?;
    let mut head = row_head(
        job,
        &opened.name,
        opened.durable,
        durability_name(config.durability),
        opened.open_ms,
    );
    if let Some(epochs) = job.fill_epochs {
        head.fill = Some(fill_database(&opened, &manifest, epochs, job.progress)?);
        // The run is measured from the filled state.
        before = Before::read(job)?;
    }
    let mut stream = match &job.files.unnamed {
        Some((_, file)) => BatchStream::from_file(
            file.try_clone().context("the batch stream handed down")?,
            job.files.out_path.join(&job.files.stream),
            &head,
        )?,
        None => BatchStream::create(job.files.named_out()?, &job.files.stream, &head)?,
    };
    let bar = progress_bar(job.progress, limit, &opened.name);
    let replayed = replay_batches(job, &opened, &mut reader, limit, &bar, &before, &mut stream)?;
    bar.finish();
    let fill = head.fill;
    measure_result(job, &manifest, &config, before, opened, replayed, fill)
}

/// Fill the new database with `epochs` epochs of a regular chain over the fixture's
/// validators that ends at the fixture's first epoch (`crate::replay::fill`), then sync the filesystem
/// so that the fill's write-back does not land in the measured batches, and reset the peak RSS
/// so that it is the batches'.
fn fill_database<E: Environment>(
    opened: &Opened<E>,
    manifest: &Manifest,
    epochs: u64,
    progress: bool,
) -> anyhow::Result<FillSummary> {
    let first_epoch = manifest
        .contents
        .first_epoch
        .ok_or_else(|| anyhow!("--fill-epochs: the fixture has no batches"))?;
    let chain = RegularChain::ending_at(
        manifest.description.validator_count,
        first_epoch,
        epochs,
        crate::replay::fill::DEFAULT_SEED,
    )?;
    let t = Instant::now();
    let bar = fill_bar(progress, &opened.name);
    let report = crate::replay::fill::fill(&opened.slasher, &chain, &mut |pass, done, total| {
        bar.set_length(total);
        bar.set_position(done);
        bar.set_message(format!("fill pass {pass} of 3"));
    })
    .with_context(|| format!("{}: filling {epochs} epochs", opened.name))?;
    bar.finish_and_clear();
    let fill_s = t.elapsed().as_secs_f64();
    rustix::fs::sync();
    // The row's peak RSS is of its batches: "5" resets the process's VmHWM (proc(5)).
    std::fs::write("/proc/self/clear_refs", "5")
        .context("resetting the peak RSS after the fill (/proc/self/clear_refs)")?;
    Ok(FillSummary {
        epochs,
        first_epoch: chain.first_epoch,
        validators: chain.validators,
        seconds: fill_s,
        sync_seconds: t.elapsed().as_secs_f64() - fill_s,
        report,
    })
}

fn fill_bar(show: bool, name: &str) -> ProgressBar {
    let bar = progress_bar(show, 1, name);
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:>16} [{bar:30}] {pos}/{len} {msg} {elapsed_precise} (eta {eta})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// What a run is measured against, read before the database is opened: the device's and the
/// process's write counters and the filesystem's used space.
struct Before {
    device: Option<PathBuf>,
    device_before: Option<u64>,
    io_before: ProcIo,
    fs_used_before: Option<u64>,
}

impl Before {
    fn read(job: &ChildJob<'_>) -> anyhow::Result<Self> {
        let device = job.fs.device.clone().map(PathBuf::from);
        let device_before = device.as_deref().and_then(device_bytes_written);
        let io_before = ProcIo::read().context("reading /proc/self/io")?;
        let fs_used_before = fs_used_bytes(&job.db);
        Ok(Self {
            device,
            device_before,
            io_before,
            fs_used_before,
        })
    }
}

/// The open slasher, how long opening took, and the row's name.
struct Opened<E: Environment> {
    slasher: Slasher<Timed<E>>,
    open_ms: f64,
    durable: bool,
    name: String,
}

fn open_slasher<E: Environment>(job: &ChildJob<'_>, config: &Config) -> anyhow::Result<Opened<E>> {
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
    Ok(Opened {
        slasher,
        open_ms,
        durable,
        name,
    })
}

fn progress_bar(show: bool, limit: u64, name: &str) -> ProgressBar {
    if show {
        let bar = ProgressBar::new(limit);
        if let Ok(style) = ProgressStyle::with_template(
            "{prefix:>16} [{bar:30}] {pos}/{len} batches {elapsed_precise} (eta {eta}) {msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(name.to_string());
        bar
    } else {
        ProgressBar::hidden()
    }
}

/// What the batches gave: one record per processed batch, the soak's samples, the slashings.
struct Replayed {
    batches: Vec<BatchRecord>,
    samples: Vec<Sample>,
    found: SlashingsFound,
    interrupted: bool,
    elapsed_s: f64,
}

fn replay_batches<E: Environment>(
    job: &ChildJob<'_>,
    opened: &Opened<E>,
    reader: &mut FixtureReader,
    limit: u64,
    bar: &ProgressBar,
    before: &Before,
    stream: &mut BatchStream,
) -> anyhow::Result<Replayed> {
    let (slasher, name) = (&opened.slasher, &opened.name);
    let (device, device_before, fs_used_before) =
        (&before.device, before.device_before, before.fs_used_before);
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
        if job.interrupt.is_set() || job.parent_gone() {
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

        let queued_batch = Queued {
            index: batch.index,
            slot: batch.slot,
            current_epoch: batch.current_epoch,
            headers,
            attestations,
            enqueue_ms,
        };
        batches.push(process_batch(
            slasher,
            name,
            &queued_batch,
            &io_start,
            &mut found,
            bar,
        )?);
        if let Some(done) = batches.last() {
            stream.batch(done)?;
        }
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
    Ok(Replayed {
        batches,
        samples,
        found,
        interrupted,
        elapsed_s,
    })
}

/// What was queued for one `process_queued`: the last fixture batch's place, and the headers,
/// attestations and enqueueing time since the previous call.
struct Queued {
    index: u64,
    slot: u64,
    current_epoch: u64,
    headers: usize,
    attestations: usize,
    enqueue_ms: f64,
}

/// One `process_queued` and `prune_database`, measured: the batch's record; its slashings are
/// added to `found`.
fn process_batch<E: Environment>(
    slasher: &Slasher<Timed<E>>,
    name: &str,
    queued: &Queued,
    io_start: &ProcIo,
    found: &mut SlashingsFound,
    bar: &ProgressBar,
) -> anyhow::Result<BatchRecord> {
    let storage_before = slasher.environment().storage_time();
    let calls_before = slasher.environment().storage_calls();
    let cpu_before = CpuTimes::now();
    let engine = slasher.environment().stats();
    let totals_before = engine.map(|e| e.commit_totals());
    // Starts the batch's span of commit peaks.
    let _ = engine.map(|e| e.take_commit_peaks());
    let t = Instant::now();
    let stats = slasher
        .process_queued(queued.current_epoch)
        .with_context(|| format!("{name}: process_queued of batch {}", queued.index))?;
    let process_ms = t.elapsed().as_secs_f64() * 1000.0;
    let t_prune = Instant::now();
    let prune = slasher
        .prune_database(queued.current_epoch)
        .with_context(|| format!("{name}: prune_database of batch {}", queued.index))?;
    let prune_ms = t_prune.elapsed().as_secs_f64() * 1000.0;
    let wall_ms = t.elapsed().as_secs_f64() * 1000.0;
    let cpu = cpu_before.until_now();
    let storage_ms = (slasher.environment().storage_time() - storage_before).as_secs_f64() * 1000.0;
    let storage_calls = slasher.environment().storage_calls() - calls_before;
    let totals = engine
        .zip(totals_before)
        .map(|(e, before)| (e.commit_totals().since(&before), e.take_commit_peaks()));
    let merges = totals.as_ref().map(|(totals, peaks)| BatchMerges {
        commit_bytes: totals.commit_bytes,
        largest_commit_bytes: peaks.largest_commit_bytes,
        installed: totals.merges,
        merged_bytes: totals.merged_bytes,
        largest_merge_bytes: peaks.largest_merge_bytes,
        largest_merge_table_bytes: peaks.largest_merge_table_bytes,
    });

    let size = files_size(&slasher.environment().filenames());
    let io_end = ProcIo::read()?;
    let attester = slasher.get_attester_slashings();
    let proposer = slasher.get_proposer_slashings();
    let slashings = BatchSlashings::canonical(&attester, &proposer);
    found.attester += slashings.attester_count();
    found.proposer += slashings.proposer_count();
    found.list.extend(summarise(queued.index, &slashings));

    bar.set_message(format!("last {wall_ms:.1} ms"));
    bar.inc(1);
    Ok(BatchRecord {
        index: queued.index,
        slot: queued.slot,
        current_epoch: queued.current_epoch,
        headers: queued.headers,
        attestations: queued.attestations,
        wall_ms,
        process_ms,
        prune_ms,
        storage_ms,
        storage_calls,
        cpu_ms: cpu.process.as_secs_f64() * 1000.0,
        thread_cpu_ms: cpu.thread.as_secs_f64() * 1000.0,
        commit_ms: ms(stats.timings.commit_us + prune.commit_us),
        process_commit_ms: ms(stats.timings.commit_us),
        prune_commit_ms: ms(prune.commit_us),
        enqueue_ms: queued.enqueue_ms,
        db_bytes: size.apparent,
        bytes_written: io_end.since(io_start).write_bytes,
        tiles_written: stats.attestation_stats.num_tiles_written,
        deferred: stats.attestation_stats.num_deferred,
        attester_slashings: slashings.attester_count(),
        proposer_slashings: slashings.proposer_count(),
        slashings_digest: slashings.digest(),
        commit_parts: totals.as_ref().map(|(totals, _)| commit_parts(totals)),
        merges,
        engine_memory: engine.map_or_else(Vec::new, |e| {
            e.memory()
                .into_iter()
                .map(|(name, v)| (name.to_string(), v))
                .collect()
        }),
    })
}

/// The end state (size, writes, memory), then the row's result; closes the slasher.
fn measure_result<E: Environment>(
    job: &ChildJob<'_>,
    manifest: &Manifest,
    config: &Config,
    before: Before,
    opened: Opened<E>,
    replayed: Replayed,
    fill: Option<FillSummary>,
) -> anyhow::Result<BackendResult> {
    let Before {
        device,
        device_before,
        io_before,
        ..
    } = before;
    let Opened {
        slasher,
        open_ms,
        durable,
        name,
    } = opened;
    let Replayed {
        batches,
        samples,
        found,
        interrupted,
        elapsed_s,
    } = replayed;
    let clock_ns = slasher_adapters::timed::clock_cost_ns();

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
        expected_within(manifest, batches.len() as u64).map(|e| check_expected(&e, &found.list));
    let walls: Vec<f64> = batches.iter().map(|b| b.wall_ms).collect();
    let commits: Vec<f64> = batches.iter().map(|b| b.commit_ms).collect();
    let wall = Summary::of(&walls);
    let commit = Summary::of(&commits);
    Ok(BackendResult {
        name,
        fill,
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
        client: None,
        clock_ns: Some(clock_ns),
    })
}

/// The start of a row's [`BatchStream`]: what the parent needs to make a row of the batches a
/// dead child finished.
fn row_head(
    job: &ChildJob<'_>,
    name: &str,
    durable: bool,
    durability: &str,
    open_ms: f64,
) -> BackendResult {
    BackendResult {
        name: name.to_string(),
        backend: job.backend.name().into(),
        filesystem: job.fs.label(),
        durable,
        durability: durability.into(),
        fs: job.fs.clone(),
        db_dir: job.db.clone(),
        open_ms,
        ..BackendResult::default()
    }
}

/// The soak's view of the database after batch `index`; see [`Sample`].
pub(super) fn take_sample(
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
    let fs_used = fs_used_bytes(db);
    Sample {
        index,
        db_bytes: size.apparent,
        db_allocated_bytes: size.allocated,
        fs_used_bytes: fs_used,
        fs_growth_bytes: fs_used_before
            .zip(fs_used)
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
