//! Background merge work in flight (design.md §3.1): the job running now, and the drain of a
//! table's upper segments into its partitions, which takes several jobs (`merge.rs` starts,
//! and installs them, `worker.rs` runs them).

use super::segment_writer::Output;

/// A background merge writing `compact/<seq>.seg` files, one at a time; `H` is the worker's
/// handle on it (`worker::Pending`, named by the users so that this file needs nothing of the
/// worker's).
#[derive(Debug)]
pub(super) struct MergeJob<H> {
    pub(super) table: usize,
    /// The first (newest) segment of the table the job reads: it and every older one stay
    /// out of the commits' merges until the job is swapped in.
    pub(super) first_input: u64,
    pub(super) handle: H,
}

/// A drain of one table's upper segments (those above its partitions) into the partitions,
/// a key range at a time: each job merges the drained segments' entries in its range with the
/// partitions there and replaces those partitions; the last one also retires the drained
/// segments. Until then they stay in the table (newer than every partition, so a reader sees
/// the same values either way) and out of the commits' merges.
#[derive(Debug, Clone)]
pub(super) struct Drain {
    pub(super) table: usize,
    /// The drained segments' sequence numbers, newest first (a contiguous run of the table's
    /// segments, right above its partitions).
    pub(super) upper: Vec<u64>,
    /// Every key below this is merged into the partitions (`None`: nothing yet).
    pub(super) cursor: Option<Vec<u8>>,
}

/// What a finished job produced.
#[derive(Debug)]
pub(super) struct Merged {
    /// The segments the outputs replace: a contiguous run of the table's, in table order.
    /// Empty for a drain job that only retires the drained segments, or whose range holds no
    /// partition: its outputs, all above every partition's keys, then go at the table's end.
    pub(super) replaced: Vec<u64>,
    /// The files written, in table order (a drain job's in ascending key order; none when
    /// nothing survived).
    pub(super) outputs: Vec<Output>,
    /// What becomes of the drain this job belongs to.
    pub(super) drain: DrainStep,
}

/// A job's effect on its drain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum DrainStep {
    /// Not a drain job (a tiered merge of upper segments).
    None,
    /// Keys below this are now in the partitions; the drain goes on from it.
    Continues(Vec<u8>),
    /// The drain is complete: the drained segments are retired with this job's install.
    Done,
}
