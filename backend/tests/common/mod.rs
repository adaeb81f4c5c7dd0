//! Shared by the engine's integration tests: a fresh directory on the real btrfs mount.

use std::path::PathBuf;

/// A fresh, empty directory under `$BUTTER_BTRFS_DIR`, removed (with any subvolumes inside)
/// when dropped. `None` (after a loud SKIP line) if the variable is unset outside CI; in CI
/// (`CI=true`) a missing btrfs mount fails the test.
pub fn btrfs_dir(test: &str) -> Option<TestDir> {
    let Some(base) = std::env::var_os("BUTTER_BTRFS_DIR") else {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("CI=true but BUTTER_BTRFS_DIR is not set: run scripts/test.sh");
        }
        eprintln!("SKIP {test}: BUTTER_BTRFS_DIR not set (run scripts/test.sh as root)");
        return None;
    };
    let path = PathBuf::from(base).join(format!(
        "{test}-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&path).expect("create test dir");
    Some(TestDir { path })
}

/// A test directory on btrfs.
pub struct TestDir {
    pub path: PathBuf,
}

impl Drop for TestDir {
    fn drop(&mut self) {
        // Subvolumes inside need the btrfs tool (or the engine's own delete); best effort.
        let _ = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "for s in {p}/gen-* {p}/live; do [ -e \"$s\" ] && (btrfs property set -ts \"$s\" ro false; btrfs subvolume delete -c \"$s\") >/dev/null 2>&1; done; rm -rf {p}",
                p = self.path.display()
            ))
            .status();
    }
}
