//! Key and value encodings of the nine tables (`docs/background.md` §1.1). All key integers are
//! big-endian, so byte order is numeric order; "SSZ u64" values are little-endian.
//!
//! | Table | Key | Value |
//! |---|---|---|
//! | `indexed_attestations` | id u48 BE (6) | SSZ `IndexedAttestation` (228 + 8n) |
//! | `indexed_attestation_ids` | target u64 BE ‖ indexed-attestation hash (40) | id u48 BE (6) |
//! | `attesters` | (target mod H) u16 BE ‖ validator u40 BE (7) | id u48 BE (6), 0 = null |
//! | `attesters_max_targets` | validator u64 BE (8) | SSZ u64 LE (8) |
//! | `min_targets`, `max_targets` | disk key u64 BE (8) | zlib(bincode tile), see `array` |
//! | `current_epochs` | validator u64 BE (8) | SSZ u64 LE (8) |
//! | `proposers` | slot u64 BE ‖ proposer u64 BE (16) | SSZ `SignedBeaconBlockHeader` (208) |
//! | `metadata` | `[0x00]` / `[0x01]` | bincode u64 (8) / bincode `DiskConfig` (24) |

use ssz::{Decode, Encode};

use super::disk_config::DiskConfig;
use super::error::Error;
use super::types::{Hash256, IndexedAttestation, SignedBeaconBlockHeader};

/// Width of an indexed-attestation id.
pub const ID_LEN: usize = 6;
/// Ids are below 2^48.
pub const MAX_ID: u64 = (1 << 48) - 1;
/// Validator indices in `attesters` keys are below 2^40 (the registry limit).
pub const MAX_ATTESTER_VALIDATOR_INDEX: u64 = (1 << 40) - 1;
/// `metadata` key of the schema version.
pub const METADATA_SCHEMA_VERSION_KEY: [u8; 1] = [0x00];
/// `metadata` key of the on-disk geometry.
pub const METADATA_CONFIG_KEY: [u8; 1] = [0x01];
/// Length of the bincode `DiskConfig`.
pub const DISK_CONFIG_LEN: usize = 24;

/// An `indexed_attestations` key: a 48-bit id; 0 is the null id (no record).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IndexedAttestationId(u64);

impl IndexedAttestationId {
    /// The null id stored in `attesters` for skipped epochs.
    pub const NULL: IndexedAttestationId = IndexedAttestationId(0);

    /// An id, checking that it fits in 48 bits.
    ///
    /// # Errors
    /// [`Error::IndexedAttestationIdOutOfRange`].
    pub fn new(id: u64) -> Result<Self, Error> {
        if id > MAX_ID {
            return Err(Error::IndexedAttestationIdOutOfRange { id });
        }
        Ok(Self(id))
    }

    /// The numeric id.
    pub fn as_u64(self) -> u64 {
        self.0
    }

    /// Whether this is the null id.
    pub fn is_null(self) -> bool {
        self.0 == 0
    }

    /// The 6 big-endian bytes.
    pub fn to_bytes(self) -> [u8; ID_LEN] {
        let b = self.0.to_be_bytes();
        [b[2], b[3], b[4], b[5], b[6], b[7]]
    }

    /// Parse 6 big-endian bytes.
    ///
    /// # Errors
    /// [`Error::IndexedAttestationIdCorrupt`] for any other length.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        let six: [u8; ID_LEN] =
            bytes
                .try_into()
                .map_err(|_| Error::IndexedAttestationIdCorrupt {
                    length: bytes.len(),
                })?;
        let mut b = [0u8; 8];
        b[2..].copy_from_slice(&six);
        Ok(Self(u64::from_be_bytes(b)))
    }

    /// The id after this one, for allocation as `last_key + 1`.
    ///
    /// # Errors
    /// [`Error::IndexedAttestationIdOutOfRange`] when the 48-bit space is exhausted.
    pub fn next(self) -> Result<Self, Error> {
        Self::new(self.0.saturating_add(1))
    }
}

/// `indexed_attestation_ids` key: target epoch u64 BE ‖ 32-byte indexed-attestation hash.
pub fn indexed_attestation_id_key(target_epoch: u64, indexed_hash: &Hash256) -> [u8; 40] {
    let mut key = [0u8; 40];
    key[..8].copy_from_slice(&target_epoch.to_be_bytes());
    key[8..].copy_from_slice(indexed_hash.as_slice());
    key
}

/// The target epoch of an `indexed_attestation_ids` key.
///
/// # Errors
/// [`Error::Corrupted`] unless the key is 40 bytes.
pub fn target_epoch_of_id_key(key: &[u8]) -> Result<u64, Error> {
    if key.len() != 40 {
        return Err(Error::corrupted(
            "indexed_attestation_ids key",
            format!("{} bytes", key.len()),
        ));
    }
    read_u64_be(&key[..8], "indexed_attestation_ids key")
}

/// `attesters` key: `(target mod H)` u16 BE ‖ validator index u40 BE.
///
/// # Errors
/// [`Error::ValidatorIndexTooLarge`] for indices ≥ 2^40 (Lighthouse panics instead).
pub fn attester_key(
    validator_index: u64,
    target_epoch: u64,
    history_length: u64,
) -> Result<[u8; 7], Error> {
    if validator_index > MAX_ATTESTER_VALIDATOR_INDEX {
        return Err(Error::ValidatorIndexTooLarge { validator_index });
    }
    // H ≤ 65,536, so the remainder fits in 16 bits.
    let slot = u16::try_from(target_epoch % history_length).map_err(|_| Error::ArithOverflow {
        what: "attester key epoch",
    })?;
    let v = validator_index.to_be_bytes();
    let s = slot.to_be_bytes();
    Ok([s[0], s[1], v[3], v[4], v[5], v[6], v[7]])
}

/// `current_epochs` / `attesters_max_targets` key: validator index u64 BE.
pub fn validator_key(validator_index: u64) -> [u8; 8] {
    validator_index.to_be_bytes()
}

/// `min_targets` / `max_targets` key: disk key u64 BE.
pub fn chunk_key(disk_key: u64) -> [u8; 8] {
    disk_key.to_be_bytes()
}

/// `proposers` key: slot u64 BE ‖ proposer index u64 BE.
pub fn proposer_key(slot: u64, proposer_index: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&slot.to_be_bytes());
    key[8..].copy_from_slice(&proposer_index.to_be_bytes());
    key
}

/// The slot of a `proposers` key.
///
/// # Errors
/// [`Error::Corrupted`] unless the key is 16 bytes.
pub fn slot_of_proposer_key(key: &[u8]) -> Result<u64, Error> {
    if key.len() != 16 {
        return Err(Error::corrupted(
            "proposers key",
            format!("{} bytes", key.len()),
        ));
    }
    read_u64_be(&key[..8], "proposers key")
}

/// An epoch value (SSZ u64: 8 bytes little-endian).
pub fn encode_epoch(epoch: u64) -> [u8; 8] {
    epoch.to_le_bytes()
}

/// Decode an SSZ u64 epoch value.
///
/// # Errors
/// [`Error::Corrupted`] unless the value is exactly 8 bytes.
pub fn decode_epoch(bytes: &[u8], what: &'static str) -> Result<u64, Error> {
    let b: [u8; 8] = bytes
        .try_into()
        .map_err(|_| Error::corrupted(what, format!("{} bytes", bytes.len())))?;
    Ok(u64::from_le_bytes(b))
}

fn read_u64_be(bytes: &[u8], what: &'static str) -> Result<u64, Error> {
    let b: [u8; 8] = bytes
        .try_into()
        .map_err(|_| Error::corrupted(what, format!("{} bytes", bytes.len())))?;
    Ok(u64::from_be_bytes(b))
}

/// SSZ of an indexed attestation (228 + 8n bytes).
pub fn encode_indexed_attestation(attestation: &IndexedAttestation) -> Vec<u8> {
    attestation.as_ssz_bytes()
}

/// Strict SSZ decode of a stored indexed attestation.
///
/// # Errors
/// [`Error::Corrupted`].
pub fn decode_indexed_attestation(bytes: &[u8]) -> Result<IndexedAttestation, Error> {
    IndexedAttestation::from_ssz_bytes(bytes)
        .map_err(|e| Error::corrupted("indexed attestation", e))
}

/// SSZ of a signed block header (208 bytes).
pub fn encode_block_header(header: &SignedBeaconBlockHeader) -> Vec<u8> {
    header.as_ssz_bytes()
}

/// Strict SSZ decode of a stored signed block header.
///
/// # Errors
/// [`Error::Corrupted`].
pub fn decode_block_header(bytes: &[u8]) -> Result<SignedBeaconBlockHeader, Error> {
    SignedBeaconBlockHeader::from_ssz_bytes(bytes)
        .map_err(|e| Error::corrupted("signed block header", e))
}

/// `metadata[0x00]`: bincode u64 (8 bytes LE).
pub fn encode_schema_version(version: u64) -> [u8; 8] {
    version.to_le_bytes()
}

/// Decode `metadata[0x00]`.
///
/// # Errors
/// [`Error::Corrupted`] if it is not a bincode u64.
pub fn decode_schema_version(bytes: &[u8]) -> Result<u64, Error> {
    bincode::deserialize::<u64>(bytes).map_err(|e| Error::corrupted("schema version", e))
}

/// `metadata[0x01]`: bincode `DiskConfig` (24 bytes).
///
/// # Errors
/// [`Error::Corrupted`] if bincode fails (it does not for this type).
pub fn encode_disk_config(config: &DiskConfig) -> Result<Vec<u8>, Error> {
    bincode::serialize(config).map_err(|e| Error::corrupted("disk config", e))
}

/// Decode `metadata[0x01]`; trailing bytes are ignored, as in Lighthouse.
///
/// # Errors
/// [`Error::Corrupted`] if shorter than 24 bytes.
pub fn decode_disk_config(bytes: &[u8]) -> Result<DiskConfig, Error> {
    bincode::deserialize::<DiskConfig>(bytes).map_err(|e| Error::corrupted("disk config", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_round_trip_and_limits() {
        let id = IndexedAttestationId::new(0x0102_0304_0506).unwrap();
        assert_eq!(id.to_bytes(), [1, 2, 3, 4, 5, 6]);
        assert_eq!(
            IndexedAttestationId::from_bytes(&[1, 2, 3, 4, 5, 6]).unwrap(),
            id
        );
        assert!(matches!(
            IndexedAttestationId::from_bytes(&[1, 2, 3]),
            Err(Error::IndexedAttestationIdCorrupt { length: 3 })
        ));
        assert!(IndexedAttestationId::new(MAX_ID).is_ok());
        assert!(IndexedAttestationId::new(MAX_ID + 1).is_err());
        assert!(IndexedAttestationId::new(MAX_ID).unwrap().next().is_err());
        assert!(IndexedAttestationId::NULL.is_null());
    }

    #[test]
    fn attester_key_layout() {
        assert_eq!(
            attester_key(300_000, 4097, 4096).unwrap(),
            [0, 1, 0, 0, 0x04, 0x93, 0xE0]
        );
        assert_eq!(
            attester_key(MAX_ATTESTER_VALIDATOR_INDEX, 65_535, 65_536).unwrap(),
            [0xFF; 7]
        );
        assert!(matches!(
            attester_key(1 << 40, 0, 16),
            Err(Error::ValidatorIndexTooLarge { validator_index }) if validator_index == 1 << 40
        ));
    }

    #[test]
    fn fixed_width_values_reject_wrong_lengths() {
        assert_eq!(decode_epoch(&encode_epoch(7), "x").unwrap(), 7);
        assert!(decode_epoch(&[0; 7], "x").is_err());
        assert!(decode_epoch(&[0; 9], "x").is_err());
        assert!(target_epoch_of_id_key(&[0; 39]).is_err());
        assert!(slot_of_proposer_key(&[0; 15]).is_err());
        assert_eq!(slot_of_proposer_key(&proposer_key(9, 1)).unwrap(), 9);
        assert_eq!(
            target_epoch_of_id_key(&indexed_attestation_id_key(5, &Hash256::ZERO)).unwrap(),
            5
        );
    }

    #[test]
    fn metadata_round_trip() {
        let dc = DiskConfig {
            chunk_size: 16,
            validator_chunk_size: 256,
            history_length: 4096,
        };
        let bytes = encode_disk_config(&dc).unwrap();
        assert_eq!(bytes.len(), DISK_CONFIG_LEN);
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[9, 9, 9]);
        assert_eq!(decode_disk_config(&longer).unwrap(), dc);
        assert!(decode_disk_config(&bytes[..23]).is_err());
        assert_eq!(decode_schema_version(&encode_schema_version(3)).unwrap(), 3);
        assert!(decode_schema_version(&[3, 0]).is_err());
    }
}
