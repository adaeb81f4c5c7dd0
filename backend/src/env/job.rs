//! A background merge in flight (design.md §3.1): what the writer keeps of it until its result
//! is swapped in (`merge.rs` starts, runs and installs it).

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::error::Result;
use crate::segment::Segment;

/// A background merge of a contiguous run of one table's segments into `compact/<seq>.seg`.
#[derive(Debug)]
pub(super) struct MergeJob {
    pub(super) table: usize,
    /// The merged segments' sequence numbers, newest first.
    pub(super) inputs: Vec<u64>,
    pub(super) seq: u64,
    pub(super) work_path: PathBuf,
    pub(super) handle: JoinHandle<Result<Merged>>,
}

impl MergeJob {
    /// Where the merge's inputs start in `segments`, if they are still there as one run.
    pub(super) fn position_in(&self, segments: &[Arc<Segment>]) -> Option<usize> {
        let first = *self.inputs.first()?;
        let at = segments.iter().position(|s| s.seq == first)?;
        let run = segments.get(at..at + self.inputs.len())?;
        run.iter()
            .zip(&self.inputs)
            .all(|(s, &seq)| s.seq == seq)
            .then_some(at)
    }
}

/// What a finished background merge produced.
#[derive(Debug)]
pub(super) struct Merged {
    /// 0 when nothing survived (only tombstones): no file was written.
    pub(super) entries: u64,
    pub(super) file_len: u64,
}
