//! Garbage collection of old generations (design.md §3 step 7).

use std::sync::atomic::Ordering;

use crate::error::Error;
use crate::root::gen_name;

use super::hooks::fail_point;
use super::Env;

/// Deleted generations after which the filesystem is asked to reclaim their space.
const MAX_UNRECLAIMED_GENERATIONS: u64 = 8;

impl Env {
    /// Delete every old generation that no reader pins. Deletion is not durable by itself; a
    /// generation that reappears after a crash is deleted again at the next open.
    ///
    /// The unpinned generations are taken out of `old_generations` under the locks, and
    /// deleted after both are released, so `begin_read` never waits for a deletion. No reader
    /// can pin them meanwhile: readers pin only the current generation, and a generation is
    /// in `old_generations` only once a newer one is current. Called at open, before the
    /// environment is shared, and by commits, with the writer lock held: two collections
    /// never run at once.
    ///
    /// A generation that cannot be deleted fails neither caller (design.md §3 step 7): the
    /// newest generation is the database. It is logged and stays on the list, for the next
    /// commit's collection.
    pub(super) fn collect_garbage(&self) {
        let doomed: Vec<u64> = {
            let mut old = self.old_generations.lock();
            let pins = self.pins.lock();
            let (pinned, doomed) = old.iter().partition(|g| pins.contains_key(g));
            *old = pinned;
            doomed
        };
        let mut failed = Vec::new();
        for &g in &doomed {
            fail_point("gc::delete");
            let dir = self.root.join(gen_name(g));
            match self.fs.delete_subvolume(&dir) {
                Ok(()) => {}
                // Already gone (an earlier attempt took effect but reported an error).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    failed.push(g);
                    let e = Error::io("delete subvolume", &dir, e);
                    log::warn!("could not delete an old generation (will retry): {e}");
                }
            }
        }
        let deleted = (doomed.len() - failed.len()) as u64;
        if !failed.is_empty() {
            let mut old = self.old_generations.lock();
            old.extend(failed);
            old.sort_unstable();
        }
        // btrfs frees a deleted subvolume's space only when its cleaner thread gets to it,
        // which it otherwise does on its own schedule (every 30 s by default): a fast
        // sequence of commits could leave dozens of deleted generations holding space. A
        // transaction commit wakes the cleaner, so one is asked for every
        // MAX_UNRECLAIMED_GENERATIONS deletions.
        if self.unreclaimed.fetch_add(deleted, Ordering::Relaxed) + deleted
            >= MAX_UNRECLAIMED_GENERATIONS
        {
            self.unreclaimed.store(0, Ordering::Relaxed);
            if let Err(e) = self.fs.sync(&self.root) {
                log::warn!("could not ask btrfs to reclaim space: {e}");
            }
        }
    }
}
