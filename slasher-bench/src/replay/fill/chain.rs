//! The regular chain a fill writes: every slot has its block and every validator attests once
//! an epoch, on time, so that a database after thousands of its batches can be computed
//! directly (`super::write`) and also replayed batch by batch ([`RegularChain::batches`]).
//!
//! - Committees: the spec's shuffle with [`crate::fixtures::shuffle::synthetic_seed`], as `generate` uses.
//! - Slot `t` has one header: proposer drawn from the seed, `parent_root` the previous header's
//!   tree-hash root, state and body roots derived from the seed.
//! - The members of slot `t`'s committees form one Electra aggregate (`index` 0) voting for the
//!   head at `t`, source `(e − 1, checkpoint)` and target `(e, checkpoint)`, where a checkpoint is
//!   the root of the header at its epoch's first slot (derived from the seed before the chain).
//!   It is included in the batch of slot `t + 1`; the last slot's aggregate is never included.
//! - Nothing is slashable: no validator votes twice for a target, and no vote surrounds another.

use crate::fixtures::file::Batch;
use crate::fixtures::generate::{derived_root, SplitMix64};
use crate::fixtures::shuffle::{EpochCommittees, SLOTS_PER_EPOCH};
use slasher_adapters::slasher::types::{
    AttestationData, BeaconBlockHeader, Checkpoint, Hash256, IndexedAttestation,
    SignedBeaconBlockHeader,
};
use tree_hash::TreeHash;

use super::error::FillError;

/// The seed `replay --fill-epochs` and `fill` use unless told otherwise.
pub const DEFAULT_SEED: u64 = 1;

/// A regular chain of `epochs` epochs that ends just before `end_epoch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegularChain {
    /// Active validators `0..validators`.
    pub validators: u64,
    /// The first epoch.
    pub first_epoch: u64,
    /// How many epochs.
    pub epochs: u64,
    /// Seed of the proposers and roots.
    pub seed: u64,
}

impl RegularChain {
    /// The chain of `epochs` epochs before `end_epoch` (so that a fixture generated with
    /// `--start-epoch end_epoch` follows it).
    ///
    /// # Errors
    /// [`FillError::Invalid`] for fewer than 64 validators, no epochs, or an epoch range that
    /// does not fit.
    pub fn ending_at(
        validators: u64,
        end_epoch: u64,
        epochs: u64,
        seed: u64,
    ) -> Result<Self, FillError> {
        if !(64..=u64::from(u32::MAX)).contains(&validators) {
            return Err(FillError::Invalid(format!(
                "--validators {validators}: need 64 to 2^32 - 1"
            )));
        }
        if epochs == 0 {
            return Err(FillError::Invalid("--epochs must be at least 1".into()));
        }
        let first_epoch = end_epoch.checked_sub(epochs).ok_or_else(|| {
            FillError::Invalid(format!(
                "--epochs {epochs} reaches before genesis from --end-epoch {end_epoch}"
            ))
        })?;
        if end_epoch.checked_mul(SLOTS_PER_EPOCH).is_none() {
            return Err(FillError::Invalid(format!(
                "--end-epoch {end_epoch} overflows the slot number"
            )));
        }
        Ok(Self {
            validators,
            first_epoch,
            epochs,
            seed,
        })
    }

    /// The last epoch (the current epoch of the last batch).
    pub fn last_epoch(&self) -> u64 {
        self.first_epoch + self.epochs - 1
    }

    /// The first slot.
    pub fn first_slot(&self) -> u64 {
        self.first_epoch * SLOTS_PER_EPOCH
    }

    /// The last slot.
    pub fn last_slot(&self) -> u64 {
        self.last_epoch() * SLOTS_PER_EPOCH + SLOTS_PER_EPOCH - 1
    }

    /// The chain's batches, one per slot, in order.
    pub fn batches(&self) -> ChainWalk {
        ChainWalk {
            chain: *self,
            slot: self.first_slot(),
            rng: SplitMix64(self.seed),
            head_root: derived_root("regular genesis parent", self.seed, &[self.first_slot()]),
            checkpoints: [
                self.pre_chain_checkpoint(self.first_epoch.saturating_sub(1)),
                self.pre_chain_checkpoint(self.first_epoch),
            ],
            committees: None,
            pending: None,
        }
    }

    fn pre_chain_checkpoint(&self, epoch: u64) -> Checkpoint {
        Checkpoint {
            epoch,
            root: derived_root("regular pre-chain checkpoint", self.seed, &[epoch]),
        }
    }
}

/// The batches of a [`RegularChain`], with the committees of the epoch being walked.
#[derive(Debug)]
pub struct ChainWalk {
    chain: RegularChain,
    /// The next slot.
    slot: u64,
    rng: SplitMix64,
    head_root: Hash256,
    /// The checkpoints of the previous and the current epoch.
    checkpoints: [Checkpoint; 2],
    committees: Option<EpochCommittees>,
    /// The aggregate of the previous slot, included in the next batch.
    pending: Option<IndexedAttestation>,
}

impl ChainWalk {
    /// The committees of the epoch of the batch returned last.
    pub fn committees(&self) -> Option<&EpochCommittees> {
        self.committees.as_ref()
    }

    fn next_batch(&mut self) -> Result<Batch, FillError> {
        let chain = self.chain;
        let slot = self.slot;
        let epoch = slot / SLOTS_PER_EPOCH;
        let message = BeaconBlockHeader {
            slot,
            proposer_index: self.rng.below(chain.validators),
            parent_root: self.head_root,
            state_root: derived_root("regular state", chain.seed, &[slot]),
            body_root: derived_root("regular body", chain.seed, &[slot]),
        };
        self.head_root = message.tree_hash_root();
        if slot % SLOTS_PER_EPOCH == 0 {
            let current = Checkpoint {
                epoch,
                root: self.head_root,
            };
            self.checkpoints = if slot == chain.first_slot() {
                [chain.pre_chain_checkpoint(epoch.saturating_sub(1)), current]
            } else {
                [self.checkpoints[1], current]
            };
            self.committees = Some(EpochCommittees::synthetic(epoch, chain.validators));
        }
        let batch = Batch {
            index: slot - chain.first_slot(),
            slot,
            current_epoch: epoch,
            headers: vec![SignedBeaconBlockHeader {
                message,
                signature: [0; 96],
            }],
            attestations: self.pending.take().into_iter().collect(),
        };
        let committees = self
            .committees
            .as_ref()
            .ok_or_else(|| FillError::Invalid("internal: no committees".into()))?;
        let mut members: Vec<u64> = (0..committees.committees_per_slot)
            .filter_map(|index| committees.committee(slot, index))
            .flatten()
            .copied()
            .collect();
        members.sort_unstable();
        let data = AttestationData {
            slot,
            index: 0,
            beacon_block_root: self.head_root,
            source: self.checkpoints[0],
            target: self.checkpoints[1],
        };
        self.pending = Some(
            IndexedAttestation::new(members, data, [0; 96])
                .map_err(|e| FillError::Invalid(format!("aggregate too large: {e:?}")))?,
        );
        self.slot += 1;
        Ok(batch)
    }
}

impl Iterator for ChainWalk {
    type Item = Result<Batch, FillError>;

    fn next(&mut self) -> Option<Self::Item> {
        (self.slot <= self.chain.last_slot()).then(|| self.next_batch())
    }
}
