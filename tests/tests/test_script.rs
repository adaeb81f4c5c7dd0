//! `scripts/test.sh` in a clone that uid 65534 cannot enter (a root user's home, mode 0700):
//! the tests run built binaries and read fixtures as that user, so the script must stop at
//! once, before it builds or mounts anything, naming the directory and the fix
//! (`unprivileged_reach` in `scripts/common.sh`).
//!
//! Needs root (setpriv to uid 65534, and the script itself); without it the tests skip outside
//! CI and fail under `CI=true`.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

/// A new directory of this test's own under /tmp (made here, so nobody else owns it), removed
/// when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Option<Scratch> {
        if !butter_test_support::is_root() {
            butter_test_support::skip(test, "running a command as uid 65534 needs root");
            return None;
        }
        let dir = std::env::temp_dir().join(format!("butter-{test}-{}", std::process::id()));
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        Some(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn reach(path: &Path) -> Output {
    Command::new("bash")
        .args([
            "-c",
            "LOG_TAG=test.sh; source \"$1/scripts/common.sh\"; unprivileged_reach \"$2\"",
            "bash",
        ])
        .arg(repo())
        .arg(path)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_directory_uid_65534_cannot_enter_is_named_with_the_fix() {
    let Some(t) = Scratch::new("reach_named") else {
        return;
    };
    let home = t.0.join("home");
    fs::create_dir_all(home.join("clone/target")).unwrap();
    fs::set_permissions(&home, fs::Permissions::from_mode(0o700)).unwrap();
    // A path that does not exist yet (a target directory before the first build) is judged
    // by its nearest existing parent.
    let out = reach(&home.join("clone/target/not-built-yet"));
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("cannot enter {} (mode 700", home.display())),
        "{err}"
    );
    assert!(
        err.contains(&format!("chmod o+x {}", home.display())),
        "{err}"
    );

    // The search bit alone is enough.
    fs::set_permissions(&home, fs::Permissions::from_mode(0o711)).unwrap();
    let out = reach(&home.join("clone/target/not-built-yet"));
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn test_sh_stops_at_once_in_a_clone_uid_65534_cannot_enter() {
    let Some(t) = Scratch::new("reach_test_sh") else {
        return;
    };
    // A clone in a 0700 home: the script's own directory is what it takes for the repository.
    let home = t.0.join("root-home");
    let clone = home.join("butter_db");
    fs::create_dir_all(&clone).unwrap();
    symlink(repo().join("scripts"), clone.join("scripts")).unwrap();
    fs::set_permissions(&home, fs::Permissions::from_mode(0o700)).unwrap();
    let out = Command::new("bash")
        .arg(clone.join("scripts/test.sh"))
        .env_remove("CI")
        .env("BUTTER_TEST_ONLY", "none")
        .env("CARGO_TARGET_DIR", clone.join("target"))
        .output()
        .unwrap();
    let err = stderr(&out);
    let all = format!("{}{err}", String::from_utf8_lossy(&out.stdout));
    assert!(!out.status.success(), "{all}");
    assert!(
        err.contains(&format!("uid 65534 cannot enter {}", home.display())),
        "{all}"
    );
    assert!(
        err.contains(&format!("chmod o+x {}", home.display())),
        "{all}"
    );
    // Stopped before the image: nothing was mounted or built.
    assert!(!all.contains("create and mount the btrfs image"), "{all}");
    assert!(!clone.join("target").exists(), "{all}");
}
