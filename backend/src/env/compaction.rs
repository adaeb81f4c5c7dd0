//! The merge policy (design.md §3 step 2 and §3.1): which segments a commit merges with its
//! memtable, and which merge the background thread runs next. Pure functions of segment
//! sizes, so they are tested without a filesystem.

use std::sync::Arc;

use crate::segment::Segment;

use super::Compaction;

/// Merges keep a table at about this many segments; with merges inside the commit
/// ([`Compaction::Inline`]) it is a hard limit.
pub(super) const MAX_SEGMENTS_PER_TABLE: usize = 8;
/// With background merges, a commit merges whatever it must to stay at or below this many
/// segments per table (the background thread has fallen behind).
const HARD_MAX_SEGMENTS_PER_TABLE: usize = 2 * MAX_SEGMENTS_PER_TABLE;
/// With background merges, a commit writes at most this many times its memtable's bytes
/// (it merges only the small newest segments; larger merges go to the background thread).
const COMMIT_MERGE_BUDGET: u64 = 4;
/// A run of newer segments is merged into an older one once it is at least 1/RATIO its size.
const MERGE_RATIO: u64 = 2;

/// The file lengths of `segments`, in their order (newest first).
pub(super) fn file_lens(segments: &[Arc<Segment>]) -> Vec<u64> {
    segments.iter().map(|s| s.file_len).collect()
}

/// How many of a table's newest segments (file lengths `lens`, newest first) a commit merges
/// with a memtable of `mem_bytes`: the tiered rule, limited to the first `free` segments
/// (those no background merge reads) and, with background merges, to COMMIT_MERGE_BUDGET
/// times the memtable's bytes.
pub(super) fn commit_merge_count(
    compaction: Compaction,
    mem_bytes: u64,
    lens: &[u64],
    free: usize,
) -> usize {
    match compaction {
        Compaction::Inline => tiered_count(mem_bytes, lens, free, u64::MAX, MAX_SEGMENTS_PER_TABLE),
        // Background, and BackgroundWaited under feature `testing`.
        _ => tiered_count(
            mem_bytes,
            lens,
            free,
            mem_bytes.saturating_mul(COMMIT_MERGE_BUDGET),
            HARD_MAX_SEGMENTS_PER_TABLE,
        ),
    }
}

/// The background merge due next, as (table index, number of newest segments to merge): in
/// the table with the most segments among those where the tiered rule, started from the
/// newest segment, merges at least two. `tables` holds each table's file lengths, newest
/// first.
pub(super) fn next_background_merge(tables: &[Vec<u64>]) -> Option<(usize, usize)> {
    // (table index, segments to merge, the table's segment count)
    let mut best: Option<(usize, usize, usize)> = None;
    for (i, lens) in tables.iter().enumerate() {
        let Some((&first, rest)) = lens.split_first() else {
            continue;
        };
        let n = tiered_count(first, rest, rest.len(), u64::MAX, MAX_SEGMENTS_PER_TABLE);
        if n >= 1 && best.is_none_or(|(_, _, len)| lens.len() > len) {
            best = Some((i, n + 1, lens.len()));
        }
    }
    best.map(|(table, n, _)| (table, n))
}

/// The tiered merge rule: how many of the newest segments (file lengths `lens`) to merge,
/// given `acc` bytes gathered so far. The next older segment joins while the data gathered
/// is at least 1/MERGE_RATIO of its size and the total stays within `budget`, or while more
/// than `max_segments` would remain. At most `free` segments join.
fn tiered_count(
    mut acc: u64,
    lens: &[u64],
    free: usize,
    budget: u64,
    max_segments: usize,
) -> usize {
    let mut n = 0;
    for &len in lens.iter().take(free) {
        let too_many = lens.len() - n >= max_segments;
        let due = acc * MERGE_RATIO >= len && acc + len <= budget;
        if !(due || too_many) {
            break;
        }
        acc += len;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commit_merges_the_newest_segments_while_they_are_small_enough() {
        // 100 bytes gathered: a 150-byte segment joins (2 × 100 ≥ 150), then 250 gathered
        // takes the 400-byte one (500 ≥ 400), then 650 stops at 2,000.
        let lens = [150, 400, 2_000];
        assert_eq!(commit_merge_count(Compaction::Inline, 100, &lens, 3), 2);
        // A larger first segment stops the run at once: the memtable becomes its own segment.
        assert_eq!(
            commit_merge_count(Compaction::Inline, 100, &[201, 10], 2),
            0
        );
        // Segments a background merge reads (beyond `free`) never join.
        assert_eq!(commit_merge_count(Compaction::Inline, 100, &lens, 1), 1);
    }

    #[test]
    fn background_commits_stay_within_their_budget_until_a_table_has_too_many_segments() {
        // Inline merges the 900-byte segment; in the background mode it is over 4 × 300.
        let lens = [300, 900];
        assert_eq!(commit_merge_count(Compaction::Inline, 300, &lens, 2), 2);
        assert_eq!(commit_merge_count(Compaction::Background, 300, &lens, 2), 1);
        // With the hard limit reached, a commit merges even what the budget excludes.
        let many = vec![1_000_000; HARD_MAX_SEGMENTS_PER_TABLE];
        assert_eq!(
            commit_merge_count(Compaction::Background, 1, &many, many.len()),
            1
        );
        let too_many = vec![1_000_000; HARD_MAX_SEGMENTS_PER_TABLE + 2];
        assert_eq!(
            commit_merge_count(Compaction::Background, 1, &too_many, too_many.len()),
            3
        );
    }

    #[test]
    fn the_background_merges_the_table_with_the_most_segments_among_those_due() {
        let tables = vec![
            vec![100, 150],           // due: 2 × 100 ≥ 150
            vec![10, 1_000, 2_000],   // not due: 20 < 1,000
            vec![50, 60, 200, 5_000], // due, and the most segments: 50+60, +200, stops at 5,000
            vec![],                   // empty tables are skipped
        ];
        assert_eq!(next_background_merge(&tables), Some((2, 3)));
        assert_eq!(next_background_merge(&tables[..2]), Some((0, 2)));
        assert_eq!(next_background_merge(&[vec![10, 1_000], vec![7]]), None);
        // Over MAX_SEGMENTS_PER_TABLE the rule merges even segments that are not due: with
        // one segment fewer nothing is due here, with one more the two newest are merged.
        let table = |n: usize| {
            let mut lens = vec![1, 1_000];
            lens.extend(std::iter::repeat_n(1_000_000, n - 2));
            vec![lens]
        };
        assert_eq!(next_background_merge(&table(MAX_SEGMENTS_PER_TABLE)), None);
        assert_eq!(
            next_background_merge(&table(MAX_SEGMENTS_PER_TABLE + 1)),
            Some((0, 2))
        );
    }
}
