//! The environment: the public handle on a database, its single writer and its readers.
//!
//! By design.md's sections: `recovery` opens a directory (§1, crash table), `commit` runs the
//! numbered steps of §3, `gc` deletes old generations (step 7) and `retire` closes merged-away
//! segments (step 8). The merges of §3.1: `policy` decides (pure functions of the table
//! versions and its settings), `merge` makes its plan into work and swaps the result in,
//! `worker` carries the work out on the merge thread, `job` is the state in flight, and
//! `segment_writer` writes the segments commits and merges produce. `hooks` holds the test
//! hooks. Reads and pins (§2) are here; the methods that begin transactions and hand out table
//! handles are in `txn.rs`, which builds on this file (this file does not import it).

mod commit;
mod gc;
mod hooks;
mod job;
mod merge;
mod policy;
mod recovery;
mod retire;
mod segment_writer;
mod spill;
mod worker;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard, RwLock};

use crate::budget::{Budget, MemoryUse};
use crate::error::{Error, Result};
use crate::fs::{BtrfsFs, Fs};
use crate::memory::MemoryCgroup;
use crate::root::LOCK_FILE;
use crate::segment::{self, BlockCache, Segment};
use crate::version::{run_position, Version};

use job::{Drain, MergeJob};
pub use policy::Merges;
use policy::Settings;

/// Name of the manifest inside `live/` and every `gen-N/`.
pub(crate) const MANIFEST_FILE: &str = "MANIFEST";
/// The longest a commit that hit ENOSPC, or open, waits for btrfs to reclaim space.
const RECLAIM_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

static NEXT_ENV_ID: AtomicU64 = AtomicU64::new(1);

/// The manifest's table-format code of the segment format, the only one this engine reads
/// (code 1 was an SQLite-file experiment, measured and removed; see design.md §8).
pub(crate) const SEGMENT_TABLE_FORMAT: u32 = 0;

/// What a successful commit did.
#[derive(Debug, Clone, Default)]
pub struct CommitInfo {
    /// The generation now committed (`gen-N`).
    pub generation: u64,
    /// Segment files written.
    pub segments_written: usize,
    /// Bytes of segment and manifest files written.
    pub bytes_written: u64,
    /// Time spent building and writing files (steps 1–4), in microseconds. Of it:
    pub write_us: u64,
    /// merging each changed table's memtable with its segments into new segment bytes in
    /// memory,
    pub build_us: u64,
    /// copying those bytes into new files (the page cache),
    pub file_us: u64,
    /// and waiting for the files' write-back to the device.
    pub write_back_us: u64,
    /// Time spent in the snapshot ioctl (the durable commit point), in microseconds.
    pub snapshot_us: u64,
    /// Sorted runs the transaction had spilled to `live/` and this commit installed (or
    /// merged into the segment it wrote): 0 unless the transaction outgrew its memory budget
    /// ([`EnvBuilder::memtable_bytes`]).
    pub spilled_runs: usize,
    /// Background merges this commit swapped in (their files were written before the commit).
    pub merges_installed: usize,
    /// Bytes of the segments those merges wrote.
    pub merged_bytes: u64,
    /// Segment files those merges wrote (a drain job writes one per partition).
    pub merge_files: usize,
    /// Bytes the largest of those merges wrote (0 if none was installed).
    pub largest_merge_bytes: u64,
    /// Bytes of its table's segment files once that merge was in place: how much of the table
    /// the largest merge rewrote is `largest_merge_bytes / largest_merge_table_bytes`.
    pub largest_merge_table_bytes: u64,
    /// The most the transaction's memory accounting reached ([`crate::WriteTxn::peak_memory_bytes`]).
    pub txn_peak_memory_bytes: u64,
    /// The environment's memory accounting once the commit was published
    /// ([`Env::memory_use`]).
    pub memory: MemoryUse,
}

/// Options for opening an [`Env`].
#[derive(Debug)]
pub struct EnvBuilder {
    path: PathBuf,
    /// `None`: [`crate::memory::default_block_cache_bytes`] of the memory available at open.
    block_cache_bytes: Option<usize>,
    /// `None`: [`crate::memory::default_memtable_bytes`] of the memory available at open.
    memtable_bytes: Option<u64>,
    merges: Merges,
    group_access: bool,
    /// (partition bytes, drain job bytes), `policy::PARTITION_BYTES` and
    /// `DRAIN_JOB_BYTES` unless a test sets them.
    merge_sizes: (u64, u64),
    /// The memory cgroup whose pressure the budget watches; `None` inside: this process's.
    memory_cgroup: Option<Option<MemoryCgroup>>,
    /// See [`EnvBuilder::on_memory_pressure`].
    memory_pressure: Option<fn(bool)>,
    fs: Arc<dyn Fs>,
}

impl EnvBuilder {
    /// Open the database in `path`, a directory on btrfs (created if missing).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        EnvBuilder {
            path: path.into(),
            block_cache_bytes: None,
            memtable_bytes: None,
            merges: Merges::Background,
            group_access: false,
            merge_sizes: (policy::PARTITION_BYTES, policy::DRAIN_JOB_BYTES),
            memory_cgroup: None,
            memory_pressure: None,
            fs: Arc::new(BtrfsFs),
        }
    }

    /// Let the owner's group read the files the engine creates: directories 0750 and files
    /// 0640 instead of the default 0700 and 0600 (the umask still applies). Changes nothing
    /// already on disk.
    pub fn group_access(mut self, allow: bool) -> Self {
        self.group_access = allow;
        self
    }

    /// Bytes of decoded segment blocks kept in memory at most. The default is an eighth of
    /// the memory available to the process when it opens the database (its memory cgroup's
    /// limit where there is one, else the machine's RAM), between 8 MiB and 1 GiB
    /// ([`crate::memory::default_block_cache_bytes`]); blocks beyond it are read again
    /// through the page cache, which the kernel can reclaim.
    pub fn block_cache_bytes(mut self, bytes: usize) -> Self {
        self.block_cache_bytes = Some(bytes);
        self
    }

    /// Bytes a write transaction's uncommitted writes may hold in memory (its memtables, and
    /// the value chunks kept for the next transaction) before it writes the largest of them
    /// to a sorted run in `live/` and goes on (design.md §2, "Spilling"). The default is an
    /// eighth of the memory available to the process when it opens the database, between
    /// 16 MiB and 1 GiB ([`crate::memory::default_memtable_bytes`]). A transaction smaller
    /// than this never spills. At least 16 KiB (tests use small budgets to make spills
    /// cheap).
    pub fn memtable_bytes(mut self, bytes: u64) -> Self {
        self.memtable_bytes = Some(bytes.max(16 << 10));
        self
    }

    /// The memory cgroup whose anonymous memory the budget watches for pressure (design.md
    /// §7.1); `None` watches none. The default is the process's own
    /// ([`MemoryCgroup::of_self`]).
    pub fn memory_cgroup(mut self, cgroup: Option<MemoryCgroup>) -> Self {
        self.memory_cgroup = Some(cgroup);
        self
    }

    /// A function that tells the process's allocator whether to give freed memory back to the
    /// kernel at once (`true`; for jemalloc: purge its arenas and set their decay times to 0)
    /// or that it may keep it again (`false`: the allocator's own settings). The budget calls
    /// it with `true` after each commit or spill that finds the memory cgroup's anonymous
    /// memory above half its limit, once the cache's room is set, and with `false` at the first
    /// that finds it at half or less (design.md §7.1): what the engine frees only lowers the
    /// cgroup's count once the allocator returns it. Default: none.
    pub fn on_memory_pressure(mut self, hook: fn(bool)) -> Self {
        self.memory_pressure = Some(hook);
        self
    }

    /// Where segment merges run (default [`Merges::Background`]).
    pub fn merges(mut self, merges: Merges) -> Self {
        self.merges = merges;
        self
    }

    /// The size of the partitions drains write and the partition bytes one drain job takes
    /// (defaults 64 MiB and 128 MiB), so that tests reach many partitions with little data
    /// (feature `testing` only).
    #[cfg(feature = "testing")]
    pub fn merge_sizes(mut self, partition_bytes: u64, drain_job_bytes: u64) -> Self {
        self.merge_sizes = (partition_bytes.max(1), drain_job_bytes.max(1));
        self
    }

    /// Route every filesystem side effect through `fs` (fault-injection tests; feature
    /// `testing` only).
    #[cfg(feature = "testing")]
    pub fn with_fs(mut self, fs: Arc<dyn Fs>) -> Self {
        self.fs = fs;
        self
    }

    /// Open (creating or recovering) the database.
    ///
    /// # Errors
    /// [`Error::NotBtrfs`], [`Error::PermissionDenied`], [`Error::Locked`] (another process has
    /// it open), [`Error::NotSubvolumeCapable`], [`Error::ForeignEntry`] (a symlink, an entry
    /// of the wrong type or of another database where the engine keeps its own; nothing is
    /// changed), corrupt or truncated files
    /// ([`Error::Corrupted`], [`Error::ChecksumMismatch`]), [`Error::UnsupportedFormatVersion`],
    /// and I/O errors.
    pub fn open(self) -> Result<Env> {
        Env::open(self)
    }
}

impl WriterState {
    /// Where the segments of table `table` that background work reads begin in `segments`
    /// (the running job's first input, or the drain's first segment): commits merge only
    /// segments above it.
    pub(crate) fn first_pinned(&self, table: usize, segments: &[Arc<Segment>]) -> Option<usize> {
        let job = self
            .merge
            .as_ref()
            .filter(|j| j.table == table)
            .and_then(|j| segments.iter().position(|s| s.seq == j.first_input));
        let drain = self
            .drain
            .as_ref()
            .filter(|d| d.table == table)
            .and_then(|d| run_position(segments, &d.upper));
        job.into_iter().chain(drain).min()
    }
}

/// State only the writer touches. Guarded by `Env::writer`; held for a `WriteTxn`'s life.
#[derive(Debug)]
pub(crate) struct WriterState {
    /// Test-only broken mode (`BUTTER_BROKEN_ACK_BEFORE_SNAPSHOT`, feature `testing`): the
    /// generation whose snapshot was deferred to the next commit.
    deferred_snapshot: Option<u64>,
    /// The next segment sequence number to hand out (commits and background merges).
    next_seq: u64,
    /// The background merge running or finished but not yet swapped in.
    merge: Option<MergeJob<worker::Pending>>,
    /// The drain in progress, if any (its jobs run one at a time as `merge`).
    drain: Option<Drain>,
    /// The last write transaction's memtable value chunks, emptied, for the next one
    /// (`Memtable::recycle_chunks`).
    pub(crate) spare_chunks: Vec<Vec<u8>>,
    /// The thread background merges run on (`worker.rs`).
    worker: worker::Worker,
}

/// An open database.
///
/// Thread-safe: share it by reference or in an `Arc`. One [`WriteTxn`](crate::WriteTxn) at a
/// time (`begin_write` blocks while another is open); any number of
/// [`ReadTxn`](crate::ReadTxn)s, each pinned to the generation that was newest when it began.
/// The methods that begin transactions and hand out table handles are in `txn.rs`.
#[derive(Debug)]
pub struct Env {
    pub(crate) id: u64,
    root: PathBuf,
    live: PathBuf,
    /// `compact/`, where background merges write their files (the directory's name is part of
    /// the on-disk format).
    merge_dir: PathBuf,
    pub(crate) fs: Arc<dyn Fs>,
    pub(crate) cache: Arc<BlockCache>,
    /// The memory budget the cache, the segments' indexes and the write transaction share.
    pub(crate) budget: Budget,
    /// Where merges run, and the sizes of a drain's partitions and jobs (the merge policy's
    /// settings).
    merges: Settings,
    /// Permission bits of the files the engine creates (0600, or 0640 with group access).
    pub(crate) file_mode: u32,
    /// Generations deleted since the filesystem was last asked to reclaim them (see
    /// `collect_garbage`).
    unreclaimed: AtomicU64,
    /// The single-writer lock.
    writer: Mutex<WriterState>,
    /// The newest committed version. Written only by the writer after a commit.
    current: RwLock<Arc<Version>>,
    /// Read transactions per generation; GC skips pinned generations.
    pins: Mutex<BTreeMap<u64, usize>>,
    /// Generations on disk besides the newest (deleted once unpinned).
    old_generations: Mutex<Vec<u64>>,
    /// Set by a failed commit: writes are refused until reopen.
    poisoned: AtomicBool,
    /// Closes the segments commits merge away, off the committing thread.
    retirer: retire::Retirer,
    /// Held for the life of the environment: one process per database.
    _lock: File,
    /// Test-only: see [`Env::on_next_begin_read`].
    #[cfg(feature = "testing")]
    read_hook: ReadHook,
}

/// Test-only (feature `testing`): what the next `begin_read` calls between reading the newest
/// generation and pinning it.
#[cfg(feature = "testing")]
#[derive(Default)]
pub(crate) struct ReadHook(Mutex<Option<Box<dyn FnOnce() + Send>>>);

#[cfg(feature = "testing")]
impl std::fmt::Debug for ReadHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadHook")
    }
}

impl Env {
    /// Shorthand for `EnvBuilder::new(path).open()`.
    ///
    /// # Errors
    /// See [`EnvBuilder::open`].
    pub fn open_path(path: impl Into<PathBuf>) -> Result<Env> {
        EnvBuilder::new(path).open()
    }

    /// Start building an environment.
    pub fn builder(path: impl Into<PathBuf>) -> EnvBuilder {
        EnvBuilder::new(path)
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The block cache's share of the memory budget in bytes (as set, or the default chosen
    /// at open). Between write transactions the cache may also use their share, and pressure
    /// shrinks it ([`Env::memory_use`], design.md §7.1).
    pub fn block_cache_bytes(&self) -> usize {
        usize::try_from(self.budget.cache_share()).unwrap_or(usize::MAX)
    }

    /// The memory budget's accounting now: the cache, the indexes, the write transaction,
    /// and the pressure seen in the process's memory cgroup.
    pub fn memory_use(&self) -> MemoryUse {
        self.budget.usage()
    }

    /// The newest committed generation.
    pub fn generation(&self) -> u64 {
        self.current.read().generation
    }

    /// Whether a failed commit has poisoned the environment.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// The index of an existing table in the newest version, or `None` (`Env::table` in
    /// `txn.rs` makes it a handle).
    pub(crate) fn table_index(&self, name: &str) -> Option<usize> {
        self.current
            .read()
            .tables
            .iter()
            .position(|t| t.name == name)
    }

    /// After a commit: `version`, the transaction's base, usually holds the last references
    /// to the segments the commit merged away; dropping it closes their files, which a
    /// background thread does (`retire.rs`).
    pub(crate) fn retire(&self, version: Arc<Version>) {
        self.retirer.retire(version);
    }

    /// The newest committed version.
    pub(crate) fn current_version(&self) -> Arc<Version> {
        self.current.read().clone()
    }

    /// The writer lock, for `Env::begin_write` (`txn.rs`); blocks while another writer holds it.
    ///
    /// # Errors
    /// [`Error::Poisoned`] after a failed commit.
    pub(crate) fn lock_writer(&self) -> Result<MutexGuard<'_, WriterState>> {
        let guard = self.writer.lock();
        if self.is_poisoned() {
            return Err(Error::Poisoned);
        }
        Ok(guard)
    }

    /// The newest committed version, pinned for `Env::begin_read` (`txn.rs`).
    pub(crate) fn pin_current_version(&self) -> Arc<Version> {
        // Pin while `current` is still read-locked: a commit cannot publish a newer
        // generation (and hand this one to garbage collection) between the read and the pin.
        let current = self.current.read();
        #[cfg(feature = "testing")]
        if let Some(hook) = self.read_hook.0.lock().take() {
            hook();
        }
        *self.pins.lock().entry(current.generation).or_insert(0) += 1;
        let version = current.clone();
        drop(current);
        version
    }

    /// Test-only (feature `testing`): the next [`Env::begin_read`] calls `hook` after it has
    /// read the newest generation and before it pins it, so that a test can hold a reader at
    /// exactly that point while a commit runs.
    #[cfg(feature = "testing")]
    pub fn on_next_begin_read(&self, hook: impl FnOnce() + Send + 'static) {
        *self.read_hook.0.lock() = Some(Box::new(hook));
    }

    pub(crate) fn unpin(&self, generation: u64) {
        let mut pins = self.pins.lock();
        if let Some(n) = pins.get_mut(&generation) {
            *n -= 1;
            if *n == 0 {
                pins.remove(&generation);
            }
        }
    }

    /// Files of the newest generation as seen in `live/` (manifest and segments), and the lock.
    pub fn files(&self) -> Vec<PathBuf> {
        let v = self.current.read();
        let mut files = vec![self.root.join(LOCK_FILE), self.live.join(MANIFEST_FILE)];
        for t in &v.tables {
            for s in &t.segments {
                files.push(self.live.join(segment::file_name(s.seq)));
            }
        }
        files
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        // Wait for a running background merge (it reads this environment's segments) and
        // delete its output; the next open would delete it otherwise.
        if let Some(job) = self.writer.get_mut().merge.take() {
            if let Ok(Ok(merged)) = job.handle.join() {
                for o in merged.outputs {
                    self.discard_merge_file(&self.merge_dir.join(segment::file_name(o.seq)));
                }
            }
        }
    }
}
