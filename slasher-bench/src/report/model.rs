//! The report's JSON schema: [`Report`] and everything it holds, as `report.json` stores it.

use crate::system::environment::{Build, FsInfo, Machine};
use crate::system::measure::ProcIo;
use serde::{Deserialize, Serialize};
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

impl FixtureInfo {
    /// The fixture at `path`, described by its `manifest`: `batch_count` batches in the file, the
    /// first `batches_replayed` of them replayed.
    ///
    /// # Errors
    /// The manifest cannot be turned into JSON.
    pub fn new(
        path: &Path,
        manifest: &crate::fixtures::file::Manifest,
        batch_count: u64,
        batches_replayed: u64,
    ) -> serde_json::Result<Self> {
        Ok(Self {
            path: path.to_path_buf(),
            name: manifest.description.name.clone(),
            records_sha256: manifest.contents.records_sha256.clone(),
            batch_count,
            batches_replayed,
            manifest: serde_json::to_value(manifest)?,
        })
    }
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
    /// The regular chain the database was filled with before the batches (`--fill-epochs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill: Option<FillSummary>,
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
    /// `None`: replayed by the project's port of the slasher. Otherwise the client whose own
    /// slasher replayed it (`lighthouse <commit>`, `slasher-bench import-client`): such a row
    /// measures batch times, slashings, peak RSS and the final database size only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// What the storage clock adds to `storage_ms` per call, in ns
    /// (`slasher_adapters::timed::clock_cost_ns`, measured after the row's last batch); `None`
    /// for client rows and in older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_ns: Option<f64>,
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
    /// Storage calls timed into `storage_ms`. 0 for client rows and in older reports.
    #[serde(default)]
    pub storage_calls: u64,
    /// CPU time of the whole process during `wall_ms` (every thread: the replay's and the
    /// backend's own, such as butter_db's background merges). 0 for client rows and in older
    /// reports.
    #[serde(default)]
    pub cpu_ms: f64,
    /// CPU time of the replay's thread (the slasher and the storage calls it makes) during
    /// `wall_ms`; `cpu_ms` minus this is the backend's other threads.
    #[serde(default)]
    pub thread_cpu_ms: f64,
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
    /// Where the batch's commits spent their time, for a backend that reports it (butter_db);
    /// `None` for the others, for client rows and in older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_parts: Option<CommitParts>,
    /// What the batch's commits wrote and the merges they installed, for a backend that
    /// reports it (butter_db); `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merges: Option<BatchMerges>,
    /// The engine's own memory accounting after the batch's last commit, by the engine's names
    /// (`slasher_adapters::EngineStats::memory`): bytes, and levels for names ending in
    /// `level`. Empty for a backend that keeps none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub engine_memory: Vec<(String, u64)>,
}

/// The writes of a batch's commits (`slasher_adapters::CommitTotals` and `CommitPeaks` over
/// the batch), in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchMerges {
    /// Segment and manifest bytes the commits wrote themselves.
    pub commit_bytes: u64,
    /// The most one of those commits wrote.
    pub largest_commit_bytes: u64,
    /// Background merges the commits installed.
    pub installed: u64,
    /// Bytes those merges wrote.
    pub merged_bytes: u64,
    /// Bytes the largest of them wrote.
    pub largest_merge_bytes: u64,
    /// Bytes of that merge's table once it was in place.
    pub largest_merge_table_bytes: u64,
}

/// The parts of a batch's commits (`slasher_adapters::CommitTotals::parts` over the batch),
/// in ms, by the engine's names and in its order; the rest of `commit_ms` is what the commits
/// spent outside them (for butter_db: the manifest, deleting old generations, closing retired
/// files). Nothing here names a part: the CSV and Markdown show whichever parts a row has, so a
/// new part in the engine's adapter reaches the report without a change here.
///
/// In JSON an object whose keys are the names with `_ms` appended, in order (e.g.
/// `{"build_ms": 1.2, "snapshot_ms": 3.4}`), as older reports stored their four fixed fields.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CommitParts(Vec<(String, f64)>);

impl CommitParts {
    /// The parts, in order: (name, ms).
    pub fn iter(&self) -> impl Iterator<Item = (&str, f64)> {
        self.0.iter().map(|(n, ms)| (n.as_str(), *ms))
    }

    /// The part `name`, ms.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.iter().find(|&(n, _)| n == name).map(|(_, ms)| ms)
    }

    /// Adds `ms` to the part `name`, which goes last if it is new.
    pub fn add(&mut self, name: &str, ms: f64) {
        match self.0.iter_mut().find(|(n, _)| n == name) {
            Some((_, v)) => *v += ms,
            None => self.0.push((name.to_string(), ms)),
        }
    }

    /// Every part together, ms.
    pub fn total_ms(&self) -> f64 {
        self.0.iter().map(|(_, ms)| ms).sum()
    }
}

impl<S: Into<String>> FromIterator<(S, f64)> for CommitParts {
    fn from_iter<I: IntoIterator<Item = (S, f64)>>(iter: I) -> Self {
        let mut parts = CommitParts::default();
        for (name, ms) in iter {
            parts.add(&name.into(), ms);
        }
        parts
    }
}

impl Serialize for CommitParts {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (name, ms) in &self.0 {
            map.serialize_entry(&format!("{name}_ms"), ms)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for CommitParts {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Parts;
        impl<'de> serde::de::Visitor<'de> for Parts {
            type Value = CommitParts;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of commit parts in ms, keyed NAME_ms")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<CommitParts, A::Error> {
                let mut parts = CommitParts::default();
                while let Some((key, ms)) = map.next_entry::<String, f64>()? {
                    let Some(name) = key.strip_suffix("_ms") else {
                        return Err(serde::de::Error::custom(format!(
                            "commit part {key:?} does not end in _ms"
                        )));
                    };
                    if parts.get(name).is_some() {
                        return Err(serde::de::Error::custom(format!(
                            "commit part {key:?} given twice"
                        )));
                    }
                    parts.add(name, ms);
                }
                Ok(parts)
            }
        }
        deserializer.deserialize_map(Parts)
    }
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
    /// Bytes the database's filesystem has in use (`statfs`); `None` in older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fs_used_bytes: Option<u64>,
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

/// How a row's database was filled before its batches (`replay --fill-epochs`).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct FillSummary {
    /// Epochs of regular chain.
    pub epochs: u64,
    /// Its first epoch (it ends at the fixture's first).
    pub first_epoch: u64,
    /// Its validators (the fixture's).
    pub validators: u64,
    /// Seconds the fill took.
    pub seconds: f64,
    /// Seconds of the `sync` after it.
    pub sync_seconds: f64,
    /// What it wrote.
    pub report: crate::replay::fill::FillReport,
}
