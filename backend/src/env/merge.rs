//! Background merges seen from the writer (design.md §3.1): starting the work the policy
//! plans (`policy::background_plan`: a tiered merge of upper segments, or the next job of a
//! table's drain into its partitions) on the worker (`worker.rs`), and swapping its result in
//! at the next commit (step 1).

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::segment::{self, key_cmp, Segment};
use crate::version::{run_position, TableVersion, Version};

use super::hooks::fail_point;
use super::job::{Drain, DrainStep, MergeJob};
use super::policy::{self, Plan};
use super::segment_writer::Target;
use super::worker::{Pending, Work, WorkKind};
use super::{CommitInfo, Env, WriterState};

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
            target: Target {
                fs: self.fs.clone(),
                dir: self.merge_dir.clone(),
                mode: self.file_mode,
                first_seq: writer.next_seq,
                seqs,
                part_bytes: self.merges.partition_bytes,
            },
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
        job: MergeJob<Pending>,
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
                self.discard_merge_file(&self.merge_dir.join(segment::file_name(o.seq)));
            }
            return Ok(());
        };
        let mut replacement = Vec::new();
        let mut job_bytes = 0;
        for o in &merged.outputs {
            let work_path = self.merge_dir.join(segment::file_name(o.seq));
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
