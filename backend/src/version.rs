//! A table's committed state: the [`Version`] of every table at one generation, and the
//! partition logic on a table's segments (design.md §3.1): which of its oldest segments are
//! partitions, putting a disjoint tail in partition order, and finding a run of segments.
//! Commits, merges, readers and the merge policy all read these; this file reads only
//! `segment`.

use std::sync::Arc;

use crate::segment::{key_cmp, Segment};

/// The committed state of every table at one generation.
#[derive(Debug)]
pub(crate) struct Version {
    pub(crate) generation: u64,
    pub(crate) tables: Vec<TableVersion>,
}

/// One table at one generation: its segments, newest first.
#[derive(Debug, Clone)]
pub(crate) struct TableVersion {
    pub(crate) name: String,
    pub(crate) segments: Vec<Arc<Segment>>,
    /// How many of `segments`' oldest are partitions ([`partitions`]), for lookups to
    /// search by key and for the background policy. Set when the version is published; a
    /// commit's draft lets it go stale.
    pub(crate) parts: usize,
}

/// How many of a table's oldest segments are its partitions: the longest run at the end of
/// `segments` (newest first) whose key ranges (`range` gives a segment's smallest and largest
/// key) ascend without overlapping. Their order does not matter to a reader, since no key is
/// in two of them; at least one when there are segments (design.md §3.1).
pub(crate) fn partition_count<T>(segments: &[T], range: impl Fn(&T) -> (&[u8], &[u8])) -> usize {
    let mut n = usize::from(!segments.is_empty());
    while let (Some(above), Some(below)) = (
        segments
            .len()
            .checked_sub(n + 1)
            .and_then(|i| segments.get(i)),
        segments.get(segments.len() - n),
    ) {
        if key_cmp(range(above).1, range(below).0).is_lt() {
            n += 1;
        } else {
            break;
        }
    }
    n
}

/// Put a table's oldest segments in the order partitions take, where that changes nothing a
/// reader sees: the longest run at the end of `segments` (newest first) whose key ranges are
/// mutually disjoint, whatever their order, is sorted by key. No key is in two of them, so
/// which of them is newer does not matter. A table written in ascending key order (each
/// commit's keys above the last's: a bulk load, an id sequence) then reads as partitions
/// without a merge. Returns how many segments the run holds (design.md §3.1).
pub(crate) fn order_disjoint_tail<T>(
    segments: &mut [T],
    range: impl Fn(&T) -> (&[u8], &[u8]),
) -> usize {
    // The run's ranges, sorted by their first key.
    let mut run: Vec<(&[u8], &[u8])> = Vec::new();
    for segment in segments.iter().rev() {
        let (lo, hi) = range(segment);
        let at = run.partition_point(|&(l, _)| key_cmp(l, lo).is_lt());
        let after_previous = at
            .checked_sub(1)
            .and_then(|i| run.get(i))
            .is_none_or(|&(_, prev_hi)| key_cmp(prev_hi, lo).is_lt());
        let before_next = run
            .get(at)
            .is_none_or(|&(next_lo, _)| key_cmp(hi, next_lo).is_lt());
        if !(after_previous && before_next) {
            break;
        }
        run.insert(at, (lo, hi));
    }
    let n = run.len();
    drop(run);
    let start = segments.len() - n;
    if let Some(tail) = segments.get_mut(start..) {
        tail.sort_by(|a, b| key_cmp(range(a).0, range(b).0));
    }
    n
}

/// How many of `segments`' (newest first) oldest are their table's partitions.
pub(crate) fn partitions(segments: &[Arc<Segment>]) -> usize {
    partition_count(segments, |s| (&s.min_key, &s.max_key))
}

/// Where the run of segments `seqs` (in order) starts in `segments`, if it is there whole.
pub(super) fn run_position(segments: &[Arc<Segment>], seqs: &[u64]) -> Option<usize> {
    let first = *seqs.first()?;
    let at = segments.iter().position(|s| s.seq == first)?;
    let run = segments.get(at..at + seqs.len())?;
    run.iter()
        .zip(seqs)
        .all(|(s, &seq)| s.seq == seq)
        .then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partitions_are_the_ascending_disjoint_run_at_the_bottom() {
        let count = |ranges: &[(&[u8], &[u8])]| partition_count(ranges, |&(lo, hi)| (lo, hi));
        assert_eq!(count(&[]), 0);
        assert_eq!(count(&[(b"a", b"z")]), 1);
        // Newest first: an upper segment over everything, then three partitions in key order.
        let table: [(&[u8], &[u8]); 4] = [(b"a", b"z"), (b"a", b"f"), (b"g", b"m"), (b"n", b"z")];
        assert_eq!(count(&table), 3);
        // Touching ranges overlap (a key in both), and descending ones are not a run.
        assert_eq!(count(&[(b"a", b"g"), (b"g", b"m")]), 1);
        assert_eq!(count(&[(b"n", b"z"), (b"a", b"f")]), 1);
    }

    #[test]
    fn disjoint_oldest_segments_are_put_in_partition_order() {
        let order = |ranges: &mut Vec<(&'static [u8], &'static [u8])>| {
            order_disjoint_tail(ranges, |&(lo, hi)| (lo, hi))
        };
        let count = |ranges: &[(&[u8], &[u8])]| partition_count(ranges, |&(lo, hi)| (lo, hi));
        // Written in ascending key order (newest first: the largest keys on top): not a run
        // of partitions until ordered, then all of it.
        let mut appended: Vec<(&[u8], &[u8])> = vec![(b"s", b"z"), (b"g", b"m"), (b"a", b"f")];
        assert_eq!(count(&appended), 1);
        assert_eq!(order(&mut appended), 3);
        assert_eq!(
            appended,
            [(b"a" as &[u8], b"f" as &[u8]), (b"g", b"m"), (b"s", b"z")]
        );
        assert_eq!(count(&appended), 3);
        // Any order of disjoint ranges; a segment over others ends the run and stays on top.
        let mut mixed: Vec<(&[u8], &[u8])> = vec![
            (b"b", b"y"),
            (b"n", b"p"),
            (b"a", b"c"),
            (b"q", b"z"),
            (b"d", b"f"),
        ];
        assert_eq!(order(&mut mixed), 4);
        assert_eq!(mixed[0], (b"b" as &[u8], b"y" as &[u8]));
        assert_eq!(count(&mixed), 4);
        // Touching ranges share a key: the run stops, and nothing above it moves.
        let mut touching: Vec<(&[u8], &[u8])> = vec![(b"h", b"k"), (b"g", b"m"), (b"a", b"g")];
        assert_eq!(order(&mut touching), 1);
        assert_eq!(
            touching,
            [(b"h" as &[u8], b"k" as &[u8]), (b"g", b"m"), (b"a", b"g")]
        );
    }
}
