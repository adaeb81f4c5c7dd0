//! Errors of the slasher logic (Lighthouse's `slasher::Error`, minus the backend variants, which
//! live in the storage [`crate::Error`] wrapped by [`Error::Database`]).

use std::path::PathBuf;

use super::disk_config::DiskConfig;

/// An error from the slasher's batch logic, its encodings or its storage.
///
/// Any error inside [`super::Slasher::process_queued`] aborts the whole batch: its write
/// transaction is dropped (rolled back) and the attestations and blocks it had dequeued are lost,
/// as in Lighthouse. Slashings found before the error stay available.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The storage interface or a backend failed.
    #[error("slasher database: {0}")]
    Database(#[from] crate::Error),
    /// Creating the database directory failed.
    #[error("creating slasher directory {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A configuration parameter that must be non-zero is zero.
    #[error("slasher config: `{field}` must not be zero")]
    ConfigInvalidZeroParameter {
        /// The offending field.
        field: &'static str,
    },
    /// `history_length` is not a multiple of `chunk_size`.
    #[error(
        "slasher config: history_length ({history_length}) must be a multiple of chunk_size \
         ({chunk_size})"
    )]
    ConfigInvalidChunkSize {
        /// The configured chunk size.
        chunk_size: usize,
        /// The configured history length.
        history_length: usize,
    },
    /// `history_length` is larger than the 16-bit attester-key and tile formats allow.
    #[error("slasher config: history_length ({history_length}) exceeds the maximum of {max}")]
    ConfigInvalidHistoryLength {
        /// The configured history length.
        history_length: usize,
        /// The largest accepted history length (65,536).
        max: usize,
    },
    /// The database was created with a different geometry than the one configured.
    #[error(
        "slasher database was created with {on_disk:?} but the configuration asks for \
         {configured:?}; these parameters cannot change on an existing database (use a new \
         directory or the original parameters)"
    )]
    ConfigIncompatible {
        /// The geometry stored in `metadata[0x01]`.
        on_disk: DiskConfig,
        /// The geometry of the running configuration.
        configured: DiskConfig,
    },
    /// `metadata[0x00]` holds a schema version this code does not understand.
    #[error(
        "slasher database has schema version {database_schema_version}, this software only \
         reads version {software_schema_version}"
    )]
    IncompatibleSchemaVersion {
        /// The version found on disk.
        database_schema_version: u64,
        /// The version this code writes ([`super::CURRENT_SCHEMA_VERSION`]).
        software_schema_version: u64,
    },
    /// A stored value or key failed to decode (SSZ, bincode or a fixed-width integer).
    #[error("corrupt {what} in the slasher database: {reason}")]
    Corrupted {
        /// Which kind of record.
        what: &'static str,
        /// What was wrong with it.
        reason: String,
    },
    /// A 6-byte indexed-attestation id had another length.
    #[error("corrupt indexed attestation id: expected 6 bytes, found {length}")]
    IndexedAttestationIdCorrupt {
        /// The length found.
        length: usize,
    },
    /// Ids are 48-bit; the table is full.
    #[error("indexed attestation id {id} does not fit in 48 bits")]
    IndexedAttestationIdOutOfRange {
        /// The id that would have been allocated.
        id: u64,
    },
    /// A validator index does not fit the 40-bit field of an `attesters` key.
    #[error("validator index {validator_index} does not fit in 40 bits")]
    ValidatorIndexTooLarge {
        /// The index.
        validator_index: u64,
    },
    /// An integer computation on keys or epochs overflowed.
    #[error("arithmetic overflow computing {what}")]
    ArithOverflow {
        /// What was being computed.
        what: &'static str,
    },
    /// A tile decoded to the wrong number of cells.
    #[error("corrupt target chunk: expected {expected} cells, found {found}")]
    ChunkLengthMismatch {
        /// C·K.
        expected: usize,
        /// What the stored tile holds.
        found: usize,
    },
    /// A cell index outside the tile (a bug or a corrupt tile).
    #[error("chunk cell index {index} out of bounds for a tile of {len} cells")]
    ChunkIndexOutOfBounds {
        /// The cell index.
        index: usize,
        /// The number of cells.
        len: usize,
    },
    /// A target distance does not fit in a `u16` cell (only reachable with H = 65,536).
    #[error("target distance {distance} does not fit in a 16-bit cell")]
    DistanceTooLarge {
        /// The distance.
        distance: u64,
    },
    /// Compressing or decompressing a tile failed.
    #[error("tile (de)compression: {0}")]
    Compression(#[source] std::io::Error),
    /// An attestation id referenced by `attesters` or `indexed_attestation_ids` is not stored.
    #[error("indexed attestation {id} is missing from the database")]
    MissingIndexedAttestation {
        /// The id.
        id: u64,
    },
    /// A surround hit pointed at a target for which the validator has no usable record.
    #[error("no attester record for validator {validator_index} at target epoch {target_epoch}")]
    MissingAttesterRecord {
        /// The validator.
        validator_index: u64,
        /// The target epoch looked up.
        target_epoch: u64,
    },
    /// Two attestations with different data roots turned out not to conflict.
    #[error(
        "attestation data roots differ but the stored attestation does not conflict \
         (validator {validator_index}, target epoch {target_epoch})"
    )]
    InconsistentAttestationDataRoot {
        /// The validator.
        validator_index: u64,
        /// The target epoch.
        target_epoch: u64,
    },
    /// The in-memory arrays ([`super::array_memory::ChunkArrays`]) met a vote that only a
    /// database can resolve: a conflict with a stored target, or two votes of one validator in
    /// one batch.
    #[error("in-memory target arrays: {0}")]
    MemoryArrays(String),
}

impl Error {
    /// A decoding failure of `what`.
    pub(crate) fn corrupted(what: &'static str, reason: impl std::fmt::Debug) -> Self {
        Error::Corrupted {
            what,
            reason: format!("{reason:?}"),
        }
    }
}
