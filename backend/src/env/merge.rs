//! Background merges (design.md §3.1): starting the work the policy says is due (a tiered
//! merge of upper segments, or the next job of a table's drain into its partitions), the worker
//! that writes it to `compact/`, and swapping its result in at the next commit (step 1); and
//! the k-way merge that commits and merges share.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::iter::{MemWalk, MergeIter};
use crate::memtable::Memtable;
use crate::segment::{self, key_cmp, CacheUse, FileSink, Segment, SegmentBuilder, SegmentSink};

use super::policy::{self, Plan};
use crate::version::{run_position, TableVersion, Version};

use super::job::{Drain, DrainStep, MergeJob, Merged, Output};
use super::{fail_point, CommitInfo, Env, WriterState};

/// What a background thread is given to do.
struct Work {
    fs: Arc<dyn Fs>,
    compact: PathBuf,
    mode: u32,
    /// First sequence number for outputs, and how many may be used.
    first_seq: u64,
    seqs: u64,
    part_bytes: u64,
    kind: WorkKind,
}

enum WorkKind {
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

impl Env {
    /// Start the background work due next, called by a commit after publishing when no job
    /// runs: what `policy::background_plan` chooses.
    pub(super) fn start_merge(&self, writer: &mut WriterState, version: &Version) {
        let plan = policy::background_plan(version, writer.drain.as_ref(), &self.merges);
        let work = match plan {
            Some(Plan::Tiered { table, n }) => version
                .tables
                .get(table)
                .and_then(|t| t.segments.get(..n))
                .map(|inputs| (table, WorkKind::Tiered(inputs.to_vec()))),
            Some(Plan::Drain { table }) => {
                if let Some(t) = version.tables.get(table) {
                    let upper = t.segments.len() - t.parts;
                    writer.drain = Some(Drain {
                        table,
                        upper: t.segments.iter().take(upper).map(|s| s.seq).collect(),
                        cursor: None,
                    });
                }
                self.drain_work(writer, version)
            }
            Some(Plan::DrainNext) => self.drain_work(writer, version),
            None => None,
        };
        if let Some((table, kind)) = work {
            self.spawn(writer, table, kind);
        }
    }

    /// The next job of the running drain, if any; a drain whose segments are no longer where
    /// it left them (cannot happen while commits leave them alone) is abandoned.
    fn drain_work(&self, writer: &mut WriterState, version: &Version) -> Option<(usize, WorkKind)> {
        let drain = writer.drain.as_ref()?;
        let segments = version.tables.get(drain.table).map(|t| &t.segments[..]);
        let n = drain.upper.len();
        let split = segments.and_then(|s| {
            let at = run_position(s, &drain.upper)?;
            Some((s.get(at..at + n)?, s.get(at + n..)?))
        });
        let Some((upper, below)) = split else {
            log::error!("a drain's segments went away; it is abandoned");
            writer.drain = None;
            return None;
        };
        // The partitions from the first that holds a key at or above the cursor.
        let first = match &drain.cursor {
            None => 0,
            Some(c) => below
                .iter()
                .position(|s| key_cmp(&s.max_key, c).is_ge())
                .unwrap_or(below.len()),
        };
        Some((
            drain.table,
            WorkKind::Drain {
                upper: upper.to_vec(),
                parts: below.get(first..).unwrap_or_default().to_vec(),
                cursor: drain.cursor.clone(),
                job_bytes: self.merges.drain_job_bytes,
            },
        ))
    }

    /// Run `kind` on the merge worker, a background thread of low priority (nice
    /// [`policy::MERGE_NICE`]).
    fn spawn(&self, writer: &mut WriterState, table: usize, kind: WorkKind) {
        let first_input = match &kind {
            WorkKind::Tiered(inputs) => inputs.first().map(|s| s.seq),
            WorkKind::Drain { upper, .. } => upper.first().map(|s| s.seq),
        };
        let Some(first_input) = first_input else {
            return;
        };
        let seqs = match kind {
            WorkKind::Tiered(_) => 1,
            WorkKind::Drain { .. } => policy::DRAIN_JOB_SEQS,
        };
        let work = Work {
            fs: self.fs.clone(),
            compact: self.compact.clone(),
            mode: self.file_mode,
            first_seq: writer.next_seq,
            seqs,
            part_bytes: self.merges.partition_bytes,
            kind,
        };
        writer.next_seq += seqs;
        // The environment's one merge thread (`worker.rs`), started at the first job.
        let spawned = writer.worker.submit(move || work.run());
        match spawned {
            Ok(handle) => {
                writer.merge = Some(MergeJob {
                    table,
                    first_input,
                    handle,
                });
            }
            // No thread: the merge is retried after the next commit; until then commits keep
            // the segment count bounded by merging themselves.
            Err(e) => log::warn!("could not start a background merge: {e}"),
        }
    }

    /// Swap a finished background job into `tables` (step 1 of the commit): clone its files
    /// into `live/` and put them in place of the segments they replace (and, at a drain's end,
    /// retire the drained segments). A job that failed, or whose inputs are no longer where it
    /// read them (cannot happen while commits leave them alone), is dropped with its drain:
    /// the data is still in its inputs. Only the clones and opening them can fail the commit.
    pub(super) fn install_merge(
        &self,
        writer: &mut WriterState,
        job: MergeJob<super::worker::Pending>,
        tables: &mut [TableVersion],
        retired: &mut Vec<Arc<Segment>>,
        info: &mut CommitInfo,
    ) -> Result<()> {
        let merged = match job.handle.join() {
            Ok(Ok(m)) => m,
            Ok(Err(e)) => {
                log::error!("background merge failed (its inputs stay): {e}");
                writer.drain = None;
                return Ok(());
            }
            Err(_) => {
                log::error!("background merge panicked (its inputs stay)");
                writer.drain = None;
                return Ok(());
            }
        };
        let segments = tables.get_mut(job.table).map(|t| &mut t.segments);
        // Where the outputs go, and (at a drain's end) where the drained segments are.
        let place = segments.as_ref().and_then(|segs| {
            let at = if merged.replaced.is_empty() {
                segs.len()
            } else {
                run_position(segs, &merged.replaced)?
            };
            let upper = match (&merged.drain, &writer.drain) {
                (DrainStep::Done, Some(d)) => Some((run_position(segs, &d.upper)?, d.upper.len())),
                (DrainStep::Done, None) => return None,
                _ => None,
            };
            Some((at, upper))
        });
        let (Some(segments), Some((at, upper))) = (segments, place) else {
            log::error!("a background merge's inputs went away; its output is dropped");
            writer.drain = None;
            for o in &merged.outputs {
                self.discard_merge_file(&self.compact.join(segment::file_name(o.seq)));
            }
            return Ok(());
        };
        let mut replacement = Vec::new();
        let mut job_bytes = 0;
        for o in &merged.outputs {
            let work_path = self.compact.join(segment::file_name(o.seq));
            let path = self.live.join(segment::file_name(o.seq));
            self.fs
                .clone_file(&work_path, &path, self.file_mode)
                .map_err(|e| Error::io("clone", &path, e))?;
            fail_point("commit::after_clone");
            self.discard_merge_file(&work_path);
            let seg = Segment::open(path, o.seq, o.file_len, o.entries, self.cache.clone())?;
            replacement.push(Arc::new(seg));
            job_bytes += o.file_len;
            info.merge_files += 1;
        }
        retired.extend(segments.splice(at..at + merged.replaced.len(), replacement));
        // The drained segments are above every partition: the splice did not move them.
        if let Some((upper_at, n)) = upper {
            retired.extend(segments.drain(upper_at..upper_at + n));
        }
        info.merged_bytes += job_bytes;
        if job_bytes > info.largest_merge_bytes {
            info.largest_merge_bytes = job_bytes;
            info.largest_merge_table_bytes = segments.iter().map(|s| s.file_len).sum();
        }
        match merged.drain {
            DrainStep::None => {}
            DrainStep::Continues(cursor) => {
                if let Some(d) = writer.drain.as_mut() {
                    d.cursor = Some(cursor);
                }
            }
            DrainStep::Done => writer.drain = None,
        }
        info.merges_installed += 1;
        Ok(())
    }

    /// Delete a background merge's file from `compact/` if it is there. Best effort: open
    /// deletes anything left in `compact/`.
    pub(super) fn discard_merge_file(&self, path: &Path) {
        if path.exists() {
            if let Err(e) = self.fs.remove_file(path) {
                log::warn!("could not delete {}: {e}", path.display());
            }
        }
    }
}

impl Work {
    /// Runs on the merge thread. On failure the files it wrote are deleted (best effort; open
    /// deletes whatever `compact/` holds).
    fn run(self) -> Result<Merged> {
        let mut out = Outputs {
            work: &self,
            builder: None,
            done: Vec::new(),
            done_bytes: 0,
        };
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
            for seq in self.first_seq..self.first_seq + self.seqs {
                let path = self.compact.join(segment::file_name(seq));
                if path.exists() {
                    let _ = self.fs.remove_file(&path);
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

/// Where a drain job may stop short of its range's end: at a key above `after` (the largest
/// key of the partitions it replaces), once its files hold `bytes`.
#[derive(Debug, Clone, Copy)]
struct Cut<'a> {
    after: Option<&'a [u8]>,
    bytes: u64,
}

/// The files a job writes, split at the partition size while it has sequence numbers left.
struct Outputs<'w> {
    work: &'w Work,
    builder: Option<(u64, SegmentBuilder<FileSink<'w>>)>,
    done: Vec<Output>,
    /// Bytes of the files in `done`.
    done_bytes: u64,
}

impl<'w> Outputs<'w> {
    /// Merge `inputs` (newest first) from `lo` (inclusive) up to `hi` (exclusive) into the
    /// outputs, dropping tombstones with `bottom` (nothing older lies below the inputs there).
    /// With `cut`, returns the key it stopped at, if it stopped there (that key not written).
    fn merge_range(
        &mut self,
        inputs: &[Arc<Segment>],
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        bottom: bool,
        cut: Option<Cut<'_>>,
    ) -> Result<Option<Vec<u8>>> {
        // A merge's result does not go into the block cache (it would push out the blocks the
        // slasher reads now, for a segment that is not live yet): its first readers load it.
        let mut it = MergeIter::new_using(inputs, CacheUse::Bypass);
        if let Some(k) = lo {
            it.seek(k, true)?;
        }
        let empty = Memtable::new();
        let mut mem = MemWalk::new(&empty);
        while let Some((key, value)) = it.next(&mut mem, bottom)? {
            if hi.is_some_and(|h| key_cmp(key, h).is_ge()) {
                break;
            }
            let stop = cut.is_some_and(|c| {
                self.bytes() >= c.bytes && c.after.is_none_or(|a| key_cmp(key, a).is_gt())
            });
            if stop {
                return Ok(Some(key.to_vec()));
            }
            self.add(key, value)?;
        }
        Ok(None)
    }

    /// Bytes written so far (the file being written: about).
    fn bytes(&self) -> u64 {
        self.done_bytes + self.builder.as_ref().map_or(0, |(_, b)| b.approx_bytes())
    }

    fn add(&mut self, key: &[u8], value: Option<&[u8]>) -> Result<()> {
        let w = self.work;
        let full = self.builder.as_ref().is_some_and(|(_, b)| {
            b.approx_bytes() >= w.part_bytes && (self.done.len() as u64) + 1 < w.seqs
        });
        if full {
            self.finish_one()?;
        }
        let (_, builder) = match &mut self.builder {
            Some(b) => b,
            None => {
                let seq = w.first_seq + self.done.len() as u64;
                let path = w.compact.join(segment::file_name(seq));
                let sink = FileSink::new(&*w.fs, &path, w.mode, None);
                self.builder.insert((seq, SegmentBuilder::new(sink)))
            }
        };
        builder.add(key, value)
    }

    /// Finish the file being written, waiting for its write-back so that a write error is
    /// reported here and the commit that swaps it in has nothing left to wait for.
    fn finish_one(&mut self) -> Result<()> {
        let Some((seq, builder)) = self.builder.take() else {
            return Ok(());
        };
        let entries = builder.entries();
        let (file_len, _) = builder.finish()?;
        let path = self.work.compact.join(segment::file_name(seq));
        self.work
            .fs
            .write_back(&path)
            .map_err(|e| Error::io("write back", &path, e))?;
        self.done_bytes += file_len;
        self.done.push(Output {
            seq,
            entries,
            file_len,
        });
        Ok(())
    }

    fn finish(mut self) -> Result<Vec<Output>> {
        self.finish_one()?;
        Ok(self.done)
    }
}

/// Merge the memtable (newest) with `inputs` (newest first) into `builder`, reading the
/// inputs' blocks through the cache as `cache_use` says.
pub(super) fn merge_into<S: SegmentSink>(
    builder: &mut SegmentBuilder<S>,
    mem: &Memtable,
    inputs: &[Arc<Segment>],
    drop_tombstones: bool,
    cache_use: CacheUse,
) -> Result<()> {
    let mut it = MergeIter::new_using(inputs, cache_use);
    let mut mem = MemWalk::new(mem);
    while let Some((key, value)) = it.next(&mut mem, drop_tombstones)? {
        builder.add(key, value)?;
    }
    Ok(())
}
