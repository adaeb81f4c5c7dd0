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
/// A table whose newer segments hold at least 1/SPACE_RATIO of its oldest segment's bytes is
/// merged whole in the background, which drops what the newer segments delete or overwrite in
/// the oldest. The tiered rule alone lets a table whose live data no longer grows carry up to
/// 1/MERGE_RATIO of it in dead bytes (design.md §3.1).
const SPACE_RATIO: u64 = 4;
/// The space rule leaves tables alone whose newer segments hold less than this: rewriting a
/// small table's oldest segment after every commit that touches it frees next to nothing.
const SPACE_MIN_BYTES: u64 = 4 << 20;

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

/// The background merge due next, as (table index, number of newest segments to merge): the
/// whole of a table due by the space rule, the one whose newer segments are the largest share
/// of its oldest; otherwise the run in the table with the most segments among those where the
/// tiered rule, started from the newest segment, merges at least two. `tables` holds each
/// table's file lengths, newest first.
pub(super) fn next_background_merge(tables: &[Vec<u64>]) -> Option<(usize, usize)> {
    space_merge(tables).or_else(|| tiered_background_merge(tables))
}

/// The tiered part of [`next_background_merge`].
fn tiered_background_merge(tables: &[Vec<u64>]) -> Option<(usize, usize)> {
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

/// The space rule of [`next_background_merge`]: (table index, all its segments) for the table
/// whose newer segments' bytes are the largest share of its oldest segment's, among those
/// where they are at least 1/SPACE_RATIO of it and at least SPACE_MIN_BYTES.
fn space_merge(tables: &[Vec<u64>]) -> Option<(usize, usize)> {
    // (table index, segment count, newer bytes, oldest bytes)
    let mut best: Option<(usize, usize, u64, u64)> = None;
    for (i, lens) in tables.iter().enumerate() {
        let Some((&oldest, newer)) = lens.split_last() else {
            continue;
        };
        let newer: u64 = newer.iter().sum();
        let due = newer >= SPACE_MIN_BYTES && newer.saturating_mul(SPACE_RATIO) >= oldest;
        // newer / oldest > best_newer / best_oldest, without dividing.
        let larger = |&(_, _, n, o): &(usize, usize, u64, u64)| {
            u128::from(newer) * u128::from(o) > u128::from(n) * u128::from(oldest)
        };
        if due && best.as_ref().is_none_or(larger) {
            best = Some((i, lens.len(), newer, oldest));
        }
    }
    best.map(|(table, n, _, _)| (table, n))
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
        // one segment fewer nothing is due here, with one more the two newest are merged (the
        // tables are too small for the space rule).
        let table = |n: usize| {
            let mut lens = vec![1, 1_000];
            lens.extend(std::iter::repeat_n(100_000, n - 2));
            vec![lens]
        };
        assert_eq!(next_background_merge(&table(MAX_SEGMENTS_PER_TABLE)), None);
        assert_eq!(
            next_background_merge(&table(MAX_SEGMENTS_PER_TABLE + 1)),
            Some((0, 2))
        );
    }

    #[test]
    fn a_table_whose_newer_segments_reach_a_quarter_of_its_oldest_is_merged_whole_first() {
        const M: u64 = 1 << 20;
        // Newer 16 MiB × 4 < 80 MiB, and 2 × 4 MiB < 12 MiB: nothing is due.
        let none = vec![4 * M, 12 * M, 80 * M];
        assert_eq!(next_background_merge(std::slice::from_ref(&none)), None);
        // Newer 20 MiB × 4 ≥ 80 MiB: merged whole, although the tiered rule would stop at 80.
        let space = vec![8 * M, 12 * M, 80 * M];
        // A tiered merge due in a table with more segments: 2 × 10 ≥ 15, then 2 × 25 < 100.
        let tiered = vec![10, 15, 100, 1_000];
        let tables = [none.clone(), space.clone(), tiered.clone()];
        assert_eq!(next_background_merge(&tables), Some((1, 3)));
        assert_eq!(next_background_merge(&[none, tiered]), Some((1, 2)));
        // Of two tables due, the one whose newer segments are the larger share of its oldest.
        let larger = vec![30 * M, 80 * M];
        assert_eq!(next_background_merge(&[space, larger]), Some((1, 2)));
        // Small tables are left to the tiered rule: 1 MiB × 4 ≥ 3 MiB, but 1 MiB is too little.
        assert_eq!(next_background_merge(&[vec![M, 3 * M], vec![80 * M]]), None);
    }
}
