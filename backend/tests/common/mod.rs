//! Shared by the engine's integration tests: a fresh directory on the real btrfs mount.

use std::path::PathBuf;

/// A fresh, empty directory under `$BUTTER_BTRFS_DIR`, removed (with any subvolumes inside)
/// when dropped. `None` after a visible SKIP line if the variable is unset outside CI; under
/// `CI=true` a missing btrfs directory fails the test (butter_test_support's rule).
pub fn btrfs_dir(test: &str) -> Option<TestDir> {
    let base = butter_test_support::btrfs_base(test)?;
    let path = base.join(format!(
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
        // Best effort: subvolumes anywhere below (read-only ones included) are deleted with the
        // engine's own deletion, everything else removed as usual.
        remove_tree(&self.path);
    }
}

fn remove_tree(dir: &std::path::Path) {
    use butter_db::fs::{is_subvolume_root, BtrfsFs, Fs};
    if let Ok(rd) = std::fs::read_dir(dir) {
        for entry in rd.flatten() {
            let path = entry.path();
            let Ok(ft) = entry.file_type() else { continue };
            if ft.is_dir() && is_subvolume_root(&path).unwrap_or(false) {
                // A subvolume with others inside cannot be deleted: those go first (a
                // read-only one's files stay, and deleting it takes them).
                remove_tree(&path);
                let _ = BtrfsFs.delete_subvolume(&path);
            } else if ft.is_dir() {
                remove_tree(&path);
            } else {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}
