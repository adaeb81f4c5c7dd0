//! What `replay` measures besides wall time: the process's I/O counters, its peak resident set,
//! the size of a database's files, block-device write counters, and order statistics of batch
//! times.
//!
//! Everything here reads Linux `/proc` and `/sys` files of the calling process, so each backend
//! is replayed in its own child process (see [`crate::replay`]) and the numbers belong to that
//! backend alone.

use serde::{Deserialize, Serialize};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The calling process's `/proc/self/io` counters.
///
/// - `write_bytes` counts bytes this process caused to be sent to the storage layer: page-cache
///   pages it dirtied through `write` or a shared writable mapping, counted when dirtied, not
///   when written back. It does not include filesystem metadata, the ext4 journal or btrfs
///   tree blocks written by kernel threads, and pages rewritten before writeback are counted
///   each time they are dirtied.
/// - `syscw` counts write-family system calls, not syncs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcIo {
    /// Bytes passed to read-family system calls.
    pub rchar: u64,
    /// Bytes passed to write-family system calls.
    pub wchar: u64,
    /// Read-family system calls.
    pub syscr: u64,
    /// Write-family system calls.
    pub syscw: u64,
    /// Bytes fetched from the storage layer.
    pub read_bytes: u64,
    /// Bytes sent (dirtied) towards the storage layer.
    pub write_bytes: u64,
    /// Dirtied bytes later truncated away before writeback.
    pub cancelled_write_bytes: u64,
}

impl ProcIo {
    /// Read `/proc/self/io`.
    ///
    /// # Errors
    /// The file cannot be read (not Linux, or a kernel without task I/O accounting).
    pub fn read() -> std::io::Result<Self> {
        let text = std::fs::read_to_string("/proc/self/io")?;
        let mut io = ProcIo::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let Ok(value) = value.trim().parse::<u64>() else {
                continue;
            };
            match key.trim() {
                "rchar" => io.rchar = value,
                "wchar" => io.wchar = value,
                "syscr" => io.syscr = value,
                "syscw" => io.syscw = value,
                "read_bytes" => io.read_bytes = value,
                "write_bytes" => io.write_bytes = value,
                "cancelled_write_bytes" => io.cancelled_write_bytes = value,
                _ => {}
            }
        }
        Ok(io)
    }

    /// `self - earlier`, field by field, saturating.
    pub fn since(&self, earlier: &ProcIo) -> ProcIo {
        ProcIo {
            rchar: self.rchar.saturating_sub(earlier.rchar),
            wchar: self.wchar.saturating_sub(earlier.wchar),
            syscr: self.syscr.saturating_sub(earlier.syscr),
            syscw: self.syscw.saturating_sub(earlier.syscw),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
            cancelled_write_bytes: self
                .cancelled_write_bytes
                .saturating_sub(earlier.cancelled_write_bytes),
        }
    }
}

/// CPU time used so far by the whole process (every thread) and by the calling thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// `CLOCK_PROCESS_CPUTIME_ID`: user and system time of every thread of the process.
    pub process: Duration,
    /// `CLOCK_THREAD_CPUTIME_ID`: user and system time of the calling thread.
    pub thread: Duration,
}

impl CpuTimes {
    /// Now: the process's clock, then the thread's.
    pub fn now() -> CpuTimes {
        let process = cpu_clock(rustix::time::ClockId::ProcessCPUTime);
        CpuTimes {
            process,
            thread: cpu_clock(rustix::time::ClockId::ThreadCPUTime),
        }
    }

    /// The CPU time used since `self` (taken with [`CpuTimes::now`]). The clocks are read in
    /// the opposite order, so that the thread's interval lies inside the process's and the
    /// process's figure is never below the thread's.
    pub fn until_now(&self) -> CpuTimes {
        let thread = cpu_clock(rustix::time::ClockId::ThreadCPUTime);
        let process = cpu_clock(rustix::time::ClockId::ProcessCPUTime);
        CpuTimes {
            process: process.saturating_sub(self.process),
            thread: thread.saturating_sub(self.thread),
        }
    }
}

fn cpu_clock(id: rustix::time::ClockId) -> Duration {
    let t = rustix::time::clock_gettime(id);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// The calling process's peak resident set size in bytes (`VmHWM` of `/proc/self/status`), or
/// `None` if it cannot be read.
pub fn peak_rss_bytes() -> Option<u64> {
    status_kib("VmHWM:").map(|kib| kib * 1024)
}

/// The calling process's current resident set size in bytes (`VmRSS`).
pub fn current_rss_bytes() -> Option<u64> {
    status_kib("VmRSS:").map(|kib| kib * 1024)
}

fn status_kib(field: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    line.get(field.len()..)?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Sizes of a set of files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilesSize {
    /// Sum of the apparent sizes (`st_size`), as Lighthouse's `size_of_dir` counts them.
    pub apparent: u64,
    /// Sum of the allocated sizes (`st_blocks × 512`).
    pub allocated: u64,
    /// Files that were listed but could not be stat'ed (e.g. not created yet).
    pub missing: u32,
}

/// Sum the sizes of `files` (a backend's `filenames()`). Missing files count as 0 and are
/// counted in [`FilesSize::missing`].
pub fn files_size(files: &[PathBuf]) -> FilesSize {
    let mut size = FilesSize::default();
    for f in files {
        match std::fs::metadata(f) {
            Ok(m) => {
                size.apparent += m.len();
                size.allocated += m.blocks() * 512;
            }
            Err(_) => size.missing += 1,
        }
    }
    size
}

/// Bytes written to a block device since boot (`/sys/class/block/<dev>/stat`, sectors written
/// × 512). Counts everything any process or kernel thread wrote to that device.
pub fn device_bytes_written(device: &Path) -> Option<u64> {
    let stat = device_stat_path(device)?;
    let text = std::fs::read_to_string(stat).ok()?;
    let sectors: u64 = text.split_whitespace().nth(6)?.parse().ok()?;
    Some(sectors * 512)
}

/// `/sys/class/block/<name>/stat` for a device node such as `/dev/loop0` or
/// `/dev/mapper/vg-lv` (resolved to `dm-N`).
pub fn device_stat_path(device: &Path) -> Option<PathBuf> {
    let resolved = std::fs::canonicalize(device).ok()?;
    let name = resolved.file_name()?.to_str()?;
    let stat = Path::new("/sys/class/block").join(name).join("stat");
    stat.exists().then_some(stat)
}

/// Bytes in use on the filesystem holding `path` (`statfs`: total minus free blocks). It
/// counts everything on that filesystem, so it is the database's footprint only on a
/// filesystem of its own (as `scripts/bench.sh` makes them). On btrfs it includes extents of
/// deleted snapshots that the cleaner has not reclaimed yet.
pub fn fs_used_bytes(path: &Path) -> Option<u64> {
    let st = rustix::fs::statfs(path).ok()?;
    let block = u64::try_from(st.f_frsize).ok()?;
    let blocks = st.f_blocks;
    let free = st.f_bfree;
    Some(blocks.saturating_sub(free) * block)
}

/// Metadata bytes used on the btrfs holding `path`, from `btrfs filesystem usage -b` (the
/// `Metadata,<profile>: Size:…, Used:…` line); `None` off btrfs or without the tool or root.
pub fn btrfs_metadata_used_bytes(path: &Path) -> Option<u64> {
    let out = std::process::Command::new("btrfs")
        .args(["filesystem", "usage", "-b"])
        .arg(path)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    parse_btrfs_metadata_used(&String::from_utf8_lossy(&out.stdout))
}

fn parse_btrfs_metadata_used(usage: &str) -> Option<u64> {
    let line = usage.lines().find(|l| l.starts_with("Metadata,"))?;
    let used = line.split("Used:").nth(1)?;
    let digits: String = used
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Total extents of `files`, from `filefrag` (e2fsprogs; FIEMAP underneath); `None` if the
/// tool is missing or fails. A file rewritten in place on a copy-on-write filesystem
/// fragments, which this shows over a long run.
pub fn extent_count(files: &[PathBuf]) -> Option<u64> {
    let existing: Vec<&PathBuf> = files.iter().filter(|f| f.is_file()).collect();
    if existing.is_empty() {
        return Some(0);
    }
    let out = std::process::Command::new("filefrag")
        .args(&existing)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    parse_filefrag(&String::from_utf8_lossy(&out.stdout))
}

fn parse_filefrag(text: &str) -> Option<u64> {
    let mut total = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        // "<path>: 3 extents found" (or "1 extent found").
        let count = line.rsplit(": ").next()?.split_whitespace().next()?;
        total += count.parse::<u64>().ok()?;
    }
    Some(total)
}

/// Order statistics of a sample of durations in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Sample size.
    pub count: usize,
    /// Smallest.
    pub min: f64,
    /// Median (the lower middle element for an even count, as nearest rank at 50 %).
    pub median: f64,
    /// 99th percentile, nearest rank: the smallest value with at least 99 % of the sample at or
    /// below it.
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sum.
    pub sum: f64,
}

impl Summary {
    /// Summarise `values` (any order). An empty sample gives all zeros.
    pub fn of(values: &[f64]) -> Summary {
        if values.is_empty() {
            return Summary::default();
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let sum: f64 = sorted.iter().sum();
        Summary {
            count: sorted.len(),
            min: sorted.first().copied().unwrap_or_default(),
            median: nearest_rank(&sorted, 50.0),
            p99: nearest_rank(&sorted, 99.0),
            max: sorted.last().copied().unwrap_or_default(),
            mean: sum / sorted.len() as f64,
            sum,
        }
    }
}

/// Nearest-rank percentile of an ascending, non-empty sample.
fn nearest_rank(sorted: &[f64], percent: f64) -> f64 {
    let n = sorted.len();
    let rank = ((percent / 100.0) * n as f64).ceil() as usize;
    let index = rank.clamp(1, n) - 1;
    sorted.get(index).copied().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filefrag_and_btrfs_usage_are_parsed() {
        let frag = "/d/gen-3/t1.seg: 1 extent found\n/d/gen-3/t2.seg: 12 extents found\n";
        assert_eq!(parse_filefrag(frag), Some(13));
        assert_eq!(parse_filefrag("/d/x: unknown\n"), None);
        let usage = "Overall:\n    Device size:\t\t   8589934592\n\n\
                     Data,single: Size:1082130432, Used:20480 (0.00%)\n\
                     Metadata,single: Size:268435456, Used:147456 (0.05%)\n";
        assert_eq!(parse_btrfs_metadata_used(usage), Some(147_456));
        assert_eq!(
            parse_btrfs_metadata_used("Data,single: Size:1, Used:1\n"),
            None
        );
    }

    #[test]
    fn a_helper_threads_cpu_counts_for_the_process_not_the_caller() {
        let before = CpuTimes::now();
        let spin = |d: Duration| {
            let start = CpuTimes::now();
            while start.until_now().thread < d {}
        };
        std::thread::scope(|s| {
            s.spawn(|| spin(Duration::from_millis(60)));
        });
        spin(Duration::from_millis(20));
        let used = before.until_now();
        assert!(used.thread >= Duration::from_millis(20), "{used:?}");
        // The helper's 60 ms are the process's, not this thread's.
        assert!(
            used.process >= used.thread + Duration::from_millis(60),
            "{used:?}"
        );
        assert!(used.thread < Duration::from_millis(60), "{used:?}");
    }

    #[test]
    fn summary_uses_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).rev().collect();
        let s = Summary::of(&values);
        assert_eq!(s.count, 100);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.median, 50.0);
        assert_eq!(s.p99, 99.0);
        assert_eq!(s.max, 100.0);
        assert_eq!(s.sum, 5050.0);
        let one = Summary::of(&[7.0]);
        assert_eq!((one.median, one.p99, one.max), (7.0, 7.0, 7.0));
        assert_eq!(Summary::of(&[]).count, 0);
    }

    #[test]
    fn proc_counters_are_readable() {
        let before = ProcIo::read().expect("/proc/self/io");
        let after = ProcIo::read().expect("/proc/self/io");
        assert!(
            after.since(&before).rchar > 0,
            "reading /proc/self/io is itself a read"
        );
        assert!(peak_rss_bytes().is_some_and(|b| b > 0));
        assert!(current_rss_bytes().is_some_and(|b| b > 0));
    }
}
