//! The background merge worker (design.md §3.1): the work a plan becomes ([`Work`]: a tiered
//! merge, or one job of a drain) and how it runs, writing `compact/` files through the segment
//! writer; and the one thread, for the environment's life, that runs the jobs the commits hand
//! it, one at a time.
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
use crate::iter::{MemWalk, MergeIter};
use crate::memtable::Memtable;
use crate::segment::{self, key_cmp, CacheUse, Segment};
use crate::sys;

use super::hooks::fail_point;
use super::job::{DrainStep, Merged};
use super::policy::{self, MERGE_NICE};
use super::segment_writer::{Cut, Outputs, Target};

/// What a background thread is given to do.
pub(super) struct Work {
    /// Where its files go.
    pub(super) target: Target,
    pub(super) kind: WorkKind,
}

pub(super) enum WorkKind {
    /// Merge these (the newest segments of a table, newest first) into one segment.
    Tiered(Vec<Arc<Segment>>),
    /// The next job of a drain.
    Drain {
        /// The drained segments, newest first.
        upper: Vec<Arc<Segment>>,
        /// The partitions from the first one holding a key at or above `cursor`, in key order.
        parts: Vec<Arc<Segment>>,
        cursor: Option<Vec<u8>>,
        job_bytes: u64,
    },
}

impl Work {
    /// Runs on the merge thread. On failure the files it wrote are deleted (best effort; open
    /// deletes whatever `compact/` holds).
    pub(super) fn run(self) -> Result<Merged> {
        let mut out = Outputs::new(&self.target);
        let r = match &self.kind {
            WorkKind::Tiered(inputs) => out
                .merge_range(inputs, None, None, false, None)
                .map(|_| (inputs.iter().map(|s| s.seq).collect(), DrainStep::None)),
            WorkKind::Drain {
                upper,
                parts,
                cursor,
                job_bytes,
            } => drain_job(&mut out, upper, parts, cursor.clone(), *job_bytes),
        };
        let r = r.and_then(|(replaced, drain)| {
            let outputs = out.finish()?;
            fail_point("merge::after_write");
            Ok(Merged {
                replaced,
                outputs,
                drain,
            })
        });
        if r.is_err() {
            let t = &self.target;
            for seq in t.first_seq..t.first_seq + t.seqs {
                let path = t.dir.join(segment::file_name(seq));
                if path.exists() {
                    let _ = t.fs.remove_file(&path);
                }
            }
        }
        r
    }
}

/// One drain job: from `cursor`, skip the partitions whose range holds no key of the drained
/// segments `upper` (they stay as they are), then merge the next partitions, up to `job_bytes`
/// of them, with `upper`'s entries in their range. Partition `i`'s range runs from the end of
/// the previous one's (the cursor, for the first) to the next partition's smallest key (to the
/// end, for the last). Returns the partitions replaced and the drain's step.
fn drain_job(
    out: &mut Outputs<'_>,
    upper: &[Arc<Segment>],
    parts: &[Arc<Segment>],
    mut lo: Option<Vec<u8>>,
    job_bytes: u64,
) -> Result<(Vec<u64>, DrainStep)> {
    let upper_key_in = |lo: Option<&[u8]>, hi: Option<&[u8]>| -> Result<bool> {
        let mut it = MergeIter::new_using(upper, CacheUse::Bypass);
        match lo {
            Some(k) => it.seek(k, true)?,
            None => it.rewind()?,
        }
        let empty = Memtable::new();
        Ok(it
            .next(&mut MemWalk::new(&empty), false)?
            .is_some_and(|(k, _)| hi.is_none_or(|h| key_cmp(k, h).is_lt())))
    };
    let mut first = 0;
    while first < parts.len() {
        let hi = parts.get(first + 1).map(|s| &s.min_key[..]);
        if upper_key_in(lo.as_deref(), hi)? {
            break;
        }
        match hi {
            Some(h) => lo = Some(h.to_vec()),
            // Nothing of `upper` from the cursor on: the drain is complete.
            None => return Ok((Vec::new(), DrainStep::Done)),
        }
        first += 1;
    }
    let rest = parts.get(first..).unwrap_or_default();
    let lens: Vec<u64> = rest.iter().map(|s| s.file_len).collect();
    let (taken, after) = rest.split_at(policy::drain_job_len(&lens, job_bytes));
    let hi = after.first().map(|s| s.min_key.to_vec());
    let mut inputs = upper.to_vec();
    inputs.extend_from_slice(taken);
    // Where the drained segments are dense beyond the partitions taken (new keys above every
    // partition, while a table fills), the job stops once it has written its budget: the
    // next one goes on from the first key it left.
    let cut = Cut {
        after: taken.last().map(|s| &s.max_key[..]),
        bytes: job_bytes,
    };
    let stopped = out.merge_range(&inputs, lo.as_deref(), hi.as_deref(), true, Some(cut))?;
    let replaced = taken.iter().map(|s| s.seq).collect();
    let step = match stopped.or(hi) {
        Some(next) => DrainStep::Continues(next),
        None => DrainStep::Done,
    };
    Ok((replaced, step))
}

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
