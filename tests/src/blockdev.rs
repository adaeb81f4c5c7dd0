//! Loop devices, btrfs images and mounts, each behind a guard that undoes it on drop. Only
//! the loop devices a guard attached are ever detached (other jobs may have their own).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::harness::{run, run_ok};

const CMD_LIMIT: Duration = Duration::from_secs(60);

/// Creates a sparse file of `bytes` and formats it as btrfs (single metadata, like
/// scripts/test.sh). A fresh filesystem gets a fresh fsid, so an old crashed one never
/// collides with it.
pub fn make_btrfs_image(path: &Path, bytes: u64) {
    let f = std::fs::File::create(path).expect("create image");
    f.set_len(bytes).expect("size image");
    drop(f);
    run_ok(
        "mkfs.btrfs",
        &[
            "-q",
            "-f",
            "-m",
            "single",
            path.to_str().expect("utf-8 path"),
        ],
        CMD_LIMIT,
    );
}

/// An attached loop device; detached on drop.
#[derive(Debug)]
pub struct LoopDev {
    /// `/dev/loopN`.
    pub dev: String,
}

impl LoopDev {
    /// `losetup -f --show file` (buffered I/O: the loop driver turns each block-layer FLUSH
    /// into an fsync of `file`).
    pub fn attach(file: &Path) -> LoopDev {
        let out = run_ok(
            "losetup",
            &["-f", "--show", file.to_str().expect("utf-8 path")],
            CMD_LIMIT,
        );
        LoopDev {
            dev: out.trim().to_string(),
        }
    }

    /// Detaches now (also what drop does), reporting failure.
    pub fn detach(mut self) -> Result<(), String> {
        let r = self.detach_inner();
        self.dev.clear();
        r
    }

    fn detach_inner(&mut self) -> Result<(), String> {
        if self.dev.is_empty() {
            return Ok(());
        }
        let mut last = String::new();
        for _ in 0..20 {
            let out = run("losetup", &["-d", &self.dev], CMD_LIMIT);
            if out.ok {
                return Ok(());
            }
            last = out.stderr;
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!("losetup -d {}: {last}", self.dev))
    }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        if let Err(e) = self.detach_inner() {
            eprintln!("warning: {e}");
        }
    }
}

/// A mounted filesystem; unmounted on drop.
#[derive(Debug)]
pub struct Mount {
    /// The mount point.
    pub dir: PathBuf,
    mounted: bool,
}

impl Mount {
    /// Mounts btrfs from `dev` on `dir` (created if missing), without discard (the lazy disk
    /// implements no fallocate).
    ///
    /// # Errors
    /// mount's message.
    pub fn btrfs(dev: &str, dir: &Path) -> Result<Mount, String> {
        std::fs::create_dir_all(dir).expect("create mount point");
        let out = run(
            "mount",
            &[
                "-t",
                "btrfs",
                "-o",
                "noatime,nodiscard",
                dev,
                dir.to_str().expect("utf-8 path"),
            ],
            CMD_LIMIT,
        );
        if !out.ok {
            return Err(format!("mount {dev}: {}{}", out.stdout, out.stderr));
        }
        Ok(Mount {
            dir: dir.to_path_buf(),
            mounted: true,
        })
    }

    /// Unmounts now, reporting failure (drop retries and falls back to a lazy unmount).
    pub fn unmount(mut self) -> Result<(), String> {
        self.unmount_inner()
    }

    fn unmount_inner(&mut self) -> Result<(), String> {
        if !self.mounted {
            return Ok(());
        }
        let d = self.dir.to_str().expect("utf-8 path").to_string();
        let mut last = String::new();
        for _ in 0..30 {
            let out = run("umount", &[&d], CMD_LIMIT);
            if out.ok {
                self.mounted = false;
                return Ok(());
            }
            last = out.stderr;
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = run("umount", &["-l", &d], CMD_LIMIT);
        self.mounted = false;
        Err(format!("umount {d}: {last} (lazily unmounted)"))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Err(e) = self.unmount_inner() {
            eprintln!("warning: {e}");
        }
    }
}

/// `btrfs check --readonly` on an unmounted image or device: `Err` with its output unless
/// clean.
pub fn btrfs_check(target: &str) -> Result<(), String> {
    let out = run("btrfs", &["check", "--readonly", target], CMD_LIMIT);
    if out.ok {
        Ok(())
    } else {
        Err(format!(
            "btrfs check --readonly {target} failed:\n{}{}",
            out.stdout, out.stderr
        ))
    }
}
