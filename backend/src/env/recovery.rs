//! Opening a database directory (design.md §1 and "What a crash leaves"): check what is there,
//! create a fresh database or take the newest generation, make `live/` from it, and clear
//! what a stopped process left.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use crate::budget::Budget;
use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::manifest::Manifest;
use crate::memory::{self, MemoryCgroup};
use crate::root::{
    self, gen_name, DbId, Kind, RootScan, COMPACT_DIR, ID_FILE, INCOMPLETE_FILE, LIVE_DIR,
    LOCK_FILE,
};
use crate::segment::BlockCache;
use crate::segment::{self, Segment};
use crate::sys;
use crate::version::{partitions, TableVersion, Version};

use super::commit::write_manifest;
use super::hooks::fail_point;
use super::policy::Settings;
use super::{
    Env, EnvBuilder, WriterState, MANIFEST_FILE, NEXT_ENV_ID, RECLAIM_WAIT, SEGMENT_TABLE_FORMAT,
};

impl Env {
    /// Open (creating or recovering) the database `b` names, in the steps below, in this
    /// order: every check of what is there comes before the first change.
    pub(super) fn open(b: EnvBuilder) -> Result<Env> {
        let root = b.path;
        let (file_mode, dir_mode) = if b.group_access {
            (0o640, 0o750)
        } else {
            (0o600, 0o700)
        };
        let fs = b.fs;
        make_root_on_btrfs(&*fs, &root, dir_mode)?;
        let live = root.join(LIVE_DIR);
        // An existing lock file is locked first, so that a database in use is `Locked`, not
        // judged by what its writer is in the middle of. A missing one is created only once
        // the directory has passed every check: a refused open creates nothing (the checks
        // are made again under the lock, which decides).
        if !root::check_kind(&root.join(LOCK_FILE), Kind::File)? {
            check_contents(&root, &live)?;
        }
        let lock = lock_root(&*fs, &root, file_mode)?;
        let (scan, id) = check_root(&*fs, &root, &live, file_mode)?;
        let mut gens = scan.generations;
        if gens.is_empty() {
            create_generation_zero(&*fs, &root, &live, scan.live, &id, (file_mode, dir_mode))?;
            gens.push(0);
        }
        let (newest, newest_dir, manifest) = newest_manifest(&root, &gens, &id)?;
        // Whatever `live/` holds was never committed (or equals gen-N): start over from gen-N.
        fail_point("recovery::discard_live");
        if root::check_kind(&live, Kind::Subvolume)? {
            fs.delete_subvolume(&live)
                .map_err(|e| Error::io("delete subvolume", &live, e))?;
        }
        snapshot_when_space_allows(&*fs, &root, &newest_dir, &live)?;
        let available = memory::available_bytes();
        let cache_bytes = b
            .block_cache_bytes
            .unwrap_or_else(|| memory::default_block_cache_bytes(available));
        let memtable_bytes = b
            .memtable_bytes
            .unwrap_or_else(|| memory::default_memtable_bytes(available));
        let cache = Arc::new(BlockCache::new(cache_bytes));
        let tables = open_tables(&manifest, &live, &newest_dir, &cache)?;
        let segments = tables.iter().map(|t| t.segments.len()).sum();
        allow_open_segments(segments);
        let cgroup = b
            .memory_cgroup
            .clone()
            .unwrap_or_else(MemoryCgroup::of_self);
        let budget = Budget::new(
            cache.clone(),
            cache_bytes as u64,
            memtable_bytes,
            cgroup,
            b.memory_pressure,
        );
        let version = Version {
            generation: newest,
            tables,
        };
        // Background merges that never got swapped in (the process stopped first).
        let merge_dir = root.join(COMPACT_DIR);
        root::clear_compact_dir(&*fs, &merge_dir, dir_mode)?;
        let env = Env {
            id: NEXT_ENV_ID.fetch_add(1, Ordering::Relaxed),
            root,
            live,
            merge_dir,
            fs,
            cache,
            budget,
            merges: Settings {
                mode: b.merges,
                partition_bytes: b.merge_sizes.0,
                drain_job_bytes: b.merge_sizes.1,
            },
            file_mode,
            unreclaimed: AtomicU64::new(0),
            writer: Mutex::new(WriterState {
                deferred_snapshot: None,
                next_seq: manifest.next_seq,
                merge: None,
                drain: None,
                spare_chunks: Vec::new(),
                worker: super::worker::Worker::default(),
            }),
            current: RwLock::new(Arc::new(version)),
            pins: Mutex::new(BTreeMap::new()),
            old_generations: Mutex::new(gens.into_iter().filter(|&g| g != newest).collect()),
            poisoned: AtomicBool::new(false),
            retirer: super::retire::Retirer::start(),
            _lock: lock,
            #[cfg(feature = "testing")]
            read_hook: super::ReadHook::default(),
        };
        // As after a commit (step 7), an old generation that cannot be deleted is not an open
        // failure.
        env.collect_garbage();
        Ok(env)
    }
}

/// Create the database directory `root` if it is missing, and check that it is on btrfs.
fn make_root_on_btrfs(fs: &dyn Fs, root: &Path, dir_mode: u32) -> Result<()> {
    if !root::check_kind(root, Kind::DirOrSubvolume)? {
        if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs.create_dir_all(parent)
                .map_err(|e| Error::io("create database directory", parent, e))?;
        }
        fs.create_dir(root, dir_mode)
            .map_err(|e| Error::io("create database directory", root, e))?;
    }
    let fs_type = sys::filesystem_type(root).map_err(|e| Error::io("statfs", root, e))?;
    if !fs_type.is_btrfs() {
        return Err(Error::NotBtrfs {
            path: root.to_path_buf(),
            found: fs_type.name,
            magic: fs_type.magic,
        });
    }
    Ok(())
}

/// Take the exclusive lock on `root`'s lock file (one process per database).
fn lock_root(fs: &dyn Fs, root: &Path, file_mode: u32) -> Result<File> {
    let lock_path = root.join(LOCK_FILE);
    // A directory, FIFO or device by the lock's name is foreign like any other owned name
    // of the wrong type; `O_NOFOLLOW` below refuses a symlink swapped in after this look.
    root::check_kind(&lock_path, Kind::File)?;
    let lock_file =
        fs.open_lock_file(&lock_path, file_mode)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => Error::foreign(&lock_path, "it is a symlink"),
                _ => Error::io("open lock file", &lock_path, e),
            })?;
    // The lock lives as long as the returned file is open.
    match root::lock_exclusive(&lock_file) {
        Ok(true) => {}
        Ok(false) => {
            return Err(Error::Locked {
                path: root.to_path_buf(),
                lock: lock_path,
            })
        }
        Err(e) => return Err(Error::io("lock", &lock_path, e)),
    }
    Ok(lock_file)
}

/// Check everything by the engine's names in `root` before anything is touched, and the
/// database's identity (created here for a new database).
fn check_root(fs: &dyn Fs, root: &Path, live: &Path, file_mode: u32) -> Result<(RootScan, DbId)> {
    let scan = check_contents(root, live)?;
    let id = match scan.id {
        Some(id) => id,
        None => root::create_id(fs, root, file_mode)?,
    };
    Ok((scan, id))
}

/// Everything by our names, checked before anything is touched: the entries, what `compact/`
/// holds, that `live/` (discarded at open) holds only the engine's files, and that the
/// directory is not a copy the `butter` tool left unfinished. Changes nothing.
fn check_contents(root: &Path, live: &Path) -> Result<RootScan> {
    let scan = root::scan(root)?;
    root::compact_outputs(&root.join(COMPACT_DIR))?;
    if scan.live {
        root::check_live_contents(live)?;
    }
    if scan.id.is_none() && root::check_kind(&root.join(INCOMPLETE_FILE), Kind::File)? {
        // A copy or removal by the `butter` tool stopped before the copy had its identity:
        // its files are the tool's, not a database to create here.
        return Err(Error::NotADatabase {
            path: root.to_path_buf(),
            reason: format!(
                "{INCOMPLETE_FILE} marks a copy, restore or removal by the butter tool that \
                 did not finish (`butter remove` deletes what it left)"
            ),
        });
    }
    Ok(scan)
}

/// A fresh database, or one whose very first commit never completed: `live/` (made anew),
/// holding the identity and an empty manifest, and its snapshot gen-0.
fn create_generation_zero(
    fs: &dyn Fs,
    root: &Path,
    live: &Path,
    live_exists: bool,
    id: &DbId,
    (file_mode, dir_mode): (u32, u32),
) -> Result<()> {
    // A fresh database, or one whose very first commit never completed.
    fail_point("recovery::init");
    if live_exists {
        fs.delete_subvolume(live)
            .map_err(|e| Error::io("delete subvolume", live, e))?;
    }
    fs.create_subvolume(live)
        .map_err(|e| match e.raw_os_error() {
            // btrfs refuses the subvolume ioctl itself: not a place for subvolumes.
            Some(libc::ENOTTY | libc::EINVAL | libc::EOPNOTSUPP | libc::EXDEV) => {
                Error::NotSubvolumeCapable {
                    path: root.to_path_buf(),
                    source: e,
                }
            }
            _ => Error::io("create subvolume", live, e),
        })?;
    // Snapshots copy this mode, so every generation has it too.
    fs.set_mode(live, dir_mode)
        .map_err(|e| Error::io("chmod", live, e))?;
    let live_id = live.join(ID_FILE);
    fs.write_new_file(&live_id, &id.encode(), file_mode)
        .map_err(|e| Error::io("write", &live_id, e))?;
    let manifest = Manifest {
        keys_recorded: true,
        table_format: SEGMENT_TABLE_FORMAT,
        generation: 0,
        next_seq: 1,
        tables: Vec::new(),
    };
    write_manifest(fs, live, &manifest, file_mode)?;
    let gen0 = root.join(gen_name(0));
    fs.snapshot(live, &gen0, true)
        .map_err(|e| Error::io("snapshot", &gen0, e))?;
    Ok(())
}

/// The newest of `gens` and its manifest, once every generation is checked to be this
/// database's (`id`).
fn newest_manifest(root: &Path, gens: &[u64], id: &DbId) -> Result<(u64, PathBuf, Manifest)> {
    // Every generation must be this database's before one is adopted or deleted.
    for &g in gens {
        root::check_generation_id(&root.join(gen_name(g)), id)?;
    }
    let newest = gens.last().copied().unwrap_or(0);
    let newest_dir = root.join(gen_name(newest));
    let manifest_path = newest_dir.join(MANIFEST_FILE);
    let bytes =
        root::read_nofollow(&manifest_path).map_err(|e| Error::io("read", &manifest_path, e))?;
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
    Ok((newest, newest_dir, manifest))
}

/// Open the segments `manifest` lists, in `live` (an error names the file in `newest_dir`,
/// the generation it came from). With the key ranges a manifest of version 2 records, only
/// each file's length is checked here, and its index is read on first use; a manifest of
/// version 1 has each segment's index read now, for its key range.
fn open_tables(
    manifest: &Manifest,
    live: &Path,
    newest_dir: &Path,
    cache: &Arc<BlockCache>,
) -> Result<Vec<TableVersion>> {
    let mut tables = Vec::with_capacity(manifest.tables.len());
    for t in &manifest.tables {
        let mut segments = Vec::with_capacity(t.segments.len());
        for s in &t.segments {
            let name = segment::file_name(s.seq);
            let path = live.join(&name);
            let segment = if manifest.keys_recorded {
                Segment::open_listed(path.clone(), s, cache.clone())
            } else {
                Segment::open(path.clone(), s.seq, s.file_len, s.entries, cache.clone())
            };
            let segment = segment.map_err(|e| e.naming(&path, &newest_dir.join(&name)))?;
            segments.push(Arc::new(segment));
        }
        tables.push(TableVersion {
            name: t.name.clone(),
            parts: partitions(&segments),
            segments,
        });
    }
    Ok(tables)
}

/// Room for files this process opens besides the segments the manifest lists: a commit's and
/// a merge's new segments, the directories, lock and manifest the engine holds.
const FILE_HEADROOM: u64 = 256;

/// Every segment's file may end up open (a file is opened on the segment's first use and kept
/// open while the segment is live): if the process's soft limit on open files leaves no room for
/// `segments` of them beside what is open now, raise it toward the hard limit, as far as twice
/// what is needed, and warn if the hard limit is too low. (Lighthouse's beacon node keeps the
/// usual soft limit of 1,024; a database of history 4,096 lists on the order of 1,000–1,600
/// segments.)
fn allow_open_segments(segments: usize) {
    let (Some(soft), hard) = crate::sys::open_file_limit() else {
        return;
    };
    let open_now = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64);
    let needed = open_now + segments as u64 + FILE_HEADROOM;
    if needed <= soft {
        return;
    }
    let raised = hard.map_or(needed * 2, |h| h.min(needed * 2));
    if raised > soft {
        match crate::sys::set_open_file_soft_limit(raised) {
            Ok(()) => log::info!(
                "raised the soft limit on open files from {soft} to {raised} for {segments} \
                 segments"
            ),
            Err(e) => log::warn!("could not raise the soft limit on open files: {e}"),
        }
    }
    if raised < needed {
        log::warn!(
            "the hard limit on open files ({raised}) is below what the database may need \
             ({needed}: {segments} segments, {open_now} files open now); raise it \
             (systemd: LimitNOFILE=)"
        );
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
