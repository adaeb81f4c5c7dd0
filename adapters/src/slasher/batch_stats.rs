//! Per-batch statistics (Lighthouse's `BatchStats`, `BlockStats`, `AttestationStats`) plus the
//! phase timings a benchmark reports.

use serde::Serialize;

/// What `process_queued` did with the blocks of one batch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BlockStats {
    /// Distinct headers dequeued (Lighthouse's `num_blocks`).
    pub num_processed: usize,
    /// Headers newly written to `proposers`.
    pub num_stored: usize,
    /// Proposer slashings found in this batch.
    pub num_slashings: usize,
}

/// What `process_queued` did with the attestations of one batch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AttestationStats {
    /// Attestations dequeued, before validation (Lighthouse's `num_attestations`).
    pub num_dequeued: usize,
    /// Attestations that passed validation and were processed in this batch.
    pub num_processed: usize,
    /// Attestations deferred (target in the future) and put back in the queue.
    pub num_deferred: usize,
    /// Attestations dropped (source after target, or too old for the history window).
    pub num_dropped: usize,
    /// Processed attestations that survived de-duplication.
    pub num_deduplicated: usize,
    /// Attestations newly written to `indexed_attestations` (the rest already had an id).
    pub num_stored: usize,
    /// Distinct attester slashings found in this batch (double votes and surrounds).
    pub num_slashings: usize,
    /// Of which double votes.
    pub num_double_votes: usize,
    /// Validator chunks processed (`highest attesting index / K + 1`, or 0).
    pub num_validator_chunks: usize,
    /// Min and max tiles written.
    pub num_tiles_written: usize,
}

/// Wall-clock time per phase of `process_queued`, in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BatchTimings {
    /// Beginning the write transaction (waiting for another writer included).
    pub begin_us: u64,
    /// Step 1: block headers.
    pub blocks_us: u64,
    /// Steps 2–4: validation, de-duplication and storing the indexed attestations.
    pub store_us: u64,
    /// Step 6a over all validator chunks: the double-vote pass.
    pub double_vote_us: u64,
    /// Step 6b over all validator chunks: min/max arrays and `current_epochs` puts.
    pub arrays_us: u64,
    /// Step 7: the commit alone.
    pub commit_us: u64,
    /// The whole call.
    pub total_us: u64,
}

/// Statistics of one `process_queued` call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BatchStats {
    /// The current epoch of the batch.
    pub current_epoch: u64,
    /// Blocks.
    pub block_stats: BlockStats,
    /// Attestations.
    pub attestation_stats: AttestationStats,
    /// Phase timings.
    pub timings: BatchTimings,
}

/// Statistics of one `prune_database` call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PruneStats {
    /// The current epoch passed in.
    pub current_epoch: u64,
    /// The oldest target epoch kept, `c + 1 − H` saturating at 0.
    pub min_epoch: u64,
    /// Block headers deleted from `proposers`.
    pub num_proposers_deleted: usize,
    /// Attestations deleted (from both `indexed_attestation_ids` and `indexed_attestations`).
    pub num_attestations_deleted: usize,
    /// Deletions, in microseconds.
    pub prune_us: u64,
    /// The commit alone, in microseconds.
    pub commit_us: u64,
}

/// Microseconds elapsed since `start`, saturating.
pub(crate) fn micros_since(start: std::time::Instant) -> u64 {
    u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX)
}
