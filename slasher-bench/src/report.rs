//! The replay report: its JSON schema ([`Report`]), the correctness gate
//! ([`first_disagreement`]), and its renderings: `report.md` (one table per fixture, with
//! ratios to LMDB), `batches.csv` and SVG charts (per-batch time series, CDF of batch times,
//! database size over batches).
//!
//! `slasher-bench report IN... [--out DIR]` ([`run`]) re-renders one report or merges several
//! (e.g. an ext4 run and a btrfs run) into one; rows keep their filesystem labels.

use crate::environment::{Build, FsInfo, Machine};
use crate::measure::{ProcIo, Summary};
use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Identifies the JSON layout below.
pub const REPORT_SCHEMA: &str = "slasher-bench-report/1";

/// A whole report: one or more replay runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// [`REPORT_SCHEMA`].
    pub schema: String,
    /// `slasher-bench <version>` that wrote the file.
    pub generated_by: String,
    /// Runs, in the order they were merged.
    pub runs: Vec<Run>,
}

/// One `slasher-bench replay` invocation: one fixture, several backends on one machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    /// When the run started (Unix seconds).
    pub started_unix_s: u64,
    /// The command line.
    pub command: Vec<String>,
    /// The fixture replayed.
    pub fixture: FixtureInfo,
    /// The slasher configuration every backend used.
    pub slasher_config: SlasherConfigInfo,
    /// The machine.
    pub machine: Machine,
    /// The build.
    pub build: Build,
    /// What each measured quantity means (and what was not measured).
    pub notes: Vec<String>,
    /// One row per backend that completed.
    pub backends: Vec<BackendResult>,
    /// Backends that did not complete.
    pub failures: Vec<Failure>,
    /// The correctness gate over this run's rows.
    pub correctness: Correctness,
    /// Whether SIGINT or SIGTERM stopped the run: its rows hold the batches done before it.
    #[serde(default)]
    pub interrupted: bool,
    /// The signal that stopped the run (`SIGINT` or `SIGTERM`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_by: Option<String>,
    /// Backends the interruption kept from starting.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_started: Vec<String>,
}

/// The fixture of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FixtureInfo {
    /// Path as given.
    pub path: PathBuf,
    /// Manifest `description.name`.
    pub name: String,
    /// Manifest `contents.records_sha256`: identifies the batches.
    pub records_sha256: String,
    /// Batches in the file.
    pub batch_count: u64,
    /// Batches replayed (`--batches` may limit it).
    pub batches_replayed: u64,
    /// The whole manifest.
    pub manifest: serde_json::Value,
}

/// The slasher configuration of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SlasherConfigInfo {
    /// C.
    pub chunk_size: usize,
    /// K.
    pub validator_chunk_size: usize,
    /// H.
    pub history_length: usize,
    /// LRU capacity.
    pub attestation_root_cache_size: usize,
    /// LMDB map size / MDBX upper geometry, MiB.
    pub max_db_size_mbs: usize,
    /// `immediate` or `eventual` (`--non-durable`); each row says what its backend honoured.
    pub durability_requested: String,
    /// How tiles were compressed: `lighthouse` (zlib level 6) or `fast` (libdeflate level 1;
    /// every report written before the choice existed used it).
    #[serde(default = "fast_codec")]
    pub tile_codec: String,
    /// Seconds of slots per batch.
    #[serde(default = "one_slot")]
    pub update_period_s: u64,
}

fn fast_codec() -> String {
    "fast".into()
}

fn one_slot() -> u64 {
    12
}

impl SlasherConfigInfo {
    /// What a row's times depend on besides the backend, in one line; rows are only compared
    /// with rows of the same settings.
    pub fn label(&self) -> String {
        format!(
            "tile codec {}, history {}, chunk {}×{}, one batch per {} s",
            self.tile_codec,
            self.history_length,
            self.chunk_size,
            self.validator_chunk_size,
            self.update_period_s
        )
    }
}

/// A backend that failed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Failure {
    /// Backend name.
    pub backend: String,
    /// What happened.
    pub error: String,
}

/// One backend's replay of the fixture.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BackendResult {
    /// Row label: `<backend>[-nondurable]@<filesystem>`, e.g. `lmdb@ext4`.
    pub name: String,
    /// `lmdb`, `mdbx`, `redb` or `butter`.
    pub backend: String,
    /// Filesystem type of the database directory.
    pub filesystem: String,
    /// `Environment::durable()`: a commit that returned survives power loss.
    pub durable: bool,
    /// Durability passed to the backend (`immediate` / `eventual`).
    pub durability: String,
    /// Mount details of the database directory.
    pub fs: FsInfo,
    /// The database directory.
    pub db_dir: PathBuf,
    /// Opening the environment and creating the tables.
    pub open_ms: f64,
    /// Wall time of batch 0 (the cold start).
    pub first_batch_ms: f64,
    /// Median batch wall time (all batches, nearest rank).
    pub median_batch_ms: f64,
    /// 99th percentile batch wall time (all batches, nearest rank).
    pub p99_batch_ms: f64,
    /// Slowest batch.
    pub max_batch_ms: f64,
    /// Mean batch wall time.
    pub mean_batch_ms: f64,
    /// Sum of batch wall times, seconds.
    pub total_s: f64,
    /// Whole replay loop including fixture decoding and enqueueing, seconds.
    pub elapsed_s: f64,
    /// Median of the commit part (both commits) of a batch.
    pub median_commit_ms: f64,
    /// 99th percentile of the commit part.
    pub p99_commit_ms: f64,
    /// Sum of the commit parts, seconds.
    pub commit_total_s: f64,
    /// Sum of the apparent sizes of `filenames()` after the last batch.
    pub db_bytes_final: u64,
    /// Sum of the allocated sizes of `filenames()` after the last batch.
    pub db_allocated_bytes_final: u64,
    /// `/proc/self/io` `write_bytes` of the child process from before open to after the last
    /// batch (see the run's notes).
    pub bytes_written: u64,
    /// The whole `/proc/self/io` delta over the same span.
    pub proc_io: ProcIo,
    /// Bytes the database's block device received over the run, after a final `syncfs`
    /// (device-wide: includes other processes writing to the same device).
    pub device_bytes_written: Option<u64>,
    /// fsync/fdatasync/msync calls; `None`: not measured.
    pub sync_calls: Option<u64>,
    /// Peak resident set of the child process (`VmHWM`).
    pub peak_rss_bytes: Option<u64>,
    /// Slashings found.
    pub slashings: SlashingsFound,
    /// Whether the slashings the fixture's manifest lists were found (synthetic fixtures, whole
    /// fixture replayed); `None` otherwise.
    pub expected_slashings: Option<ExpectedCheck>,
    /// Every batch.
    pub batches: Vec<BatchRecord>,
    /// The soak's samples (`replay --sample-every N`), in batch order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<Sample>,
    /// Whether the run was interrupted during this row: `batches` then holds the batches done,
    /// fewer than the run's `batches_replayed`.
    #[serde(default)]
    pub interrupted: bool,
}

/// One batch of one backend.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BatchRecord {
    /// Position in the fixture.
    pub index: u64,
    /// Slot of the batch.
    pub slot: u64,
    /// Epoch passed to `process_queued` and `prune_database`.
    pub current_epoch: u64,
    /// Headers enqueued.
    pub headers: usize,
    /// Attestations enqueued.
    pub attestations: usize,
    /// `process_queued` + `prune_database`, wall.
    pub wall_ms: f64,
    /// `process_queued` alone.
    pub process_ms: f64,
    /// `prune_database` alone.
    pub prune_ms: f64,
    /// Time inside storage calls during `wall_ms` (get, put, del, cursors, begin, commit; see
    /// `slasher_adapters::timed`); the rest of `wall_ms` is the slasher's own work. 0 in
    /// reports written before it was measured.
    #[serde(default)]
    pub storage_ms: f64,
    /// Both commits (from `BatchStats` and `PruneStats`).
    pub commit_ms: f64,
    /// The `process_queued` commit.
    pub process_commit_ms: f64,
    /// The `prune_database` commit.
    pub prune_commit_ms: f64,
    /// Queueing (hashing) the batch's headers and attestations; not part of `wall_ms`.
    pub enqueue_ms: f64,
    /// Sum of the apparent sizes of `filenames()` after the batch.
    pub db_bytes: u64,
    /// `/proc/self/io` `write_bytes` during the batch.
    pub bytes_written: u64,
    /// Min and max tiles written.
    pub tiles_written: usize,
    /// Attestations deferred to a later batch (target epoch in the future).
    pub deferred: usize,
    /// Attester slashings found in this batch.
    pub attester_slashings: usize,
    /// Proposer slashings found in this batch.
    pub proposer_slashings: usize,
    /// SHA-256 of the sorted SSZ encodings of this batch's slashings; `None` if there were none.
    pub slashings_digest: Option<String>,
}

/// The state of a database and its filesystem after a batch (`replay --sample-every`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Sample {
    /// The batch after which it was taken.
    pub index: u64,
    /// Apparent size of `filenames()` (the newest state).
    pub db_bytes: u64,
    /// Allocated size of `filenames()`.
    pub db_allocated_bytes: u64,
    /// Bytes the database's filesystem has in use now minus before the backend opened: the
    /// database's footprint with everything the filesystem keeps for it (snapshots, deleted
    /// generations not yet reclaimed), if nothing else writes to that filesystem.
    pub fs_growth_bytes: Option<i64>,
    /// btrfs metadata in use on that filesystem.
    pub btrfs_metadata_used_bytes: Option<u64>,
    /// Extents of the files of `filenames()` (`filefrag`).
    pub extents: Option<u64>,
    /// `gen-*` entries in the database directory: butter_db's live snapshots.
    pub snapshots: u64,
    /// Resident set of the replaying process.
    pub rss_bytes: Option<u64>,
    /// Bytes the database's block device received since the run started.
    pub device_bytes_written: Option<u64>,
}

/// Slashings one backend found.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SlashingsFound {
    /// Attester slashings (double and surround votes).
    pub attester: usize,
    /// Proposer slashings.
    pub proposer: usize,
    /// Each slashing, in batch order, then sorted.
    pub list: Vec<SlashingRecord>,
}

/// One slashing, summarised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlashingRecord {
    /// Batch that found it.
    pub batch: u64,
    /// `double_vote`, `surround_vote` or `double_proposal`.
    pub kind: String,
    /// Attester slashings: the validators in both attestations. Proposer: the proposer.
    pub validators: Vec<u64>,
    /// Attester slashings: the first attestation.
    pub attestation_1: Option<VoteRecord>,
    /// Attester slashings: the second attestation.
    pub attestation_2: Option<VoteRecord>,
    /// Proposer slashings: the slot.
    pub slot: Option<u64>,
}

/// An attestation of a slashing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct VoteRecord {
    /// Source epoch.
    pub source_epoch: u64,
    /// Target epoch.
    pub target_epoch: u64,
    /// `hash_tree_root(data)`, `0x` hex.
    pub data_root: String,
}

/// Expected (manifest) versus found slashings.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExpectedCheck {
    /// Slashings listed in the manifest.
    pub expected: usize,
    /// Of which found.
    pub found: usize,
    /// Descriptions of the missing ones.
    pub missing: Vec<String>,
    /// Found slashings that match no listed one.
    pub unexpected: usize,
}

/// The correctness gate of a set of rows replaying the same batches.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Correctness {
    /// Every compared row found the same slashings in every batch.
    pub agree: bool,
    /// Row names compared.
    pub compared: Vec<String>,
    /// The first batch where they differ.
    pub first_difference: Option<Disagreement>,
}

/// Where rows first disagree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Disagreement {
    /// Batch index.
    pub batch_index: u64,
    /// Per row: name, digest, attester and proposer counts (`None` digest: no slashings;
    /// `missing` if the row has no such batch).
    pub rows: Vec<DisagreementRow>,
}

/// One row's view of the disagreeing batch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DisagreementRow {
    /// Row name.
    pub name: String,
    /// Digest, `none` or `missing`.
    pub digest: String,
    /// Attester slashings in the batch.
    pub attester: usize,
    /// Proposer slashings in the batch.
    pub proposer: usize,
}

impl std::fmt::Display for Disagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rows: Vec<String> = self
            .rows
            .iter()
            .map(|r| {
                let digest = r.digest.get(..16).unwrap_or(&r.digest);
                format!(
                    "{} ({} attester, {} proposer, digest {digest})",
                    r.name, r.attester, r.proposer
                )
            })
            .collect();
        write!(
            f,
            "slashings differ first at batch {}: {}",
            self.batch_index,
            rows.join("; ")
        )?;
        Ok(())
    }
}

/// Compare the per-batch slashing digests of rows that replayed the same batches. Returns the
/// first batch where any two differ (a row lacking the batch counts as different, unless the
/// row was interrupted: an interrupted row is compared on the batches it did).
pub fn first_disagreement(rows: &[&BackendResult]) -> Option<Disagreement> {
    let longest = rows.iter().map(|r| r.batches.len()).max().unwrap_or(0);
    for i in 0..longest {
        let views: Vec<DisagreementRow> = rows
            .iter()
            .filter(|r| !r.interrupted || i < r.batches.len())
            .map(|r| match r.batches.get(i) {
                Some(b) => DisagreementRow {
                    name: r.name.clone(),
                    digest: b.slashings_digest.clone().unwrap_or_else(|| "none".into()),
                    attester: b.attester_slashings,
                    proposer: b.proposer_slashings,
                },
                None => DisagreementRow {
                    name: r.name.clone(),
                    digest: "missing".into(),
                    attester: 0,
                    proposer: 0,
                },
            })
            .collect();
        let first = views.first().map(|v| v.digest.clone());
        if views.iter().any(|v| Some(&v.digest) != first.as_ref()) {
            let batch_index = rows
                .iter()
                .find_map(|r| r.batches.get(i).map(|b| b.index))
                .unwrap_or(i as u64);
            return Some(Disagreement {
                batch_index,
                rows: views,
            });
        }
    }
    None
}

/// Run the gate over `rows`.
pub fn correctness(rows: &[&BackendResult]) -> Correctness {
    let first_difference = first_disagreement(rows);
    Correctness {
        agree: first_difference.is_none(),
        compared: rows.iter().map(|r| r.name.clone()).collect(),
        first_difference,
    }
}

/// Rows of a report that replayed the same batches (same `records_sha256` and batch count),
/// keyed by fixture, with the run index of each row.
/// Rows by (fixture records, batches replayed, settings label): only rows of one group are
/// compared with each other.
pub type Groups<'a> = BTreeMap<(String, u64, String), Vec<(usize, &'a BackendResult)>>;

/// Group a report's rows by fixture.
pub fn groups(report: &Report) -> Groups<'_> {
    let mut out: Groups<'_> = BTreeMap::new();
    for (run_index, run) in report.runs.iter().enumerate() {
        let key = (
            run.fixture.records_sha256.clone(),
            run.fixture.batches_replayed,
            run.slasher_config.label(),
        );
        for row in &run.backends {
            out.entry(key.clone()).or_default().push((run_index, row));
        }
    }
    out
}

/// The correctness gate over every fixture group of a (possibly merged) report: the first
/// disagreement found, with its fixture name.
pub fn gate(report: &Report) -> Option<(String, Disagreement)> {
    for ((sha, _, _), rows) in groups(report) {
        let only: Vec<&BackendResult> = rows.iter().map(|(_, r)| *r).collect();
        if let Some(d) = first_disagreement(&only) {
            let name = report
                .runs
                .iter()
                .find(|r| r.fixture.records_sha256 == sha)
                .map_or(sha.clone(), |r| r.fixture.name.clone());
            return Some((name, d));
        }
    }
    None
}

/// The second half of the gate: rows that missed slashings the fixture lists as expected
/// (`inject`ed or generated), described in one line; `None` when every row found them all.
pub fn missing_expected(report: &Report) -> Option<String> {
    let missed: Vec<String> = report
        .runs
        .iter()
        .flat_map(|run| &run.backends)
        .filter_map(|r| {
            let e = r.expected_slashings.as_ref()?;
            (!e.missing.is_empty()).then(|| {
                format!(
                    "{} found {} of {} ({})",
                    r.name,
                    e.found,
                    e.expected,
                    e.missing.join("; ")
                )
            })
        })
        .collect();
    (!missed.is_empty()).then(|| missed.join("; "))
}

// ---- rendering -------------------------------------------------------------------------------

/// Write `report.json`, `batches.csv`, `report.md` and the SVG charts into `out` (created if
/// missing). Returns the files written.
///
/// # Errors
/// I/O and chart-drawing errors.
pub fn write_outputs(report: &Report, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut written = Vec::new();
    let json = out.join("report.json");
    std::fs::write(&json, serde_json::to_vec_pretty(report)?)
        .with_context(|| format!("writing {}", json.display()))?;
    written.push(json);
    let csv = out.join("batches.csv");
    std::fs::write(&csv, render_csv(report))
        .with_context(|| format!("writing {}", csv.display()))?;
    written.push(csv);
    let charts = crate::report::charts::write_charts(report, out)?;
    let md = out.join("report.md");
    std::fs::write(&md, render_markdown(report, &charts))
        .with_context(|| format!("writing {}", md.display()))?;
    written.push(md);
    written.extend(charts.into_iter().map(|c| c.path));
    Ok(written)
}

/// `batches.csv`: one line per (row, batch).
pub fn render_csv(report: &Report) -> String {
    let mut s = String::from(
        "run,name,backend,filesystem,durable,index,slot,current_epoch,headers,attestations,\
         wall_ms,process_ms,prune_ms,commit_ms,enqueue_ms,db_bytes,bytes_written,tiles_written,\
         attester_slashings,proposer_slashings,storage_ms\n",
    );
    for (run_index, run) in report.runs.iter().enumerate() {
        for r in &run.backends {
            for b in &r.batches {
                let _ = writeln!(
                    s,
                    "{run_index},{},{},{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{},{},{},{},{},{:.3}",
                    csv_field(&r.name),
                    csv_field(&r.backend),
                    csv_field(&r.filesystem),
                    r.durable,
                    b.index,
                    b.slot,
                    b.current_epoch,
                    b.headers,
                    b.attestations,
                    b.wall_ms,
                    b.process_ms,
                    b.prune_ms,
                    b.commit_ms,
                    b.enqueue_ms,
                    b.db_bytes,
                    b.bytes_written,
                    b.tiles_written,
                    b.attester_slashings,
                    b.proposer_slashings,
                    b.storage_ms
                );
            }
        }
    }
    s
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The LMDB row a row is compared with: LMDB on the same filesystem if present in the group,
/// else any LMDB row of the group.
fn baseline<'a>(
    row: &BackendResult,
    group: &[(usize, &'a BackendResult)],
) -> Option<&'a BackendResult> {
    let lmdb = || {
        group
            .iter()
            .map(|(_, r)| *r)
            .filter(|r| r.backend == "lmdb" && r.durable)
    };
    lmdb()
        .find(|r| r.filesystem == row.filesystem)
        .or_else(|| lmdb().next())
}

fn ratio(value: f64, base: Option<f64>) -> String {
    match base {
        Some(b) if b > 0.0 => format!("{:.2}×", value / b),
        _ => "–".into(),
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

fn opt_mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "n/m".into(), mib)
}

/// `report.md`.
pub fn render_markdown(report: &Report, charts: &[charts::Chart]) -> String {
    let mut s = String::from("# slasher-bench replay report\n\n");
    let _ = writeln!(
        s,
        "Each batch is replayed through the slasher as Lighthouse does it: the batch's headers and \
         attestations are queued, then `process_queued(current_epoch)` runs in one write \
         transaction and `prune_database(current_epoch)` in a second one. *Batch time* is the \
         wall time of both; *commit* is the time of the two commits alone. Each backend runs in \
         its own process, one after another, on a fresh database. Times in milliseconds; \
         ratios are row ÷ LMDB on the same filesystem (else any LMDB row of the table); below 1 \
         is faster than LMDB.\n"
    );
    if let Some((fixture, d)) = gate(report) {
        let _ = writeln!(s, "**CORRECTNESS GATE FAILED** (fixture {fixture}): {d}\n");
    }
    if let Some(missed) = missing_expected(report) {
        let _ = writeln!(s, "**EXPECTED SLASHINGS NOT FOUND**: {missed}\n");
    }
    for (i, run) in report.runs.iter().enumerate() {
        render_run_status(&mut s, i, run);
    }
    for ((sha, batches, settings), group) in groups(report) {
        let name = report
            .runs
            .iter()
            .find(|r| r.fixture.records_sha256 == sha)
            .map_or("?", |r| r.fixture.name.as_str());
        let _ = writeln!(s, "## Fixture `{name}`: {batches} batches; {settings}\n");
        let only: Vec<&BackendResult> = group.iter().map(|(_, r)| *r).collect();
        match first_disagreement(&only) {
            None => {
                let total: usize = only
                    .first()
                    .map_or(0, |r| r.slashings.attester + r.slashings.proposer);
                let _ = writeln!(
                    s,
                    "Correctness gate: all {} rows found the same slashings in every batch \
                     ({total} in total).\n",
                    only.len()
                );
            }
            Some(d) => {
                let _ = writeln!(s, "Correctness gate: **FAILED**: {d}\n");
            }
        }
        s.push_str(
            "| run | backend | filesystem | durability | first batch | median | p99 | max | \
             total s | median ×LMDB | p99 ×LMDB | first ×LMDB | total ×LMDB | median commit | \
             DB MiB (apparent / allocated) | written MiB | device MiB | peak RSS MiB | slashings |\n",
        );
        s.push_str(
            "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\
             ---:|---:|\n",
        );
        for (run_index, r) in &group {
            let base = baseline(r, &group);
            let durability = if r.durable {
                "durable".to_string()
            } else {
                format!("**NON-DURABLE** ({})", r.durability)
            };
            let _ = writeln!(
                s,
                "| {run_index} | {}{} | {} | {durability} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | \
                 {} | {} | {} | {} | {:.2} | {} / {} | {} | {} | {} | {} |",
                r.name,
                if r.interrupted {
                    format!(" (**partial**: {} batches)", r.batches.len())
                } else {
                    String::new()
                },
                r.filesystem,
                r.first_batch_ms,
                r.median_batch_ms,
                r.p99_batch_ms,
                r.max_batch_ms,
                r.total_s,
                ratio(r.median_batch_ms, base.map(|b| b.median_batch_ms)),
                ratio(r.p99_batch_ms, base.map(|b| b.p99_batch_ms)),
                ratio(r.first_batch_ms, base.map(|b| b.first_batch_ms)),
                ratio(r.total_s, base.map(|b| b.total_s)),
                r.median_commit_ms,
                mib(r.db_bytes_final),
                mib(r.db_allocated_bytes_final),
                mib(r.bytes_written),
                opt_mib(r.device_bytes_written),
                opt_mib(r.peak_rss_bytes),
                r.slashings.attester + r.slashings.proposer,
            );
        }
        s.push('\n');
        render_phases(&mut s, &group);
        render_soak(&mut s, &group);
        let expected: Vec<String> = group
            .iter()
            .filter_map(|(_, r)| {
                let e = r.expected_slashings.as_ref()?;
                Some(format!(
                    "{}: {}/{} expected found, {} unexpected{}",
                    r.name,
                    e.found,
                    e.expected,
                    e.unexpected,
                    if e.missing.is_empty() {
                        String::new()
                    } else {
                        format!(" (missing: {})", e.missing.join("; "))
                    }
                ))
            })
            .collect();
        if !expected.is_empty() {
            let _ = writeln!(s, "Injected slashings (from the fixture manifest):\n");
            for line in expected {
                let _ = writeln!(s, "- {line}");
            }
            s.push('\n');
        }
        for chart in charts.iter().filter(|c| c.group == sha) {
            let file = chart
                .path
                .file_name()
                .and_then(|f| f.to_str())
                .unwrap_or_default();
            let _ = writeln!(s, "![{}]({file})\n", chart.title);
        }
    }
    for (i, run) in report.runs.iter().enumerate() {
        render_run_details(&mut s, i, run);
    }
    s
}

/// The phases of a replay, by the epoch the slasher is told (`current_epoch`) relative to the
/// first batch's: the cold start fills the database from empty, the next epoch still writes
/// most tiles for the first time, and after that the database is in its steady state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Batches of the first batch's epoch.
    ColdEpoch,
    /// Batches of the epoch after it.
    NextEpoch,
    /// Every later batch.
    Steady,
}

impl Phase {
    /// The three phases in replay order.
    pub const ALL: [Phase; 3] = [Phase::ColdEpoch, Phase::NextEpoch, Phase::Steady];

    /// The phase of a batch `epochs_after` epochs after the first batch's.
    pub fn of_offset(epochs_after: u64) -> Phase {
        match epochs_after {
            0 => Phase::ColdEpoch,
            1 => Phase::NextEpoch,
            _ => Phase::Steady,
        }
    }

    /// Name as printed in reports.
    pub fn name(self) -> &'static str {
        match self {
            Phase::ColdEpoch => "cold epoch",
            Phase::NextEpoch => "next epoch",
            Phase::Steady => "steady",
        }
    }
}

/// Wall and storage time of one row in one phase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseTimes {
    /// Batches in the phase.
    pub batches: usize,
    /// Median batch wall time, ms.
    pub median_ms: f64,
    /// Sum of batch wall times, s.
    pub total_s: f64,
    /// Median time inside storage calls per batch, ms.
    pub storage_median_ms: f64,
    /// Sum of storage time, s.
    pub storage_total_s: f64,
}

/// A row's times in `phase`; `None` if the row has no batch in it.
pub fn phase_times(row: &BackendResult, phase: Phase) -> Option<PhaseTimes> {
    let first = row.batches.first()?.current_epoch;
    let in_phase: Vec<&BatchRecord> = row
        .batches
        .iter()
        .filter(|b| Phase::of_offset(b.current_epoch.saturating_sub(first)) == phase)
        .collect();
    if in_phase.is_empty() {
        return None;
    }
    let wall: Vec<f64> = in_phase.iter().map(|b| b.wall_ms).collect();
    let storage: Vec<f64> = in_phase.iter().map(|b| b.storage_ms).collect();
    let (wall, storage) = (Summary::of(&wall), Summary::of(&storage));
    Some(PhaseTimes {
        batches: in_phase.len(),
        median_ms: wall.median,
        total_s: wall.sum / 1000.0,
        storage_median_ms: storage.median,
        storage_total_s: storage.sum / 1000.0,
    })
}

/// The per-phase table: end-to-end and storage time, medians and totals, with ratios to the
/// row's LMDB baseline in the same phase.
fn render_phases(s: &mut String, group: &[(usize, &BackendResult)]) {
    if group
        .iter()
        .all(|(_, r)| r.batches.iter().all(|b| b.storage_ms == 0.0))
    {
        return;
    }
    s.push_str(
        "Where the time goes, by phase (*storage*: time inside the backend's calls — get, put, \
         del, cursors, commit; the rest of a batch is the slasher's own work, the same code for \
         every backend):\n\n",
    );
    s.push_str(
        "| run | backend | phase | batches | median | total s | storage median | storage total s | \
         storage share | median ×LMDB | total ×LMDB | storage median ×LMDB | storage total ×LMDB |\n",
    );
    s.push_str("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (run_index, r) in group {
        let base = baseline(r, group);
        for phase in Phase::ALL {
            let Some(t) = phase_times(r, phase) else {
                continue;
            };
            let b = base.and_then(|b| phase_times(b, phase));
            let share = if t.total_s > 0.0 {
                format!("{:.0} %", 100.0 * t.storage_total_s / t.total_s)
            } else {
                "–".into()
            };
            let _ = writeln!(
                s,
                "| {run_index} | {} | {} | {} | {:.1} | {:.2} | {:.1} | {:.2} | {share} | {} | {} | {} | {} |",
                r.name,
                phase.name(),
                t.batches,
                t.median_ms,
                t.total_s,
                t.storage_median_ms,
                t.storage_total_s,
                ratio(t.median_ms, b.map(|b| b.median_ms)),
                ratio(t.total_s, b.map(|b| b.total_s)),
                ratio(t.storage_median_ms, b.map(|b| b.storage_median_ms)),
                ratio(t.storage_total_s, b.map(|b| b.storage_total_s)),
            );
        }
    }
    s.push('\n');
}

/// How a long run aged: the figures the soak is judged by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoakTrend {
    /// Batches in the steady phase (after the cold and the next epoch).
    pub warm_batches: usize,
    /// Median batch time of the last 10 % of warm batches over that of the first 10 %: above 1
    /// is a slowdown over the run.
    pub trend: f64,
    /// Median warm batch, ms.
    pub warm_median_ms: f64,
    /// Slowest warm batch, ms.
    pub largest_stall_ms: f64,
    /// Apparent database size after the last sample.
    pub end_db_bytes: u64,
    /// Filesystem growth after the last sample, if measured.
    pub end_fs_growth_bytes: Option<i64>,
    /// Most live snapshots in any sample.
    pub max_snapshots: u64,
    /// Extents after the last sample, if measured.
    pub end_extents: Option<u64>,
}

/// The soak figures of a row; `None` without samples or without warm batches.
pub fn soak_trend(row: &BackendResult) -> Option<SoakTrend> {
    let last_sample = row.samples.last()?;
    let first = row.batches.first()?.current_epoch;
    let warm: Vec<f64> = row
        .batches
        .iter()
        .filter(|b| b.current_epoch >= first + 2)
        .map(|b| b.wall_ms)
        .collect();
    if warm.is_empty() {
        return None;
    }
    let tenth = (warm.len() / 10).max(1);
    let head = Summary::of(&warm[..tenth]).median;
    let tail = Summary::of(&warm[warm.len() - tenth..]).median;
    let all = Summary::of(&warm);
    Some(SoakTrend {
        warm_batches: warm.len(),
        trend: if head > 0.0 { tail / head } else { f64::NAN },
        warm_median_ms: all.median,
        largest_stall_ms: all.max,
        end_db_bytes: last_sample.db_bytes,
        end_fs_growth_bytes: last_sample.fs_growth_bytes,
        max_snapshots: row.samples.iter().map(|s| s.snapshots).max().unwrap_or(0),
        end_extents: last_sample.extents,
    })
}

/// The soak table (rows with samples only).
fn render_soak(s: &mut String, group: &[(usize, &BackendResult)]) {
    let rows: Vec<(usize, &BackendResult, SoakTrend)> = group
        .iter()
        .filter_map(|(i, r)| soak_trend(r).map(|t| (*i, *r, t)))
        .collect();
    if rows.is_empty() {
        return;
    }
    s.push_str(
        "Soak (`--sample-every`): *trend* is the median batch of the last 10 % of warm batches \
         (after the first two epochs) over that of the first 10 %; *stall* is the slowest warm \
         batch over the warm median; sizes and extents after the last batch; *fs growth* is \
         what the database's filesystem gained since the backend opened (snapshots and \
         not-yet-reclaimed space included; exact only if nothing else writes there).\n\n",
    );
    s.push_str(
        "| run | backend | warm batches | warm median | trend | largest stall | stall ÷ median | \
         DB MiB | fs growth MiB | fs growth ÷ DB | max snapshots | extents |\n",
    );
    s.push_str("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (i, r, t) in rows {
        let fs_ratio = t
            .end_fs_growth_bytes
            .filter(|_| t.end_db_bytes > 0)
            .map_or_else(
                || "–".into(),
                |g| format!("{:.2}", g as f64 / t.end_db_bytes as f64),
            );
        let growth = t
            .end_fs_growth_bytes
            .map_or_else(|| "n/m".into(), |g| format!("{:.1}", g as f64 / 1048576.0));
        let _ = writeln!(
            s,
            "| {i} | {} | {} | {:.1} | {:.2} | {:.1} | {:.2} | {} | {} | {fs_ratio} | {} | {} |",
            r.name,
            t.warm_batches,
            t.warm_median_ms,
            t.trend,
            t.largest_stall_ms,
            t.largest_stall_ms / t.warm_median_ms,
            mib(t.end_db_bytes),
            growth,
            t.max_snapshots,
            t.end_extents
                .map_or_else(|| "n/m".into(), |e| e.to_string()),
        );
    }
    s.push('\n');
}

/// The warnings at the top of `report.md`: an interrupted run and failed rows, with the reason.
fn render_run_status(s: &mut String, index: usize, run: &Run) {
    if run.interrupted {
        let done: Vec<String> = run
            .backends
            .iter()
            .map(|r| {
                format!(
                    "`{}` {} batches{}",
                    r.name,
                    r.batches.len(),
                    if r.interrupted { " (partial)" } else { "" }
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "**INTERRUPTED**: run {index} was stopped by {} before it was complete; its rows hold \
             only the batches done, of {} asked for: {}{}. Partial rows are not comparable with \
             complete ones.\n",
            run.interrupted_by.as_deref().unwrap_or("a signal"),
            run.fixture.batches_replayed,
            if done.is_empty() {
                "no row".to_string()
            } else {
                done.join(", ")
            },
            if run.not_started.is_empty() {
                String::new()
            } else {
                format!("; not started: {}", run.not_started.join(", "))
            }
        );
    }
    for failure in &run.failures {
        let _ = writeln!(
            s,
            "**FAILED** (run {index}) `{}`: {}\n",
            failure.backend, failure.error
        );
    }
}

fn render_run_details(s: &mut String, index: usize, run: &Run) {
    let m = &run.machine;
    let b = &run.build;
    let c = &run.slasher_config;
    let _ = writeln!(s, "## Run {index}: environment\n");
    let _ = writeln!(s, "- command: `{}`", run.command.join(" "));
    let _ = writeln!(
        s,
        "- fixture: `{}` ({}), {} of {} batches replayed, records sha256 `{}`",
        run.fixture.name,
        run.fixture.path.display(),
        run.fixture.batches_replayed,
        run.fixture.batch_count,
        run.fixture.records_sha256
    );
    let _ = writeln!(
        s,
        "- slasher config: C = {}, K = {}, H = {}, LRU {}, max_db_size_mbs {}, durability \
         requested: {}",
        c.chunk_size,
        c.validator_chunk_size,
        c.history_length,
        c.attestation_root_cache_size,
        c.max_db_size_mbs,
        c.durability_requested
    );
    let _ = writeln!(
        s,
        "- machine: kernel {}, CPU {} ({} online, {} available to the process), RAM {} GiB",
        m.kernel.as_deref().unwrap_or("?"),
        m.cpu_model.as_deref().unwrap_or("?"),
        m.cpus_online.map_or("?".into(), |n| n.to_string()),
        m.cpus_available.map_or("?".into(), |n| n.to_string()),
        m.ram_bytes.map_or("?".into(), |r| format!(
            "{:.1}",
            r as f64 / (1u64 << 30) as f64
        )),
    );
    let _ = writeln!(
        s,
        "- build: {} profile, git {}{}",
        b.profile,
        b.git_revision.as_deref().unwrap_or("unknown"),
        if b.git_dirty == Some(true) {
            " (with uncommitted changes)"
        } else {
            ""
        }
    );
    if b.profile != "release" {
        let _ = writeln!(
            s,
            "- **WARNING: not a release build; these times are not benchmarks.**"
        );
    }
    let versions: Vec<String> = b
        .crate_versions
        .iter()
        .map(|v| format!("{} {}", v.name, v.version))
        .collect();
    let _ = writeln!(s, "- crates: {}", versions.join(", "));
    for r in &run.backends {
        let f = &r.fs;
        let _ = writeln!(
            s,
            "- `{}`: {} (statfs magic {}) at {}, mounted on {} from {}{} with `{}` / `{}`; \
             database in {}; durable: {}",
            r.name,
            f.fs_type,
            f.magic,
            f.path.display(),
            f.mount_point
                .as_ref()
                .map_or("?".into(), |p| p.display().to_string()),
            f.device.as_deref().unwrap_or("?"),
            f.loop_backing_file
                .as_ref()
                .map_or(String::new(), |b| format!(" (loop file {b})")),
            f.mount_options.as_deref().unwrap_or("?"),
            f.super_options.as_deref().unwrap_or("?"),
            r.db_dir.display(),
            r.durable
        );
    }
    for failure in &run.failures {
        let _ = writeln!(s, "- **FAILED** `{}`: {}", failure.backend, failure.error);
    }
    if !run.notes.is_empty() {
        let _ = writeln!(s, "\nWhat the numbers mean:\n");
        for note in &run.notes {
            let _ = writeln!(s, "- {note}");
        }
    }
    s.push('\n');
}

// ---- `slasher-bench report` ------------------------------------------------------------------

/// `slasher-bench report`: re-render or merge reports.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Report directories (holding `report.json`) or `report.json` files.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Output directory; defaults to the input directory when there is exactly one input.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Read a report from a directory or a `report.json` path.
///
/// # Errors
/// I/O or JSON errors; an unknown schema.
pub fn load(path: &Path) -> anyhow::Result<Report> {
    let file = if path.is_dir() {
        path.join("report.json")
    } else {
        path.to_path_buf()
    };
    let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
    let report: Report =
        serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", file.display()))?;
    if report.schema != REPORT_SCHEMA {
        bail!(
            "{}: schema {:?}, this build reads {REPORT_SCHEMA:?}",
            file.display(),
            report.schema
        );
    }
    Ok(report)
}

/// Concatenate the runs of several reports.
pub fn merge(reports: Vec<Report>) -> Report {
    Report {
        schema: REPORT_SCHEMA.into(),
        generated_by: crate::TOOL.into(),
        runs: reports.into_iter().flat_map(|r| r.runs).collect(),
    }
}

/// Run `slasher-bench report`.
///
/// # Errors
/// Unreadable inputs, write errors, or rows of one fixture that disagree on the slashings
/// (after writing the merged report).
pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    let out = match (&args.out, args.inputs.as_slice()) {
        (Some(out), _) => out.clone(),
        (None, [one]) if one.is_dir() => one.clone(),
        (None, [one]) => one
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
        (None, _) => bail!("several inputs: say where the merged report goes with --out DIR"),
    };
    let reports = args
        .inputs
        .iter()
        .map(|p| load(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let report = merge(reports);
    let written = write_outputs(&report, &out)?;
    print!("{}", summary_table(&report));
    for f in &written {
        println!("wrote {}", f.display());
    }
    if let Some((fixture, d)) = gate(&report) {
        bail!("correctness gate failed on fixture {fixture}: {d}");
    }
    if let Some(missed) = missing_expected(&report) {
        bail!("expected slashings not found: {missed}");
    }
    Ok(())
}

/// A short plain-text table of every row: for the terminal.
pub fn summary_table(report: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<26} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9}",
        "row", "first ms", "median ms", "p99 ms", "max ms", "total s", "med×LMDB", "p99×LMDB"
    );
    for group in groups(report).values() {
        for (_, r) in group {
            let base = baseline(r, group);
            let _ = writeln!(
                s,
                "{:<26} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>9.2} {:>9} {:>9}",
                format!(
                    "{}{}{}",
                    r.name,
                    if r.durable { "" } else { " (non-durable)" },
                    if r.interrupted { " (partial)" } else { "" }
                ),
                r.first_batch_ms,
                r.median_batch_ms,
                r.p99_batch_ms,
                r.max_batch_ms,
                r.total_s,
                ratio(r.median_batch_ms, base.map(|b| b.median_batch_ms)),
                ratio(r.p99_batch_ms, base.map(|b| b.p99_batch_ms)),
            );
        }
    }
    s
}

pub mod charts {
    //! SVG charts of a report, one set per fixture group.

    use super::{groups, BackendResult, Report, Sample};
    use anyhow::anyhow;
    use plotters::prelude::*;
    use std::path::{Path, PathBuf};

    /// A chart written to disk.
    #[derive(Debug, Clone)]
    pub struct Chart {
        /// The fixture group (`records_sha256`).
        pub group: String,
        /// Title.
        pub title: String,
        /// File.
        pub path: PathBuf,
    }

    const SIZE: (u32, u32) = (1100, 600);

    /// Draw the per-batch time series, the CDF of batch times and the database size for every
    /// fixture group of `report` into `out`.
    ///
    /// # Errors
    /// Drawing or I/O errors.
    pub fn write_charts(report: &Report, out: &Path) -> anyhow::Result<Vec<Chart>> {
        let all = groups(report);
        let several = all.len() > 1;
        let mut charts = Vec::new();
        for (n, ((sha, _, _), group)) in all.iter().enumerate() {
            let rows: Vec<&BackendResult> = group.iter().map(|(_, r)| *r).collect();
            if rows.iter().all(|r| r.batches.is_empty()) {
                continue;
            }
            let suffix = if several {
                format!("-{n}")
            } else {
                String::new()
            };
            let mut add = |stem: &str, title: &str| {
                let path = out.join(format!("{stem}{suffix}.svg"));
                charts.push(Chart {
                    group: sha.clone(),
                    title: title.into(),
                    path: path.clone(),
                });
                path
            };
            let p = add(
                "batch_times",
                "Per-batch wall time (process_queued + prune), ms, log scale",
            );
            time_series(&p, &rows).map_err(|e| anyhow!("drawing {}: {e}", p.display()))?;
            let p = add("batch_cdf", "CDF of batch wall times, ms, log scale");
            cdf(&p, &rows).map_err(|e| anyhow!("drawing {}: {e}", p.display()))?;
            let p = add(
                "db_size",
                "Database size (sum of filenames() sizes) after each batch",
            );
            db_size(&p, &rows).map_err(|e| anyhow!("drawing {}: {e}", p.display()))?;
            if rows.iter().any(|r| !r.samples.is_empty()) {
                for (stem, title, metric) in SAMPLE_CHARTS {
                    let p = add(stem, title);
                    samples(&p, &rows, title, *metric)
                        .map_err(|e| anyhow!("drawing {}: {e}", p.display()))?;
                }
            }
        }
        Ok(charts)
    }

    type DrawResult = Result<(), Box<dyn std::error::Error>>;

    type Metric = fn(&Sample) -> Option<f64>;

    fn mib(bytes: u64) -> f64 {
        bytes as f64 / (1024.0 * 1024.0)
    }

    /// The soak's charts: one per sampled quantity, every row on each.
    const SAMPLE_CHARTS: &[(&str, &str, Metric)] = &[
        (
            "soak_fs_growth",
            "Filesystem growth since the backend opened, MiB",
            |s| s.fs_growth_bytes.map(|g| g as f64 / (1024.0 * 1024.0)),
        ),
        (
            "soak_db_size",
            "Database size (filenames(), apparent), MiB",
            |s| Some(mib(s.db_bytes)),
        ),
        (
            "soak_extents",
            "Extents of the database files (filefrag)",
            |s| s.extents.map(|e| e as f64),
        ),
        ("soak_snapshots", "Live gen-N snapshots", |s| {
            Some(s.snapshots as f64)
        }),
        ("soak_metadata", "btrfs metadata in use, MiB", |s| {
            s.btrfs_metadata_used_bytes.map(mib)
        }),
        (
            "soak_rss",
            "Resident set of the replaying process, MiB",
            |s| s.rss_bytes.map(mib),
        ),
    ];

    fn samples(path: &Path, rows: &[&BackendResult], title: &str, metric: Metric) -> DrawResult {
        let root = SVGBackend::new(path, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let values = || {
            rows.iter()
                .flat_map(|r| r.samples.iter().filter_map(metric))
        };
        let hi = values().fold(0.0f64, f64::max).max(1.0) * 1.15;
        let batches = rows
            .iter()
            .filter_map(|r| r.samples.last().map(|s| s.index + 1))
            .max()
            .unwrap_or(1)
            .max(2);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0u64..batches, 0.0..hi)?;
        chart.configure_mesh().x_desc("batch").draw()?;
        for (i, r) in rows.iter().enumerate() {
            let c = color(i);
            let points: Vec<(u64, f64)> = r
                .samples
                .iter()
                .filter_map(|s| metric(s).map(|v| (s.index, v)))
                .collect();
            chart
                .draw_series(LineSeries::new(points, c.stroke_width(2)))?
                .label(label(r))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        }
        legend(&mut chart)?;
        root.present()?;
        Ok(())
    }

    fn color(i: usize) -> RGBColor {
        const COLORS: [RGBColor; 8] = [
            RGBColor(31, 119, 180),
            RGBColor(255, 127, 14),
            RGBColor(44, 160, 44),
            RGBColor(214, 39, 40),
            RGBColor(148, 103, 189),
            RGBColor(140, 86, 75),
            RGBColor(227, 119, 194),
            RGBColor(127, 127, 127),
        ];
        COLORS.get(i % COLORS.len()).copied().unwrap_or(BLACK)
    }

    fn label(r: &BackendResult) -> String {
        if r.durable {
            r.name.clone()
        } else {
            format!("{} (non-durable)", r.name)
        }
    }

    fn time_range(rows: &[&BackendResult]) -> (f64, f64) {
        let times = rows
            .iter()
            .flat_map(|r| r.batches.iter().map(|b| b.wall_ms));
        let (lo, hi) = times.fold((f64::MAX, 0.0f64), |(lo, hi), t| (lo.min(t), hi.max(t)));
        let lo = lo.clamp(0.001, f64::MAX) * 0.8;
        (lo, (hi * 1.25).max(lo * 10.0))
    }

    fn time_series(path: &Path, rows: &[&BackendResult]) -> DrawResult {
        let root = SVGBackend::new(path, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let (lo, hi) = time_range(rows);
        let batches = rows
            .iter()
            .map(|r| r.batches.len())
            .max()
            .unwrap_or(1)
            .max(2) as u64;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Per-batch wall time (process_queued + prune_database)",
                ("sans-serif", 22),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0u64..batches, (lo..hi).log_scale())?;
        chart.configure_mesh().x_desc("batch").y_desc("ms").draw()?;
        for (i, r) in rows.iter().enumerate() {
            let c = color(i);
            let points = r.batches.iter().map(|b| (b.index, b.wall_ms.max(lo)));
            chart
                .draw_series(LineSeries::new(points, c.stroke_width(1)))?
                .label(label(r))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        }
        legend(&mut chart)?;
        root.present()?;
        Ok(())
    }

    fn cdf(path: &Path, rows: &[&BackendResult]) -> DrawResult {
        let root = SVGBackend::new(path, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let (lo, hi) = time_range(rows);
        let mut chart = ChartBuilder::on(&root)
            .caption("CDF of batch wall times", ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0f64..1.0)?;
        chart
            .configure_mesh()
            .x_desc("batch wall time, ms")
            .y_desc("fraction of batches ≤ x")
            .draw()?;
        for (i, r) in rows.iter().enumerate() {
            let c = color(i);
            let mut times: Vec<f64> = r.batches.iter().map(|b| b.wall_ms.max(lo)).collect();
            times.sort_by(f64::total_cmp);
            let n = times.len() as f64;
            // A step function: each sample raises the curve by 1/n at its value.
            let mut points = Vec::with_capacity(times.len() * 2);
            for (k, t) in times.iter().enumerate() {
                points.push((*t, k as f64 / n));
                points.push((*t, (k + 1) as f64 / n));
            }
            chart
                .draw_series(LineSeries::new(points, c.stroke_width(2)))?
                .label(label(r))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        }
        legend(&mut chart)?;
        root.present()?;
        Ok(())
    }

    fn db_size(path: &Path, rows: &[&BackendResult]) -> DrawResult {
        let root = SVGBackend::new(path, SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        let sizes = || {
            rows.iter()
                .flat_map(|r| r.batches.iter().map(|b| mib(b.db_bytes)))
        };
        // Log scale: preallocating engines (MDBX geometry) are orders of magnitude above the
        // others on small fixtures.
        let lo = sizes()
            .filter(|s| *s > 0.0)
            .fold(f64::MAX, f64::min)
            .min(1.0)
            * 0.8;
        let hi = sizes().fold(0.0f64, f64::max).max(lo * 10.0) * 1.25;
        let batches = rows
            .iter()
            .map(|r| r.batches.len())
            .max()
            .unwrap_or(1)
            .max(2) as u64;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Database size after each batch (sum of filenames() sizes)",
                ("sans-serif", 22),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0u64..batches, (lo..hi).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("batch")
            .y_desc("MiB, log scale")
            .draw()?;
        for (i, r) in rows.iter().enumerate() {
            let c = color(i);
            let points = r.batches.iter().map(|b| (b.index, mib(b.db_bytes).max(lo)));
            chart
                .draw_series(LineSeries::new(points, c.stroke_width(2)))?
                .label(label(r))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
        }
        legend(&mut chart)?;
        root.present()?;
        Ok(())
    }

    fn legend<'a, DB, CT>(chart: &mut ChartContext<'a, DB, CT>) -> DrawResult
    where
        DB: DrawingBackend + 'a,
        DB::ErrorType: 'static,
        CT: CoordTranslate,
    {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .draw()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, backend: &str, fs: &str, digests: &[Option<&str>]) -> BackendResult {
        BackendResult {
            name: name.into(),
            backend: backend.into(),
            filesystem: fs.into(),
            durable: true,
            median_batch_ms: 2.0,
            batches: digests
                .iter()
                .enumerate()
                .map(|(i, d)| BatchRecord {
                    index: i as u64,
                    slashings_digest: d.map(str::to_string),
                    attester_slashings: usize::from(d.is_some()),
                    ..BatchRecord::default()
                })
                .collect(),
            ..BackendResult::default()
        }
    }

    /// A row whose batches have the given (epoch, wall ms, storage ms).
    fn timed_row(name: &str, backend: &str, batches: &[(u64, f64, f64)]) -> BackendResult {
        BackendResult {
            name: name.into(),
            backend: backend.into(),
            filesystem: "ext4".into(),
            durable: true,
            batches: batches
                .iter()
                .enumerate()
                .map(|(i, &(current_epoch, wall_ms, storage_ms))| BatchRecord {
                    index: i as u64,
                    current_epoch,
                    wall_ms,
                    storage_ms,
                    ..BatchRecord::default()
                })
                .collect(),
            ..BackendResult::default()
        }
    }

    #[test]
    fn phases_split_by_epoch_after_the_first_batch() {
        let r = timed_row(
            "butter@btrfs",
            "butter",
            &[
                (10, 100.0, 40.0),
                (10, 300.0, 60.0),
                (10, 200.0, 50.0),
                (11, 50.0, 10.0),
                (12, 20.0, 5.0),
                (14, 40.0, 7.0),
            ],
        );
        let cold = phase_times(&r, Phase::ColdEpoch).expect("cold");
        assert_eq!(cold.batches, 3);
        assert_eq!(cold.median_ms, 200.0);
        assert!((cold.total_s - 0.6).abs() < 1e-9);
        assert_eq!(cold.storage_median_ms, 50.0);
        assert!((cold.storage_total_s - 0.15).abs() < 1e-9);
        let next = phase_times(&r, Phase::NextEpoch).expect("next");
        assert_eq!((next.batches, next.median_ms), (1, 50.0));
        let steady = phase_times(&r, Phase::Steady).expect("steady");
        assert_eq!((steady.batches, steady.median_ms), (2, 20.0));
        assert!((steady.storage_total_s - 0.012).abs() < 1e-9);
        let short = timed_row("lmdb@ext4", "lmdb", &[(3, 1.0, 0.5)]);
        assert!(phase_times(&short, Phase::NextEpoch).is_none());
    }

    #[test]
    fn soak_trend_compares_the_last_warm_tenth_with_the_first() {
        // Epochs 0 and 1 are not warm; 20 warm batches: the first two at 10 ms, the last two
        // at 25 ms and 35 ms.
        let mut batches = vec![(0, 500.0, 0.0), (1, 300.0, 0.0)];
        batches.extend((0..20).map(|i| {
            let wall = match i {
                0 | 1 => 10.0,
                18 => 25.0,
                19 => 35.0,
                _ => 20.0,
            };
            (2 + i / 4, wall, 0.0)
        }));
        let mut r = timed_row("butter@btrfs", "butter", &batches);
        assert!(soak_trend(&r).is_none(), "no samples, no soak figures");
        r.samples = vec![
            Sample {
                index: 10,
                snapshots: 3,
                ..Sample::default()
            },
            Sample {
                index: 21,
                db_bytes: 4096,
                snapshots: 1,
                extents: Some(7),
                ..Sample::default()
            },
        ];
        let t = soak_trend(&r).expect("figures");
        assert_eq!(t.warm_batches, 20);
        assert!((t.trend - 2.5).abs() < 1e-9, "trend {}", t.trend);
        assert_eq!(t.largest_stall_ms, 35.0);
        assert_eq!(t.warm_median_ms, 20.0);
        assert_eq!(
            (t.end_db_bytes, t.max_snapshots, t.end_extents),
            (4096, 3, Some(7))
        );
    }

    #[test]
    fn phase_table_compares_storage_with_lmdb_in_the_same_phase() {
        let lmdb = timed_row("lmdb@ext4", "lmdb", &[(1, 100.0, 80.0), (2, 50.0, 40.0)]);
        let butter = timed_row("butter@ext4", "butter", &[(1, 90.0, 40.0), (2, 30.0, 10.0)]);
        let mut s = String::new();
        render_phases(&mut s, &[(0, &lmdb), (1, &butter)]);
        let line = s
            .lines()
            .find(|l| l.contains("butter@ext4") && l.contains("next epoch"))
            .expect("butter's next-epoch line");
        // storage median 10 / 40 and storage total 0.010 s / 0.040 s.
        assert!(line.ends_with("| 0.25× | 0.25× |"), "{line}");
        assert!(line.contains("| 33 % |"), "{line}");
        // Reports written before storage time was measured get no phase table.
        let old = timed_row("lmdb@ext4", "lmdb", &[(1, 100.0, 0.0)]);
        let mut s = String::new();
        render_phases(&mut s, &[(0, &old)]);
        assert!(s.is_empty());
    }

    #[test]
    fn gate_names_the_first_differing_batch_and_rows() {
        let a = row(
            "lmdb@ext4",
            "lmdb",
            "ext4",
            &[None, Some("aa"), None, Some("bb")],
        );
        let b = row(
            "redb@ext4",
            "redb",
            "ext4",
            &[None, Some("aa"), None, Some("cc")],
        );
        assert!(first_disagreement(&[&a, &a.clone()]).is_none());
        let d = first_disagreement(&[&a, &b]).expect("they differ");
        assert_eq!(d.batch_index, 3);
        let text = d.to_string();
        assert!(
            text.contains("batch 3") && text.contains("lmdb@ext4") && text.contains("redb@ext4")
        );
        let short = row("mdbx@ext4", "mdbx", "ext4", &[None, Some("aa")]);
        let d = first_disagreement(&[&a, &short]).expect("a missing batch differs");
        assert_eq!(
            d.batch_index, 2,
            "batch 2 has no slashings in `a` and is missing in `short`"
        );
    }

    #[test]
    fn ratios_prefer_lmdb_on_the_same_filesystem() {
        let mut ext4 = row("lmdb@ext4", "lmdb", "ext4", &[]);
        ext4.median_batch_ms = 4.0;
        let btrfs = row("lmdb@btrfs", "lmdb", "btrfs", &[]);
        let butter = row("butter@btrfs", "butter", "btrfs", &[]);
        let xfs = row("redb@xfs", "redb", "xfs", &[]);
        let group = vec![(0, &ext4), (1, &btrfs), (1, &butter), (2, &xfs)];
        assert_eq!(
            baseline(&butter, &group).map(|b| b.name.as_str()),
            Some("lmdb@btrfs")
        );
        assert_eq!(
            baseline(&xfs, &group).map(|b| b.name.as_str()),
            Some("lmdb@ext4")
        );
        assert_eq!(ratio(3.0, Some(2.0)), "1.50×");
        assert_eq!(ratio(3.0, None), "–");
    }
}
