//! Plumbing shared by the tiers: environment gating, commands with time limits, re-executing
//! the test binary as a workload child and reading its START/ACK lines.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use butter_test_support::in_ci;

/// Skips (outside CI, with a visible SKIP line) or fails (in CI) when something is missing.
/// Returns whether the test may run.
pub fn require(test: &str, problems: &[String]) -> bool {
    if problems.is_empty() {
        return true;
    }
    butter_test_support::skip(test, &problems.join("; "));
    false
}

/// What a tier that builds its own block devices needs: root, loop devices, FUSE, btrfs tools.
pub fn device_problems() -> Vec<String> {
    let mut p = Vec::new();
    let root = butter_test_support::is_root();
    if !root {
        p.push("not root".to_string());
    }
    for dev in ["/dev/loop-control", "/dev/fuse"] {
        if !Path::new(dev).exists() {
            p.push(format!("{dev} missing"));
        }
    }
    for tool in ["mkfs.btrfs", "btrfs", "losetup", "mount", "umount"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            p.push(format!("{tool} not found"));
        }
    }
    p
}

/// A fresh directory under `$BUTTER_BTRFS_DIR` (the btrfs mount scripts/test.sh makes), or
/// `None` after a SKIP line outside CI. It is removed with everything in it, read-only
/// snapshots included, when the returned guard is dropped: at the end of the test, also when
/// the test fails.
pub fn btrfs_dir(test: &str) -> Option<BtrfsDir> {
    let base = butter_test_support::btrfs_base(test)?;
    let p = base.join(format!(
        "{test}-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&p).expect("mkdir under BUTTER_BTRFS_DIR");
    Some(BtrfsDir { path: p })
}

/// A test's directory on btrfs (see [`btrfs_dir`]); derefs to its path.
#[derive(Debug)]
pub struct BtrfsDir {
    path: PathBuf,
}

impl std::ops::Deref for BtrfsDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for BtrfsDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl Drop for BtrfsDir {
    fn drop(&mut self) {
        remove_db_dir(&self.path);
    }
}

/// Deletes a database directory on btrfs, subvolumes (read-only ones included) and all, with
/// the engine's own deletion; a failure is named on stderr (scripts/test.sh then finds what
/// was left).
pub fn remove_db_dir(dir: &Path) {
    use butter_db::fs::BtrfsFs;
    match BtrfsFs.remove_tree(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => eprintln!("warning: could not remove {}: {e}", dir.display()),
    }
}

/// A private scratch directory for mount points and images, removed on drop (only if
/// nothing is mounted below it).
#[derive(Debug)]
pub struct ScratchDir {
    /// Its path.
    pub path: PathBuf,
}

impl ScratchDir {
    /// A new directory under `parent` named after the test, the process and a random number.
    pub fn new(parent: &Path, test: &str) -> ScratchDir {
        let path = parent.join(format!(
            "{test}-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&path).expect("create scratch directory");
        ScratchDir { path }
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        let prefix = format!("{}/", self.path.display());
        if mounts
            .lines()
            .any(|l| l.split(' ').nth(1).is_some_and(|m| m.starts_with(&prefix)))
        {
            eprintln!(
                "warning: leaving {}: something is still mounted below it",
                self.path.display()
            );
            return;
        }
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Where tiers put their disk images: `$BUTTER_CRASH_IMG_DIR`, else `/dev/shm` (RAM: the
/// images only have to survive this process, and tmpfs keeps a crash cycle under a second).
pub fn image_parent() -> PathBuf {
    std::env::var_os("BUTTER_CRASH_IMG_DIR")
        .map_or_else(|| PathBuf::from("/dev/shm"), PathBuf::from)
}

/// The outcome of [`run`].
#[derive(Debug)]
pub struct Output {
    /// Whether the command exited with status 0.
    pub ok: bool,
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
}

/// Runs a command, killing it after `limit`. Stdout and stderr are captured.
///
/// # Panics
/// If the command cannot be started.
pub fn run(cmd: &str, args: &[&str], limit: Duration) -> Output {
    let mut child = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"));
    let out_pipe = child.stdout.take();
    let err_pipe = child.stderr.take();
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut p) = out_pipe {
            let _ = std::io::Read::read_to_string(&mut p, &mut s);
        }
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut p) = err_pipe {
            let _ = std::io::Read::read_to_string(&mut p, &mut s);
        }
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let stdout = out_t.join().unwrap_or_default();
    let mut stderr = err_t.join().unwrap_or_default();
    if status.is_none() {
        stderr.push_str(&format!("\n(killed after {limit:?})"));
    }
    Output {
        ok: status.is_some_and(|s| s.success()),
        stdout,
        stderr,
    }
}

/// [`run`], panicking with the command's output unless it succeeds.
pub fn run_ok(cmd: &str, args: &[&str], limit: Duration) -> String {
    let out = run(cmd, args, limit);
    assert!(
        out.ok,
        "{cmd} {} failed:\n{}\n{}",
        args.join(" "),
        out.stdout,
        out.stderr
    );
    out.stdout
}

/// The `tier-child` binary the tiers run as their child processes (`src/bin/tier-child.rs`).
/// Cargo builds it beside the integration tests: the test binary is `target/<profile>/deps/X`,
/// the child `target/<profile>/tier-child`. They used to be `#[test]` functions re-run by name,
/// which always passed when run as tests and were counted among the tests.
///
/// # Panics
/// If it is not there (the tests were not built by cargo).
pub fn child_exe() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let child = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("tier-child"))
        .expect("test binary directory");
    assert!(
        child.is_file(),
        "{} missing: build the tests with cargo (it builds the tier-child binary)",
        child.display()
    );
    child
}

/// What a workload child has reported so far.
#[derive(Debug, Default, Clone)]
pub struct Progress {
    /// Highest `START i`.
    pub started: u64,
    /// Highest `ACK i`.
    pub acked: u64,
    /// Every other line, for diagnostics and tier-specific reports.
    pub other: Vec<String>,
    /// The child closed its stdout.
    pub eof: bool,
}

/// A re-executed test binary running a workload, with a thread collecting its output.
#[derive(Debug)]
pub struct WorkloadChild {
    child: Child,
    progress: Arc<Mutex<Progress>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl WorkloadChild {
    /// Runs `tier-child MODE` (this crate's child binary, see [`child_exe`]) with `envs`
    /// added.
    ///
    /// # Panics
    /// If the child cannot be started.
    pub fn spawn(mode: &str, envs: &[(&str, String)]) -> WorkloadChild {
        let mut cmd = Command::new(child_exe());
        cmd.arg(mode)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn workload child");
        let stdout = child.stdout.take().expect("child stdout");
        let stderr = child.stderr.take().expect("child stderr");
        let progress = Arc::new(Mutex::new(Progress::default()));
        let p = progress.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut p = p.lock().expect("progress lock");
                if let Some((_, n)) = line.split_once("START ") {
                    p.started = p.started.max(n.trim().parse().unwrap_or(0));
                } else if let Some((_, n)) = line.split_once("ACK ") {
                    p.acked = p.acked.max(n.trim().parse().unwrap_or(0));
                } else if !line.trim().is_empty() {
                    p.other.push(line);
                }
            }
            p.lock().expect("progress lock").eof = true;
        });
        // Child stderr is kept quiet unless BUTTER_TEST_VERBOSE is set.
        std::thread::spawn(move || {
            let verbose = std::env::var_os("BUTTER_TEST_VERBOSE").is_some();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if verbose {
                    eprintln!("child: {line}");
                }
            }
        });
        WorkloadChild {
            child,
            progress,
            reader: Some(reader),
        }
    }

    /// A copy of the progress so far.
    pub fn progress(&self) -> Progress {
        self.progress.lock().expect("progress lock").clone()
    }

    /// Waits until `done(progress)` holds or the child's output ends, at most `limit`.
    /// Returns whether `done` held.
    pub fn wait_for(&self, limit: Duration, done: impl Fn(&Progress) -> bool) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let p = self.progress();
            if done(&p) {
                return true;
            }
            if p.eof || Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// SIGKILLs the child.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// Waits for the child to exit (killing it after `limit`) and for its output; returns the
    /// final progress and whether it exited successfully.
    pub fn finish(mut self, limit: Duration) -> (Progress, bool) {
        let deadline = Instant::now() + limit;
        let ok = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break s.success(),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                _ => {
                    eprintln!("workload child did not exit within {limit:?}: killing it");
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break false;
                }
            }
        };
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        (self.progress(), ok)
    }
}

impl Drop for WorkloadChild {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A seed from `var` if set, else random; printed so a failure can be replayed.
pub fn seed(test: &str, var: &str) -> u64 {
    let seed = std::env::var(var)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("{test}: seed {seed} (replay with {var}={seed})");
    seed
}
