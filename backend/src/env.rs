//! The environment: opening and recovering a database directory, the single writer, commits,
//! generations and their garbage collection.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use std::os::unix::fs::OpenOptionsExt;

use nix::fcntl::{Flock, FlockArg};
use parking_lot::{Mutex, RwLock};

use crate::cache::BlockCache;
use crate::error::{Error, Result};
use crate::fs::{BtrfsFs, Fs};
use crate::manifest::{Manifest, SegmentMeta, TableMeta};
use crate::memtable::Memtable;
use crate::root::{self, gen_name, Kind, COMPACT_DIR, ID_FILE, LIVE_DIR, LOCK_FILE};
use crate::segment::{self, Block, Segment, SegmentBuilder};
use crate::sys;
use crate::txn::{ReadTxn, TableHandle, WriteTxn};

/// Name of the manifest inside `live/` and every `gen-N/`.
pub(crate) const MANIFEST_FILE: &str = "MANIFEST";
const MANIFEST_TMP_FILE: &str = "MANIFEST.tmp";

/// Merges keep a table at about this many segments; with merges inside the commit
/// ([`Compaction::Inline`]) it is a hard limit.
const MAX_SEGMENTS_PER_TABLE: usize = 8;
/// With background merges, a commit merges whatever it must to stay at or below this many
/// segments per table (the background thread has fallen behind).
const HARD_MAX_SEGMENTS_PER_TABLE: usize = 2 * MAX_SEGMENTS_PER_TABLE;
/// With background merges, a commit writes at most this many times its memtable's bytes
/// (it merges only the small newest segments; larger merges go to the background thread).
const COMMIT_MERGE_BUDGET: u64 = 4;
/// A run of newer segments is merged into an older one once it is at least 1/RATIO its size.
const MERGE_RATIO: u64 = 2;
/// Deleted generations after which the filesystem is asked to reclaim their space.
const MAX_UNRECLAIMED_GENERATIONS: u64 = 8;
/// The longest a commit that hit ENOSPC waits for deleted generations to be reclaimed.
const RECLAIM_WAIT: std::time::Duration = std::time::Duration::from_secs(30);
/// Default block cache size.
const DEFAULT_BLOCK_CACHE_BYTES: usize = 256 << 20;

static NEXT_ENV_ID: AtomicU64 = AtomicU64::new(1);

/// The manifest's table-format code of the segment format, the only one this engine reads
/// (code 1 was an SQLite-file experiment, measured and removed; see design.md §8).
const SEGMENT_TABLE_FORMAT: u32 = 0;

/// Where segment merges run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Compaction {
    /// A commit merges its memtable only with small newest segments (at most
    /// 4x the memtable's bytes); larger merges run on a background thread, one at a time,
    /// and the next commit after one finishes swaps its output in. The default: a commit's
    /// latency does not depend on the size of the table.
    #[default]
    Background,
    /// As `Background`, but every commit first waits for the running merge, so the order of
    /// filesystem operations is the same in every run (the fault-enumeration tests; feature
    /// `testing` only).
    #[cfg(feature = "testing")]
    BackgroundWaited,
    /// Every merge runs inside the commit that makes it due (no thread).
    Inline,
}

impl Compaction {
    /// Whether every commit waits for the running merge (`BackgroundWaited`).
    fn waits_for_merges(self) -> bool {
        #[cfg(feature = "testing")]
        if self == Compaction::BackgroundWaited {
            return true;
        }
        false
    }
}

/// What a successful commit did.
#[derive(Debug, Clone, Default)]
pub struct CommitInfo {
    /// The generation now committed (`gen-N`).
    pub generation: u64,
    /// Segment files written.
    pub segments_written: usize,
    /// Bytes of segment and manifest files written.
    pub bytes_written: u64,
    /// Time spent building and writing files, in microseconds.
    pub write_us: u64,
    /// Time spent in the snapshot ioctl (the durable commit point), in microseconds.
    pub snapshot_us: u64,
    /// Background merges this commit swapped in (their files were written before the commit).
    pub merges_installed: usize,
    /// Bytes of the segments those merges wrote.
    pub merged_bytes: u64,
}

/// Options for opening an [`Env`].
#[derive(Debug)]
pub struct EnvBuilder {
    path: PathBuf,
    block_cache_bytes: usize,
    compaction: Compaction,
    group_access: bool,
    fs: Arc<dyn Fs>,
}

impl EnvBuilder {
    /// Open the database in `path`, a directory on btrfs (created if missing).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        EnvBuilder {
            path: path.into(),
            block_cache_bytes: DEFAULT_BLOCK_CACHE_BYTES,
            compaction: Compaction::Background,
            group_access: false,
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

    /// Bytes of decoded segment blocks kept in memory (default 256 MiB).
    pub fn block_cache_bytes(mut self, bytes: usize) -> Self {
        self.block_cache_bytes = bytes;
        self
    }

    /// Where segment merges run (default [`Compaction::Background`]).
    pub fn compaction(mut self, compaction: Compaction) -> Self {
        self.compaction = compaction;
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

/// The committed state of every table at one generation.
#[derive(Debug)]
pub(crate) struct Version {
    pub(crate) generation: u64,
    pub(crate) tables: Vec<TableVersion>,
}

/// One table at one generation: its segments, newest first.
#[derive(Debug, Clone)]
pub(crate) struct TableVersion {
    pub(crate) name: String,
    pub(crate) segments: Vec<Arc<Segment>>,
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
    merge: Option<MergeJob>,
}

/// A background merge of a contiguous run of one table's segments into `compact/<seq>.seg`.
#[derive(Debug)]
struct MergeJob {
    table: usize,
    /// The merged segments' sequence numbers, newest first.
    inputs: Vec<u64>,
    seq: u64,
    work_path: PathBuf,
    handle: JoinHandle<Result<Merged>>,
}

impl MergeJob {
    /// Where the merge's inputs start in `segments`, if they are still there as one run.
    fn position_in(&self, segments: &[Arc<Segment>]) -> Option<usize> {
        let first = *self.inputs.first()?;
        let at = segments.iter().position(|s| s.seq == first)?;
        let run = segments.get(at..at + self.inputs.len())?;
        run.iter()
            .zip(&self.inputs)
            .all(|(s, &seq)| s.seq == seq)
            .then_some(at)
    }
}

/// What a finished background merge produced.
#[derive(Debug)]
struct Merged {
    /// 0 when nothing survived (only tombstones): no file was written.
    entries: u64,
    file_len: u64,
    blocks: Vec<Arc<Block>>,
}

/// An open database.
///
/// Thread-safe: share it by reference or in an `Arc`. One [`WriteTxn`] at a time
/// (`begin_write` blocks while another is open); any number of [`ReadTxn`]s, each pinned to the
/// generation that was newest when it began.
#[derive(Debug)]
pub struct Env {
    pub(crate) id: u64,
    root: PathBuf,
    live: PathBuf,
    compact: PathBuf,
    pub(crate) fs: Arc<dyn Fs>,
    pub(crate) cache: Arc<BlockCache>,
    compaction: Compaction,
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
    /// Held for the life of the environment: one process per database.
    _lock: Flock<File>,
}

/// Test-only: acknowledge commits before their snapshot exists (the snapshot is taken at the
/// start of the next commit). Deliberately breaks durability so the power-loss and kill tests
/// can prove they catch a store that acknowledges too early. Only with feature `testing`.
fn broken_ack_before_snapshot() -> bool {
    cfg!(feature = "testing") && std::env::var_os("BUTTER_BROKEN_ACK_BEFORE_SNAPSHOT").is_some()
}

fn fail_point(name: &str) {
    #[cfg(feature = "testing")]
    {
        if std::env::var("BUTTER_FAILPOINT").is_ok_and(|v| v == name) {
            eprintln!("butter_db: fail point {name} reached, aborting");
            std::process::abort();
        }
    }
    let _ = name;
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

    fn open(b: EnvBuilder) -> Result<Env> {
        let root = b.path;
        let (file_mode, dir_mode) = if b.group_access {
            (0o640, 0o750)
        } else {
            (0o600, 0o700)
        };
        let fs = b.fs;
        if !root::check_kind(&root, Kind::Dir)? && !root::check_kind(&root, Kind::Subvolume)? {
            if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)
                    .map_err(|e| Error::io("create database directory", parent, e))?;
            }
            fs.create_dir(&root, dir_mode)
                .map_err(|e| Error::io("create database directory", &root, e))?;
        }
        let fs_type = sys::filesystem_type(&root).map_err(|e| Error::io("statfs", &root, e))?;
        if !fs_type.is_btrfs() {
            return Err(Error::NotBtrfs {
                path: root,
                found: fs_type.name,
                magic: fs_type.magic,
            });
        }
        let lock_path = root.join(LOCK_FILE);
        let lock_file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(file_mode)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&lock_path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => Error::foreign(&lock_path, "it is a symlink"),
                _ => Error::io("open lock file", &lock_path, e),
            })?;
        let lock = match Flock::lock(lock_file, FlockArg::LockExclusiveNonblock) {
            Ok(l) => l,
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                return Err(Error::Locked {
                    path: root,
                    lock: lock_path,
                })
            }
            Err((_, e)) => return Err(Error::io("lock", &lock_path, e.into())),
        };
        // Everything by our names is checked before anything is touched.
        let scan = root::scan(&root)?;
        let live = root.join(LIVE_DIR);
        let id = match scan.id {
            Some(id) => id,
            None => root::create_id(&*fs, &root, file_mode)?,
        };
        let mut gens = scan.generations;
        if gens.is_empty() {
            // A fresh database, or one whose very first commit never completed.
            fail_point("recovery::init");
            if scan.live {
                fs.delete_subvolume(&live)
                    .map_err(|e| Error::io("delete subvolume", &live, e))?;
            }
            fs.create_subvolume(&live)
                .map_err(|e| match e.raw_os_error() {
                    // btrfs refuses the subvolume ioctl itself: not a place for subvolumes.
                    Some(libc::ENOTTY | libc::EINVAL | libc::EOPNOTSUPP | libc::EXDEV) => {
                        Error::NotSubvolumeCapable {
                            path: root.clone(),
                            source: e,
                        }
                    }
                    _ => Error::io("create subvolume", &live, e),
                })?;
            // Snapshots copy this mode, so every generation has it too.
            fs.set_mode(&live, dir_mode)
                .map_err(|e| Error::io("chmod", &live, e))?;
            let live_id = live.join(ID_FILE);
            fs.write_new_file(&live_id, &id.encode(), file_mode)
                .map_err(|e| Error::io("write", &live_id, e))?;
            let manifest = Manifest {
                table_format: SEGMENT_TABLE_FORMAT,
                generation: 0,
                next_seq: 1,
                tables: Vec::new(),
            };
            write_manifest(&*fs, &live, &manifest, file_mode)?;
            let gen0 = root.join(gen_name(0));
            fs.snapshot(&live, &gen0, true)
                .map_err(|e| Error::io("snapshot", &gen0, e))?;
            gens.push(0);
        }
        // Every generation must be this database's before one is adopted or deleted.
        for &g in &gens {
            root::check_generation_id(&root.join(gen_name(g)), &id)?;
        }
        let newest = gens.last().copied().unwrap_or(0);
        let newest_dir = root.join(gen_name(newest));
        let manifest_path = newest_dir.join(MANIFEST_FILE);
        let bytes = root::read_nofollow(&manifest_path)
            .map_err(|e| Error::io("read", &manifest_path, e))?;
        let manifest = Manifest::decode(&bytes, &manifest_path)?;
        if manifest.generation != newest {
            return Err(Error::corrupted(
                &manifest_path,
                format!(
                    "manifest says generation {}, directory says {newest}",
                    manifest.generation
                ),
            ));
        }
        if manifest.table_format != SEGMENT_TABLE_FORMAT {
            return Err(Error::corrupted(
                &manifest_path,
                format!(
                    "table format {} is not the segment format (0); format 1 (SQLite files) \
                     was an experiment this engine no longer reads",
                    manifest.table_format
                ),
            ));
        }
        // Whatever `live/` holds was never committed (or equals gen-N): start over from gen-N.
        fail_point("recovery::discard_live");
        if root::check_kind(&live, Kind::Subvolume)? {
            fs.delete_subvolume(&live)
                .map_err(|e| Error::io("delete subvolume", &live, e))?;
        }
        snapshot_when_space_allows(&*fs, &root, &newest_dir, &live)?;
        let cache = Arc::new(BlockCache::new(b.block_cache_bytes));
        let mut tables = Vec::with_capacity(manifest.tables.len());
        for t in &manifest.tables {
            let mut segments = Vec::with_capacity(t.segments.len());
            for s in &t.segments {
                let path = live.join(segment::file_name(s.seq));
                segments.push(Arc::new(Segment::open(
                    path,
                    s.seq,
                    s.file_len,
                    s.entries,
                    cache.clone(),
                )?));
            }
            tables.push(TableVersion {
                name: t.name.clone(),
                segments,
            });
        }
        let version = Version {
            generation: newest,
            tables,
        };
        // Background merges that never got swapped in (the process stopped first).
        let compact = root.join(COMPACT_DIR);
        root::clear_compact_dir(&*fs, &compact, dir_mode)?;
        let env = Env {
            id: NEXT_ENV_ID.fetch_add(1, Ordering::Relaxed),
            root,
            live,
            compact,
            fs,
            cache,
            compaction: b.compaction,
            file_mode,
            unreclaimed: AtomicU64::new(0),
            writer: Mutex::new(WriterState {
                deferred_snapshot: None,
                next_seq: manifest.next_seq,
                merge: None,
            }),
            current: RwLock::new(Arc::new(version)),
            pins: Mutex::new(BTreeMap::new()),
            old_generations: Mutex::new(gens.into_iter().filter(|&g| g != newest).collect()),
            poisoned: AtomicBool::new(false),
            _lock: lock,
        };
        env.collect_garbage()?;
        Ok(env)
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// The newest committed generation.
    pub fn generation(&self) -> u64 {
        self.current.read().generation
    }

    /// Whether a failed commit has poisoned the environment.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// The handle of an existing table, or `None`.
    pub fn table(&self, name: &str) -> Option<TableHandle> {
        let v = self.current.read();
        v.tables
            .iter()
            .position(|t| t.name == name)
            .map(|i| TableHandle::new(self.id, i))
    }

    /// Open a table, creating it (in its own commit) if it does not exist.
    ///
    /// # Errors
    /// Commit errors.
    pub fn create_table(&self, name: &str) -> Result<TableHandle> {
        let mut txn = self.begin_write()?;
        let t = txn.create_table(name)?;
        txn.commit()?;
        Ok(t)
    }

    /// Begin the write transaction; blocks while another one is open.
    ///
    /// # Errors
    /// [`Error::Poisoned`] after a failed commit.
    pub fn begin_write(&self) -> Result<WriteTxn<'_>> {
        let guard = self.writer.lock();
        if self.is_poisoned() {
            return Err(Error::Poisoned);
        }
        let base = self.current.read().clone();
        Ok(WriteTxn::new(self, guard, base))
    }

    /// Begin a read transaction pinned to the newest committed generation.
    pub fn begin_read(&self) -> ReadTxn<'_> {
        // Pin while `current` is still read-locked: a commit cannot publish a newer
        // generation (and hand this one to garbage collection) between the read and the pin.
        let current = self.current.read();
        *self.pins.lock().entry(current.generation).or_insert(0) += 1;
        let version = current.clone();
        drop(current);
        ReadTxn::new(self, version)
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

    /// Delete every old generation that no reader pins. Deletion is not durable by itself; a
    /// generation that reappears after a crash is deleted again at the next open.
    ///
    /// The unpinned generations are taken out of `old_generations` under the locks, and
    /// deleted after both are released, so `begin_read` never waits for a deletion. No reader
    /// can pin them meanwhile: readers pin only the current generation, and a generation is
    /// in `old_generations` only once a newer one is current. Called at open, before the
    /// environment is shared, and by commits, with the writer lock held: two collections
    /// never run at once.
    fn collect_garbage(&self) -> Result<()> {
        let doomed: Vec<u64> = {
            let mut old = self.old_generations.lock();
            let pins = self.pins.lock();
            let (pinned, doomed) = old.iter().partition(|g| pins.contains_key(g));
            *old = pinned;
            doomed
        };
        let mut failed = Vec::new();
        let mut first_error = None;
        for &g in &doomed {
            fail_point("gc::delete");
            let dir = self.root.join(gen_name(g));
            match self.fs.delete_subvolume(&dir) {
                Ok(()) => {}
                // Already gone (an earlier attempt took effect but reported an error).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    failed.push(g);
                    first_error.get_or_insert(Error::io("delete subvolume", &dir, e));
                }
            }
        }
        let deleted = (doomed.len() - failed.len()) as u64;
        if !failed.is_empty() {
            let mut old = self.old_generations.lock();
            old.extend(failed);
            old.sort_unstable();
        }
        // btrfs frees a deleted subvolume's space only when its cleaner thread gets to it,
        // which it otherwise does on its own schedule (every 30 s by default): a fast
        // sequence of commits could leave dozens of deleted generations holding space. A
        // transaction commit wakes the cleaner, so one is asked for every
        // MAX_UNRECLAIMED_GENERATIONS deletions.
        if self.unreclaimed.fetch_add(deleted, Ordering::Relaxed) + deleted
            >= MAX_UNRECLAIMED_GENERATIONS
        {
            self.unreclaimed.store(0, Ordering::Relaxed);
            if let Err(e) = self.fs.sync(&self.root) {
                log::warn!("could not ask btrfs to reclaim space: {e}");
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Commit a write transaction's memtables. Called by `WriteTxn::commit` with the writer
    /// lock held. Any error poisons the environment.
    pub(crate) fn commit(
        &self,
        writer: &mut WriterState,
        base: &Version,
        new_tables: &[String],
        memtables: &[Memtable],
    ) -> Result<CommitInfo> {
        let mut r = self.commit_inner(writer, base, new_tables, memtables);
        if let Some(e) = r.as_ref().err().filter(|e| e.is_disk_full()) {
            // Space held by deleted generations comes back only when btrfs's cleaner has
            // processed them: put live/ back to the committed state, let btrfs reclaim, and
            // try once more. (Not if the snapshot exists: undo_for_retry refuses.)
            log::warn!(
                "{e}; waiting for deleted generations to be reclaimed, then retrying the \
                 commit once"
            );
            match self.undo_for_retry(base.generation) {
                Ok(()) => r = self.commit_inner(writer, base, new_tables, memtables),
                Err(e) => log::warn!("cannot retry the commit: {e}"),
            }
        }
        if r.is_err() {
            self.poisoned.store(true, Ordering::Release);
        }
        r
    }

    /// After a commit failed before its snapshot: discard what it wrote (`live/` becomes a
    /// writable snapshot of gen-`base` again, as at open) and wait for btrfs to reclaim the
    /// generations deleted so far. Refuses if gen-(`base`+1) exists (the commit may have
    /// taken effect).
    fn undo_for_retry(&self, base: u64) -> Result<()> {
        let next = self.root.join(gen_name(base + 1));
        if root::check_kind(&next, Kind::Subvolume)? {
            return Err(Error::foreign(
                &next,
                "the failed commit's snapshot exists; not retrying",
            ));
        }
        self.fs
            .delete_subvolume(&self.live)
            .map_err(|e| Error::io("delete subvolume", &self.live, e))?;
        let base_dir = self.root.join(gen_name(base));
        self.fs
            .snapshot(&base_dir, &self.live, false)
            .map_err(|e| Error::io("snapshot", &self.live, e))?;
        self.wait_for_reclaim();
        Ok(())
    }

    /// Asks btrfs to commit its transaction, which also wakes the cleaner that frees deleted
    /// subvolumes, and repeats until the free space stops growing (five polls 100 ms apart
    /// without growth), for at most RECLAIM_WAIT.
    fn wait_for_reclaim(&self) {
        let deadline = Instant::now() + RECLAIM_WAIT;
        let free = || {
            nix::sys::statvfs::statvfs(&self.root)
                .map(|s| s.blocks_available() * s.fragment_size())
                .unwrap_or(0)
        };
        let mut best = free();
        let mut still = 0;
        while still < 5 && Instant::now() < deadline {
            if let Err(e) = self.fs.sync(&self.root) {
                log::warn!("sync while waiting for free space: {e}");
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            let now = free();
            if now > best {
                best = now;
                still = 0;
            } else {
                still += 1;
            }
        }
        self.unreclaimed.store(0, Ordering::Relaxed);
    }

    /// How many of a table's newest segments the commit merges with its memtable: the
    /// tiered rule, limited to `free` segments (those no background merge reads) and, with
    /// background merges, to COMMIT_MERGE_BUDGET times the memtable's bytes.
    fn commit_merge_count(
        &self,
        mem: &Memtable,
        segments: &[Arc<Segment>],
        free: usize,
    ) -> (usize, u64) {
        let acc = memtable_bytes(mem);
        match self.compaction {
            Compaction::Inline => {
                tiered_count(acc, segments, free, u64::MAX, MAX_SEGMENTS_PER_TABLE)
            }
            // Background, and BackgroundWaited under feature `testing`.
            _ => tiered_count(
                acc,
                segments,
                free,
                acc.saturating_mul(COMMIT_MERGE_BUDGET),
                HARD_MAX_SEGMENTS_PER_TABLE,
            ),
        }
    }

    /// Start a background merge if one is due: in the table with the most segments among
    /// those where the tiered rule merges at least two. Called by a commit, after publishing.
    fn start_merge(&self, writer: &mut WriterState, version: &Version) {
        if self.compaction == Compaction::Inline {
            return;
        }
        // (table index, segments to merge, the table's segment count)
        let mut best: Option<(usize, usize, usize)> = None;
        for (i, t) in version.tables.iter().enumerate() {
            let Some((first, rest)) = t.segments.split_first() else {
                continue;
            };
            let (n, _) = tiered_count(
                first.file_len,
                rest,
                rest.len(),
                u64::MAX,
                MAX_SEGMENTS_PER_TABLE,
            );
            if n >= 1 && best.is_none_or(|(_, _, len)| t.segments.len() > len) {
                best = Some((i, n + 1, t.segments.len()));
            }
        }
        let Some((table, n, _)) = best else { return };
        let Some(segments) = version.tables.get(table).map(|t| &t.segments) else {
            return;
        };
        let Some(inputs) = segments.get(..n) else {
            return;
        };
        let inputs: Vec<Arc<Segment>> = inputs.to_vec();
        // Later commits only add newer segments, so a run that ends at the oldest still does.
        let drop_tombstones = n == segments.len();
        let seq = writer.next_seq;
        writer.next_seq += 1;
        let work_path = self.compact.join(segment::file_name(seq));
        let fs = self.fs.clone();
        let mode = self.file_mode;
        let (path, seqs) = (work_path.clone(), inputs.iter().map(|s| s.seq).collect());
        let spawned = std::thread::Builder::new()
            .name("butter-merge".into())
            .spawn(move || {
                // The merge uses only CPU time the slasher leaves idle.
                if let Err(e) = sys::set_current_thread_idle() {
                    log::warn!("merge thread keeps normal priority: {e}");
                }
                run_merge(&*fs, &inputs, drop_tombstones, &path, mode)
            });
        match spawned {
            Ok(handle) => {
                writer.merge = Some(MergeJob {
                    table,
                    inputs: seqs,
                    seq,
                    work_path,
                    handle,
                });
            }
            // No thread: the merge is retried after the next commit; until then commits keep
            // the segment count bounded by merging themselves.
            Err(e) => log::warn!("could not start a background merge: {e}"),
        }
    }

    /// Swap a finished background merge into `tables` (step 1 of the commit): clone its file
    /// into `live/` and replace its inputs with it. A merge that failed, or whose inputs are
    /// no longer the table's segments (cannot happen while commits leave them alone), is
    /// dropped: the data is still in its inputs. Only the clone and opening it can fail the
    /// commit.
    fn install_merge(
        &self,
        job: MergeJob,
        tables: &mut [TableVersion],
        retired: &mut Vec<Arc<Segment>>,
        info: &mut CommitInfo,
    ) -> Result<()> {
        let segments = tables.get_mut(job.table).map(|t| &mut t.segments);
        let place = segments.as_ref().and_then(|segs| job.position_in(segs));
        let merged = match job.handle.join() {
            Ok(Ok(m)) => Some(m),
            Ok(Err(e)) => {
                log::error!("background merge failed (its inputs stay): {e}");
                None
            }
            Err(_) => {
                log::error!("background merge panicked (its inputs stay)");
                None
            }
        };
        let (Some(merged), Some(segments), Some(at)) = (merged, segments, place) else {
            self.discard_merge_file(&job.work_path);
            return Ok(());
        };
        let mut replacement = Vec::new();
        if merged.entries > 0 {
            let path = self.live.join(segment::file_name(job.seq));
            self.fs
                .clone_file(&job.work_path, &path, self.file_mode)
                .map_err(|e| Error::io("clone", &path, e))?;
            fail_point("commit::after_clone");
            self.discard_merge_file(&job.work_path);
            for (i, b) in merged.blocks.into_iter().enumerate() {
                self.cache.insert(job.seq, i, b);
            }
            let seg = Segment::open(
                path,
                job.seq,
                merged.file_len,
                merged.entries,
                self.cache.clone(),
            )?;
            replacement.push(Arc::new(seg));
        }
        retired.extend(segments.splice(at..at + job.inputs.len(), replacement));
        info.merges_installed += 1;
        info.merged_bytes += merged.file_len;
        Ok(())
    }

    /// Delete a background merge's file from `compact/` if it is there. Best effort: open
    /// deletes anything left in `compact/`.
    fn discard_merge_file(&self, path: &Path) {
        if path.exists() {
            if let Err(e) = self.fs.remove_file(path) {
                log::warn!("could not delete {}: {e}", path.display());
            }
        }
    }

    fn commit_inner(
        &self,
        writer: &mut WriterState,
        base: &Version,
        new_tables: &[String],
        memtables: &[Memtable],
    ) -> Result<CommitInfo> {
        if self.is_poisoned() {
            return Err(Error::Poisoned);
        }
        if new_tables.is_empty() && memtables.iter().all(|m| m.is_empty()) {
            // Nothing to publish: the committed state is already durable.
            return Ok(CommitInfo {
                generation: base.generation,
                ..CommitInfo::default()
            });
        }
        if let Some(g) = writer.deferred_snapshot.take() {
            let dir = self.root.join(gen_name(g));
            self.fs
                .snapshot(&self.live, &dir, true)
                .map_err(|e| Error::io("snapshot", &dir, e))?;
        }
        let started = Instant::now();
        let generation = base.generation + 1;
        let mut info = CommitInfo {
            generation,
            ..CommitInfo::default()
        };
        let mut tables: Vec<TableVersion> = base.tables.clone();
        tables.extend(new_tables.iter().map(|n| TableVersion {
            name: n.clone(),
            segments: vec![],
        }));
        let mut retired: Vec<Arc<Segment>> = Vec::new();
        let mut written: Vec<PathBuf> = Vec::new();

        // Step 1 (design.md §3): swap in a finished background merge (already written back).
        if let Some(job) = writer.merge.take() {
            if self.compaction.waits_for_merges() || job.handle.is_finished() {
                self.install_merge(job, &mut tables, &mut retired, &mut info)?;
            } else {
                writer.merge = Some(job);
            }
        }

        // Step 2: write each changed table's memtable (merged with some of its newest
        // segments) as one new segment file in live/.
        for (i, (table, mem)) in tables.iter_mut().zip(memtables).enumerate() {
            if mem.is_empty() {
                continue;
            }
            // Segments a running background merge reads are not merged here.
            let free = match &writer.merge {
                Some(job) if job.table == i => job.position_in(&table.segments),
                _ => None,
            }
            .unwrap_or(table.segments.len());
            let (merge, estimate) = self.commit_merge_count(mem, &table.segments, free);
            let drop_tombstones = merge == table.segments.len();
            let inputs: Vec<Arc<Segment>> = table.segments.drain(..merge).collect();
            let mut builder = SegmentBuilder::with_capacity(estimate);
            merge_into(&mut builder, mem, &inputs, drop_tombstones)?;
            retired.extend(inputs);
            if builder.entries() == 0 {
                continue;
            }
            let seq = writer.next_seq;
            writer.next_seq += 1;
            let entries = builder.entries();
            let (bytes, blocks) = builder.finish();
            let path = self.live.join(segment::file_name(seq));
            self.fs
                .write_new_file_nowait(&path, &bytes, self.file_mode)
                .map_err(|e| Error::io("write", &path, e))?;
            written.push(path.clone());
            info.segments_written += 1;
            info.bytes_written += bytes.len() as u64;
            for (i, b) in blocks.into_iter().enumerate() {
                self.cache.insert(seq, i, b);
            }
            let seg = Segment::open(path, seq, bytes.len() as u64, entries, self.cache.clone())?;
            table.segments.insert(0, Arc::new(seg));
        }
        // Step 2b: wait for the new segments' write-back (started as each was written), so a
        // write error fails this commit instead of vanishing inside the snapshot.
        for path in &written {
            self.fs
                .write_back(path)
                .map_err(|e| Error::io("write back", path, e))?;
        }
        fail_point("commit::after_segments");

        // Step 3: the new manifest, written beside the old one and renamed over it.
        let manifest = Manifest {
            table_format: SEGMENT_TABLE_FORMAT,
            generation,
            next_seq: writer.next_seq,
            tables: tables
                .iter()
                .map(|t| TableMeta {
                    name: t.name.clone(),
                    segments: t
                        .segments
                        .iter()
                        .map(|s| SegmentMeta {
                            seq: s.seq,
                            file_len: s.file_len,
                            entries: s.entries,
                        })
                        .collect(),
                })
                .collect(),
        };
        info.bytes_written += write_manifest(&*self.fs, &self.live, &manifest, self.file_mode)?;

        // Step 4: unlink merged-away segments from live/ (older generations keep them).
        for s in &retired {
            let path = self.live.join(segment::file_name(s.seq));
            self.fs
                .remove_file(&path)
                .map_err(|e| Error::io("unlink", &path, e))?;
        }
        fail_point("commit::before_snapshot");
        info.write_us = started.elapsed().as_micros() as u64;

        // Step 5: the commit point. Creating the read-only snapshot flushes live/ and commits
        // the btrfs transaction before returning.
        let snap_started = Instant::now();
        let gen_dir = self.root.join(gen_name(generation));
        if broken_ack_before_snapshot() {
            writer.deferred_snapshot = Some(generation);
            *self.current.write() = Arc::new(Version { generation, tables });
            return Ok(info);
        }
        self.fs
            .snapshot(&self.live, &gen_dir, true)
            .map_err(|e| Error::CommitOutcomeUnknown {
                generation,
                source: Box::new(Error::io("snapshot", &gen_dir, e)),
            })?;
        info.snapshot_us = snap_started.elapsed().as_micros() as u64;
        fail_point("commit::after_snapshot");

        // Step 6: publish in memory and start the next background merge if one is due.
        let version = Arc::new(Version { generation, tables });
        *self.current.write() = version.clone();
        self.old_generations.lock().push(base.generation);
        for s in &retired {
            self.cache.evict_segment(s.seq, s.block_count());
        }
        if writer.merge.is_none() {
            self.start_merge(writer, &version);
        }
        // Step 7. The commit is durable; a failure to delete an old generation is not a commit
        // failure. It is retried after the next commit and at the next open.
        if let Err(e) = self.collect_garbage() {
            log::warn!("could not delete an old generation (will retry): {e}");
        }
        Ok(info)
    }
}

/// The bytes a memtable's entries take in a segment, give or take.
fn memtable_bytes(mem: &Memtable) -> u64 {
    mem.iter()
        .map(|(k, v)| (k.len() + v.map_or(0, <[u8]>::len) + 6) as u64)
        .sum()
}

/// The tiered merge rule: how many of the newest `segments` to merge, given `acc` bytes
/// gathered so far. The next older segment joins while the data gathered is at least
/// 1/MERGE_RATIO of its size and the total stays within `budget`, or while more than
/// `max_segments` would remain. At most `free` segments join. Also returns the bytes gathered.
fn tiered_count(
    mut acc: u64,
    segments: &[Arc<Segment>],
    free: usize,
    budget: u64,
    max_segments: usize,
) -> (usize, u64) {
    let mut n = 0;
    for s in segments.iter().take(free) {
        let too_many = segments.len() - n >= max_segments;
        let due = acc * MERGE_RATIO >= s.file_len && acc + s.file_len <= budget;
        if !(due || too_many) {
            break;
        }
        acc += s.file_len;
        n += 1;
    }
    (n, acc)
}

/// A background merge: merge `inputs` (newest first) and write the result to `path`, waiting
/// for its write-back so that a write error is reported here and the commit that swaps it in
/// has nothing left to wait for.
fn run_merge(
    fs: &dyn Fs,
    inputs: &[Arc<Segment>],
    drop_tombstones: bool,
    path: &Path,
    mode: u32,
) -> Result<Merged> {
    let estimate = inputs.iter().map(|s| s.file_len).sum();
    let mut builder = SegmentBuilder::with_capacity(estimate);
    merge_into(&mut builder, &Memtable::new(), inputs, drop_tombstones)?;
    let entries = builder.entries();
    if entries == 0 {
        return Ok(Merged {
            entries,
            file_len: 0,
            blocks: Vec::new(),
        });
    }
    let (bytes, blocks) = builder.finish();
    fs.write_new_file_nowait(path, &bytes, mode)
        .map_err(|e| Error::io("write", path, e))?;
    fs.write_back(path)
        .map_err(|e| Error::io("write back", path, e))?;
    fail_point("merge::after_write");
    Ok(Merged {
        entries,
        file_len: bytes.len() as u64,
        blocks,
    })
}

/// Merge the memtable (newest) with `inputs` (newest first) into `builder`.
fn merge_into(
    builder: &mut SegmentBuilder,
    mem: &Memtable,
    inputs: &[Arc<Segment>],
    drop_tombstones: bool,
) -> Result<()> {
    if inputs.is_empty() {
        // Only the memtable (a new table, or one whose segments are all larger): its entries
        // are already in order and unique.
        for (k, v) in mem {
            if v.is_some() || !drop_tombstones {
                builder.add(k, v)?;
            }
        }
        return Ok(());
    }
    let mut mem_it = mem.iter().peekable();
    let mut its: Vec<_> = inputs.iter().map(|s| s.iter()).collect();
    let mut key = Vec::new();
    loop {
        // The smallest head key; on ties the newest source (memtable, then segments in
        // order) wins.
        key.clear();
        let mut winner: Option<usize> = None;
        if let Some((k, _)) = mem_it.peek() {
            key.extend_from_slice(k);
            winner = Some(0);
        }
        for (j, it) in its.iter_mut().enumerate() {
            if let Some((k, _)) = it.peek()? {
                if winner.is_none() || k < key.as_slice() {
                    key.clear();
                    key.extend_from_slice(k);
                    winner = Some(j + 1);
                }
            }
        }
        let Some(w) = winner else { break };
        if w == 0 {
            if let Some((_, v)) = mem_it.next() {
                if v.is_some() || !drop_tombstones {
                    builder.add(&key, v)?;
                }
            }
        }
        for (j, it) in its.iter_mut().enumerate() {
            let same = matches!(it.peek()?, Some((k, _)) if k == key.as_slice());
            if !same {
                continue;
            }
            if w == j + 1 {
                if let Some((_, v)) = it.peek()? {
                    if v.is_some() || !drop_tombstones {
                        builder.add(&key, v)?;
                    }
                }
            }
            it.advance();
        }
    }
    Ok(())
}

impl Drop for Env {
    fn drop(&mut self) {
        // Wait for a running background merge (it reads this environment's segments) and
        // delete its output; the next open would delete it otherwise.
        if let Some(job) = self.writer.get_mut().merge.take() {
            let _ = job.handle.join();
            self.discard_merge_file(&job.work_path);
        }
    }
}

/// Open's writable snapshot of the newest generation as `live`. Space just freed (a file
/// deleted to make room) comes back to btrfs's metadata only once its cleaner has returned the
/// emptied data block groups, so for up to RECLAIM_WAIT an ENOSPC is answered by asking for a
/// transaction commit (which wakes the cleaner) and trying again.
fn snapshot_when_space_allows(fs: &dyn Fs, root: &Path, src: &Path, live: &Path) -> Result<()> {
    let deadline = Instant::now() + RECLAIM_WAIT;
    let mut warned = false;
    loop {
        match fs.snapshot(src, live, false) {
            Ok(()) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) && Instant::now() < deadline => {
                if !warned {
                    warned = true;
                    log::warn!(
                        "disk full while opening (snapshot {}); waiting up to {} s for btrfs \
                         to reclaim freed space",
                        live.display(),
                        RECLAIM_WAIT.as_secs()
                    );
                }
                if let Err(e) = fs.sync(root) {
                    log::warn!("sync while waiting for free space: {e}");
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            Err(e) => return Err(Error::io("snapshot", live, e)),
        }
    }
}

/// Write `live/MANIFEST` by writing a temporary file and renaming it into place.
fn write_manifest(fs: &dyn Fs, live: &Path, manifest: &Manifest, mode: u32) -> Result<u64> {
    let tmp = live.join(MANIFEST_TMP_FILE);
    let dst = live.join(MANIFEST_FILE);
    if tmp.exists() {
        fs.remove_file(&tmp)
            .map_err(|e| Error::io("unlink", &tmp, e))?;
    }
    let bytes = manifest.encode();
    fs.write_new_file(&tmp, &bytes, mode)
        .map_err(|e| Error::io("write", &tmp, e))?;
    fs.rename(&tmp, &dst)
        .map_err(|e| Error::io("rename", &dst, e))?;
    Ok(bytes.len() as u64)
}
