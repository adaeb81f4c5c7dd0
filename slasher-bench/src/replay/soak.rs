//! `slasher-bench soak`: weeks of chain in one run. It generates a chain long enough to wrap
//! the slasher's history `--wraps` times (with a history much shorter than Lighthouse's 4096
//! epochs, so that the wrap-arounds and the pruning they cause happen in hours, not months),
//! then replays it on each backend with `--sample-every` samples of the database and its
//! filesystem, and writes the usual report with a soak table and one chart per sampled
//! quantity (see `report::soak_trend`).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::fixtures::generate::{generate, GenerateOptions};
use crate::replay::{self, ReplayArgs};

/// The soak's default history, epochs.
const DEFAULT_HISTORY: usize = 64;

/// `soak` arguments.
#[derive(Debug, Args)]
pub struct SoakArgs {
    /// Active validators of the generated chain.
    #[arg(long, default_value_t = 16_384)]
    pub validators: u64,
    /// How many times the chain wraps the history (the run is `wraps × history + 2` epochs,
    /// 32 batches each).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    pub wraps: u64,
    /// Seed of the generated chain.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Sample every N batches (default: once per epoch).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    pub sample_every: u64,
    /// Backends, as for `replay`.
    #[arg(long, value_delimiter = ',')]
    pub backends: Vec<String>,
    /// Database directories, as for `replay`.
    #[arg(long)]
    pub db_dir: String,
    /// Output directory: the generated fixture (`soak.fixture`) and the report.
    #[arg(long)]
    pub out: PathBuf,
    /// No progress bars.
    #[arg(long)]
    pub no_progress: bool,
    /// The slasher's settings, as for `replay`; `--history-length` defaults to 64 epochs here,
    /// short, so that the chain wraps it soon.
    #[command(flatten)]
    pub settings: replay::SlasherSettings,
}

/// Generate the chain, then replay it with samples.
///
/// # Errors
/// Invalid settings, generation and replay errors.
pub fn run(args: SoakArgs) -> anyhow::Result<()> {
    let history_length = args.settings.history_length.unwrap_or(DEFAULT_HISTORY) as u64;
    let epochs = args
        .wraps
        .checked_mul(history_length)
        .and_then(|e| e.checked_add(2))
        .context("--wraps × --history-length is too large")?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let fixture = args.out.join("soak.fixture");
    let mut opts = GenerateOptions::new(args.validators, epochs, args.seed);
    opts.history_length = history_length;
    opts.name = Some(format!(
        "soak-{}v-h{}-x{}",
        args.validators, history_length, args.wraps
    ));
    eprintln!(
        "soak: generating {epochs} epochs ({} batches) of {} validators, history {}",
        epochs * 32,
        args.validators,
        history_length
    );
    generate(&opts, &fixture).with_context(|| format!("generating {}", fixture.display()))?;
    replay::run(ReplayArgs {
        fixture,
        backends: args.backends,
        db_dir: args.db_dir,
        out: Some(args.out),
        batches: None,
        non_durable: false,
        keep_db: false,
        no_progress: args.no_progress,
        sample_every: Some(args.sample_every),
        fill_epochs: None,
        butter_cache_mib: None,
        settings: args.settings,
        child_result: None,
        parent_pid: None,
        db_dir_fd: None,
        child_fds: None,
    })
}
