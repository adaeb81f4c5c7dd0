//! The memory the process may use, for the default size of the engine's caches (design.md
//! §7, "Memory").
//!
//! A process in a memory cgroup (a systemd unit's `MemoryMax`, a container's limit) is killed
//! by the kernel's OOM killer when its memory and page cache together reach the limit and
//! reclaim cannot free enough. Page cache is reclaimable; the engine's own decoded blocks are
//! not. So the engine sizes its caches from the limit where there is one, and from the
//! machine's RAM otherwise, and leaves the rest of the database to the page cache.
//!
//! Everything here reads text files under `/proc` and the cgroup filesystem; anything missing
//! or unreadable means "unknown" (`None`), never an error.

use std::path::{Path, PathBuf};

/// A limit at or above this is "no limit" (cgroup v1 writes 2^63 rounded down to a page for
/// unlimited; nothing real is this large).
const UNLIMITED: u64 = 1 << 60;

/// The cgroup version of a [`MemoryCgroup`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// The v1 `memory` controller (`memory.limit_in_bytes`, `memory.oom_control`).
    V1,
    /// The unified hierarchy (`memory.max`, `memory.events`).
    V2,
}

/// The memory cgroup a process belongs to: its directory in the cgroup filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryCgroup {
    /// The cgroup's directory (e.g. `/sys/fs/cgroup/memory/system.slice/x.service`).
    pub dir: PathBuf,
    /// Where the hierarchy is mounted (the root cgroup's directory, as far as this process
    /// can see).
    pub mount: PathBuf,
    /// v1 or v2.
    pub version: CgroupVersion,
}

impl MemoryCgroup {
    /// The memory cgroup of this process, if it is in one this process can see.
    pub fn of_self() -> Option<MemoryCgroup> {
        let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        Self::find(&cgroups, &mountinfo)
    }

    /// The memory cgroup named in `cgroups` (the text of `/proc/PID/cgroup`), located with
    /// `mountinfo` (the text of `/proc/PID/mountinfo`). The v1 memory controller wins when
    /// both are there: on a hybrid system the unified hierarchy then has no memory controller.
    pub fn find(cgroups: &str, mountinfo: &str) -> Option<MemoryCgroup> {
        let mut unified = None;
        for line in cgroups.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(id), Some(controllers), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if controllers.split(',').any(|c| c == "memory") {
                return locate(mountinfo, path, CgroupVersion::V1);
            }
            if id == "0" && controllers.is_empty() {
                unified = Some(path);
            }
        }
        locate(mountinfo, unified?, CgroupVersion::V2)
    }

    /// The limit on this cgroup's memory and page cache together, in bytes: the smallest
    /// limit of the cgroup and its ancestors (as far as the mount shows them); `None` if there
    /// is none or it cannot be read.
    pub fn limit_bytes(&self) -> Option<u64> {
        let stat = match self.version {
            CgroupVersion::V1 => std::fs::read_to_string(self.dir.join("memory.stat")).ok(),
            CgroupVersion::V2 => None,
        };
        self.limit_with(stat.as_deref())
    }

    /// [`MemoryCgroup::limit_bytes`], with v1's `memory.stat` already read (`stat`).
    fn limit_with(&self, stat: Option<&str>) -> Option<u64> {
        let limit = match self.version {
            // Already the smallest over the ancestors; memory.limit_in_bytes is the cgroup's own.
            CgroupVersion::V1 => stat
                .and_then(|t| text_value(t, "hierarchical_memory_limit"))
                .or_else(|| read_number(&self.dir.join("memory.limit_in_bytes"))),
            CgroupVersion::V2 => self
                .dir
                .ancestors()
                .take_while(|d| d.starts_with(&self.mount) && *d != self.mount)
                .filter_map(|d| read_number(&d.join("memory.max")))
                .min(),
        };
        limit.filter(|&l| l < UNLIMITED)
    }

    /// The anonymous memory charged to this cgroup and its children, in bytes (what reclaim
    /// cannot take back by dropping page cache: v1 `memory.stat`'s `total_rss`, v2's `anon`),
    /// and [`MemoryCgroup::limit_bytes`]; `None` unless both are known. `memory.stat` is read
    /// once for both.
    pub fn anon_and_limit(&self) -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string(self.dir.join("memory.stat")).ok()?;
        let key = match self.version {
            CgroupVersion::V1 => "total_rss",
            CgroupVersion::V2 => "anon",
        };
        Some((text_value(&stat, key)?, self.limit_with(Some(&stat))?))
    }

    /// How many processes the kernel's OOM killer has killed in this cgroup (v1
    /// `memory.oom_control`, v2 `memory.events`: `oom_kill`), if the kernel counts them.
    pub fn oom_kills(&self) -> Option<u64> {
        let file = match self.version {
            CgroupVersion::V1 => "memory.oom_control",
            CgroupVersion::V2 => "memory.events",
        };
        stat_value(&self.dir.join(file), "oom_kill")
    }
}

/// The directory of cgroup `path` in the hierarchy of `version`, from the mount table.
fn locate(mountinfo: &str, path: &str, version: CgroupVersion) -> Option<MemoryCgroup> {
    for line in mountinfo.lines() {
        // id parent major:minor root mount-point options [optional...] - fstype source super
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split(' ').collect();
        let mut right = right.split(' ');
        let (Some(fstype), Some(_source), Some(options)) =
            (right.next(), right.next(), right.next())
        else {
            continue;
        };
        let wanted = match version {
            CgroupVersion::V1 => fstype == "cgroup" && options.split(',').any(|o| o == "memory"),
            CgroupVersion::V2 => fstype == "cgroup2",
        };
        let (Some(root), Some(mount)) = (fields.get(3), fields.get(4)) else {
            continue;
        };
        if !wanted {
            continue;
        }
        // The mount shows the hierarchy from `root` down: the cgroup must lie below it.
        let relative = if *root == "/" {
            Some(path)
        } else {
            path.strip_prefix(root)
                .filter(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        let Some(relative) = relative else {
            continue;
        };
        let mount = PathBuf::from(unescape(mount));
        let dir = mount.join(relative.trim_start_matches('/'));
        return Some(MemoryCgroup {
            dir,
            mount,
            version,
        });
    }
    None
}

/// Undo mountinfo's octal escapes (`\040` for a space).
fn unescape(field: &str) -> String {
    let mut out = Vec::with_capacity(field.len());
    let bytes = field.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u8::from_str_radix(d, 8).ok());
        match (bytes.get(i), octal) {
            (Some(b'\\'), Some(b)) => {
                out.push(b);
                i += 4;
            }
            (Some(&b), _) => {
                out.push(b);
                i += 1;
            }
            (None, _) => break,
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A file holding one number (`max` and anything else unparsable: `None`).
fn read_number(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The value of `key` in a file of `key value` lines (`memory.stat`, `memory.events`).
fn stat_value(path: &Path, key: &str) -> Option<u64> {
    text_value(&std::fs::read_to_string(path).ok()?, key)
}

/// The value of `key` in the text of a file of `key value` lines.
fn text_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// The machine's RAM (`MemTotal` of `/proc/meminfo`), in bytes.
pub fn total_ram_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// The memory this process may use, in bytes: its memory cgroup's limit where there is one
/// (and it is below the machine's RAM), else the machine's RAM; `None` if neither is known.
pub fn available_bytes() -> Option<u64> {
    let ram = total_ram_bytes();
    let limit = MemoryCgroup::of_self().and_then(|c| c.limit_bytes());
    match (limit, ram) {
        (Some(l), Some(r)) => Some(l.min(r)),
        (l, r) => l.or(r),
    }
}

/// The block cache's size when the caller sets none: an eighth of `available` bytes, at
/// least [`MIN_BLOCK_CACHE_BYTES`] and at most [`MAX_BLOCK_CACHE_BYTES`] (the largest when
/// `available` is unknown).
pub fn default_block_cache_bytes(available: Option<u64>) -> usize {
    let Some(available) = available else {
        return MAX_BLOCK_CACHE_BYTES;
    };
    let share = usize::try_from(available / BLOCK_CACHE_SHARE).unwrap_or(usize::MAX);
    share.clamp(MIN_BLOCK_CACHE_BYTES, MAX_BLOCK_CACHE_BYTES)
}

/// The block cache's default is `available / BLOCK_CACHE_SHARE`.
pub const BLOCK_CACHE_SHARE: u64 = 8;
/// The smallest default block cache (a process limited to under 64 MiB).
pub const MIN_BLOCK_CACHE_BYTES: usize = 8 << 20;
/// The largest default block cache: room for the table a slasher's first epoch rewrites in
/// every batch at today's validator count (~255 MB of decoded blocks at 1.1M validators,
/// history 4096), which an LRU smaller than it misses on every read (design.md §7); reached
/// with 8 GiB available.
pub const MAX_BLOCK_CACHE_BYTES: usize = 1 << 30;

/// A write transaction's memory budget when the caller sets none
/// ([`crate::EnvBuilder::memtable_bytes`]): an eighth of `available` bytes, at least
/// [`MIN_MEMTABLE_BYTES`] and at most [`MAX_MEMTABLE_BYTES`] (the largest when `available` is
/// unknown). With the block cache's eighth, a quarter of the limit goes to the engine's two
/// largest parts; the rest is the process's own (for the slasher, ~60 MiB of its own state
/// and the replay's) and the page cache.
pub fn default_memtable_bytes(available: Option<u64>) -> u64 {
    let Some(available) = available else {
        return MAX_MEMTABLE_BYTES;
    };
    (available / MEMTABLE_SHARE).clamp(MIN_MEMTABLE_BYTES, MAX_MEMTABLE_BYTES)
}

/// The memtable budget's default is `available / MEMTABLE_SHARE`.
pub const MEMTABLE_SHARE: u64 = 8;
/// The smallest default memtable budget: every limit up to 128 MiB gets it (a quarter of a
/// 64 MiB limit). A transaction that outgrows its budget spills runs and reads them back at its
/// commit: the mainnet sample's cold batches hold ~13 MiB, and under a 66 MiB limit, with a
/// budget of an eighth (8.25 MiB), every one of them spilled, which made its storage time
/// 1.11–1.19× and its device reads 9× what they are with 16 MiB (docs/runs/memory-limit.md
/// §6.4). Pressure still halves it from level 3 (design.md §7.1).
pub const MIN_MEMTABLE_BYTES: u64 = 16 << 20;
/// The largest default memtable budget, reached with 8 GiB available.
pub const MAX_MEMTABLE_BYTES: u64 = 1 << 30;

#[cfg(test)]
mod tests;
