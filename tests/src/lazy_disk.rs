//! The "lazy disk": a FUSE filesystem exposing one file, `disk.img`, that behaves like a disk
//! with a volatile write cache (`docs/reliability.md` §3).
//!
//! Writes are kept in memory until an `fsync` arrives; `fsync` writes them into the durable
//! image file. Put a loop device on `disk.img` (buffered mode) and btrfs on the loop device:
//! every block-layer FLUSH becomes an `fsync` here (btrfs issues two per transaction commit),
//! so the fsync count enumerates the disk-cache-flush points. "Cutting power" at the K-th
//! flush applies none (`Drop`), a random half (`Subset`) or a random prefix (`Prefix`) of the
//! writes since the previous flush to the durable image, and from then on every I/O fails
//! with `EIO`, as a dead disk would. The durable image can then be loop-mounted directly to
//! see what survived.
//!
//! It can also fail single reads, writes or flushes with `EIO` (or every one from the N-th
//! on) without cutting power. The server runs single-threaded, so for a given workload the
//! K-th flush is the same point in every run (up to btrfs's own background work).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, UNIX_EPOCH};

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, INodeNo, LockOwner,
    MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyWrite, Request, SessionACL, WriteFlags,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const PAGE: u64 = 4096;
const DISK_INO: u64 = 2;
const DISK_NAME: &str = "disk.img";
const TTL: Duration = Duration::from_secs(3600);

/// What survives of the unflushed writes when power is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CutMode {
    /// Nothing written since the last flush survives.
    Drop,
    /// Each page written since the last flush survives with probability 1/2 (its latest
    /// contents), chosen by the seed.
    Subset(u64),
    /// The writes since the last flush survive up to a random point of their order.
    Prefix(u64),
}

/// Which operation an injected `EIO` hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoKind {
    /// `read`.
    Read,
    /// `write`.
    Write,
    /// `fsync` (a flush).
    Fsync,
}

/// Counters of the operations the disk has seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Reads served or refused.
    pub reads: u64,
    /// Writes accepted or refused.
    pub writes: u64,
    /// Flushes (fsync calls).
    pub fsyncs: u64,
    /// Pages currently written but not flushed.
    pub pending_pages: u64,
    /// Errors injected so far.
    pub injected: u64,
    /// Whether power has been cut.
    pub dead: bool,
}

#[derive(Debug, Clone, Copy)]
struct Injection {
    kind: IoKind,
    at: u64,
    sticky: bool,
}

#[derive(Debug)]
struct DiskState {
    durable: File,
    size: u64,
    /// Page number → latest unflushed contents.
    pending: BTreeMap<u64, Vec<u8>>,
    /// Every unflushed write in order: offset and data.
    log: Vec<(u64, Vec<u8>)>,
    counters: Counters,
    cut_at_fsync: Option<(u64, CutMode)>,
    inject: Option<Injection>,
}

impl DiskState {
    fn injected(&mut self, kind: IoKind, n: u64) -> bool {
        let hit = self
            .inject
            .is_some_and(|i| i.kind == kind && (n == i.at || (i.sticky && n > i.at)));
        if hit {
            self.counters.injected += 1;
        }
        hit
    }

    fn page(&self, page: u64) -> std::io::Result<Vec<u8>> {
        if let Some(p) = self.pending.get(&page) {
            return Ok(p.clone());
        }
        let mut buf = vec![0u8; PAGE as usize];
        let off = page * PAGE;
        let len = PAGE.min(self.size.saturating_sub(off)) as usize;
        if len > 0 {
            self.durable.read_exact_at(&mut buf[..len], off)?;
        }
        Ok(buf)
    }

    fn read(&self, offset: u64, size: u32) -> std::io::Result<Vec<u8>> {
        let end = (offset + u64::from(size)).min(self.size);
        let mut out = Vec::with_capacity(end.saturating_sub(offset) as usize);
        let mut pos = offset;
        while pos < end {
            let page = pos / PAGE;
            let in_page = (pos % PAGE) as usize;
            let take = ((PAGE - pos % PAGE).min(end - pos)) as usize;
            if let Some(p) = self.pending.get(&page) {
                out.extend_from_slice(&p[in_page..in_page + take]);
            } else {
                let mut buf = vec![0u8; take];
                self.durable.read_exact_at(&mut buf, pos)?;
                out.extend_from_slice(&buf);
            }
            pos += take as u64;
        }
        Ok(out)
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let end = offset + data.len() as u64;
        if end > self.size {
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let mut pos = offset;
        while pos < end {
            let page = pos / PAGE;
            let in_page = (pos % PAGE) as usize;
            let take = ((PAGE - pos % PAGE).min(end - pos)) as usize;
            let mut contents = self.page(page)?;
            let from = (pos - offset) as usize;
            contents[in_page..in_page + take].copy_from_slice(&data[from..from + take]);
            self.pending.insert(page, contents);
            pos += take as u64;
        }
        self.log.push((offset, data.to_vec()));
        self.counters.pending_pages = self.pending.len() as u64;
        Ok(())
    }

    /// Writes every pending page to the durable image.
    fn flush(&mut self) -> std::io::Result<()> {
        for (page, data) in std::mem::take(&mut self.pending) {
            let off = page * PAGE;
            let len = PAGE.min(self.size - off) as usize;
            self.durable.write_all_at(&data[..len], off)?;
        }
        self.log.clear();
        self.counters.pending_pages = 0;
        Ok(())
    }

    /// Power cut: keep what `mode` says of the pending writes, then fail everything.
    fn cut(&mut self, mode: CutMode) -> std::io::Result<()> {
        match mode {
            CutMode::Drop => {}
            CutMode::Subset(seed) => {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                for (page, data) in &self.pending {
                    if rng.gen_bool(0.5) {
                        let off = page * PAGE;
                        let len = PAGE.min(self.size - off) as usize;
                        self.durable.write_all_at(&data[..len], off)?;
                    }
                }
            }
            CutMode::Prefix(seed) => {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let keep = rng.gen_range(0..=self.log.len());
                for (off, data) in self.log.iter().take(keep) {
                    self.durable.write_all_at(data, *off)?;
                }
            }
        }
        self.pending.clear();
        self.log.clear();
        self.counters.pending_pages = 0;
        self.counters.dead = true;
        Ok(())
    }
}

/// The FUSE side: answers the kernel from the shared state.
#[derive(Debug)]
struct LazyFs {
    state: Arc<Mutex<DiskState>>,
}

fn lock(state: &Mutex<DiskState>) -> MutexGuard<'_, DiskState> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn attr(ino: u64, size: u64) -> FileAttr {
    let dir = ino == 1;
    FileAttr {
        ino: INodeNo(ino),
        size,
        blocks: size.div_ceil(512),
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind: if dir {
            FileType::Directory
        } else {
            FileType::RegularFile
        },
        perm: if dir { 0o755 } else { 0o600 },
        nlink: if dir { 2 } else { 1 },
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: PAGE as u32,
        flags: 0,
    }
}

fn eio() -> Errno {
    Errno::EIO
}

impl Filesystem for LazyFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        if u64::from(parent) == 1 && name == DISK_NAME {
            let size = lock(&self.state).size;
            reply.entry(&TTL, &attr(DISK_INO, size), fuser::Generation(0));
        } else {
            reply.error(Errno::ENOENT);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match u64::from(ino) {
            1 => reply.attr(&TTL, &attr(1, 0)),
            DISK_INO => reply.attr(&TTL, &attr(DISK_INO, lock(&self.state).size)),
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if u64::from(ino) == DISK_INO {
            reply.opened(FileHandle(0), FopenFlags::empty());
        } else {
            reply.error(Errno::EISDIR);
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let mut s = lock(&self.state);
        s.counters.reads += 1;
        let n = s.counters.reads;
        if s.counters.dead || s.injected(IoKind::Read, n) {
            return reply.error(eio());
        }
        match s.read(offset, size) {
            Ok(data) => reply.data(&data),
            Err(_) => reply.error(eio()),
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let mut s = lock(&self.state);
        s.counters.writes += 1;
        let n = s.counters.writes;
        if s.counters.dead || s.injected(IoKind::Write, n) {
            return reply.error(eio());
        }
        match s.write(offset, data) {
            Ok(()) => reply.written(data.len() as u32),
            Err(e) => reply.error(Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        // close(2), not a cache flush: nothing becomes durable.
        reply.ok();
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let mut s = lock(&self.state);
        s.counters.fsyncs += 1;
        let n = s.counters.fsyncs;
        if s.counters.dead {
            return reply.error(eio());
        }
        if let Some((at, mode)) = s.cut_at_fsync {
            if n >= at {
                let _ = s.cut(mode);
                return reply.error(eio());
            }
        }
        if s.injected(IoKind::Fsync, n) {
            return reply.error(eio());
        }
        match s.flush() {
            Ok(()) => reply.ok(),
            Err(_) => reply.error(eio()),
        }
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        if u64::from(ino) != 1 {
            return reply.error(Errno::ENOTDIR);
        }
        let entries = [
            (1, FileType::Directory, "."),
            (1, FileType::Directory, ".."),
            (DISK_INO, FileType::RegularFile, DISK_NAME),
        ];
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }
}

/// A mounted lazy disk. Dropping it unmounts the FUSE filesystem (after whatever sits on
/// top of it has been unmounted and detached).
#[derive(Debug)]
pub struct LazyDisk {
    state: Arc<Mutex<DiskState>>,
    session: Option<fuser::BackgroundSession>,
    mountpoint: PathBuf,
}

impl LazyDisk {
    /// Serves `durable` (an existing image file) as `<mountpoint>/disk.img`.
    ///
    /// # Errors
    /// Opening the image or mounting FUSE.
    pub fn mount(durable: &Path, mountpoint: &Path) -> std::io::Result<LazyDisk> {
        let file = File::options().read(true).write(true).open(durable)?;
        let size = file.metadata()?.len();
        let state = Arc::new(Mutex::new(DiskState {
            durable: file,
            size,
            pending: BTreeMap::new(),
            log: Vec::new(),
            counters: Counters::default(),
            cut_at_fsync: None,
            inject: None,
        }));
        std::fs::create_dir_all(mountpoint)?;
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName("lazydisk".to_string()),
            MountOption::NoAtime,
        ];
        config.acl = SessionACL::All;
        config.n_threads = Some(1);
        let session = fuser::spawn_mount(
            LazyFs {
                state: state.clone(),
            },
            mountpoint,
            &config,
        )?;
        Ok(LazyDisk {
            state,
            session: Some(session),
            mountpoint: mountpoint.to_path_buf(),
        })
    }

    /// The disk file to put a loop device on.
    pub fn disk_path(&self) -> PathBuf {
        self.mountpoint.join(DISK_NAME)
    }

    /// The counters so far.
    pub fn counters(&self) -> Counters {
        lock(&self.state).counters
    }

    /// Cut power when the flush count reaches `at` (counting from the disk's start).
    pub fn cut_at_fsync(&self, at: u64, mode: CutMode) {
        lock(&self.state).cut_at_fsync = Some((at, mode));
    }

    /// Cut power now.
    ///
    /// # Errors
    /// Writing the surviving pages.
    pub fn cut_now(&self, mode: CutMode) -> std::io::Result<()> {
        let mut s = lock(&self.state);
        if s.counters.dead {
            return Ok(());
        }
        s.cut(mode)
    }

    /// Fail the `at`-th operation of `kind` (counting from the disk's start) with `EIO`, or
    /// every one from it on when `sticky`.
    pub fn inject_eio(&self, kind: IoKind, at: u64, sticky: bool) {
        lock(&self.state).inject = Some(Injection { kind, at, sticky });
    }

    /// Stop injecting errors.
    pub fn clear_injection(&self) {
        lock(&self.state).inject = None;
    }

    /// Make every pending write durable (a clean power-down of a live disk).
    ///
    /// # Errors
    /// Writing the pages.
    pub fn flush_pending(&self) -> std::io::Result<()> {
        let mut s = lock(&self.state);
        if s.counters.dead {
            return Ok(());
        }
        s.flush()
    }

    /// Unmounts the FUSE filesystem and stops the server.
    ///
    /// # Errors
    /// The unmount's error.
    pub fn unmount(mut self) -> std::io::Result<()> {
        match self.session.take() {
            Some(s) => s.umount_and_join(),
            None => Ok(()),
        }
    }
}

impl Drop for LazyDisk {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            if let Err(e) = s.umount_and_join() {
                eprintln!(
                    "warning: unmounting lazy disk {}: {e}",
                    self.mountpoint.display()
                );
            }
        }
    }
}
