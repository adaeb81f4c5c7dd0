//! Where a benchmark runs: the filesystem under a directory (type from `statfs`, mount point,
//! options and device from `/proc/self/mountinfo`), the machine (kernel, CPU, RAM), the build
//! (crate versions from the workspace `Cargo.lock`, git revision, profile).
//!
//! [`refuse_memory_fs`] enforces the first rule of benchmark honesty
//! (`docs/background.md` §2.6): a directory on tmpfs or ramfs is refused, because `fsync`
//! there is a no-op and a "durable" commit would measure nothing.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `statfs` magic numbers of the filesystems we name (from `linux/magic.h`).
const MAGICS: &[(u64, &str)] = &[
    (0x9123_683e, "btrfs"),
    (0xef53, "ext4"),
    (0x5846_5342, "xfs"),
    (0x0102_1994, "tmpfs"),
    (0x8584_58f6, "ramfs"),
    (0x2fc1_2fc1, "zfs"),
    (0xf2f5_2010, "f2fs"),
    (0xca45_1a4e, "bcachefs"),
    (0x794c_7630, "overlayfs"),
    (0x6969, "nfs"),
    (0xff53_4d42, "cifs"),
    (0x6573_5546, "fuse"),
    (0x7371_7368, "squashfs"),
    (0x3434, "nilfs2"),
    (0x5265_4973, "reiserfs"),
    (0x4d44, "vfat"),
    (0x5346_544e, "ntfs"),
    (0x0102_1997, "v9fs"),
];

/// Filesystems whose `fsync` does not reach a disk.
const MEMORY_FILESYSTEMS: &[&str] = &["tmpfs", "ramfs"];

/// The filesystem holding a directory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsInfo {
    /// The directory asked about (or its nearest existing ancestor, if it did not exist).
    pub path: PathBuf,
    /// Name from the `statfs` magic (`btrfs`, `ext4`, `xfs`, `tmpfs`, ... or `unknown`).
    pub fs_type: String,
    /// The `statfs` magic, hex.
    pub magic: String,
    /// The filesystem type mountinfo gives (e.g. `ext4`, which also covers ext2/ext3 magic).
    pub mount_fs_type: Option<String>,
    /// Mount point of the mount holding `path`.
    pub mount_point: Option<PathBuf>,
    /// Per-mount options (e.g. `rw,noatime`).
    pub mount_options: Option<String>,
    /// Per-superblock options (e.g. `rw,space_cache=v2,subvol=/`).
    pub super_options: Option<String>,
    /// Mount source (the device, e.g. `/dev/loop3`).
    pub device: Option<String>,
    /// For a loop device: its backing file (`/sys/block/loopN/loop/backing_file`).
    pub loop_backing_file: Option<String>,
}

impl FsInfo {
    /// Whether this is tmpfs or ramfs.
    pub fn is_memory(&self) -> bool {
        MEMORY_FILESYSTEMS.contains(&self.fs_type.as_str())
            || self
                .mount_fs_type
                .as_deref()
                .is_some_and(|t| MEMORY_FILESYSTEMS.contains(&t))
    }

    /// The name used in report labels: the `statfs` name, or mountinfo's if `statfs` gave no
    /// known name.
    pub fn label(&self) -> String {
        if self.fs_type == "unknown" {
            self.mount_fs_type
                .clone()
                .unwrap_or_else(|| "unknown".into())
        } else {
            self.fs_type.clone()
        }
    }
}

/// Why a directory cannot hold a benchmark database.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnvironmentError {
    /// The directory is on tmpfs or ramfs.
    #[error(
        "{dir} is on {fs}; benchmarks must run on a real disk (fsync on {fs} is a no-op, so \
         durable commits would measure nothing). Choose a directory on ext4, xfs or btrfs"
    )]
    MemoryFilesystem {
        /// The directory.
        dir: PathBuf,
        /// `tmpfs` or `ramfs`.
        fs: String,
    },
    /// `statfs` failed.
    #[error("statfs {}", dir.display())]
    Statfs {
        /// The directory.
        dir: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Probe the filesystem holding `dir` (or its nearest existing ancestor).
///
/// # Errors
/// [`EnvironmentError::Statfs`] if no ancestor can be stat'ed.
pub fn probe_fs(dir: &Path) -> Result<FsInfo, EnvironmentError> {
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut existing = absolute.as_path();
    while !existing.exists() {
        match existing.parent() {
            Some(parent) => existing = parent,
            None => break,
        }
    }
    let existing = std::fs::canonicalize(existing).unwrap_or_else(|_| existing.to_path_buf());
    let st = rustix::fs::statfs(&existing).map_err(|e| EnvironmentError::Statfs {
        dir: existing.clone(),
        source: e.into(),
    })?;
    Ok(fs_info(existing, &st))
}

/// [`probe_fs`] for the directory `dir` holds open: `fstatfs` on the handle, and the mount
/// found by the path the kernel gives for it (`/proc/self/fd/N`, read as text), so that no
/// name is looked up (`shown`, the directory's path as given, is used if that link cannot be
/// read).
///
/// # Errors
/// [`EnvironmentError::Statfs`] if `fstatfs` fails.
pub fn probe_fs_fd(
    dir: std::os::fd::BorrowedFd<'_>,
    shown: &Path,
) -> Result<FsInfo, EnvironmentError> {
    use std::os::fd::AsRawFd as _;
    let st = rustix::fs::fstatfs(dir).map_err(|e| EnvironmentError::Statfs {
        dir: shown.to_path_buf(),
        source: e.into(),
    })?;
    let path = std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd()))
        .unwrap_or_else(|_| shown.to_path_buf());
    Ok(fs_info(path, &st))
}

/// What [`probe_fs`] reports for `existing`, whose `statfs` is `st`.
fn fs_info(existing: PathBuf, st: &rustix::fs::StatFs) -> FsInfo {
    #[allow(clippy::unnecessary_cast)] // `f_type` is i64 or u32 depending on the architecture.
    let magic = (st.f_type as i64 as u64) & 0xffff_ffff;
    let fs_type = MAGICS
        .iter()
        .find(|(m, _)| *m == magic)
        .map_or("unknown", |(_, n)| n)
        .to_string();
    let mut info = FsInfo {
        path: existing.clone(),
        fs_type,
        magic: format!("{magic:#x}"),
        mount_fs_type: None,
        mount_point: None,
        mount_options: None,
        super_options: None,
        device: None,
        loop_backing_file: None,
    };
    if let Some(mount) = find_mount(&existing) {
        info.loop_backing_file = loop_backing_file(&mount.source);
        info.mount_fs_type = Some(mount.fs_type);
        info.mount_point = Some(mount.mount_point);
        info.mount_options = Some(mount.options);
        info.super_options = Some(mount.super_options);
        info.device = Some(mount.source);
    }
    info
}

/// Refuse a directory on tmpfs or ramfs.
///
/// # Errors
/// [`EnvironmentError::MemoryFilesystem`] with a message that says why and what to do.
pub fn refuse_memory_fs(dir: &Path, info: &FsInfo) -> Result<(), EnvironmentError> {
    if info.is_memory() {
        let fs = if MEMORY_FILESYSTEMS.contains(&info.fs_type.as_str()) {
            info.fs_type.clone()
        } else {
            info.mount_fs_type
                .clone()
                .unwrap_or_else(|| info.fs_type.clone())
        };
        return Err(EnvironmentError::MemoryFilesystem {
            dir: dir.to_path_buf(),
            fs,
        });
    }
    Ok(())
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone)]
struct Mount {
    mount_point: PathBuf,
    options: String,
    fs_type: String,
    source: String,
    super_options: String,
}

/// The mount whose mount point is the longest prefix of `path` (the last one listed if several
/// are stacked on the same point).
fn find_mount(path: &Path) -> Option<Mount> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut best: Option<Mount> = None;
    for line in text.lines() {
        let Some(mount) = parse_mountinfo_line(line) else {
            continue;
        };
        if !path.starts_with(&mount.mount_point) {
            continue;
        }
        let better = best.as_ref().is_none_or(|b| {
            mount.mount_point.components().count() >= b.mount_point.components().count()
        });
        if better {
            best = Some(mount);
        }
    }
    best
}

/// `id parent major:minor root mount_point options [optional...] - fs_type source super_options`
fn parse_mountinfo_line(line: &str) -> Option<Mount> {
    let (left, right) = line.split_once(" - ")?;
    let mut l = left.split(' ');
    let mount_point = unescape_mountinfo(l.nth(4)?);
    let options = l.next()?.to_string();
    let mut r = right.split(' ');
    let fs_type = r.next()?.to_string();
    let source = unescape_mountinfo(r.next()?);
    let super_options = r.next().unwrap_or_default().to_string();
    Some(Mount {
        mount_point: PathBuf::from(mount_point),
        options,
        fs_type,
        source,
        super_options,
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo` octal.
fn unescape_mountinfo(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).filter(|d| {
            bytes.get(i) == Some(&b'\\') && d.iter().all(|c| (b'0'..=b'7').contains(c))
        });
        match octal {
            Some(d) => {
                let v = d.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 4;
            }
            None => {
                out.push(bytes.get(i).copied().unwrap_or_default());
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn loop_backing_file(source: &str) -> Option<String> {
    let name = Path::new(source).file_name()?.to_str()?;
    if !name.starts_with("loop") {
        return None;
    }
    let text = std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).ok()?;
    Some(text.trim().to_string())
}

/// The machine.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// `uname -r`.
    pub kernel: Option<String>,
    /// `uname -v`.
    pub kernel_version: Option<String>,
    /// CPU model name from `/proc/cpuinfo`.
    pub cpu_model: Option<String>,
    /// Logical CPUs listed in `/proc/cpuinfo`.
    pub cpus_online: Option<usize>,
    /// CPUs this process may run on (affinity and cgroup quota).
    pub cpus_available: Option<usize>,
    /// `MemTotal`, bytes.
    pub ram_bytes: Option<u64>,
    /// Host name.
    pub hostname: Option<String>,
}

impl Machine {
    /// Probe the running machine.
    pub fn probe() -> Machine {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        };
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string());
        let cpus_online = cpuinfo
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let ram_bytes = meminfo
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kib| kib.parse::<u64>().ok())
            .map(|kib| kib * 1024);
        Machine {
            kernel: read("/proc/sys/kernel/osrelease"),
            kernel_version: read("/proc/sys/kernel/version"),
            cpu_model,
            cpus_online: (cpus_online > 0).then_some(cpus_online),
            cpus_available: std::thread::available_parallelism().ok().map(|n| n.get()),
            ram_bytes,
            hostname: read("/proc/sys/kernel/hostname"),
        }
    }
}

/// The build that ran the benchmark.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Build {
    /// `release` or `debug` (from `debug_assertions`). Debug numbers are not benchmarks.
    pub profile: String,
    /// The cargo profile that built it (`release`, `maxperf`...; `slasher-bench/build.rs`);
    /// `None` in reports written before it was recorded.
    #[serde(default)]
    pub cargo_profile: Option<String>,
    /// `git rev-parse HEAD` of the source tree, if it is a git checkout.
    pub git_revision: Option<String>,
    /// Whether `git status --porcelain` listed changes (tracked or untracked).
    pub git_dirty: Option<bool>,
    /// Versions of the engine and codec crates, from the workspace `Cargo.lock` at build time.
    pub crate_versions: Vec<CrateVersion>,
}

/// One crate and its locked version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrateVersion {
    /// Crate name.
    pub name: String,
    /// Version.
    pub version: String,
}

/// Crates whose versions a report records.
const REPORTED_CRATES: &[&str] = &[
    "slasher-bench",
    "slasher-adapters",
    "butter_db",
    "lmdb-rkv",
    "lmdb-rkv-sys",
    "libmdbx",
    "redb",
    "ethereum_ssz",
    "tree_hash",
    "flate2",
    "libz-sys",
    "miniz_oxide",
];

/// The workspace lock file as it was when this binary was built.
const CARGO_LOCK: &str = include_str!("../../../Cargo.lock");

impl Build {
    /// Describe this build.
    pub fn probe() -> Build {
        let source_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .arg("-C")
                .arg(source_dir)
                .args(args)
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        };
        Build {
            profile: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
            .into(),
            cargo_profile: Some(env!("SLASHER_BENCH_CARGO_PROFILE").to_string()),
            git_revision: git(&["rev-parse", "HEAD"]),
            git_dirty: git(&["status", "--porcelain"]).map(|s| !s.is_empty()),
            crate_versions: locked_versions(CARGO_LOCK, REPORTED_CRATES),
        }
    }
}

/// Versions of `names` in a `Cargo.lock` text (every locked version, if several).
fn locked_versions(lock: &str, names: &[&str]) -> Vec<CrateVersion> {
    let mut out = Vec::new();
    let mut name: Option<&str> = None;
    for line in lock.lines() {
        let line = line.trim();
        if line == "[[package]]" {
            name = None;
        } else if let Some(v) = line.strip_prefix("name = ") {
            name = Some(v.trim_matches('"'));
        } else if let (Some(v), Some(n)) = (line.strip_prefix("version = "), name) {
            if names.contains(&n) {
                out.push(CrateVersion {
                    name: n.into(),
                    version: v.trim_matches('"').into(),
                });
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name).then(a.version.cmp(&b.version)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_parse() {
        let m = parse_mountinfo_line(
            "43 27 0:39 / /mnt/my\\040disk rw,noatime shared:1 - btrfs /dev/loop0 \
             rw,space_cache=v2,subvol=/",
        )
        .expect("parses");
        assert_eq!(m.mount_point, PathBuf::from("/mnt/my disk"));
        assert_eq!(m.options, "rw,noatime");
        assert_eq!(m.fs_type, "btrfs");
        assert_eq!(m.source, "/dev/loop0");
        assert_eq!(m.super_options, "rw,space_cache=v2,subvol=/");
    }

    #[test]
    fn dev_shm_is_refused_when_it_is_tmpfs() {
        let dir = Path::new("/dev/shm/slasher-bench-probe");
        let info = probe_fs(dir).expect("probe");
        if info.fs_type != "tmpfs" {
            butter_test_support::skip(
                "dev_shm_is_refused_when_it_is_tmpfs",
                &format!("/dev/shm is {} here, not tmpfs", info.fs_type),
            );
            return;
        }
        let err = refuse_memory_fs(dir, &info).expect_err("tmpfs is refused");
        let msg = err.to_string();
        assert!(
            msg.contains("is on tmpfs; benchmarks must run on a real disk"),
            "{msg}"
        );
    }

    #[test]
    fn lock_versions_are_found() {
        let v = locked_versions(CARGO_LOCK, &["slasher-bench"]);
        assert_eq!(v.len(), 1);
        let b = Build::probe();
        assert!(!b.crate_versions.is_empty());
        let m = Machine::probe();
        assert!(m.kernel.is_some() && m.ram_bytes.is_some());
    }

    /// The build records the directory cargo built it in (`debug/` for this test binary,
    /// `maxperf/` for the scripts' replay), and a report written before it did still loads.
    #[test]
    fn the_build_names_its_cargo_profile() {
        let b = Build::probe();
        let dir = std::env::current_exe().expect("test binary path");
        // <target>/<profile>/deps/<test binary>
        let built_in = dir
            .ancestors()
            .nth(2)
            .and_then(|d| d.file_name())
            .and_then(|n| n.to_str())
            .map(str::to_owned);
        assert_eq!(
            b.cargo_profile, built_in,
            "the profile directory of this very binary"
        );
        let json = serde_json::to_string(&b).expect("serialises");
        let mut value: serde_json::Value = serde_json::from_str(&json).expect("parses");
        value
            .as_object_mut()
            .expect("an object")
            .remove("cargo_profile");
        let old: Build = serde_json::from_value(value).expect("a report without it still loads");
        assert_eq!(old.cargo_profile, None);
    }
}
