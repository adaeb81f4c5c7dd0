//! Engine statistics: what a storage engine can say about its own commits beyond the storage
//! interface.
//!
//! They are a capability, not part of [`Environment`](crate::Environment): a backend that keeps
//! them returns them from [`Environment::stats`](crate::Environment::stats) (butter_db); the
//! others keep the default `None`. The commits' time comes as named parts
//! ([`CommitTotals::parts`]) in the engine's order, so a caller can carry and show them by
//! name: a new part is one more name where the engine's adapter fills them in.

use std::fmt::Debug;
use std::time::Duration;

/// Statistics an engine keeps about its commits (see the module documentation).
pub trait EngineStats: Send + Sync + Debug {
    /// Totals over every commit since the environment was opened: a caller takes the
    /// difference ([`CommitTotals::since`]) over the span it measures.
    fn commit_totals(&self) -> CommitTotals;

    /// The largest single merge and the largest commit since the previous call (or since
    /// open). Each call starts a new span, so a caller takes one before and one after what it
    /// measures.
    fn take_commit_peaks(&self) -> CommitPeaks;

    /// The engine's own accounting of its memory after the last commit, as named byte counts
    /// and levels (lowercase, `_` between words) in the engine's order; empty for an engine
    /// that keeps none. A caller shows them by name, so a new figure is one more name where
    /// the engine's adapter fills them in.
    fn memory(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// A backend's commits, summed over every commit since the environment was opened. Whatever a
/// commit spends outside its named parts is its total minus their sum.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitTotals {
    /// Commits that returned `Ok` (one with nothing to write costs nothing).
    pub commits: u64,
    /// The parts of the commits' wall time, by name (lowercase, `_` between words), in the
    /// engine's order.
    pub parts: Vec<(&'static str, Duration)>,
    /// Bytes of the files the commits wrote themselves.
    pub commit_bytes: u64,
    /// Background merges the commits installed, and the bytes those merges wrote.
    pub merges: u64,
    /// See `merges`.
    pub merged_bytes: u64,
}

impl CommitTotals {
    /// Adds `time` to the part `name`, which goes last if it is new.
    pub fn add_part(&mut self, name: &'static str, time: Duration) {
        match self.parts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, t)) => *t += time,
            None => self.parts.push((name, time)),
        }
    }

    /// The part `name`, if the engine reports it.
    pub fn part(&self, name: &str) -> Option<Duration> {
        self.parts.iter().find(|(n, _)| *n == name).map(|&(_, t)| t)
    }

    /// `self - earlier`, field by field and part by part (saturating; a part `earlier` lacks
    /// counts from zero).
    #[must_use]
    pub fn since(&self, earlier: &CommitTotals) -> CommitTotals {
        CommitTotals {
            commits: self.commits.saturating_sub(earlier.commits),
            parts: self
                .parts
                .iter()
                .map(|&(name, t)| {
                    (
                        name,
                        t.saturating_sub(earlier.part(name).unwrap_or_default()),
                    )
                })
                .collect(),
            commit_bytes: self.commit_bytes.saturating_sub(earlier.commit_bytes),
            merges: self.merges.saturating_sub(earlier.merges),
            merged_bytes: self.merged_bytes.saturating_sub(earlier.merged_bytes),
        }
    }
}

/// The largest writes of a span of commits (see [`EngineStats::take_commit_peaks`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CommitPeaks {
    /// Bytes the largest background merge wrote (0: none was installed).
    pub largest_merge_bytes: u64,
    /// Bytes of its table's files once that merge was in place.
    pub largest_merge_table_bytes: u64,
    /// Bytes the largest commit wrote itself (its segments, merges within the commit
    /// included, and its manifest).
    pub largest_commit_bytes: u64,
}

impl CommitPeaks {
    /// Takes in one commit's figures.
    pub fn add(&mut self, merge_bytes: u64, merge_table_bytes: u64, commit_bytes: u64) {
        if merge_bytes > self.largest_merge_bytes {
            self.largest_merge_bytes = merge_bytes;
            self.largest_merge_table_bytes = merge_table_bytes;
        }
        self.largest_commit_bytes = self.largest_commit_bytes.max(commit_bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_are_summed_and_differenced_by_name() {
        let ms = Duration::from_millis;
        let mut before = CommitTotals::default();
        before.add_part("build", ms(5));
        let mut after = before.clone();
        after.commits = 2;
        after.add_part("build", ms(7));
        after.add_part("snapshot", ms(3));
        assert_eq!(after.parts, vec![("build", ms(12)), ("snapshot", ms(3))]);
        let span = after.since(&before);
        assert_eq!(span.commits, 2);
        // A part the earlier totals lack counts from zero; the order is kept.
        assert_eq!(span.parts, vec![("build", ms(7)), ("snapshot", ms(3))]);
        assert_eq!(span.part("file"), None);
    }
}
