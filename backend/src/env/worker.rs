//! The background merge worker (design.md §3.1): one thread for the environment's life that
//! runs the merge jobs the commits hand it, one at a time.
//!
//! Each job had its own new thread. glibc's allocator gives a new thread an arena of its own
//! when others are busy, and memory a thread frees stays in its arena for reuse there; with a
//! new thread per job, the arenas of finished merges piled up: about 27 MiB of the replay's
//! anonymous memory under a 128 MiB limit (docs/runs/memory-limit.md §4). One long-lived
//! thread uses one arena, and reuses what its last job freed.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use crate::error::Result;
use crate::sys;

use super::job::Merged;
use super::policy::MERGE_NICE;

/// What a job's thread returned: its result, or the panic that ended it.
pub(super) type Outcome = std::thread::Result<Result<Merged>>;

/// Where a job's outcome is left for the commit that installs it.
#[derive(Debug, Default)]
struct Slot {
    outcome: Mutex<Option<Outcome>>,
    done: Condvar,
}

/// A job handed to the worker: [`Pending::is_finished`] without waiting, [`Pending::join`]
/// waiting for it.
#[derive(Debug)]
pub(super) struct Pending(Arc<Slot>);

impl Pending {
    /// Whether the job has finished (its outcome is waiting).
    pub(super) fn is_finished(&self) -> bool {
        self.0.outcome.lock().is_some()
    }

    /// Wait for the job and take its outcome.
    pub(super) fn join(self) -> Outcome {
        let mut outcome = self.0.outcome.lock();
        loop {
            if let Some(o) = outcome.take() {
                return o;
            }
            self.0.done.wait(&mut outcome);
        }
    }
}

type Job = Box<dyn FnOnce() -> Result<Merged> + Send>;

/// The worker thread and the way to it; started at the first job.
#[derive(Debug, Default)]
pub(super) struct Worker {
    queue: Option<Sender<(Job, Arc<Slot>)>>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    /// Run `job` on the worker thread (started now if it is not running, at nice
    /// [`MERGE_NICE`]). Fails only if the thread cannot be started.
    pub(super) fn submit(
        &mut self,
        job: impl FnOnce() -> Result<Merged> + Send + 'static,
    ) -> std::io::Result<Pending> {
        if self.queue.is_none() {
            let (tx, rx) = mpsc::channel::<(Job, Arc<Slot>)>();
            let thread = std::thread::Builder::new()
                .name("butter-merge".into())
                .spawn(move || {
                    // A bounded share of a busy core, not only its idle time (design.md §7).
                    if let Err(e) = sys::set_current_thread_background(MERGE_NICE) {
                        log::warn!("merge thread keeps normal priority: {e}");
                    }
                    for (job, slot) in rx {
                        let outcome = catch_unwind(AssertUnwindSafe(job));
                        *slot.outcome.lock() = Some(outcome);
                        slot.done.notify_all();
                    }
                })?;
            self.queue = Some(tx);
            self.thread = Some(thread);
        }
        let slot = Arc::new(Slot::default());
        let sent = self
            .queue
            .as_ref()
            .map(|q| q.send((Box::new(job), slot.clone())));
        match sent {
            Some(Ok(())) => Ok(Pending(slot)),
            // The thread is gone (it cannot end while the sender lives, short of an abort):
            // start another next time.
            _ => {
                self.queue = None;
                self.thread = None;
                Err(std::io::Error::other("the merge worker thread has ended"))
            }
        }
    }
}

impl Drop for Worker {
    /// Close the queue and wait for the thread to finish the job it runs, if any.
    fn drop(&mut self) {
        self.queue = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::job::DrainStep;

    fn merged() -> Merged {
        Merged {
            replaced: Vec::new(),
            outputs: Vec::new(),
            drain: DrainStep::None,
        }
    }

    /// Jobs run one after another on one thread, which outlives each of them; a panicking job
    /// is reported as such and the thread goes on.
    #[test]
    fn one_thread_runs_every_job() {
        let mut worker = Worker::default();
        let mut threads = Vec::new();
        for _ in 0..5 {
            let (tx, rx) = mpsc::channel();
            let p = worker
                .submit(move || {
                    tx.send(std::thread::current().id()).unwrap();
                    Ok(merged())
                })
                .unwrap();
            assert!(matches!(p.join(), Ok(Ok(_))));
            threads.push(rx.recv().unwrap());
        }
        assert!(threads.windows(2).all(|w| w[0] == w[1]), "{threads:?}");
        assert_ne!(threads[0], std::thread::current().id());
        let p = worker.submit(|| panic!("a job that panics")).unwrap();
        assert!(p.join().is_err());
        let p = worker.submit(|| Ok(merged())).unwrap();
        assert!(matches!(p.join(), Ok(Ok(_))));
    }

    /// `is_finished` is false while the job runs and true once it is done.
    #[test]
    fn is_finished_follows_the_job() {
        let mut worker = Worker::default();
        let (go, wait) = mpsc::channel::<()>();
        let p = worker
            .submit(move || {
                wait.recv().unwrap();
                Ok(merged())
            })
            .unwrap();
        assert!(!p.is_finished());
        go.send(()).unwrap();
        while !p.is_finished() {
            std::thread::yield_now();
        }
        assert!(matches!(p.join(), Ok(Ok(_))));
    }
}
