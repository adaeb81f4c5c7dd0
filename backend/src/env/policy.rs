//! The merge policy (design.md §3 step 2 and §3.1), whole: its settings and constants, and
//! the pure functions from a table's segments (or every table's, in a [`Version`]) to what to
//! merge. [`commit_merge`] says how many of a table's newest segments a commit merges with its
//! memtable, [`orders_disjoint_tail`] when a commit puts a table's disjoint oldest segments in
//! partition order, and [`background_plan`] which background merge runs next ([`Plan`]);
//! `merge.rs` and `worker.rs` carry the plan out, and read the drain sizes here. Nothing here
//! touches a file, so the policy is tested without a filesystem.

use std::sync::Arc;

use crate::segment::Segment;
use crate::version::{partitions, run_position, TableVersion, Version};

use super::job::Drain;

/// Where segment merges run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Merges {
    /// A commit merges its memtable only with small newest segments (at most
    /// 4x the memtable's bytes); larger merges run on a background thread, one at a time,
    /// and the next commit after one finishes swaps its output in. The default: a commit's
    /// latency does not depend on the size of the table.
    #[default]
    Background,
    /// As `Background`, but every commit first waits for the running merge, so the order of
    /// filesystem operations is the same in every run (the fault-enumeration tests; feature
    /// `testing` only).
    #[cfg(feature = "testing")]
    BackgroundWaited,
    /// Every merge runs inside the commit that makes it due (no thread).
    Inline,
}

impl Merges {
    /// Whether every commit waits for the running merge (`BackgroundWaited`).
    pub(super) fn waits_for_merges(self) -> bool {
        #[cfg(feature = "testing")]
        if self == Merges::BackgroundWaited {
            return true;
        }
        false
    }
}

/// The policy's settings: where merges run, and the sizes of a drain's partitions and jobs
/// ([`PARTITION_BYTES`] and [`DRAIN_JOB_BYTES`] unless a test sets them).
#[derive(Debug, Clone, Copy)]
pub(super) struct Settings {
    pub(super) mode: Merges,
    pub(super) partition_bytes: u64,
    pub(super) drain_job_bytes: u64,
}

/// Merges keep a table at about this many segments; with merges inside the commit
/// ([`Merges::Inline`]) it is a hard limit.
const MAX_SEGMENTS_PER_TABLE: usize = 8;
/// With background merges, a commit merges whatever it must to stay at or below this many
/// segments per table (the background thread has fallen behind).
const HARD_MAX_SEGMENTS_PER_TABLE: usize = 2 * MAX_SEGMENTS_PER_TABLE;
/// With background merges, a commit writes at most this many times its memtable's bytes
/// (it merges only the small newest segments; larger merges go to the background thread).
const COMMIT_MERGE_BUDGET: u64 = 4;
/// With background merges, a commit at HARD_MAX_SEGMENTS_PER_TABLE merges past its budget only
/// while the merge stays within this many bytes: a table left with many large segments (a
/// bulk load in ascending key order) would otherwise have every commit rewrite its newest,
/// largest segment. Such a table waits for the background thread, which drains it.
const FORCED_COMMIT_MERGE_BYTES: u64 = 64 << 20;
/// A run of newer segments is merged into an older one once it is at least 1/RATIO its size.
const MERGE_RATIO: u64 = 2;
/// A table whose upper segments hold at least 1/SPACE_RATIO of its partitions' bytes is
/// drained into them in the background, which drops what the upper segments delete or
/// overwrite there. The tiered rule alone lets a table whose live data no longer grows carry
/// up to 1/MERGE_RATIO of it in dead bytes (design.md §3.1).
const SPACE_RATIO: u64 = 4;
/// The space rule leaves tables alone whose upper segments hold less than this: rewriting a
/// small table's oldest segment after every commit that touches it frees next to nothing.
const SPACE_MIN_BYTES: u64 = 4 << 20;
/// A drain writes its output as partitions of about this many bytes (the last of a job's may
/// be smaller); `EnvBuilder::merge_sizes` changes it in tests.
pub(super) const PARTITION_BYTES: u64 = 64 << 20;
/// One drain job takes partitions while their bytes stay within this (at least one): what any
/// one background merge reads of a table's partitions and writes of them, however large the
/// table grows. Also the budget of a tiered background merge. It was 256 MiB until the full
/// window at history 256 (docs/runs/design-history.md §3.1): the output of a job that ends a
/// drain sits beside the partitions it replaces and the drained segments, and there a 256 MiB
/// job took the filesystem's usage to 1.30× the live data.
pub(super) const DRAIN_JOB_BYTES: u64 = 128 << 20;
/// Sequence numbers a drain job may use for its outputs (it cannot take more from the writer
/// while it runs); the last output grows past the partition size rather than need another.
pub(super) const DRAIN_JOB_SEQS: u64 = 256;
/// The nice value of the merge thread (`worker.rs`): beside a thread of nice 0 on a busy core
/// it gets about a tenth of the core (the kernel's weights 110 against 1,024), and all of an
/// idle one (design.md §7).
pub(super) const MERGE_NICE: i32 = 10;

/// How many of a table's newest `segments` a commit merges with a memtable of `mem_bytes`.
/// It merges only upper segments (partitions are left to drains, except a table's only one
/// while it is smaller than a partition) and none that background work reads (from `pinned`
/// on), as [`commit_merge_count`] says.
pub(super) fn commit_merge(
    segments: &[Arc<Segment>],
    pinned: Option<usize>,
    mem_bytes: u64,
    settings: &Settings,
) -> usize {
    let parts = partitions(segments);
    let small = parts == 1
        && segments
            .last()
            .is_some_and(|s| s.file_len < settings.partition_bytes);
    let upper = match settings.mode {
        Merges::Inline => segments.len(),
        _ if small => segments.len(),
        _ => segments.len() - parts,
    };
    let free = pinned.unwrap_or(upper).min(upper);
    let lens = file_lens(segments.get(..upper).unwrap_or_default());
    commit_merge_count(settings.mode, mem_bytes, &lens, free)
}

/// Whether a commit puts the disjoint oldest of a table's `segments` in partition order
/// (`version::order_disjoint_tail`): when the table has more upper segments than the hard
/// limit (the background has fallen behind, or the table was loaded in ascending key order)
/// and no background work holds any of them (`pinned` is `None`).
pub(super) fn orders_disjoint_tail(segments: &[Arc<Segment>], pinned: Option<usize>) -> bool {
    let upper = segments.len() - partitions(segments);
    upper > HARD_MAX_SEGMENTS_PER_TABLE && pinned.is_none()
}

/// The background merge to start now that none runs ([`Plan`]): nothing with
/// [`Merges::Inline`]. Without a `drain`: a drain or a tiered merge, as
/// [`next_background_merge`] says. During a drain: a tiered merge of the segments above it if
/// one is due, else the drain's next job. Tiered merges write at most a drain job's budget.
pub(super) fn background_plan(
    version: &Version,
    drain: Option<&Drain>,
    settings: &Settings,
) -> Option<Plan> {
    if settings.mode == Merges::Inline {
        return None;
    }
    let shapes: Vec<Shape> = version
        .tables
        .iter()
        .enumerate()
        .map(|(i, t)| shape(t, drain.filter(|d| d.table == i)))
        .collect();
    if drain.is_some() {
        tiered_background_merge(&shapes, settings.drain_job_bytes).or(Some(Plan::DrainNext))
    } else {
        next_background_merge(&shapes, settings.drain_job_bytes)
    }
}

/// `table` as the policy sees it: its upper segments (during `drain`, only those above the
/// drained ones) and its partitions' bytes.
fn shape(table: &TableVersion, drain: Option<&Drain>) -> Shape {
    let segs = &table.segments;
    let parts = table.parts;
    let upper_end = drain
        .and_then(|d| run_position(segs, &d.upper))
        .unwrap_or(segs.len() - parts);
    let (upper, rest) = segs.split_at(upper_end.min(segs.len()));
    Shape {
        upper: file_lens(upper),
        base: rest.iter().rev().take(parts).map(|s| s.file_len).sum(),
    }
}

/// The file lengths of `segments`, in their order (newest first).
fn file_lens(segments: &[Arc<Segment>]) -> Vec<u64> {
    segments.iter().map(|s| s.file_len).collect()
}

/// How many of a table's newest segments (file lengths `lens`, newest first) a commit merges
/// with a memtable of `mem_bytes`: the tiered rule, limited to the first `free` segments
/// (those no background merge reads) and, with background merges, to COMMIT_MERGE_BUDGET
/// times the memtable's bytes.
fn commit_merge_count(mode: Merges, mem_bytes: u64, lens: &[u64], free: usize) -> usize {
    match mode {
        Merges::Inline => tiered_count(
            mem_bytes,
            lens,
            free,
            u64::MAX,
            (MAX_SEGMENTS_PER_TABLE, u64::MAX),
        ),
        // Background, and BackgroundWaited under feature `testing`.
        _ => {
            let budget = mem_bytes.saturating_mul(COMMIT_MERGE_BUDGET);
            tiered_count(
                mem_bytes,
                lens,
                free,
                budget,
                (
                    HARD_MAX_SEGMENTS_PER_TABLE,
                    budget.max(FORCED_COMMIT_MERGE_BYTES),
                ),
            )
        }
    }
}

/// A table as the background policy sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Shape {
    /// File lengths of the segments above its partitions, newest first (those a drain would
    /// take; while a drain runs, those above the drained ones).
    upper: Vec<u64>,
    /// Bytes of its partitions (the run of key-disjoint segments at its bottom).
    base: u64,
}

/// The background work due next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Plan {
    /// Merge the `n` newest segments of `table` into one.
    Tiered { table: usize, n: usize },
    /// Start draining `table`'s upper segments into its partitions.
    Drain { table: usize },
    /// The next job of the drain in progress.
    DrainNext,
}

/// The background merge due next: a drain of the table whose upper segments are the largest
/// share of its partitions, among those due by bytes ([`drain_due`]); otherwise the tiered
/// rule's run within `budget` bytes in the table with the most upper segments, among those
/// where it merges at least two; otherwise a drain of the table with the most upper segments,
/// among those with more than MAX_SEGMENTS_PER_TABLE of them (their segments are too large
/// for the budget to merge, so only a drain can take them).
fn next_background_merge(tables: &[Shape], budget: u64) -> Option<Plan> {
    drain_due(tables)
        .or_else(|| tiered_background_merge(tables, budget))
        .or_else(|| {
            let (table, _) = tables
                .iter()
                .enumerate()
                .filter(|(_, s)| s.upper.len() > MAX_SEGMENTS_PER_TABLE)
                .max_by_key(|(i, s)| (s.upper.len(), std::cmp::Reverse(*i)))?;
            Some(Plan::Drain { table })
        })
}

/// The tiered part of [`next_background_merge`] (upper segments only, at most `budget` bytes
/// in all).
fn tiered_background_merge(tables: &[Shape], budget: u64) -> Option<Plan> {
    // (table index, segments to merge, the table's upper segment count)
    let mut best: Option<(usize, usize, usize)> = None;
    for (i, shape) in tables.iter().enumerate() {
        let lens = &shape.upper;
        let Some((&first, rest)) = lens.split_first() else {
            continue;
        };
        let n = tiered_count(
            first,
            rest,
            rest.len(),
            u64::MAX,
            (MAX_SEGMENTS_PER_TABLE, u64::MAX),
        );
        // The longest run the rule takes that stays within the budget.
        let mut total = first;
        let within = rest
            .iter()
            .take(n)
            .take_while(|&&len| {
                total = total.saturating_add(len);
                total <= budget
            })
            .count();
        if within >= 1 && best.is_none_or(|(_, _, len)| lens.len() > len) {
            best = Some((i, within + 1, lens.len()));
        }
    }
    best.map(|(table, n, _)| Plan::Tiered { table, n })
}

/// The table to drain by bytes, if any: among those whose upper segments hold at least
/// 1/MERGE_RATIO of their partitions' bytes (the tiered rule's step, for young tables), or at
/// least 1/SPACE_RATIO of them and SPACE_MIN_BYTES (the space rule, which drops what the upper
/// segments delete or overwrite), the one where that share is largest.
fn drain_due(tables: &[Shape]) -> Option<Plan> {
    // (table index, upper bytes, base bytes)
    let mut best: Option<(usize, u64, u64)> = None;
    for (i, shape) in tables.iter().enumerate() {
        let upper: u64 = shape.upper.iter().sum();
        let base = shape.base;
        let due = upper > 0
            && (upper.saturating_mul(MERGE_RATIO) >= base
                || (upper >= SPACE_MIN_BYTES && upper.saturating_mul(SPACE_RATIO) >= base));
        // upper / base > best_upper / best_base, without dividing.
        let larger = |&(_, u, b): &(usize, u64, u64)| {
            u128::from(upper) * u128::from(b) > u128::from(u) * u128::from(base)
        };
        if due && best.as_ref().is_none_or(larger) {
            best = Some((i, upper, base));
        }
    }
    best.map(|(table, _, _)| Plan::Drain { table })
}

/// How many partitions (file lengths `lens`, in key order) one drain job takes from the first:
/// while their bytes stay within `job_bytes`, and at least one.
pub(super) fn drain_job_len(lens: &[u64], job_bytes: u64) -> usize {
    let mut total = 0u64;
    let mut n = 0;
    for &len in lens {
        total = total.saturating_add(len);
        if n > 0 && total > job_bytes {
            break;
        }
        n += 1;
    }
    n
}

/// The tiered merge rule: how many of the newest segments (file lengths `lens`) to merge,
/// given `acc` bytes gathered so far. The next older segment joins while the data gathered
/// is at least 1/MERGE_RATIO of its size and the total stays within `budget`, or while more
/// than `max_segments` would remain and the total stays within `forced_cap`
/// (`(max_segments, forced_cap)`). At most `free` segments join.
fn tiered_count(
    mut acc: u64,
    lens: &[u64],
    free: usize,
    budget: u64,
    (max_segments, forced_cap): (usize, u64),
) -> usize {
    let mut n = 0;
    for &len in lens.iter().take(free) {
        let too_many = lens.len() - n >= max_segments && acc + len <= forced_cap;
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
        assert_eq!(commit_merge_count(Merges::Inline, 100, &lens, 3), 2);
        // A larger first segment stops the run at once: the memtable becomes its own segment.
        assert_eq!(commit_merge_count(Merges::Inline, 100, &[201, 10], 2), 0);
        // Segments a background merge reads (beyond `free`) never join.
        assert_eq!(commit_merge_count(Merges::Inline, 100, &lens, 1), 1);
    }

    #[test]
    fn background_commits_stay_within_their_budget_until_a_table_has_too_many_segments() {
        // Inline merges the 900-byte segment; in the background mode it is over 4 × 300.
        let lens = [300, 900];
        assert_eq!(commit_merge_count(Merges::Inline, 300, &lens, 2), 2);
        assert_eq!(commit_merge_count(Merges::Background, 300, &lens, 2), 1);
        // With the hard limit reached, a commit merges even what the budget excludes.
        let many = vec![1_000_000; HARD_MAX_SEGMENTS_PER_TABLE];
        assert_eq!(
            commit_merge_count(Merges::Background, 1, &many, many.len()),
            1
        );
        let too_many = vec![1_000_000; HARD_MAX_SEGMENTS_PER_TABLE + 2];
        assert_eq!(
            commit_merge_count(Merges::Background, 1, &too_many, too_many.len()),
            3
        );
        // Not past FORCED_COMMIT_MERGE_BYTES: large segments wait for the background thread,
        // whatever their count; inline commits still merge them.
        let large = vec![40 << 20; HARD_MAX_SEGMENTS_PER_TABLE + 2];
        assert_eq!(
            commit_merge_count(Merges::Background, 1, &large, large.len()),
            1
        );
        let huge = vec![100 << 20; HARD_MAX_SEGMENTS_PER_TABLE + 2];
        assert_eq!(
            commit_merge_count(Merges::Background, 1, &huge, huge.len()),
            0
        );
        assert_eq!(
            commit_merge_count(Merges::Inline, 1, &huge, huge.len()),
            huge.len()
        );
    }

    /// Shapes of tables with huge partitions (no drain due), for the tiered rule.
    fn uppers(tables: &[Vec<u64>]) -> Vec<Shape> {
        tables
            .iter()
            .map(|upper| Shape {
                upper: upper.clone(),
                base: 1 << 50,
            })
            .collect()
    }

    #[test]
    fn the_background_merges_the_table_with_the_most_segments_among_those_due() {
        let tables = vec![
            vec![100, 150],           // due: 2 × 100 ≥ 150
            vec![10, 1_000, 2_000],   // not due: 20 < 1,000
            vec![50, 60, 200, 5_000], // due, and the most segments: 50+60, +200, stops at 5,000
            vec![],                   // empty tables are skipped
        ];
        let tiered = |table, n| Some(Plan::Tiered { table, n });
        assert_eq!(
            next_background_merge(&uppers(&tables), u64::MAX),
            tiered(2, 3)
        );
        assert_eq!(
            next_background_merge(&uppers(&tables[..2]), u64::MAX),
            tiered(0, 2)
        );
        assert_eq!(
            next_background_merge(&uppers(&[vec![10, 1_000], vec![7]]), u64::MAX),
            None
        );
        // Over MAX_SEGMENTS_PER_TABLE the rule merges even segments that are not due: with
        // one segment fewer nothing is due here, with one more the two newest are merged.
        let table = |n: usize| {
            let mut lens = vec![1, 1_000];
            lens.extend(std::iter::repeat_n(100_000, n - 2));
            uppers(&[lens])
        };
        assert_eq!(
            next_background_merge(&table(MAX_SEGMENTS_PER_TABLE), u64::MAX),
            None
        );
        assert_eq!(
            next_background_merge(&table(MAX_SEGMENTS_PER_TABLE + 1), u64::MAX),
            tiered(0, 2)
        );
    }

    #[test]
    fn a_table_is_drained_once_its_upper_segments_reach_half_or_a_large_quarter_of_its_partitions()
    {
        const M: u64 = 1 << 20;
        let shape = |upper: &[u64], base| Shape {
            upper: upper.to_vec(),
            base,
        };
        // Upper 16 MiB × 4 < 80 MiB, and 2 × 4 MiB < 12 MiB: nothing is due.
        let none = shape(&[4 * M, 12 * M], 80 * M);
        assert_eq!(
            next_background_merge(std::slice::from_ref(&none), u64::MAX),
            None
        );
        // Upper 20 MiB × 4 ≥ 80 MiB: drained, although the tiered rule has nothing to do.
        let space = shape(&[8 * M, 12 * M], 80 * M);
        // A tiered merge due in a table with more segments: 2 × 10 ≥ 15, then 2 × 25 < 100.
        let tiered = shape(&[10, 15, 100], 1_000_000);
        let drain = |table| Some(Plan::Drain { table });
        let tables = [none.clone(), space.clone(), tiered.clone()];
        assert_eq!(next_background_merge(&tables, u64::MAX), drain(1));
        assert_eq!(
            next_background_merge(&[none, tiered], u64::MAX),
            Some(Plan::Tiered { table: 1, n: 2 })
        );
        // Of two tables due, the one whose upper segments are the larger share.
        let larger = shape(&[30 * M], 80 * M);
        assert_eq!(next_background_merge(&[space, larger], u64::MAX), drain(1));
        // A small table is drained once its upper segments reach half its partitions (the
        // tiered rule's step); below that, 1 MiB × 4 ≥ 3 MiB is too little for the space rule.
        assert_eq!(next_background_merge(&[shape(&[M], 3 * M)], u64::MAX), None);
        assert_eq!(
            next_background_merge(&[shape(&[M], 2 * M)], u64::MAX),
            drain(0)
        );
        // Nothing above the partitions: nothing to drain.
        assert_eq!(next_background_merge(&[shape(&[], 0)], u64::MAX), None);
    }

    #[test]
    fn background_tiered_merges_stay_within_the_budget_and_too_many_large_segments_are_drained() {
        let shape = |upper: &[u64]| Shape {
            upper: upper.to_vec(),
            base: 1 << 50,
        };
        // The rule would take all three (100, +150, +300); the budget of 300 stops at two.
        let three = shape(&[100, 150, 300, 10_000]);
        assert_eq!(
            next_background_merge(std::slice::from_ref(&three), u64::MAX),
            Some(Plan::Tiered { table: 0, n: 3 })
        );
        assert_eq!(
            next_background_merge(std::slice::from_ref(&three), 300),
            Some(Plan::Tiered { table: 0, n: 2 })
        );
        // Segments each at the budget: no tiered merge fits; with more than
        // MAX_SEGMENTS_PER_TABLE of them the table is drained instead.
        let full = |n| shape(&vec![300; n]);
        assert_eq!(
            next_background_merge(&[full(MAX_SEGMENTS_PER_TABLE)], 300),
            None
        );
        assert_eq!(
            next_background_merge(
                &[
                    full(MAX_SEGMENTS_PER_TABLE + 1),
                    full(MAX_SEGMENTS_PER_TABLE + 2)
                ],
                300
            ),
            Some(Plan::Drain { table: 1 })
        );
    }

    #[test]
    fn a_drain_job_takes_partitions_up_to_its_budget_and_at_least_one() {
        assert_eq!(drain_job_len(&[100, 100, 100], 250), 2);
        assert_eq!(drain_job_len(&[100, 100, 100], 300), 3);
        assert_eq!(drain_job_len(&[1_000, 10], 250), 1);
        assert_eq!(drain_job_len(&[], 250), 0);
    }
}
