//! Consensus types the slasher stores, with their standard SSZ encodings and tree-hash roots
//! (sizes and hashes summarised in `docs/background.md` §1.3). Mainnet preset.

use ssz_derive::{Decode, Encode};
use ssz_types::typenum::U131072;
use ssz_types::VariableList;
use tree_hash::TreeHash;
use tree_hash_derive::TreeHash;

/// A 32-byte SHA-256 root.
pub type Hash256 = tree_hash::Hash256;

/// A compressed BLS signature (96 bytes). The slasher never verifies signatures.
pub type SignatureBytes = [u8; 96];

/// `SLOTS_PER_EPOCH` of the mainnet preset.
pub const SLOTS_PER_EPOCH: u64 = 32;

/// `MAX_VALIDATORS_PER_COMMITTEE × MAX_COMMITTEES_PER_SLOT` on mainnet: the Electra list limit,
/// and the limit used by Lighthouse's `indexed_attestation_hash`.
pub type MaxValidatorsPerSlot = U131072;

/// `Checkpoint` (40 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Encode, Decode, TreeHash)]
pub struct Checkpoint {
    /// Epoch.
    pub epoch: u64,
    /// Block root.
    pub root: Hash256,
}

/// `AttestationData` (128 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Encode, Decode, TreeHash)]
pub struct AttestationData {
    /// Slot.
    pub slot: u64,
    /// Committee index (0 since Electra).
    pub index: u64,
    /// LMD GHOST vote.
    pub beacon_block_root: Hash256,
    /// FFG source.
    pub source: Checkpoint,
    /// FFG target.
    pub target: Checkpoint,
}

/// `IndexedAttestation` in its on-disk form, shared by Base and Electra (228 + 8n bytes). The
/// list limit is Electra's; SSZ does not encode the limit, so the bytes are the same for both.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Encode, Decode, TreeHash)]
pub struct IndexedAttestation {
    /// Validator indices, ascending for valid attestations.
    pub attesting_indices: VariableList<u64, MaxValidatorsPerSlot>,
    /// The attested data.
    pub data: AttestationData,
    /// Aggregate signature.
    pub signature: SignatureBytes,
}

impl IndexedAttestation {
    /// Build from plain parts.
    ///
    /// # Errors
    /// More than 131,072 indices.
    pub fn new(
        indices: Vec<u64>,
        data: AttestationData,
        signature: SignatureBytes,
    ) -> Result<Self, ssz_types::Error> {
        Ok(Self {
            attesting_indices: VariableList::new(indices)?,
            data,
            signature,
        })
    }

    /// Lighthouse's `attestation_data_hash`: the tree-hash root of `data` alone.
    pub fn data_root(&self) -> Hash256 {
        self.data.tree_hash_root()
    }

    /// Lighthouse's `indexed_attestation_hash`: the root of `IndexedAttestationHeader`
    /// {indices (limit 131,072), data root, signature}, which is this type's tree-hash root
    /// because the data field's leaf is exactly the data root.
    pub fn indexed_root(&self) -> Hash256 {
        self.tree_hash_root()
    }
}

/// `BeaconBlockHeader` (112 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Encode, Decode, TreeHash)]
pub struct BeaconBlockHeader {
    /// Slot.
    pub slot: u64,
    /// Proposer.
    pub proposer_index: u64,
    /// Parent root.
    pub parent_root: Hash256,
    /// State root.
    pub state_root: Hash256,
    /// Body root.
    pub body_root: Hash256,
}

/// `SignedBeaconBlockHeader` (208 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Encode, Decode, TreeHash)]
pub struct SignedBeaconBlockHeader {
    /// The header.
    pub message: BeaconBlockHeader,
    /// Proposer signature.
    pub signature: SignatureBytes,
}

/// Two attestations by overlapping validators that are slashable together.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Encode, Decode, TreeHash)]
pub struct AttesterSlashing {
    /// The first (for surrounds: as Lighthouse orders them).
    pub attestation_1: IndexedAttestation,
    /// The second.
    pub attestation_2: IndexedAttestation,
}

/// Two different headers for the same slot and proposer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Encode, Decode, TreeHash)]
pub struct ProposerSlashing {
    /// The stored header.
    pub signed_header_1: SignedBeaconBlockHeader,
    /// The new header.
    pub signed_header_2: SignedBeaconBlockHeader,
}
