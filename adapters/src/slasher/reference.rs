//! A naive in-memory reference slasher: the oracle for differential tests.
//!
//! It mirrors the queue semantics of [`super::Slasher`] exactly (validation, dropping and
//! deferral at each `process_queued`), then compares every pair of processed attestations of each
//! validator: a **double vote** is two attestations with the same target epoch and different
//! data; a **surround** is `a.source < b.source && b.target < a.target`, either way round. It
//! knows nothing of tiles, ids, pruning or the history window beyond the validation rules.
//!
//! What it predicts is the set of **slashed validators**. The real slasher reports one slashing
//! per conflict it meets, not every slashable pair: for example, once a validator has
//! double-voted, a later surround may be classified as "already double-voted" and not reported
//! again. The set of validators appearing in both attestations of some reported slashing is
//! nonetheless the same as the set of validators with at least one slashable pair among their
//! processed attestations, provided the current epoch never decreases and `prune_database` is
//! never called with an epoch later than the next batch's.

use std::collections::{BTreeMap, BTreeSet};

use super::keys::MAX_ATTESTER_VALIDATOR_INDEX;
use super::types::{AttestationData, AttesterSlashing, IndexedAttestation};

/// Whether `a` and `b` (by the same validator) are slashable together.
pub fn is_slashable_pair(a: &AttestationData, b: &AttestationData) -> bool {
    is_double_vote(a, b) || surrounds(a, b) || surrounds(b, a)
}

/// Same target epoch, different data.
pub fn is_double_vote(a: &AttestationData, b: &AttestationData) -> bool {
    a.target.epoch == b.target.epoch && a != b
}

/// `outer` surrounds `inner`.
pub fn surrounds(outer: &AttestationData, inner: &AttestationData) -> bool {
    outer.source.epoch < inner.source.epoch && inner.target.epoch < outer.target.epoch
}

/// The validators in both attestations of a slashing.
pub fn common_validators(slashing: &AttesterSlashing) -> BTreeSet<u64> {
    let first: BTreeSet<u64> = slashing
        .attestation_1
        .attesting_indices
        .iter()
        .copied()
        .collect();
    slashing
        .attestation_2
        .attesting_indices
        .iter()
        .copied()
        .filter(|v| first.contains(v))
        .collect()
}

/// Whether a reported slashing is genuine: a slashable pair with at least one common validator.
pub fn is_valid_slashing(slashing: &AttesterSlashing) -> bool {
    is_slashable_pair(&slashing.attestation_1.data, &slashing.attestation_2.data)
        && !common_validators(slashing).is_empty()
}

/// The validators slashed by a set of slashings.
pub fn slashed_validators<'a>(
    slashings: impl IntoIterator<Item = &'a AttesterSlashing>,
) -> BTreeSet<u64> {
    slashings.into_iter().flat_map(common_validators).collect()
}

/// The reference slasher.
#[derive(Debug, Clone)]
pub struct ReferenceSlasher {
    history_length: u64,
    queue: Vec<IndexedAttestation>,
    /// Distinct attestation data processed per validator.
    processed: BTreeMap<u64, Vec<AttestationData>>,
    slashed: BTreeSet<u64>,
}

impl ReferenceSlasher {
    /// A reference for history length H.
    pub fn new(history_length: u64) -> Self {
        Self {
            history_length,
            queue: Vec::new(),
            processed: BTreeMap::new(),
            slashed: BTreeSet::new(),
        }
    }

    /// Queue an attestation.
    pub fn accept_attestation(&mut self, attestation: IndexedAttestation) {
        self.queue.push(attestation);
    }

    /// Process the queue at `current_epoch` with the slasher's validation rules.
    pub fn process_queued(&mut self, current_epoch: u64) {
        let mut deferred = Vec::new();
        for attestation in std::mem::take(&mut self.queue) {
            let (source, target) = (attestation.data.source.epoch, attestation.data.target.epoch);
            if source > target
                || source.saturating_add(self.history_length) <= current_epoch
                || attestation
                    .attesting_indices
                    .iter()
                    .any(|&v| v > MAX_ATTESTER_VALIDATOR_INDEX)
            {
                continue;
            }
            if target > current_epoch {
                deferred.push(attestation);
                continue;
            }
            for &v in attestation.attesting_indices.iter() {
                let seen = self.processed.entry(v).or_default();
                if seen.contains(&attestation.data) {
                    continue;
                }
                if seen
                    .iter()
                    .any(|old| is_slashable_pair(old, &attestation.data))
                {
                    self.slashed.insert(v);
                }
                seen.push(attestation.data);
            }
        }
        self.queue = deferred;
    }

    /// Validators with at least one slashable pair among their processed attestations.
    pub fn slashed_validators(&self) -> &BTreeSet<u64> {
        &self.slashed
    }

    /// Attestations still queued (deferred).
    pub fn num_queued(&self) -> usize {
        self.queue.len()
    }
}
