//! Closing merged-away segments off the committing thread (design.md §3 step 8).
//!
//! A write transaction's base version usually holds the last references to the segments its
//! commit merged away, so dropping it closes their files. Closing the last descriptor of an
//! unlinked file makes the kernel evict its page-cache pages there and then: for the ~255 MB
//! table a slasher's cold batch rewrites, about 36 ms of every commit
//! (`backend/examples/rewrite.rs`). The committing thread hands that version to a thread of
//! its own instead, which drops it when the CPU is otherwise idle.

use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::sys;
use crate::version::Version;

/// Versions waiting to be dropped at most. When the thread is that far behind, the committing
/// thread drops the next one itself, as before, so retired files never pile up.
const QUEUE: usize = 2;

/// The thread that drops retired versions, and the way to it.
#[derive(Debug)]
pub(super) struct Retirer {
    queue: Option<SyncSender<Arc<Version>>>,
    thread: Option<JoinHandle<()>>,
}

impl Retirer {
    /// Start the thread. Without one (the system refused a thread), every version is dropped
    /// by its committing thread.
    pub(super) fn start() -> Self {
        let (queue, versions) = mpsc::sync_channel::<Arc<Version>>(QUEUE);
        let spawned = std::thread::Builder::new()
            .name("butter-retire".into())
            .spawn(move || {
                if let Err(e) = sys::set_current_thread_idle() {
                    log::warn!("retiring thread keeps normal priority: {e}");
                }
                for version in versions {
                    drop(version);
                }
            });
        match spawned {
            Ok(thread) => Retirer {
                queue: Some(queue),
                thread: Some(thread),
            },
            Err(e) => {
                log::warn!("no thread to close retired segments on: {e}");
                Retirer {
                    queue: None,
                    thread: None,
                }
            }
        }
    }

    /// Drop `version` on the thread, or here if the thread is behind or gone.
    pub(super) fn retire(&self, version: Arc<Version>) {
        let Some(queue) = &self.queue else {
            return;
        };
        match queue.try_send(version) {
            Ok(()) => {}
            Err(TrySendError::Full(v) | TrySendError::Disconnected(v)) => drop(v),
        }
    }
}

impl Drop for Retirer {
    /// Every version handed over is dropped, and its files closed, before this returns.
    fn drop(&mut self) {
        self.queue = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
