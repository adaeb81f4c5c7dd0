//! `slasher-bench`: produce replay fixtures (import, record, generate), inspect them, and replay
//! them through the slasher on every backend.
//!
//! Each subcommand is one variant of [`Command`] with its own `Args` struct and `run` function;
//! add a subcommand by adding a variant and a match arm in [`main`].
//!
//! Errors are printed by [`slasher_bench::errors::render`]: the message and each cause once,
//! no backtrace unless `--backtrace` or `SLASHER_BENCH_BACKTRACE=1` asks for one. Exit status:
//! 0 on success, 1 on an error, 130 (SIGINT) or 143 (SIGTERM) for an interrupted `replay`.

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use slasher_bench::fixtures::file::{FixtureReader, Manifest};
use slasher_bench::fixtures::generate::{generate, GenerateOptions};
use slasher_bench::fixtures::import::{import_beacon_api, ImportOptions};
use slasher_bench::fixtures::inject::{inject, InjectOptions};
use slasher_bench::fixtures::record::{record, RecordOptions};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// The allocator of the whole process (the replay parent and its child alike): jemalloc, as
/// Lighthouse links it, with feature `jemalloc` (on by default); glibc's malloc without it.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// butter_db's pressure function under jemalloc ([`slasher_adapters::butter`]). jemalloc keeps
/// freed pages for `dirty_decay_ms` (10 s by default) before it returns them, and a memory
/// cgroup counts them all that time. Under pressure (`true`) every arena's decay times, and
/// the default for arenas made later, are set to 0: an arena whose decay time is set to 0
/// purges all its unused pages at once (jemalloc 5.3, `pac_maybe_decay_purge`) and from then on
/// returns pages as they are freed. Once the pressure is gone (`false`) they are set back to
/// the process's settings (`opt.dirty_decay_ms`, `opt.muzzy_decay_ms`: jemalloc's defaults, or
/// what `_RJEM_MALLOC_CONF` says). Errors (an arena index not in use) are skipped: this only
/// ever changes how soon memory is given back.
#[cfg(all(feature = "jemalloc", feature = "butter"))]
fn jemalloc_on_memory_pressure(under: bool) {
    use tikv_jemalloc_ctl::{arenas, Access, AsName};
    let Ok(count) = arenas::narenas::read() else {
        return;
    };
    let kinds = [
        (
            &b"opt.dirty_decay_ms\0"[..],
            &b"arenas.dirty_decay_ms\0"[..],
            &b"arena.0.dirty_decay_ms\0"[..],
        ),
        (
            &b"opt.muzzy_decay_ms\0"[..],
            &b"arenas.muzzy_decay_ms\0"[..],
            &b"arena.0.muzzy_decay_ms\0"[..],
        ),
    ];
    for (setting, default, each) in kinds {
        let ms: isize = if under {
            0
        } else {
            match Access::read(setting.name()) {
                Ok(ms) => ms,
                Err(_) => continue,
            }
        };
        let _: Result<(), _> = Access::<isize>::write(default.name(), ms);
        let Ok(mut mib) = each.name().mib::<[usize; 3]>() else {
            continue;
        };
        for arena in 0..count as usize {
            mib[1] = arena;
            let _: Result<(), _> = Access::<isize>::write(&mib, ms);
        }
    }
}

#[derive(Debug, Parser)]
#[command(name = "slasher-bench", version, about)]
struct Cli {
    /// On an error, also print where it was made (a backtrace); the same as
    /// SLASHER_BENCH_BACKTRACE=1. Without it errors print no backtrace, whatever RUST_BACKTRACE
    /// says.
    #[arg(long, global = true)]
    backtrace: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Turn beacon-node REST API responses (attestations and headers per slot, optionally
    /// committees per epoch) into a replay fixture.
    ImportBeaconApi(ImportArgs),
    /// Fetch attestations, headers and committees from a live beacon node into a directory that
    /// `import-beacon-api` reads.
    Record(RecordArgs),
    /// Write a deterministic synthetic fixture with injected slashings.
    Generate(GenerateArgs),
    /// Copy a fixture with slashable events added (double votes, surround votes, double
    /// proposals by its own validators and proposers), listed in the manifest so that `replay`
    /// fails if a backend misses one.
    Inject(InjectArgs),
    /// Print a fixture's manifest and check every batch record.
    Inspect(InspectArgs),
    /// Replay a fixture through the slasher on every backend and write a report.
    Replay(slasher_bench::replay::ReplayArgs),
    /// Re-render one report, or merge several, from their report.json files.
    Report(slasher_bench::report::ReportArgs),
    /// Remove databases `replay` left behind, read-only btrfs snapshots included.
    ///
    /// For databases of an interrupted or killed run, or kept with --keep-db; works as root and
    /// as their unprivileged owner. Removes only directories named
    /// slasher-bench-<backend>-<pid>-<time> holding a .slasher-bench-db marker; refuses anything
    /// else.
    Clean(slasher_bench::system::clean::CleanArgs),
    /// Weeks of chain: generate a chain that wraps a short slasher history several times and
    /// replay it with samples of size, extents, snapshots, metadata and RSS (see
    /// docs/runs/soak.md §6).
    Soak(slasher_bench::replay::soak::SoakArgs),
    /// Turn a replay through Lighthouse's own slasher (the CSV of scripts/lighthouse.sh's runner)
    /// into a report row `lighthouse:<backend>@<fs>`, which `report` merges beside the port's
    /// rows: the correctness gate then compares client and port, and the report gives the
    /// port's medians against the client's per phase.
    ImportClient(slasher_bench::replay::client::ImportClientArgs),
    /// Move a slasher database to another backend, history included (e.g. --from lmdb:DIR
    /// --to butter:DIR2): all nine tables copied entry for entry, verified, and renamed into
    /// place only when complete.
    Migrate(slasher_bench::migrate::MigrateArgs),
}

#[derive(Debug, Args)]
#[command(
    after_help = "File names: every entry of the three directories must be named \
    <N>.json or <N>.json.gz, where N is the slot (the epoch for committees) in decimal without \
    leading zeros (4699968, not 04699968; slot 0 is 0). Names starting with '.' are ignored. \
    Any other name, or the same N both as .json and .json.gz, is an error listing the files. \
    A file is gunzipped if it starts with the gzip magic; one response may be at most 64 MiB \
    once inflated. A file holding null or no `data` is a missed slot; an import that yields \
    0 batches is an error."
)]
struct ImportArgs {
    /// Directory of `<slot>.json[.gz]` responses of `/eth/v1/beacon/blocks/<slot>/attestations`.
    #[arg(long)]
    attestations: PathBuf,
    /// Directory of `<slot>.json[.gz]` responses of `/eth/v1/beacon/headers/<slot>`.
    #[arg(long)]
    headers: PathBuf,
    /// Directory of `<epoch>.json[.gz]` responses of `/eth/v1/beacon/states/<id>/committees`;
    /// without it, committees are synthesised with the spec shuffle and a substitute seed.
    #[arg(long)]
    committees: Option<PathBuf>,
    /// First slot to import.
    #[arg(long)]
    from_slot: Option<u64>,
    /// Last slot to import (inclusive).
    #[arg(long)]
    to_slot: Option<u64>,
    /// Fixture name for the manifest.
    #[arg(long)]
    name: Option<String>,
    /// Network name for the manifest.
    #[arg(long, default_value = "mainnet")]
    network: String,
    /// Output fixture file.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Debug, Args)]
struct RecordArgs {
    /// Base URL of the beacon node's REST API, e.g. http://127.0.0.1:5052.
    #[arg(long)]
    beacon_node: String,
    /// First slot.
    #[arg(long)]
    from_slot: u64,
    /// Last slot (inclusive).
    #[arg(long)]
    to_slot: u64,
    /// Output directory (attestations/, headers/, committees/).
    #[arg(long)]
    out: PathBuf,
    /// Attempts per request.
    #[arg(long, default_value_t = 5)]
    attempts: u32,
    /// Per-request timeout in seconds.
    #[arg(long, default_value_t = 60)]
    timeout_secs: u64,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

#[derive(Debug, Args)]
struct GenerateArgs {
    /// Active validators (default: about mainnet's active set in 2026).
    #[arg(long, default_value_t = slasher_bench::fixtures::generate::DEFAULT_VALIDATORS)]
    validators: u64,
    /// Attestation shape: one aggregate per slot over several committees (electra, mainnet
    /// today) or one per committee (phase0, before Electra).
    #[arg(long, value_enum, default_value_t = slasher_bench::fixtures::generate::Fork::Electra)]
    fork: slasher_bench::fixtures::generate::Fork,
    /// Epochs (one batch per slot).
    #[arg(long)]
    epochs: u64,
    /// Seed.
    #[arg(long)]
    seed: u64,
    /// First epoch (the default is about mainnet's in late 2026, so the slasher's whole history
    /// window lies before it, as on a node started today).
    #[arg(long, default_value_t = slasher_bench::fixtures::generate::DEFAULT_START_EPOCH)]
    start_epoch: u64,
    /// Injected double votes.
    #[arg(long, default_value_t = 2)]
    double_votes: u32,
    /// Injected surround votes.
    #[arg(long, default_value_t = 2)]
    surround_votes: u32,
    /// Injected double proposals.
    #[arg(long, default_value_t = 2)]
    double_proposals: u32,
    /// Fixture name for the manifest.
    #[arg(long)]
    name: Option<String>,
    /// The slasher history in epochs that the fixture's config hint names (replay's default).
    #[arg(long, default_value_t = 4096)]
    history_length: u64,
    /// Output fixture file.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Debug, Args)]
struct InjectArgs {
    /// The fixture to copy.
    #[arg(long)]
    fixture: PathBuf,
    /// Double votes to add.
    #[arg(long, default_value_t = 4)]
    double_votes: u32,
    /// Surround votes to add.
    #[arg(long, default_value_t = 4)]
    surround_votes: u32,
    /// Double proposals to add.
    #[arg(long, default_value_t = 2)]
    double_proposals: u32,
    /// Seed of the choices (the same input and options give the same bytes).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Every event is complete at or after this batch (0-based)…
    #[arg(long, default_value_t = 1)]
    first_batch: u64,
    /// …and at or before this one (default: the last batch).
    #[arg(long)]
    last_batch: Option<u64>,
    /// Each double vote's two attestations in one batch (default: the second in the next
    /// batch); a double proposal's two headers always are in one batch.
    #[arg(long)]
    same_batch: bool,
    /// Output fixture file.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Debug, Args)]
struct InspectArgs {
    /// Fixture file.
    fixture: PathBuf,
}

fn run_import(args: ImportArgs) -> anyhow::Result<()> {
    let mut opts = ImportOptions::new(args.attestations, args.headers);
    opts.committees_dir = args.committees;
    opts.from_slot = args.from_slot;
    opts.to_slot = args.to_slot;
    opts.name = args.name;
    opts.network = args.network;
    let summary = import_beacon_api(&opts, &args.out)
        .with_context(|| format!("importing into {}", args.out.display()))?;
    let c = &summary.manifest.contents;
    println!(
        "wrote {}: {} batches, {} headers, {} attestations, {} missed slots skipped",
        args.out.display(),
        c.batch_count,
        c.header_count,
        c.attestation_count,
        summary.missed_slots.len()
    );
    for epoch in &summary.active_validators {
        println!(
            "epoch {}: {} active validators ({} committees seen, {})",
            epoch.epoch, epoch.active_validators, epoch.committees_seen, epoch.inferred_from
        );
    }
    Ok(())
}

fn run_record(args: RecordArgs) -> anyhow::Result<()> {
    let mut opts = RecordOptions::new(args.beacon_node, args.from_slot, args.to_slot, args.out);
    opts.attempts = args.attempts;
    opts.timeout = Duration::from_secs(args.timeout_secs);
    opts.progress = !args.quiet;
    let summary = record(&opts).context("recording")?;
    println!(
        "fetched {} files, skipped {} already present, {} missed slots (404), {} retries; \
         attestations from the {} endpoint",
        summary.fetched, summary.skipped, summary.missed, summary.retries, summary.attestations_api
    );
    Ok(())
}

fn run_generate(args: GenerateArgs) -> anyhow::Result<()> {
    let mut opts = GenerateOptions::new(args.validators, args.epochs, args.seed);
    opts.start_epoch = args.start_epoch;
    opts.double_votes = args.double_votes;
    opts.surround_votes = args.surround_votes;
    opts.double_proposals = args.double_proposals;
    opts.name = args.name;
    opts.history_length = args.history_length;
    opts.fork = args.fork;
    let manifest =
        generate(&opts, &args.out).with_context(|| format!("generating {}", args.out.display()))?;
    print_written(&args.out, &manifest);
    Ok(())
}

/// One line about a fixture just written.
fn print_written(out: &Path, manifest: &Manifest) {
    let c = &manifest.contents;
    println!(
        "wrote {}: {} batches, {} headers, {} attestations, {} expected slashings",
        out.display(),
        c.batch_count,
        c.header_count,
        c.attestation_count,
        manifest
            .description
            .expected_slashings
            .as_ref()
            .map_or(0, Vec::len)
    );
}

fn run_inject(args: InjectArgs) -> anyhow::Result<()> {
    let opts = InjectOptions {
        double_votes: args.double_votes,
        surround_votes: args.surround_votes,
        double_proposals: args.double_proposals,
        seed: args.seed,
        first_batch: args.first_batch,
        last_batch: args.last_batch,
        same_batch: args.same_batch,
    };
    let manifest = inject(&args.fixture, &args.out, &opts)
        .with_context(|| format!("injecting slashings into {}", args.fixture.display()))?;
    print_written(&args.out, &manifest);
    Ok(())
}

fn run_inspect(args: InspectArgs) -> anyhow::Result<()> {
    let reader = FixtureReader::open(&args.fixture)?;
    println!("{}", serde_json::to_string_pretty(reader.manifest())?);
    let batches = reader.verify()?;
    println!("ok: {batches} batches verified");
    Ok(())
}

/// Prints warnings and errors that the storage engines report through the `log` facade (for
/// butter_db: a failed background merge, a generation it could not delete yet, a full disk it
/// is waiting out) on stderr, one line each, naming the module.
struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Warn
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            eprintln!("{} {}: {}", record.level(), record.target(), record.args());
        }
    }

    fn flush(&self) {}
}

static LOGGER: StderrLogger = StderrLogger;

fn main() -> ExitCode {
    // Only fails if a logger is already set, which nothing else here does.
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
    #[cfg(all(feature = "jemalloc", feature = "butter"))]
    slasher_adapters::butter::set_on_memory_pressure(jemalloc_on_memory_pressure);
    let cli = Cli::parse();
    let backtrace = slasher_bench::errors::backtrace_wanted(cli.backtrace);
    // anyhow captures a backtrace when RUST_LIB_BACKTRACE (else RUST_BACKTRACE) asks; ask for
    // it exactly when it will be printed. Still one thread here, and children inherit it.
    std::env::set_var("RUST_LIB_BACKTRACE", if backtrace { "1" } else { "0" });
    if backtrace {
        std::env::set_var(slasher_bench::errors::BACKTRACE_ENV, "1");
    }
    let outcome = match cli.command {
        Command::ImportBeaconApi(args) => run_import(args),
        Command::Record(args) => run_record(args),
        Command::Generate(args) => run_generate(args),
        Command::Inject(args) => run_inject(args),
        Command::Inspect(args) => run_inspect(args),
        Command::Replay(args) => slasher_bench::replay::run(args),
        Command::Report(args) => slasher_bench::report::run(args),
        Command::Clean(args) => slasher_bench::system::clean::run(args),
        Command::Soak(args) => slasher_bench::replay::soak::run(args),
        Command::ImportClient(args) => slasher_bench::replay::client::run(args),
        Command::Migrate(args) => slasher_bench::migrate::run(args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprint!("{}", slasher_bench::errors::render(&e, backtrace));
            match e.downcast_ref::<slasher_bench::replay::Interrupted>() {
                Some(i) if i.signal == "SIGINT" => ExitCode::from(130),
                Some(_) => ExitCode::from(143),
                None => ExitCode::FAILURE,
            }
        }
    }
}

#[cfg(all(test, feature = "jemalloc", feature = "butter"))]
mod tests {
    use tikv_jemalloc_ctl::{Access, AsName};

    /// This process's resident memory in bytes (`VmRSS`).
    fn resident_bytes() -> u64 {
        slasher_bench::system::measure::current_rss_bytes().expect("VmRSS in /proc/self/status")
    }

    fn decay(name: &[u8]) -> isize {
        Access::read(name.name()).unwrap()
    }

    #[test]
    fn pressure_gives_freed_pages_back_and_relief_restores_the_settings() {
        const MIB: usize = 1 << 20;
        const KEPT: u64 = 32 << 20;
        let setting = decay(b"opt.dirty_decay_ms\0");
        assert_ne!(
            setting, 0,
            "jemalloc already returns pages at once: nothing to show"
        );
        let before = resident_bytes();
        // 64 MiB in 1 MiB blocks, every page written, then freed: jemalloc keeps the pages.
        let blocks: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8 | 1; MIB]).collect();
        drop(blocks);
        let freed = resident_bytes();
        assert!(
            freed >= before + KEPT,
            "jemalloc gave the pages back by itself (resident {before} bytes, {freed} after \
             the free), so this test would show nothing"
        );
        super::jemalloc_on_memory_pressure(true);
        let released = resident_bytes();
        assert!(
            released + KEPT <= freed,
            "resident {freed} bytes before the pressure call, {released} after"
        );
        assert_eq!(decay(b"arena.0.dirty_decay_ms\0"), 0);
        assert_eq!(decay(b"arenas.dirty_decay_ms\0"), 0);
        super::jemalloc_on_memory_pressure(false);
        assert_eq!(decay(b"arena.0.dirty_decay_ms\0"), setting);
        assert_eq!(decay(b"arenas.dirty_decay_ms\0"), setting);
        assert_eq!(
            decay(b"arena.0.muzzy_decay_ms\0"),
            decay(b"opt.muzzy_decay_ms\0")
        );
    }
}
