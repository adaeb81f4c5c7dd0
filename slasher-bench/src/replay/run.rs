//! The parent process of `slasher-bench replay`: one child per backend, then the report.

use super::args::ReplayArgs;
use super::child::run_child;
use super::dirs::{parse_backends, parse_db_dirs, prepare_dirs, Plan};
use super::partial::{batches_name, partial_row_of, OomWatch};
use super::run_info::{durability_name, measurement_notes, print_header, slasher_config};
use crate::fixtures::file::{FixtureReader, Manifest};
use crate::report::{self, BackendResult, Failure, FixtureInfo, Report, Run, SlasherConfigInfo};
use crate::system::clean::{db_name, DbDir, DbReplaced};
use crate::system::environment::{Build, Machine};
use crate::system::interrupt::Interrupt;
use crate::system::outdir::OutDir;
use anyhow::{anyhow, bail, Context};
use slasher_adapters::slasher::Config;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
            let text = crate::errors::chain_text(e);
            match args.child_fds.as_deref() {
                Some(&[_, _, error]) => {
                    if let Ok(mut file) = super::child::inherited_file(error) {
                        let _ = std::io::Write::write_all(&mut file, text.as_bytes());
                    }
                }
                _ => {
                    let _ = crate::system::outdir::write_file(&error_file(result), text);
                }
            }
        }
        return outcome;
    }
    let exe = std::env::current_exe().context("locating the slasher-bench executable")?;
    run_with_exe(&args, &exe)
}

/// Where a child writes its error text.
fn error_file(result_file: &Path) -> PathBuf {
    let mut name = result_file.as_os_str().to_owned();
    name.push(".error");
    PathBuf::from(name)
}

/// How one child ended.
#[derive(Debug)]
enum ChildOutcome {
    Done(Box<BackendResult>),
    /// Why, and the batches it finished (a row marked interrupted), if any.
    Failed(String, Option<Box<BackendResult>>),
}

/// Run one backend's child and wait for it, forwarding SIGINT/SIGTERM to it.
/// The child's files are named in `out` under `result_name` (a name no other user can guess,
/// so nothing is there to remove first), read and removed through `out`'s handle, never
/// through a symlink, and only if they are regular files of this user.
#[allow(clippy::too_many_arguments)]
fn run_backend_child(
    exe: &Path,
    args: &ReplayArgs,
    plan: &Plan,
    db: &Path,
    db_dir: &DbDir,
    out: &OutDir,
    result_name: &str,
    batches: u64,
    interrupt: &Interrupt,
) -> anyhow::Result<ChildOutcome> {
    let result_file = out.path().join(result_name);
    let errors = format!("{result_name}.error");
    let stream = batches_name(result_name);
    // The database directory goes to the child as an inherited descriptor (the one handle
    // on the directory this run made; the child never looks the path up to find it).
    let handle = db_dir
        .handle()
        .with_context(|| format!("opening {}", db.display()))?;
    rustix::io::fcntl_setfd(&handle, rustix::io::FdFlags::empty())
        .context("handing the database directory to the child")?;
    // The child's result, stream and error go to unnamed files in --out (O_TMPFILE), handed
    // down as descriptors: no name of the child's ever exists in --out, so none can be
    // planted, and nothing is left there whatever ends the run. Where the filesystem has no
    // O_TMPFILE, named files under unpredictable names instead.
    let unnamed = unnamed_files(out);
    let inherited = unnamed.as_ref().map(inheritable).transpose()?;
    let oom = OomWatch::start();
    let mut cmd = Command::new(exe);
    cmd.arg("replay")
        .arg("--fixture")
        .arg(&args.fixture)
        .arg("--backends")
        .arg(plan.backend.name())
        .arg("--db-dir")
        .arg(db)
        .arg("--db-dir-fd")
        .arg(handle.as_raw_fd().to_string())
        .arg("--child-result")
        .arg(&result_file)
        .arg("--parent-pid")
        .arg(std::process::id().to_string())
        .arg("--batches")
        .arg(batches.to_string())
        .args(args.settings.to_args())
        .stdin(Stdio::null())
        // Its own process group: a Ctrl-C at the terminal reaches the parent alone, which
        // forwards it once.
        .process_group(0);
    if let Some(fds) = &inherited {
        let list: Vec<String> = fds.iter().map(|f| f.as_raw_fd().to_string()).collect();
        cmd.arg("--child-fds").arg(list.join(","));
    }
    pass_on_options(&mut cmd, args);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("running {}", exe.display()))?;
    drop(handle);
    drop(inherited);
    let status = wait_forwarding_signals(&mut child, plan, interrupt)?;
    let read = |which, name: &str| read_child_file(unnamed.as_ref(), out, which, name);
    let outcome = if status.success() {
        match parse_result(read(0, result_name)) {
            Ok(r) => ChildOutcome::Done(Box::new(r)),
            Err(e) => ChildOutcome::Failed(
                format!(
                    "reading {}: {}",
                    result_file.display(),
                    crate::errors::chain_text(&e)
                ),
                None,
            ),
        }
    } else {
        let reason = failure_reason(read(2, &errors), &status, oom.as_ref());
        ChildOutcome::Failed(
            format!(
                "the {} child process failed ({status}): {reason}",
                plan.backend
            ),
            read(1, &stream)
                .and_then(|b| partial_row_of(&String::from_utf8_lossy(&b)))
                .map(Box::new),
        )
    };
    if unnamed.is_none() {
        for name in [result_name, &errors, &stream] {
            out.remove_own(name);
        }
    }
    Ok(outcome)
}

/// The child's three files (result, stream, error) as unnamed files in `out`, or `None` where
/// its filesystem has no `O_TMPFILE`.
fn unnamed_files(out: &OutDir) -> Option<[std::fs::File; 3]> {
    match [(); 3].map(|()| out.create_unnamed()) {
        [Ok(r), Ok(s), Ok(e)] => Some([r, s, e]),
        _ => None,
    }
}

/// Copies of the unnamed files for the child to inherit.
fn inheritable(files: &[std::fs::File; 3]) -> anyhow::Result<Vec<OwnedFd>> {
    let mut fds = Vec::new();
    for f in files {
        // dup: a copy without close-on-exec, for the child alone.
        fds.push(rustix::io::dup(f).context("handing a file to the child")?);
    }
    Ok(fds)
}

/// Adds the replay's options that the child takes as given to the parent.
fn pass_on_options(cmd: &mut Command, args: &ReplayArgs) {
    if args.non_durable {
        cmd.arg("--non-durable");
    }
    if args.no_progress {
        cmd.arg("--no-progress");
    }
    if let Some(n) = args.sample_every {
        cmd.arg("--sample-every").arg(n.to_string());
    }
    if let Some(n) = args.fill_epochs {
        cmd.arg("--fill-epochs").arg(n.to_string());
    }
    if let Some(mib) = args.butter_cache_mib {
        cmd.arg("--butter-cache-mib").arg(mib.to_string());
    }
}

/// Waits for the child to exit, forwarding the first SIGINT/SIGTERM the parent gets to it.
fn wait_forwarding_signals(
    child: &mut std::process::Child,
    plan: &Plan,
    interrupt: &Interrupt,
) -> anyhow::Result<std::process::ExitStatus> {
    let mut forwarded = false;
    loop {
        if let Some(status) = child.try_wait().context("waiting for the child")? {
            return Ok(status);
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
    }
}

/// What the child wrote to its result (0), stream (1) or error (2) file: the unnamed file, or
/// the file of this user's named `name` in `out`.
fn read_child_file(
    unnamed: Option<&[std::fs::File; 3]>,
    out: &OutDir,
    which: usize,
    name: &str,
) -> Option<Vec<u8>> {
    match unnamed {
        Some(files) => {
            let mut data = Vec::new();
            let mut file: &std::fs::File = files.get(which)?;
            std::io::Read::read_to_end(&mut file, &mut data).ok()?;
            Some(data)
        }
        None => out.read_own(name),
    }
}

/// The child's result, from what it wrote to its result file.
fn parse_result(bytes: Option<Vec<u8>>) -> anyhow::Result<BackendResult> {
    let bytes = bytes
        .filter(|b| !b.is_empty())
        .ok_or_else(|| anyhow!("the child wrote no result file of this user's"))?;
    Ok(serde_json::from_slice(&bytes)?)
}

/// Why a child failed: the text of its error file, else the OOM killer's doing, else that it
/// gave no reason.
fn failure_reason(
    error: Option<Vec<u8>>,
    status: &std::process::ExitStatus,
    oom: Option<&OomWatch>,
) -> String {
    error
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .filter(|t| !t.trim().is_empty())
        .map(|t| t.trim().to_string())
        .or_else(|| oom_killed(status, oom))
        .unwrap_or_else(|| "no reason given (see its output above)".to_string())
}

/// Why a child that died by SIGKILL died, if the OOM killer killed in its cgroup meanwhile.
fn oom_killed(status: &std::process::ExitStatus, oom: Option<&OomWatch>) -> Option<String> {
    use std::os::unix::process::ExitStatusExt as _;
    if status.signal() != Some(nix::sys::signal::Signal::SIGKILL as i32) {
        return None;
    }
    oom?.killed()
}

/// The parent: plan, check, run each backend in a child, merge, gate, write.
///
/// # Errors
/// As [`run`].
pub fn run_with_exe(args: &ReplayArgs, exe: &Path) -> anyhow::Result<()> {
    let interrupt =
        Interrupt::install_parent().context("installing the SIGINT/SIGTERM handlers")?;
    let prepared = prepare(args)?;
    let machine = Machine::probe();
    let build = Build::probe();
    print_header(
        &args.fixture,
        &prepared.manifest,
        prepared.batches_replayed,
        &machine,
        &build,
        &prepared.plans,
    );
    if args.non_durable {
        eprintln!("--non-durable: only redb honours it; the other backends stay durable");
    }
    let started_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut rows = Rows::default();
    for plan in &prepared.plans {
        if interrupt.is_set() {
            rows.not_started.push(plan.backend.name().to_string());
            continue;
        }
        run_row(
            exe,
            args,
            &prepared,
            plan,
            started_unix_s,
            &interrupt,
            &mut rows,
        )?;
    }
    let replaced = std::mem::take(&mut rows.replaced);
    let report = build_report(
        args,
        &prepared,
        rows,
        machine,
        build,
        started_unix_s,
        &interrupt,
    )?;
    if prepared.out_dir.holds("report.json") {
        eprintln!(
            "note: replacing the report of an earlier run in {}",
            prepared.out.display()
        );
    }
    // Through the handle taken before the run: --out is not looked up again.
    let written = report::write_outputs_in(&report, &prepared.out_dir)?;
    print!("{}", report::summary_table(&report));
    for f in &written {
        println!("wrote {}", f.display());
    }
    verdict(&report, &prepared.out, &replaced, &interrupt)
}

/// What the parent checked and planned before anything runs.
struct Prepared {
    out: PathBuf,
    manifest: Manifest,
    /// The slasher's configuration (its path is a placeholder; each child has its own).
    config: Config,
    out_dir: OutDir,
    plans: Vec<Plan>,
    /// Batches in the fixture, and how many of them are replayed.
    batch_count: u64,
    batches_replayed: u64,
}

/// Checks the arguments, the fixture's header, every directory and then the whole fixture,
/// in that order, so that a refused run creates neither `--out` nor a `--db-dir`.
fn prepare(args: &ReplayArgs) -> anyhow::Result<Prepared> {
    let out = args
        .out
        .clone()
        .ok_or_else(|| anyhow!("--out is required"))?;
    let backends = parse_backends(&args.backends)?;
    let dirs = parse_db_dirs(&args.db_dir, &backends)?;
    // The fixture's header first (nothing is created for a fixture that cannot be opened),
    // then every directory, before the fixture is read through or anything runs.
    let reader = FixtureReader::open(&args.fixture)
        .with_context(|| format!("opening fixture {}", args.fixture.display()))?;
    let manifest = reader.manifest().clone();
    // The settings too (--batches 0, --history-length 0, --validator-chunk-size 0,
    // --update-period 5, ...): a run refused for them creates neither --out nor a --db-dir.
    let fill_only = args.batches == Some(0) && args.fill_epochs.is_some() && args.keep_db;
    if args.batches == Some(0) && !fill_only {
        bail!(
            "nothing to replay: --batches 0 (allowed only with --fill-epochs and --keep-db, \
             to fill a database and keep it)"
        );
    }
    let config = slasher_config(&manifest, Path::new("."), args.non_durable, &args.settings)?;
    let (out_dir, plans) = prepare_dirs(&out, &backends, &dirs)?;

    eprintln!("checking fixture {} ...", args.fixture.display());
    let batch_count = reader
        .verify()
        .with_context(|| format!("checking fixture {}", args.fixture.display()))?;
    let batches_replayed = args.batches.map_or(batch_count, |n| n.min(batch_count));
    // `--batches 0 --fill-epochs N --keep-db` fills a database and keeps it (for another
    // program to replay on, as scripts/bench.sh does for Lighthouse's rows).
    if batches_replayed == 0 && !fill_only {
        match args.batches {
            Some(0) => bail!(
                "nothing to replay: --batches 0 (allowed only with --fill-epochs and --keep-db, \
                 to fill a database and keep it)"
            ),
            _ => bail!(
                "nothing to replay: the fixture {} has 0 batches",
                args.fixture.display()
            ),
        }
    }
    Ok(Prepared {
        out,
        manifest,
        config,
        out_dir,
        plans,
        batch_count,
        batches_replayed,
    })
}

/// The rows so far: the results (partial rows of failed children included), the failures, the
/// backends an interruption kept from starting, and the database directories another user
/// swapped during the run (the run then fails).
#[derive(Debug, Default)]
struct Rows {
    results: Vec<BackendResult>,
    failures: Vec<Failure>,
    not_started: Vec<String>,
    replaced: Vec<String>,
}

/// One backend's row: its database directory made, its child run, its outcome recorded in
/// `rows`, the directory removed (unless `--keep-db` on an uninterrupted run).
fn run_row(
    exe: &Path,
    args: &ReplayArgs,
    prepared: &Prepared,
    plan: &Plan,
    started_unix_s: u64,
    interrupt: &Interrupt,
    rows: &mut Rows,
) -> anyhow::Result<()> {
    let db = plan
        .root
        .join(db_name(plan.backend, std::process::id(), started_unix_s));
    // Made in the --db-dir handle taken before the run (its path is not looked up again).
    let parent = rustix::io::dup(&*plan.handle).context("the --db-dir handle")?;
    let db_dir = match DbDir::create_in(parent, &db, plan.backend) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => bail!(
            "{} already exists; remove it with `slasher-bench clean {}` or choose another \
             --db-dir",
            db.display(),
            plan.root.display()
        ),
        Err(e) => {
            return Err(e)
                .with_context(|| format!("creating the database directory {}", db.display()))
        }
    };
    let result_name =
        crate::system::outdir::unpredictable_name(&format!(".child-{}-", plan.backend), ".json");
    eprintln!("== {} in {}", plan.backend, db.display());
    let outcome = run_backend_child(
        exe,
        args,
        plan,
        &db,
        &db_dir,
        &prepared.out_dir,
        &result_name,
        prepared.batches_replayed,
        interrupt,
    );
    match outcome {
        Ok(ChildOutcome::Done(result)) => {
            print_row_line(&result, prepared.batches_replayed);
            rows.results.push(*result);
        }
        Ok(ChildOutcome::Failed(error, partial)) => {
            eprintln!("   {}: FAILED: {error}", plan.backend);
            rows.failures.push(Failure {
                backend: plan.backend.name().into(),
                error,
            });
            if let Some(row) = partial {
                eprintln!(
                    "   {}: kept the {} batches it finished (a partial row)",
                    row.name,
                    row.batches.len()
                );
                rows.results.push(*row);
            }
        }
        Err(e) => {
            let _ = db_dir.remove();
            return Err(e);
        }
    }
    // An interrupted run keeps nothing behind, whatever --keep-db says.
    if interrupt.is_set() || !args.keep_db {
        if let Err(e) = db_dir.remove() {
            eprintln!("warning: {}", crate::errors::chain_text(&e));
            if e.is::<DbReplaced>() {
                rows.replaced.push(db.display().to_string());
            }
        }
    }
    Ok(())
}

/// A finished row's line on the terminal.
fn print_row_line(result: &BackendResult, batches_replayed: u64) {
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
}

/// The run's report: its rows merged and gated, with what the run was.
fn build_report(
    args: &ReplayArgs,
    prepared: &Prepared,
    rows: Rows,
    machine: Machine,
    build: Build,
    started_unix_s: u64,
    interrupt: &Interrupt,
) -> anyhow::Result<Report> {
    let config = &prepared.config;
    let gated: Vec<&BackendResult> = rows.results.iter().collect();
    let correctness = report::correctness(&gated);
    let interrupted_by = interrupt.is_set().then(|| interrupt.signal_name());
    let run = Run {
        started_unix_s,
        command: std::env::args().collect(),
        fixture: FixtureInfo::new(
            &args.fixture,
            &prepared.manifest,
            prepared.batch_count,
            prepared.batches_replayed,
        )?,
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
        backends: rows.results,
        failures: rows.failures,
        correctness,
        interrupted: interrupted_by.is_some(),
        interrupted_by: interrupted_by.map(str::to_string),
        not_started: rows.not_started,
    };
    Ok(Report {
        schema: report::REPORT_SCHEMA.into(),
        generated_by: crate::TOOL.into(),
        runs: vec![run],
    })
}

/// The run's outcome once its report is written: an error for swapped database directories,
/// an interruption, a failed correctness gate, expected slashings not found, or failed
/// backends, in that order.
fn verdict(
    report: &Report,
    out: &Path,
    replaced: &[String],
    interrupt: &Interrupt,
) -> anyhow::Result<()> {
    let run = report.runs.first().ok_or_else(|| anyhow!("no run"))?;
    if !replaced.is_empty() {
        bail!(
            "database directories were replaced during the run and were not removed through the \
             replacement: {} (report in {})",
            replaced.join(", "),
            out.display()
        );
    }
    if run.interrupted_by.is_some() {
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
    if let Some(missed) = report::missing_expected(report) {
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
