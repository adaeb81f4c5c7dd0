//! The nine slasher tables, with Lighthouse's names (`slasher/src/database.rs`).
//!
//! Key layouts (all integers big-endian, so byte order is numeric order):
//! see `docs/background.md` §1.1 and the per-constant docs below.

/// `id` u48 BE (6 bytes) → SSZ `IndexedAttestation` (228 + 8n bytes).
pub const INDEXED_ATTESTATION_DB: &str = "indexed_attestations";
/// `target_epoch` u64 BE ‖ `indexed_attestation_hash` (40 bytes) → id u48 BE.
pub const INDEXED_ATTESTATION_ID_DB: &str = "indexed_attestation_ids";
/// `target_epoch mod H` u16 BE ‖ `validator_index` u40 BE (7 bytes) → id u48 BE (0 = null).
pub const ATTESTERS_DB: &str = "attesters";
/// `validator_index` u64 BE → SSZ u64 (LE): largest target stored.
pub const ATTESTERS_MAX_TARGETS_DB: &str = "attesters_max_targets";
/// `disk_key` u64 BE → zlib(bincode(`Vec<u16>` of C·K cells)).
pub const MIN_TARGETS_DB: &str = "min_targets";
/// `disk_key` u64 BE → zlib(bincode(`Vec<u16>` of C·K cells)).
pub const MAX_TARGETS_DB: &str = "max_targets";
/// `validator_index` u64 BE → SSZ u64 (LE): epoch of the last array update.
pub const CURRENT_EPOCHS_DB: &str = "current_epochs";
/// `slot` u64 BE ‖ `proposer_index` u64 BE → SSZ `SignedBeaconBlockHeader` (208 bytes).
pub const PROPOSERS_DB: &str = "proposers";
/// `[0x00]` → schema version (bincode u64); `[0x01]` → bincode `DiskConfig` (24 bytes).
pub const METADATA_DB: &str = "metadata";

/// The number of tables, Lighthouse's `MAX_NUM_DBS`.
pub const MAX_NUM_DBS: usize = 9;

/// All table names, in the order `OpenDatabases` lists them.
pub const TABLE_NAMES: [&str; MAX_NUM_DBS] = [
    INDEXED_ATTESTATION_DB,
    INDEXED_ATTESTATION_ID_DB,
    ATTESTERS_DB,
    ATTESTERS_MAX_TARGETS_DB,
    MIN_TARGETS_DB,
    MAX_TARGETS_DB,
    CURRENT_EPOCHS_DB,
    PROPOSERS_DB,
    METADATA_DB,
];

/// The nine open tables (Lighthouse's `OpenDatabases`), generic over the backend's handle.
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)]
pub struct OpenDatabases<D> {
    pub indexed_attestation_db: D,
    pub indexed_attestation_id_db: D,
    pub attesters_db: D,
    pub attesters_max_targets_db: D,
    pub min_targets_db: D,
    pub max_targets_db: D,
    pub current_epochs_db: D,
    pub proposers_db: D,
    pub metadata_db: D,
}

impl<D: Copy> OpenDatabases<D> {
    /// Build from a function that opens one table by name.
    ///
    /// # Errors
    /// The first error `open` returns.
    pub fn try_from_fn<E>(mut open: impl FnMut(&'static str) -> Result<D, E>) -> Result<Self, E> {
        Ok(Self {
            indexed_attestation_db: open(INDEXED_ATTESTATION_DB)?,
            indexed_attestation_id_db: open(INDEXED_ATTESTATION_ID_DB)?,
            attesters_db: open(ATTESTERS_DB)?,
            attesters_max_targets_db: open(ATTESTERS_MAX_TARGETS_DB)?,
            min_targets_db: open(MIN_TARGETS_DB)?,
            max_targets_db: open(MAX_TARGETS_DB)?,
            current_epochs_db: open(CURRENT_EPOCHS_DB)?,
            proposers_db: open(PROPOSERS_DB)?,
            metadata_db: open(METADATA_DB)?,
        })
    }

    /// The nine handles, in [`TABLE_NAMES`] order.
    pub fn all(&self) -> [D; MAX_NUM_DBS] {
        [
            self.indexed_attestation_db,
            self.indexed_attestation_id_db,
            self.attesters_db,
            self.attesters_max_targets_db,
            self.min_targets_db,
            self.max_targets_db,
            self.current_epochs_db,
            self.proposers_db,
            self.metadata_db,
        ]
    }
}
