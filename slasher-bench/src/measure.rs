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
