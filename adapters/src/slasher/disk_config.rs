//! The part of the slasher's configuration that is stored in the database: beside
//! [`super::Config`], which makes it, and [`super::Error`], which reports a mismatch with it.

use serde::{Deserialize, Serialize};

/// The part of the configuration that fixes the on-disk layout, stored in `metadata[0x01]` as
/// bincode: three `usize` fields, each a u64 LE, 24 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskConfig {
    /// C.
    pub chunk_size: usize,
    /// K.
    pub validator_chunk_size: usize,
    /// H.
    pub history_length: usize,
}
