//! Background merges (design.md §3.1): starting one when the policy says it is due, the
//! worker that writes it to `compact/`, and swapping its result in at the next commit (step 1);
//! and the k-way merge that commits and merges share.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fs::Fs;
use crate::iter::{MemWalk, MergeIter};
use crate::memtable::Memtable;
use crate::segment::{self, CacheUse, FileSink, Segment, SegmentBuilder, SegmentSink};
use crate::sys;

use super::compaction;
use super::job::{MergeJob, Merged};
use super::{fail_point, CommitInfo, Compaction, Env, TableVersion, Version, WriterState};

impl Env {
    /// Start a background merge if one is due (`compaction::next_background_merge`: the space
    /// rule's whole-table merge first, else the tiered rule's in the table with the most
    /// segments). Called by a commit, after publishing.
    pub(super) fn start_merge(&self, writer: &mut WriterState, version: &Version) {
        if self.compaction == Compaction::Inline {
            return;
        }
        let lens: Vec<Vec<u64>> = version
            .tables
            .iter()
            .map(|t| compaction::file_lens(&t.segments))
            .collect();
        let Some((table, n)) = compaction::next_background_merge(&lens) else {
            return;
        };
        let Some(segments) = version.tables.get(table).map(|t| &t.segments) else {
            return;
        };
        let Some(inputs) = segments.get(..n) else {
            return;
        };
        let inputs: Vec<Arc<Segment>> = inputs.to_vec();
        // Later commits only add newer segments, so a run that ends at the oldest still does.
        let drop_tombstones = n == segments.len();
        let seq = writer.next_seq;
        writer.next_seq += 1;
        let work_path = self.compact.join(segment::file_name(seq));
        let fs = self.fs.clone();
        let mode = self.file_mode;
        let (path, seqs) = (work_path.clone(), inputs.iter().map(|s| s.seq).collect());
        let spawned = std::thread::Builder::new()
            .name("butter-merge".into())
            .spawn(move || {
                // The merge uses only CPU time the slasher leaves idle.
                if let Err(e) = sys::set_current_thread_idle() {
                    log::warn!("merge thread keeps normal priority: {e}");
                }
                run_merge(&*fs, &inputs, drop_tombstones, &path, mode)
            });
        match spawned {
            Ok(handle) => {
                writer.merge = Some(MergeJob {
                    table,
                    inputs: seqs,
                    seq,
                    work_path,
                    handle,
                });
            }
            // No thread: the merge is retried after the next commit; until then commits keep
            // the segment count bounded by merging themselves.
            Err(e) => log::warn!("could not start a background merge: {e}"),
        }
    }

    /// Swap a finished background merge into `tables` (step 1 of the commit): clone its file
    /// into `live/` and replace its inputs with it. A merge that failed, or whose inputs are
    /// no longer the table's segments (cannot happen while commits leave them alone), is
    /// dropped: the data is still in its inputs. Only the clone and opening it can fail the
    /// commit.
    pub(super) fn install_merge(
        &self,
        job: MergeJob,
        tables: &mut [TableVersion],
        retired: &mut Vec<Arc<Segment>>,
        info: &mut CommitInfo,
    ) -> Result<()> {
        let segments = tables.get_mut(job.table).map(|t| &mut t.segments);
        let place = segments.as_ref().and_then(|segs| job.position_in(segs));
        let merged = match job.handle.join() {
            Ok(Ok(m)) => Some(m),
            Ok(Err(e)) => {
                log::error!("background merge failed (its inputs stay): {e}");
                None
            }
            Err(_) => {
                log::error!("background merge panicked (its inputs stay)");
                None
            }
        };
        let (Some(merged), Some(segments), Some(at)) = (merged, segments, place) else {
            self.discard_merge_file(&job.work_path);
            return Ok(());
        };
        let mut replacement = Vec::new();
        if merged.entries > 0 {
            let path = self.live.join(segment::file_name(job.seq));
            self.fs
                .clone_file(&job.work_path, &path, self.file_mode)
                .map_err(|e| Error::io("clone", &path, e))?;
            fail_point("commit::after_clone");
            self.discard_merge_file(&job.work_path);
            let seg = Segment::open(
                path,
                job.seq,
                merged.file_len,
                merged.entries,
                self.cache.clone(),
            )?;
            replacement.push(Arc::new(seg));
        }
        retired.extend(segments.splice(at..at + job.inputs.len(), replacement));
        info.merges_installed += 1;
        info.merged_bytes += merged.file_len;
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

/// A background merge: merge `inputs` (newest first) and write the result to `path`, waiting
/// for its write-back so that a write error is reported here and the commit that swaps it in
/// has nothing left to wait for.
fn run_merge(
    fs: &dyn Fs,
    inputs: &[Arc<Segment>],
    drop_tombstones: bool,
    path: &Path,
    mode: u32,
) -> Result<Merged> {
    // A merge's result does not go into the block cache (it would push out the blocks the
    // slasher reads now, for a segment that is not live yet): its first readers load it.
    let mut builder = SegmentBuilder::new(FileSink::new(fs, path, mode, None));
    merge_into(
        &mut builder,
        &Memtable::new(),
        inputs,
        drop_tombstones,
        CacheUse::Bypass,
    )?;
    let entries = builder.entries();
    if entries == 0 {
        return Ok(Merged {
            entries,
            file_len: 0,
        });
    }
    let (file_len, _) = builder.finish()?;
    fs.write_back(path)
        .map_err(|e| Error::io("write back", path, e))?;
    fail_point("merge::after_write");
    Ok(Merged { entries, file_len })
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
