//! How every test in the workspace treats a missing capability (a btrfs directory, root, a
//! tool): outside CI it prints a `SKIP` line that a plain `cargo test` shows and the test
//! returns early; with `CI=true` the test fails, so CI never passes by skipping.
//!
//! Also the mount options of the filesystem a test works on ([`mount_options`]), the clock the
//! fuzz tiers time each input by ([`thread_cpu_time`]) and their runner ([`fuzz`]).

pub mod fuzz;

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

/// The options of the mount that holds `path` (per-mount and filesystem options together, e.g.
/// `noatime`, `user_subvol_rm_allowed`), from `/proc/self/mountinfo`: the mount whose mount
/// point is the longest prefix of `path` made canonical. `None` if `path` or mountinfo cannot
/// be read. A test that depends on a mount option judges its own filesystem with this, not
/// every mount of the machine.
pub fn mount_options(path: &Path) -> Option<Vec<String>> {
    let path = std::fs::canonicalize(path).ok()?;
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut best: Option<(usize, Vec<String>)> = None;
    for line in text.lines() {
        // ID PARENT MAJ:MIN ROOT MOUNT-POINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER-OPTIONS
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split(' ').collect();
        let (Some(mount_point), Some(options)) = (fields.get(4), fields.get(5)) else {
            continue;
        };
        let mount_point = unescape_mountinfo(mount_point);
        if !path.starts_with(&mount_point) {
            continue;
        }
        let depth = Path::new(&mount_point).components().count();
        // A later line with the same mount point is mounted over the earlier one.
        if best.as_ref().is_some_and(|(d, _)| *d > depth) {
            continue;
        }
        let super_options = right.split(' ').nth(2).unwrap_or("");
        let all = options
            .split(',')
            .chain(super_options.split(','))
            .filter(|o| !o.is_empty())
            .map(str::to_string)
            .collect();
        best = Some((depth, all));
    }
    best.map(|(_, options)| options)
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal.
fn unescape_mountinfo(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).and_then(|d| {
            let d = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(d, 8).ok()
        });
        match (b[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `program` to run as user and group `uid` without supplementary groups, through `setpriv`
/// (util-linux; the caller must be root), with standard input closed; add its arguments.
pub fn as_user(uid: u32, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args([
        format!("--reuid={uid}"),
        format!("--regid={uid}"),
        "--clear-groups".into(),
        "--".into(),
    ])
    .arg(program)
    .stdin(std::process::Stdio::null());
    cmd
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
    fn mount_options_are_those_of_the_paths_own_mount() {
        // btrfs always lists `subvolid=` among its options; procfs never does. So the btrfs
        // directory's options come from its own mount, and /proc's not from a btrfs mount
        // above it.
        let proc = mount_options(Path::new("/proc/self")).expect("mountinfo");
        assert!(proc.iter().any(|o| o == "rw" || o == "ro"), "{proc:?}");
        assert!(!proc.iter().any(|o| o.starts_with("subvolid=")), "{proc:?}");
        if let Some(dir) = std::env::var_os(BTRFS_DIR_VAR) {
            let btrfs = mount_options(Path::new(&dir)).expect("mountinfo");
            assert!(
                btrfs.iter().any(|o| o.starts_with("subvolid=")),
                "{btrfs:?}"
            );
        }
        assert_eq!(
            mount_options(Path::new("/nonexistent-butter-test-support")),
            None
        );
        assert_eq!(unescape_mountinfo("/mnt/a\\040b"), "/mnt/a b");
    }

    #[test]
    fn the_named_directory_is_btrfs_when_set() {
        if let Some(dir) = std::env::var_os(BTRFS_DIR_VAR) {
            assert!(is_btrfs(Path::new(&dir)), "{dir:?} is not on btrfs");
        }
    }
}
