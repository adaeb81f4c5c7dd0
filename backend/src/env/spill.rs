//! Spilling an open write transaction's memtable to files in `live/` (design.md §2,
//! "Spilling").
//!
//! A write transaction holds its writes in memory until it commits. A transaction that writes
//! more than its share of the memory budget ([`Env::memtable_budget`]) writes its largest
//! memtable as a sorted run, a segment file in `live/`, empties it, and goes on. The runs are
//! uncommitted state like everything else in `live/`: open discards `live/` and starts again
//! from the newest generation, so a crash or an abort leaves no trace of them in any
//! generation. Reads of the transaction see its memtable, then its runs (newest first), then
//! the committed segments; its commit installs the runs as the table's newest segments (the
//! commit's merge may take them in), in the same single snapshot as the rest.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::memtable::Memtable;
use crate::segment::{self, CacheUse, FileSink, Segment, SegmentBuilder};

use super::segment_writer::merge_into;
use super::{Env, WriterState};

/// The most runs one table's spills keep: a spill that would leave more merges the newest
/// ones into the run it writes. Each run is one more segment every lookup and walk of the
/// transaction visits.
pub(crate) const MAX_SPILL_RUNS: usize = 4;

/// How many of a table's runs (file lengths `runs`, newest first) a spill of a memtable of
/// `mem_bytes` merges into the run it writes: the newest runs while they are no larger than
/// what the new run holds so far (runs of like size merge, so the bytes rewritten stay
/// logarithmic in the transaction's size), and as many more as keep the table at
/// [`MAX_SPILL_RUNS`].
pub(crate) fn spill_merge_count(mem_bytes: u64, runs: &[u64]) -> usize {
    let mut acc = mem_bytes;
    let mut take = 0;
    for (i, &len) in runs.iter().enumerate() {
        let would_remain = runs.len() - i;
        if len <= acc || would_remain >= MAX_SPILL_RUNS {
            acc = acc.saturating_add(len);
            take = i + 1;
        } else {
            break;
        }
    }
    take
}

impl Env {
    /// Bytes a write transaction's memtables (and the value chunks kept for the next one) may
    /// hold before the transaction spills ([`crate::EnvBuilder::memtable_bytes`]).
    /// Pressure in the process's memory cgroup lowers it (design.md §7.1).
    pub fn memtable_budget(&self) -> u64 {
        self.budget.memtable_budget()
    }

    /// Write `mem` merged with the newest of `runs` (a table's runs, newest first; as many as
    /// [`spill_merge_count`] says) as a new run in `live/`, and open it. Returns the run
    /// (`None` if nothing was left to write: no file exists) and how many of `runs` it
    /// replaces. The caller empties `mem` and discards those runs ([`Env::discard_runs`])
    /// only after this succeeded; on an error the partial file is deleted and the transaction
    /// is as it was, but the environment is poisoned, as after a failed commit: a write to
    /// `live/` failed, and `live/` may hold what it left (the next open discards it).
    pub(crate) fn spill(
        &self,
        writer: &mut WriterState,
        mem: &Memtable,
        runs: &[Arc<Segment>],
    ) -> Result<(Option<Arc<Segment>>, usize)> {
        let lens: Vec<u64> = runs.iter().map(|s| s.file_len).collect();
        let merged = spill_merge_count(mem.bytes(), &lens);
        let inputs = runs.get(..merged).unwrap_or_default();
        super::hooks::fail_point("spill::before_write");
        let seq = writer.next_seq;
        writer.next_seq += 1;
        let path = self.live.join(segment::file_name(seq));
        // Not seeded into the block cache: a run is read back, if at all, by the lookups of
        // this transaction, and the cache's room is better kept for committed blocks.
        let sink = FileSink::new(&*self.fs, &path, self.file_mode, None);
        let mut builder = SegmentBuilder::new(sink);
        let built = merge_into(&mut builder, mem, inputs, false, CacheUse::Take).and_then(|()| {
            let entries = builder.entries();
            if entries == 0 {
                return Ok(None);
            }
            let (len, _sink) = builder.finish()?;
            let seg = Segment::open(path.clone(), seq, len, entries, self.cache.clone())?;
            Ok(Some(Arc::new(seg)))
        });
        if built.is_err() {
            self.poisoned.store(true, Ordering::Release);
            if path.exists() {
                if let Err(e) = self.fs.remove_file(&path) {
                    log::warn!("could not delete {}: {e}", path.display());
                }
            }
        }
        super::hooks::fail_point("spill::after_write");
        self.budget.observe();
        Ok((built?, merged))
    }

    /// Forget runs that no commit will install (merged into a newer run, or the transaction
    /// ended without committing them): evict their blocks and delete their files from `live/`.
    /// A file that cannot be deleted is reported; it is uncommitted state, which the next open
    /// discards with the rest of `live/`, but until then a commit would carry it into its
    /// generation as a file no manifest names: the environment is poisoned (writes refused
    /// until it is reopened) and the error returned.
    pub(crate) fn discard_runs(&self, runs: &[Arc<Segment>]) -> Result<()> {
        let mut first_error = None;
        for s in runs {
            self.cache.evict_segment(s.seq, s.cacheable_blocks());
            let path = self.live.join(segment::file_name(s.seq));
            match self.fs.remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    log::warn!("could not delete the spilled run {}: {e}", path.display());
                    self.poisoned.store(true, Ordering::Release);
                    first_error.get_or_insert(Error::io("unlink", &path, e));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spill_merges_runs_of_like_size_and_keeps_at_most_max_runs() {
        // Nothing to merge.
        assert_eq!(spill_merge_count(100, &[]), 0);
        // A larger run below is left alone.
        assert_eq!(spill_merge_count(100, &[400]), 0);
        // Runs no larger than what has gathered so far merge: 100 + 100 = 200 >= 150.
        assert_eq!(spill_merge_count(100, &[100, 150, 1000]), 2);
        // Three large runs: the new one makes four, which is allowed.
        assert_eq!(spill_merge_count(1, &[100, 200, 400]), 0);
        // Four: the newest merges so that four remain.
        assert_eq!(spill_merge_count(1, &[100, 200, 400, 800]), 1);
        // Five (cannot happen, but): the two newest merge, so that four remain.
        assert_eq!(spill_merge_count(1, &[100, 200, 400, 800, 1600]), 2);
        // Equal spills settle into a logarithmic set, never more than MAX_SPILL_RUNS.
        let mut runs: Vec<u64> = Vec::new();
        for _ in 0..1000 {
            let take = spill_merge_count(10, &runs);
            let merged: u64 = 10 + runs.drain(..take).sum::<u64>();
            runs.insert(0, merged);
            assert!(runs.len() <= MAX_SPILL_RUNS, "{runs:?}");
            assert!(runs.windows(2).all(|w| w[0] <= w[1]), "{runs:?}");
        }
    }
}
