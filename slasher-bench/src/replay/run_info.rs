//! What the report records about a run besides its rows: settings, durability, the header
//! printed before the first backend, and what each measured quantity means.

use super::dirs::Plan;
use super::settings::{SlasherSettings, SECONDS_PER_SLOT};
use crate::fixtures::file::Manifest;
use crate::system::environment::{Build, Machine};
use anyhow::{anyhow, bail};
use slasher_adapters::slasher::Config;
use slasher_adapters::Durability;
use std::path::Path;

pub(super) fn durability_name(d: Durability) -> &'static str {
    match d {
        Durability::Immediate => "immediate",
        Durability::Eventual => "eventual",
    }
}

/// The slasher configuration a fixture asks for, at `path`.
/// The slasher configuration a run uses: the settings given, else the fixture's hint, else
/// Lighthouse's defaults. Checked as Lighthouse checks it, plus the update period.
pub(super) fn slasher_config(
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

pub(super) fn print_header(
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
        "machine: kernel {}, {} ({} CPUs available), RAM {:.1} GiB; {} build (cargo profile {}), git {}",
        machine.kernel.as_deref().unwrap_or("?"),
        machine.cpu_model.as_deref().unwrap_or("?"),
        machine.cpus_available.unwrap_or(0),
        machine.ram_bytes.unwrap_or(0) as f64 / f64::from(1u32 << 30),
        build.profile,
        build.cargo_profile.as_deref().unwrap_or("?"),
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
pub(super) fn measurement_notes() -> Vec<String> {
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
