//! The slasher's configuration (Lighthouse's `slasher::Config`, storage-relevant part) and the
//! geometry helpers of the min/max target arrays (`docs/background.md` §1.2).
//!
//! | Parameter | Symbol | Default |
//! |---|---|---|
//! | `chunk_size` | C | 16 epochs per tile |
//! | `validator_chunk_size` | K | 256 validators per tile |
//! | `history_length` | H | 4096 epochs |
//! | `attestation_root_cache_size` | | 100,000 LRU entries |
//! | `max_db_size_mbs` | | 524,288 (512 GiB) |

use std::num::NonZeroUsize;
use std::path::PathBuf;

use super::disk_config::DiskConfig;
use super::error::Error;
use crate::config::{BackendConfig, DatabaseBackend, Durability, DEFAULT_MAX_DB_SIZE_MBS};

/// Lighthouse's default chunk size C (epochs per tile).
pub const DEFAULT_CHUNK_SIZE: usize = 16;
/// Lighthouse's default validator chunk size K (validators per tile).
pub const DEFAULT_VALIDATOR_CHUNK_SIZE: usize = 256;
/// Lighthouse's default history length H (epochs).
pub const DEFAULT_HISTORY_LENGTH: usize = 4096;
/// Lighthouse's default capacity of the id → data-root LRU.
pub const DEFAULT_ATTESTATION_ROOT_CACHE_SIZE: NonZeroUsize = match NonZeroUsize::new(100_000) {
    Some(n) => n,
    None => NonZeroUsize::MIN,
};
/// The largest history length: `attesters` keys hold `target mod H` in 16 bits.
pub const MAX_HISTORY_LENGTH: usize = 1 << 16;

/// The backend used when none is chosen: LMDB if compiled in (Lighthouse's default), then MDBX,
/// redb, butter_db.
pub fn default_backend() -> DatabaseBackend {
    DatabaseBackend::compiled()
        .into_iter()
        .next()
        .unwrap_or(DatabaseBackend::Lmdb)
}

/// Slasher configuration.
///
/// `backend` is informational for callers that pick the environment type at run time (see
/// [`crate::with_backend`]); [`super::Slasher`] itself is generic over the environment and does
/// not read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Directory of the database files (Lighthouse's `database_path`).
    pub path: PathBuf,
    /// C: epochs per tile of the min/max target arrays. Stored on disk.
    pub chunk_size: usize,
    /// K: validators per tile. Stored on disk.
    pub validator_chunk_size: usize,
    /// H: epochs of history kept. Stored on disk; immutable once the database exists.
    pub history_length: usize,
    /// Capacity of the LRU mapping indexed-attestation ids to attestation data roots.
    pub attestation_root_cache_size: NonZeroUsize,
    /// LMDB map size / MDBX upper geometry, in MiB.
    pub max_db_size_mbs: usize,
    /// Which backend the caller wants.
    pub backend: DatabaseBackend,
    /// Commit durability passed to the backend.
    pub durability: Durability,
    /// How tiles are compressed: Lighthouse's zlib level 6 by default. Not stored: the two
    /// read each other's tiles.
    pub tile_codec: TileCodecKind,
    /// butter_db's block cache in bytes ([`BackendConfig::butter_cache_bytes`]; not one of
    /// Lighthouse's settings).
    pub butter_cache_bytes: Option<usize>,
}

/// How tiles are compressed and inflated. Both write plain zlib streams of the same bincode
/// bytes, which either reads (zlib output is not canonical, `docs/background.md` §1.2, and
/// Lighthouse only ever inflates it), so the choice changes cost and size, never the contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum TileCodecKind {
    /// What Lighthouse does, cost included: bincode, then a new flate2 `ZlibEncoder` at
    /// `Compression::default()` (C zlib, level 6) for every tile written; for every tile read,
    /// bincode reading cell by cell from a new streaming `ZlibDecoder` (an inflate call per
    /// cell, as in Lighthouse's `bincode::deserialize_from`). The bytes are the ones Lighthouse
    /// would store.
    #[default]
    Lighthouse,
    /// libdeflate at level [`TILE_COMPRESSION_LEVEL`](super::array::TILE_COMPRESSION_LEVEL) with state reused across tiles, whole
    /// buffers at once: several times cheaper, a few percent larger tiles.
    Fast,
}

impl TileCodecKind {
    /// Both codecs.
    pub const ALL: [TileCodecKind; 2] = [TileCodecKind::Lighthouse, TileCodecKind::Fast];

    /// `lighthouse` or `fast`.
    pub fn name(self) -> &'static str {
        match self {
            TileCodecKind::Lighthouse => "lighthouse",
            TileCodecKind::Fast => "fast",
        }
    }

    /// The codec named `name` (as [`TileCodecKind::name`] spells it).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl Config {
    /// Lighthouse's defaults, in `path`, with [`default_backend`].
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            chunk_size: DEFAULT_CHUNK_SIZE,
            validator_chunk_size: DEFAULT_VALIDATOR_CHUNK_SIZE,
            history_length: DEFAULT_HISTORY_LENGTH,
            attestation_root_cache_size: DEFAULT_ATTESTATION_ROOT_CACHE_SIZE,
            max_db_size_mbs: DEFAULT_MAX_DB_SIZE_MBS,
            backend: default_backend(),
            durability: Durability::Immediate,
            tile_codec: TileCodecKind::Lighthouse,
            butter_cache_bytes: None,
        }
    }

    /// Check the parameters, like Lighthouse's `Config::validate`.
    ///
    /// # Errors
    /// - [`Error::ConfigInvalidZeroParameter`] if C, K, H or `max_db_size_mbs` is 0;
    /// - [`Error::ConfigInvalidChunkSize`] if H is not a multiple of C;
    /// - [`Error::ConfigInvalidHistoryLength`] if H > 65,536.
    pub fn validate(&self) -> Result<(), Error> {
        for (field, value) in [
            ("chunk_size", self.chunk_size),
            ("validator_chunk_size", self.validator_chunk_size),
            ("history_length", self.history_length),
            ("max_db_size_mbs", self.max_db_size_mbs),
        ] {
            if value == 0 {
                return Err(Error::ConfigInvalidZeroParameter { field });
            }
        }
        if self.history_length % self.chunk_size != 0 {
            return Err(Error::ConfigInvalidChunkSize {
                chunk_size: self.chunk_size,
                history_length: self.history_length,
            });
        }
        if self.history_length > MAX_HISTORY_LENGTH {
            return Err(Error::ConfigInvalidHistoryLength {
                history_length: self.history_length,
                max: MAX_HISTORY_LENGTH,
            });
        }
        Ok(())
    }

    /// The geometry stored in `metadata[0x01]`.
    pub fn disk_config(&self) -> DiskConfig {
        DiskConfig {
            chunk_size: self.chunk_size,
            validator_chunk_size: self.validator_chunk_size,
            history_length: self.history_length,
        }
    }

    /// How to open the backend.
    pub fn backend_config(&self) -> BackendConfig {
        BackendConfig {
            path: self.path.clone(),
            max_db_size_mbs: self.max_db_size_mbs,
            durability: self.durability,
            butter_cache_bytes: self.butter_cache_bytes,
        }
    }

    /// H as a u64.
    pub fn history_length_u64(&self) -> u64 {
        self.history_length as u64
    }

    /// `chunk_index(e) = (e mod H) / C`: which tile column holds epoch `e`.
    pub fn chunk_index(&self, epoch: u64) -> usize {
        // The remainder is < H ≤ 65,536, so it fits in a usize.
        (epoch % self.history_length_u64()) as usize / self.chunk_size
    }

    /// `chunk_offset(e) = e mod C`.
    pub fn chunk_offset(&self, epoch: u64) -> usize {
        (epoch % self.chunk_size as u64) as usize
    }

    /// `validator_chunk_index(v) = v / K`.
    pub fn validator_chunk_index(&self, validator_index: u64) -> u64 {
        validator_index / self.validator_chunk_size as u64
    }

    /// `validator_offset(v) = v mod K`.
    pub fn validator_offset(&self, validator_index: u64) -> usize {
        (validator_index % self.validator_chunk_size as u64) as usize
    }

    /// `cell_index = validator_offset × C + chunk_offset`.
    pub fn cell_index(&self, validator_index: u64, epoch: u64) -> usize {
        self.validator_offset(validator_index) * self.chunk_size + self.chunk_offset(epoch)
    }

    /// Cells per tile, C·K.
    pub fn cells_per_chunk(&self) -> usize {
        self.chunk_size * self.validator_chunk_size
    }

    /// Tiles per validator chunk, H / C.
    pub fn chunks_per_validator_chunk(&self) -> usize {
        self.history_length / self.chunk_size
    }

    /// `disk_key = validator_chunk_index × (H/C) + chunk_index`.
    ///
    /// # Errors
    /// [`Error::ArithOverflow`] for validator chunk indices too large for a u64 key.
    pub fn disk_key(&self, validator_chunk_index: u64, chunk_index: usize) -> Result<u64, Error> {
        validator_chunk_index
            .checked_mul(self.chunks_per_validator_chunk() as u64)
            .and_then(|base| base.checked_add(chunk_index as u64))
            .ok_or(Error::ArithOverflow { what: "disk_key" })
    }

    /// The K validator indices of validator chunk `vci`.
    pub fn validator_indices_in_chunk(&self, vci: u64) -> std::ops::Range<u64> {
        let k = self.validator_chunk_size as u64;
        let start = vci.saturating_mul(k);
        start..start.saturating_add(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_lighthouse_defaults() {
        let c = Config::new("/tmp/x");
        assert_eq!(c.chunk_size, 16);
        assert_eq!(c.validator_chunk_size, 256);
        assert_eq!(c.history_length, 4096);
        assert_eq!(c.attestation_root_cache_size.get(), 100_000);
        assert_eq!(c.max_db_size_mbs, 512 * 1024);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn validate_rejects_bad_parameters() {
        let base = Config::new("/tmp/x");
        let mut c = base.clone();
        c.chunk_size = 0;
        assert!(matches!(
            c.validate(),
            Err(Error::ConfigInvalidZeroParameter {
                field: "chunk_size"
            })
        ));
        let mut c = base.clone();
        c.validator_chunk_size = 0;
        assert!(matches!(
            c.validate(),
            Err(Error::ConfigInvalidZeroParameter {
                field: "validator_chunk_size"
            })
        ));
        let mut c = base.clone();
        c.history_length = 0;
        assert!(matches!(
            c.validate(),
            Err(Error::ConfigInvalidZeroParameter {
                field: "history_length"
            })
        ));
        let mut c = base.clone();
        c.max_db_size_mbs = 0;
        assert!(matches!(
            c.validate(),
            Err(Error::ConfigInvalidZeroParameter {
                field: "max_db_size_mbs"
            })
        ));
        let mut c = base.clone();
        c.history_length = 4095;
        assert!(matches!(
            c.validate(),
            Err(Error::ConfigInvalidChunkSize {
                chunk_size: 16,
                history_length: 4095
            })
        ));
        let mut c = base.clone();
        c.history_length = 65_536 + 16;
        assert!(matches!(
            c.validate(),
            Err(Error::ConfigInvalidHistoryLength { .. })
        ));
        let mut c = base;
        c.history_length = 65_536;
        assert!(c.validate().is_ok());
    }

    #[test]
    fn geometry() {
        let c = Config::new("/tmp/x");
        assert_eq!(c.chunk_index(4095), 255);
        assert_eq!(c.chunk_index(4096), 0);
        assert_eq!(c.chunk_index(4097 + 16), 1);
        assert_eq!(c.cell_index(300_000, 4095), 224 * 16 + 15);
        assert_eq!(c.validator_chunk_index(300_000), 1171);
        assert_eq!(c.disk_key(1171, 255).ok(), Some(300_031));
        assert!(c.disk_key(u64::MAX, 1).is_err());
    }
}
