//! Test-only fault injection (feature `testing`): [`FaultyFs`] fails planned operations.

use super::btrfs::BtrfsFs;
use super::ops::Fs;
use std::fs::File;
use std::io::{self, IoSlice};
use std::path::Path;

/// Which outcome [`FaultyFs`] fakes for a failing operation.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultTiming {
    /// Fail without touching the filesystem (the kernel refused the call).
    Before,
    /// Perform the operation, then report the error anyway (the effect happened but the
    /// caller cannot know: a lost reply, an error reported late).
    After,
}

/// A fault plan for [`FaultyFs`]: fail operation number `at` (1-based, counting every
/// side-effecting call), or every operation from `at` on when `sticky` is set.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultPlan {
    /// The first operation to fail (1 = the first call).
    pub at: u64,
    /// The `errno` reported.
    pub errno: i32,
    /// Keep failing every later operation too.
    pub sticky: bool,
    /// Whether the failing operation still takes effect.
    pub timing: FaultTiming,
}

/// Test-only [`Fs`]: [`BtrfsFs`] that counts every side-effecting operation and fails the
/// planned ones with a chosen `errno`. The fault-enumeration tier sweeps the plan over every
/// operation of a workload. Thread-safe; the plan can be changed while an environment uses it.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct FaultyFs {
    inner: BtrfsFs,
    state: std::sync::Mutex<FaultyState>,
}

#[derive(Debug, Default)]
struct FaultyState {
    plan: Option<FaultPlan>,
    ops: u64,
    failed: Vec<(u64, &'static str)>,
}

impl FaultyFs {
    /// A wrapper that fails nothing until [`FaultyFs::set_plan`] is called.
    pub fn new() -> Self {
        Self::default()
    }

    /// A wrapper that fails according to `plan`.
    pub fn with_plan(plan: FaultPlan) -> Self {
        let fs = Self::default();
        fs.set_plan(Some(plan));
        fs
    }

    /// Replace the plan (`None`: fail nothing). Operation numbers keep counting.
    pub fn set_plan(&self, plan: Option<FaultPlan>) {
        self.lock().plan = plan;
    }

    /// Side-effecting operations attempted so far, failed ones included.
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// The operations that were failed: (operation number, operation name).
    pub fn failures(&self) -> Vec<(u64, &'static str)> {
        self.lock().failed.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FaultyState> {
        // A panic while holding this lock cannot leave the counters inconsistent.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts one operation and runs it unless the plan fails it.
    fn run<T>(&self, name: &'static str, op: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        let fault = {
            let mut s = self.lock();
            s.ops += 1;
            let n = s.ops;
            let fault = s
                .plan
                .filter(|p| n == p.at || (p.sticky && n > p.at))
                .map(|p| (p.errno, p.timing));
            if fault.is_some() {
                s.failed.push((n, name));
            }
            fault
        };
        match fault {
            None => op(),
            Some((errno, FaultTiming::Before)) => Err(io::Error::from_raw_os_error(errno)),
            Some((errno, FaultTiming::After)) => {
                // The caller sees the fault whatever the real outcome was.
                let _real_outcome = op();
                Err(io::Error::from_raw_os_error(errno))
            }
        }
    }
}

impl Fs for FaultyFs {
    fn create_subvolume(&self, path: &Path) -> io::Result<()> {
        self.run("create_subvolume", || self.inner.create_subvolume(path))
    }

    fn snapshot(&self, src: &Path, dst: &Path, readonly: bool) -> io::Result<()> {
        self.run("snapshot", || self.inner.snapshot(src, dst, readonly))
    }

    fn delete_subvolume(&self, path: &Path) -> io::Result<()> {
        self.run("delete_subvolume", || self.inner.delete_subvolume(path))
    }

    fn write_new_file(&self, path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
        self.run("write_new_file", || {
            self.inner.write_new_file(path, data, mode)
        })
    }

    fn create_new_file(&self, path: &Path, mode: u32) -> io::Result<File> {
        self.run("create_new_file", || self.inner.create_new_file(path, mode))
    }

    fn append_nowait(&self, file: &mut File, start: u64, pieces: &[IoSlice<'_>]) -> io::Result<()> {
        self.run("append_nowait", || {
            self.inner.append_nowait(file, start, pieces)
        })
    }

    fn write_back(&self, path: &Path) -> io::Result<()> {
        self.run("write_back", || self.inner.write_back(path))
    }

    fn clone_file(&self, src: &Path, dst: &Path, mode: u32) -> io::Result<()> {
        self.run("clone_file", || self.inner.clone_file(src, dst, mode))
    }

    fn create_dir(&self, path: &Path, mode: u32) -> io::Result<()> {
        self.run("create_dir", || self.inner.create_dir(path, mode))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.run("create_dir_all", || self.inner.create_dir_all(path))
    }

    fn open_lock_file(&self, path: &Path, mode: u32) -> io::Result<File> {
        self.run("open_lock_file", || self.inner.open_lock_file(path, mode))
    }

    fn set_mode(&self, path: &Path, mode: u32) -> io::Result<()> {
        self.run("set_mode", || self.inner.set_mode(path, mode))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.run("rename", || self.inner.rename(from, to))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.run("remove_file", || self.inner.remove_file(path))
    }

    fn sync(&self, path: &Path) -> io::Result<()> {
        self.run("sync", || self.inner.sync(path))
    }
}
