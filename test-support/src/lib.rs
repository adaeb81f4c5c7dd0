//! How every test in the workspace treats a missing capability (a btrfs directory, root, a
//! tool): outside CI it prints a `SKIP` line that a plain `cargo test` shows and the test
//! returns early; with `CI=true` the test fails, so CI never passes by skipping.
//!
//! Also the clock the fuzz tiers time each input by, [`thread_cpu_time`].

use std::io::Write;
use std::path::{Path, PathBuf};

/// The variable naming the btrfs directory tests work in (scripts/test.sh sets it).
pub const BTRFS_DIR_VAR: &str = "BUTTER_BTRFS_DIR";

const BTRFS_SUPER_MAGIC: u64 = 0x9123_683e;

/// Whether this run is CI (`CI=true`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Records that `test` cannot run because of `why`: fails under CI, else writes
/// `SKIP <test>: <why>` to the process's stderr. libtest captures `eprintln!` of passing
/// tests, so the line is written to the stderr handle directly.
pub fn skip(test: &str, why: &str) {
    assert!(!in_ci(), "CI=true but {test} cannot run: {why}");
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {why}");
}

/// The btrfs directory named by `BUTTER_BTRFS_DIR`, or `None` after [`skip`] when it is not
/// set. A directory that is set but missing or not on btrfs fails the test everywhere: that
/// is a broken setup, not a missing capability.
pub fn btrfs_base(test: &str) -> Option<PathBuf> {
    match std::env::var_os(BTRFS_DIR_VAR) {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            assert!(
                is_btrfs(&dir),
                "{BTRFS_DIR_VAR}={} is missing or not on btrfs",
                dir.display()
            );
            Some(dir)
        }
        _ => {
            skip(
                test,
                &format!("{BTRFS_DIR_VAR} is not set (point it at a btrfs directory, or run scripts/test.sh as root)"),
            );
            None
        }
    }
}

/// Whether `path` exists and is on btrfs.
pub fn is_btrfs(path: &Path) -> bool {
    rustix::fs::statfs(path).is_ok_and(|s| s.f_type as u64 == BTRFS_SUPER_MAGIC)
}

/// The CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`). The fuzz tiers bound
/// each input's decoding by this, not by the wall clock: a decoder that loops is caught all the
/// same, while a machine busy with other work (a parallel build, the other tests) does not make
/// a fast input look slow.
pub fn thread_cpu_time() -> std::time::Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    std::time::Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// Whether the effective uid is 0 (read from /proc, no FFI).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_btrfs_directory_is_not_btrfs() {
        // /proc is procfs on every Linux machine.
        assert!(!is_btrfs(Path::new("/proc")));
        assert!(!is_btrfs(Path::new("/nonexistent-butter-test-support")));
    }

    #[test]
    fn the_named_directory_is_btrfs_when_set() {
        if let Some(dir) = std::env::var_os(BTRFS_DIR_VAR) {
            assert!(is_btrfs(Path::new(&dir)), "{dir:?} is not on btrfs");
        }
    }
}
