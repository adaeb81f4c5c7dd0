//! Queued attestations with their hashes, the batch built from them (validation,
//! de-duplication, grouping by validator chunk: `docs/background.md` §1.4 steps 2, 3 and 5), and
//! the block queue.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use parking_lot::Mutex;

use super::config::Config;
use super::keys::MAX_ATTESTER_VALIDATOR_INDEX;
use super::types::{Hash256, IndexedAttestation, SignedBeaconBlockHeader};

/// An attestation with the two hashes Lighthouse computes at enqueue time (`docs/background.md`
/// §1.3).
///
/// The fields are private so that the hashes always match the attestation: the only
/// constructor computes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttesterRecord {
    /// The attestation as given (its signature is never verified).
    pub(crate) attestation: IndexedAttestation,
    /// `attestation_data_hash`: tree-hash root of `data`.
    pub(crate) data_hash: Hash256,
    /// `indexed_attestation_hash`: tree-hash root of the indexed attestation in Electra form.
    pub(crate) indexed_hash: Hash256,
}

impl AttesterRecord {
    /// Compute both hashes.
    pub fn new(attestation: IndexedAttestation) -> Self {
        let data_hash = attestation.data_root();
        let indexed_hash = attestation.indexed_root();
        Self {
            attestation,
            data_hash,
            indexed_hash,
        }
    }

    /// The attestation.
    pub fn attestation(&self) -> &IndexedAttestation {
        &self.attestation
    }

    /// `attestation_data_hash`: tree-hash root of `data` (the de-duplication key and the value
    /// cached in the LRU).
    pub fn data_hash(&self) -> Hash256 {
        self.data_hash
    }

    /// `indexed_attestation_hash`: the key suffix in `indexed_attestation_ids`.
    pub fn indexed_hash(&self) -> Hash256 {
        self.indexed_hash
    }

    /// Source epoch.
    pub fn source(&self) -> u64 {
        self.attestation.data.source.epoch
    }

    /// Target epoch.
    pub fn target(&self) -> u64 {
        self.attestation.data.target.epoch
    }

    /// The attesting indices.
    pub fn indices(&self) -> &[u64] {
        &self.attestation.attesting_indices
    }
}

/// Attestations waiting for the next batch, in arrival order.
#[derive(Debug, Default)]
pub(crate) struct AttestationQueue {
    queue: Mutex<Vec<Arc<AttesterRecord>>>,
}

impl AttestationQueue {
    pub(crate) fn push(&self, record: Arc<AttesterRecord>) {
        self.queue.lock().push(record);
    }

    pub(crate) fn extend(&self, records: Vec<Arc<AttesterRecord>>) {
        self.queue.lock().extend(records);
    }

    pub(crate) fn dequeue(&self) -> Vec<Arc<AttesterRecord>> {
        std::mem::take(&mut *self.queue.lock())
    }

    pub(crate) fn len(&self) -> usize {
        self.queue.lock().len()
    }
}

/// Distinct block headers waiting for the next batch. Duplicates are dropped; the rest keep
/// arrival order (Lighthouse's `HashSet` order is arbitrary; arrival order makes runs
/// reproducible).
#[derive(Debug, Default)]
pub(crate) struct BlockQueue {
    inner: Mutex<(
        Vec<SignedBeaconBlockHeader>,
        HashSet<SignedBeaconBlockHeader>,
    )>,
}

impl BlockQueue {
    pub(crate) fn push(&self, header: SignedBeaconBlockHeader) {
        let mut guard = self.inner.lock();
        let (order, seen) = &mut *guard;
        if seen.insert(header) {
            order.push(header);
        }
    }

    pub(crate) fn dequeue(&self) -> Vec<SignedBeaconBlockHeader> {
        let mut guard = self.inner.lock();
        guard.1.clear();
        std::mem::take(&mut guard.0)
    }

    pub(crate) fn len(&self) -> usize {
        self.inner.lock().0.len()
    }
}

/// What validation decided for one dequeued attestation (`docs/background.md` §1.4 step 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validity {
    /// Process it now.
    Valid,
    /// Its target is in the future: re-queue it.
    Deferred,
    /// Source after target, too old for the history window, or a validator index beyond the
    /// registry limit (2^40): drop it.
    Invalid,
}

/// Classify one attestation at current epoch `current_epoch`. The drop rules are tested before
/// the defer rule.
///
/// Beyond Lighthouse: an attestation naming a validator index ≥ 2^40 (the registry limit, and the
/// width of the `attesters` key field) is dropped here instead of panicking in the key writer
/// later.
pub fn classify(record: &AttesterRecord, current_epoch: u64, config: &Config) -> Validity {
    let source = record.source();
    let target = record.target();
    if source > target
        || source.saturating_add(config.history_length_u64()) <= current_epoch
        || record
            .indices()
            .iter()
            .any(|&v| v > MAX_ATTESTER_VALIDATOR_INDEX)
    {
        Validity::Invalid
    } else if target > current_epoch {
        Validity::Deferred
    } else {
        Validity::Valid
    }
}

/// The de-duplicated batch (`docs/background.md` §1.4 step 3): for each `(validator, data_hash)`
/// the record with the most attesting indices (the earliest on a tie).
#[derive(Debug, Default)]
pub(crate) struct AttestationBatch {
    /// `(validator, data_hash)` → position in `records`.
    pub(crate) attesters: BTreeMap<(u64, Hash256), usize>,
    /// The valid records, in queue order.
    pub(crate) records: Vec<Arc<AttesterRecord>>,
}

impl AttestationBatch {
    pub(crate) fn new(valid: Vec<Arc<AttesterRecord>>) -> Self {
        let mut attesters: BTreeMap<(u64, Hash256), usize> = BTreeMap::new();
        for (pos, record) in valid.iter().enumerate() {
            for &v in record.indices() {
                attesters
                    .entry((v, record.data_hash))
                    .and_modify(|held| {
                        if record.indices().len() > valid[*held].indices().len() {
                            *held = pos;
                        }
                    })
                    .or_insert(pos);
            }
        }
        Self {
            attesters,
            records: valid,
        }
    }

    /// Positions of the records still referenced by some map entry, in queue order.
    pub(crate) fn surviving(&self) -> Vec<usize> {
        let mut alive = vec![false; self.records.len()];
        for &pos in self.attesters.values() {
            if let Some(flag) = alive.get_mut(pos) {
                *flag = true;
            }
        }
        alive
            .iter()
            .enumerate()
            .filter_map(|(pos, &a)| a.then_some(pos))
            .collect()
    }

    /// Subqueues per validator chunk (`docs/background.md` §1.4 step 5): entry `vci` lists record
    /// positions in ascending `(validator, data_hash)` order, once per validator of the record in
    /// that chunk. Empty chunks below the highest one are included.
    pub(crate) fn group_by_validator_chunk(&self, config: &Config) -> Vec<Vec<usize>> {
        let mut subqueues: Vec<Vec<usize>> = Vec::new();
        for (&(v, _), &pos) in &self.attesters {
            // Validation capped indices at 2^40, so this fits in a usize on 64-bit targets.
            let vci = config.validator_chunk_index(v) as usize;
            if subqueues.len() <= vci {
                subqueues.resize_with(vci + 1, Vec::new);
            }
            if let Some(q) = subqueues.get_mut(vci) {
                q.push(pos);
            }
        }
        subqueues
    }
}
