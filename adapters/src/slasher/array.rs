//! The min and max target arrays (`docs/background.md` §1.2): tiles, their encoding, and the
//! per-batch update of one validator chunk.
//!
//! A tile covers C epochs × K validators. Its cell `validator_offset × C + chunk_offset` holds a
//! distance `target − epoch` as a `u16`; the stored target is `epoch + cell`.
//!
//! Stored form: a zlib stream (by default exactly Lighthouse's: C zlib at level 6; see
//! [`TileCodecKind`]) of the bincode encoding of a `Vec<u16>`:
//!
//! | Offset | Size | Field |
//! |---|---|---|
//! | 0 | 8 | cell count, u64 LE (= C·K) |
//! | 8 | 2·C·K | cells, u16 LE each |
//!
//! A missing key reads as a tile of neutral cells: `0xFFFF` for min ("no target yet"), `0` for
//! max. Every tile loaded during a pass is written back at its end, changed or not.

use flate2::{Decompress, FlushDecompress, Status};
use std::collections::{BTreeMap, HashSet};

use super::config::{Config, TileCodecKind};
use super::database::get_attestation_for_validator;
use super::error::Error;
use super::keys::{chunk_key, decode_epoch, encode_epoch, validator_key};
use super::records::AttesterRecord;
use super::types::AttesterSlashing;
use crate::backend::RwTransaction;
use crate::tables::OpenDatabases;

/// Which of the two arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TargetArray {
    /// `min_targets`: smallest target among attestations with a later source.
    Min,
    /// `max_targets`: largest target among attestations with an earlier source.
    Max,
}

impl TargetArray {
    /// The neutral cell value.
    pub fn neutral(self) -> u16 {
        match self {
            TargetArray::Min => u16::MAX,
            TargetArray::Max => 0,
        }
    }

    /// The table name.
    pub fn table_name(self) -> &'static str {
        match self {
            TargetArray::Min => crate::tables::MIN_TARGETS_DB,
            TargetArray::Max => crate::tables::MAX_TARGETS_DB,
        }
    }
}

/// One tile: C·K distances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The cells, `validator_offset × C + chunk_offset`.
    pub data: Vec<u16>,
}

/// bincode 1.3's fixed-width little-endian encoding of a `Vec<u16>`, written by hand (it is
/// an 8-byte element count, then 2 bytes per cell): serde's generic path costs more than the
/// compression of a typical tile.
fn raw_bytes_into(cells: &[u16], raw: &mut Vec<u8>) {
    raw.clear();
    raw.reserve(8 + 2 * cells.len());
    raw.extend_from_slice(&(cells.len() as u64).to_le_bytes());
    // Sized once, then filled pair by pair: the loop compiles to vector stores.
    raw.resize(8 + 2 * cells.len(), 0);
    for (dst, c) in raw[8..].chunks_exact_mut(2).zip(cells) {
        dst.copy_from_slice(&c.to_le_bytes());
    }
}

/// A bincode read of a tile failed: the stream ended early or is not zlib.
fn tile_read_error(e: &bincode::Error) -> Error {
    match &**e {
        bincode::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            Error::corrupted("tile", "truncated cells")
        }
        other => Error::corrupted("tile", format!("zlib: {other}")),
    }
}

/// A tile's stored cell count must be C·K; checked before any cell is read.
fn check_cell_count(count: u64, expected: usize) -> Result<usize, Error> {
    if count > expected as u64 {
        return Err(Error::corrupted("tile", "cell count larger than C·K"));
    }
    let count = count as usize;
    if count != expected {
        return Err(Error::ChunkLengthMismatch {
            expected,
            found: count,
        });
    }
    Ok(count)
}

/// Parse the inflated bytes of a tile: the element count, then that many cells. Bytes after
/// them are ignored (as Lighthouse's streaming bincode read does).
fn cells_from_raw(raw: &[u8], expected: usize) -> Result<Vec<u16>, Error> {
    let count = raw
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_le_bytes)
        .ok_or_else(|| Error::corrupted("tile", "shorter than its cell count"))?;
    let count = check_cell_count(count, expected)?;
    // The error values are built only on failure: this runs for every tile read.
    let cells = raw
        .get(8..8 + 2 * count)
        .ok_or_else(|| Error::corrupted("tile", "truncated cells"))?;
    let mut data = vec![0u16; count];
    for (d, b) in data.iter_mut().zip(cells.chunks_exact(2)) {
        *d = u16::from_le_bytes([b[0], b[1]]);
    }
    Ok(data)
}

impl Chunk {
    /// A tile of neutral cells.
    pub fn neutral(kind: TargetArray, config: &Config) -> Self {
        Self {
            data: vec![kind.neutral(); config.cells_per_chunk()],
        }
    }

    /// The uncompressed bincode bytes (8-byte LE count, then u16 LE cells).
    ///
    /// # Errors
    /// [`Error::Corrupted`] if bincode fails (it does not for a `Vec<u16>`).
    pub fn to_raw_bytes(&self) -> Result<Vec<u8>, Error> {
        let mut raw = Vec::new();
        raw_bytes_into(&self.data, &mut raw);
        Ok(raw)
    }

    /// zlib of the bincode bytes, as Lighthouse writes them: the stored value.
    ///
    /// # Errors
    /// [`Error::Compression`] on a zlib failure.
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        TileCodec::default().encode(self)
    }

    /// Decode a stored tile (anything after the C·K cells in the inflated stream is ignored,
    /// as in Lighthouse) and check it holds exactly C·K cells.
    ///
    /// # Errors
    /// [`Error::Corrupted`] for a bad zlib stream or bincode payload;
    /// [`Error::ChunkLengthMismatch`] for a wrong cell count.
    pub fn decode(bytes: &[u8], config: &Config) -> Result<Self, Error> {
        TileCodec::default().decode(bytes, config)
    }

    fn cell(&self, index: usize) -> Result<u16, Error> {
        match self.data.get(index) {
            Some(&cell) => Ok(cell),
            None => Err(Error::ChunkIndexOutOfBounds {
                index,
                len: self.data.len(),
            }),
        }
    }

    fn cell_mut(&mut self, index: usize) -> Result<&mut u16, Error> {
        let len = self.data.len();
        match self.data.get_mut(index) {
            Some(cell) => Ok(cell),
            None => Err(Error::ChunkIndexOutOfBounds { index, len }),
        }
    }

    /// The raw distance stored for `(validator, epoch)`.
    ///
    /// # Errors
    /// [`Error::ChunkIndexOutOfBounds`].
    pub fn distance(&self, validator: u64, epoch: u64, config: &Config) -> Result<u16, Error> {
        self.cell(config.cell_index(validator, epoch))
    }

    /// The stored target `epoch + cell` (saturating; a neutral min cell reads as
    /// `epoch + 65,535`, larger than any real target).
    ///
    /// # Errors
    /// [`Error::ChunkIndexOutOfBounds`].
    pub fn target(&self, validator: u64, epoch: u64, config: &Config) -> Result<u64, Error> {
        Ok(epoch.saturating_add(u64::from(self.distance(validator, epoch, config)?)))
    }

    /// Store `target` for `(validator, epoch)` as a distance.
    ///
    /// # Errors
    /// [`Error::DistanceTooLarge`] if `target − epoch ≥ 65,535`; [`Error::ChunkIndexOutOfBounds`].
    pub fn set_target(
        &mut self,
        validator: u64,
        epoch: u64,
        target: u64,
        config: &Config,
    ) -> Result<(), Error> {
        let distance = target
            .checked_sub(epoch)
            .ok_or(Error::ArithOverflow { what: "distance" })?;
        let cell = u16::try_from(distance)
            .ok()
            .filter(|&d| d != u16::MAX)
            .ok_or(Error::DistanceTooLarge { distance })?;
        *self.cell_mut(config.cell_index(validator, epoch))? = cell;
        Ok(())
    }

    /// Reset `(validator, epoch)` to the neutral value.
    ///
    /// # Errors
    /// [`Error::ChunkIndexOutOfBounds`].
    pub fn set_neutral(
        &mut self,
        kind: TargetArray,
        validator: u64,
        epoch: u64,
        config: &Config,
    ) -> Result<(), Error> {
        *self.cell_mut(config.cell_index(validator, epoch))? = kind.neutral();
        Ok(())
    }
}

/// The deflate level of [`TileCodecKind::Fast`]. On the mainnet sample's cold start (every
/// batch of the first epoch rewrites ~427k tiles) level 6 spent half the replay's CPU in lazy
/// matching; level 1 is several times faster for tiles a few percent larger on real data.
pub const TILE_COMPRESSION_LEVEL: i32 = 1;

/// Reusable state for encoding and decoding tiles with one [`TileCodecKind`]. Whatever the
/// kind, a stream that inflates to more than a tile (someone else's writer) is read with
/// flate2's streaming inflater, which stops after the tile, as Lighthouse's reader does.
pub struct TileCodec {
    kind: TileCodecKind,
    compressor: libdeflater::Compressor,
    decompressor: libdeflater::Decompressor,
    decompress: Decompress,
    raw: Vec<u8>,
}

impl std::fmt::Debug for TileCodec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TileCodec")
            .field("kind", &self.kind)
            .field("raw_len", &self.raw.len())
            .finish_non_exhaustive()
    }
}

impl Default for TileCodec {
    fn default() -> Self {
        Self::new(TileCodecKind::default())
    }
}

impl TileCodec {
    /// A codec of `kind`.
    pub fn new(kind: TileCodecKind) -> Self {
        Self {
            kind,
            compressor: libdeflater::Compressor::new(
                libdeflater::CompressionLvl::new(TILE_COMPRESSION_LEVEL).unwrap_or_default(),
            ),
            decompressor: libdeflater::Decompressor::new(),
            decompress: Decompress::new(true),
            raw: Vec::new(),
        }
    }

    /// zlib of the bincode bytes of `chunk`.
    ///
    /// # Errors
    /// [`Error::Compression`] on a zlib failure; [`Error::Corrupted`] if bincode fails.
    pub fn encode(&mut self, chunk: &Chunk) -> Result<Vec<u8>, Error> {
        if self.kind == TileCodecKind::Lighthouse {
            // Lighthouse's write, step for step: bincode of the cells, then a new zlib encoder
            // at the default level read to the end.
            let value = bincode::serialize(&chunk.data).map_err(|e| Error::corrupted("tile", e))?;
            let mut encoder =
                flate2::bufread::ZlibEncoder::new(&value[..], flate2::Compression::default());
            let mut out = Vec::new();
            std::io::Read::read_to_end(&mut encoder, &mut out).map_err(Error::Compression)?;
            return Ok(out);
        }
        raw_bytes_into(&chunk.data, &mut self.raw);
        let mut out = vec![0u8; self.compressor.zlib_compress_bound(self.raw.len())];
        let n = self
            .compressor
            .zlib_compress(&self.raw, &mut out)
            .map_err(|e| Error::Compression(std::io::Error::other(format!("{e:?}"))))?;
        out.truncate(n);
        Ok(out)
    }

    /// Decode a stored tile; see [`Chunk::decode`].
    ///
    /// # Errors
    /// As [`Chunk::decode`].
    pub fn decode(&mut self, bytes: &[u8], config: &Config) -> Result<Chunk, Error> {
        let expected = config.cells_per_chunk();
        let needed = 8 + 2 * expected;
        if self.kind == TileCodecKind::Lighthouse {
            // Lighthouse's read, cost included: bincode pulls the tile out of a streaming
            // `bufread::ZlibDecoder` a few bytes at a time (an inflate call and an Adler-32
            // update per cell; most of Lighthouse's cold-start CPU). Unlike Lighthouse, the
            // count is checked before any cell is read, so a hostile count allocates nothing.
            let mut decoder = flate2::bufread::ZlibDecoder::new(bytes);
            let count: u64 =
                bincode::deserialize_from(&mut decoder).map_err(|e| tile_read_error(&e))?;
            let count = check_cell_count(count, expected)?;
            let mut data = Vec::with_capacity(count);
            for _ in 0..count {
                let cell: u16 =
                    bincode::deserialize_from(&mut decoder).map_err(|e| tile_read_error(&e))?;
                data.push(cell);
            }
            return Ok(Chunk { data });
        }
        // Fast path: the whole stream inflates into exactly the bytes a tile needs (or fewer).
        self.raw.clear();
        self.raw.resize(needed, 0);
        match self.decompressor.zlib_decompress(bytes, &mut self.raw) {
            Ok(n) => {
                self.raw.truncate(n);
                return Ok(Chunk {
                    data: cells_from_raw(&self.raw, expected)?,
                });
            }
            // Longer than a tile: read just the tile from the front, below.
            Err(libdeflater::DecompressionError::InsufficientSpace) => {}
            Err(e) => return Err(Error::corrupted("tile", format!("zlib: {e:?}"))),
        }
        self.decompress.reset(true);
        self.raw.clear();
        self.raw.reserve(needed);
        let start_in = self.decompress.total_in();
        loop {
            let consumed =
                usize::try_from(self.decompress.total_in() - start_in).map_err(|_| {
                    Error::ArithOverflow {
                        what: "zlib input offset",
                    }
                })?;
            let before = (consumed, self.raw.len());
            let input = bytes.get(consumed..).unwrap_or_default();
            let status = self
                .decompress
                .decompress_vec(input, &mut self.raw, FlushDecompress::Finish)
                .map_err(|e| Error::corrupted("tile", e))?;
            if status == Status::StreamEnd || self.raw.len() >= needed {
                break;
            }
            let progressed = usize::try_from(self.decompress.total_in() - start_in).ok()
                != Some(before.0)
                || self.raw.len() != before.1;
            if !progressed {
                return Err(Error::corrupted("tile", "truncated zlib stream"));
            }
            if self.raw.len() == self.raw.capacity() {
                self.raw
                    .reserve(needed.saturating_sub(self.raw.len()).max(64));
            }
        }
        Ok(Chunk {
            data: cells_from_raw(&self.raw, expected)?,
        })
    }
}

/// What the in-memory check of one (validator, attestation) found.
#[derive(Debug)]
enum Check {
    NotSlashable,
    /// A hit whose recorded partner does not form a surround: the validator has already
    /// double-voted. No slashing, no update.
    AlreadyDoubleVoted,
    Slashable(Box<AttesterSlashing>),
}

/// The tiles of one array pass over one validator chunk, by chunk index.
struct Pass<'a, T: RwTransaction> {
    txn: &'a mut T,
    dbs: &'a OpenDatabases<T::Database>,
    config: &'a Config,
    kind: TargetArray,
    vci: u64,
    updated: BTreeMap<usize, Chunk>,
    codec: &'a mut TileCodec,
}

/// Where an array pass finds its tiles: the transaction during a batch ([`Pass`]), memory during
/// a fill ([`super::array_memory::ChunkArrays`]). The first access to a tile loads it (or a
/// neutral one); every tile accessed is written back at the end of the pass.
pub(crate) trait Tiles {
    /// The tile at `chunk_index` of this pass's array and validator chunk.
    fn tile(&mut self, chunk_index: usize) -> Result<&mut Chunk, Error>;
}

/// The epochs whose cells the epoch update of a validator with `current_epochs` entry `prev`
/// resets: `prev..=current_epoch`, of which only the last H matter (older ones alias the same
/// cells), so the range is capped at H epochs.
pub(crate) fn reset_epochs(
    config: &Config,
    prev: u64,
    current_epoch: u64,
) -> std::ops::RangeInclusive<u64> {
    let window_start = current_epoch
        .saturating_add(1)
        .saturating_sub(config.history_length_u64());
    prev.max(window_start)..=current_epoch
}

/// The epoch update of one validator whose `current_epochs` entry is `prev`: its cells of
/// [`reset_epochs`] become neutral.
fn reset_validator(
    tiles: &mut impl Tiles,
    kind: TargetArray,
    config: &Config,
    v: u64,
    prev: u64,
    current_epoch: u64,
) -> Result<(), Error> {
    for epoch in reset_epochs(config, prev, current_epoch) {
        tiles
            .tile(config.chunk_index(epoch))?
            .set_neutral(kind, v, epoch, config)?;
    }
    Ok(())
}

/// The target stored at the attestation's source epoch, if it conflicts with the attestation
/// (min: a smaller target with a later source; max: a larger target with an earlier source):
/// a candidate surround that the caller resolves against the stored attestation.
pub(crate) fn conflicting_target(
    tiles: &mut impl Tiles,
    kind: TargetArray,
    config: &Config,
    v: u64,
    source: u64,
    target: u64,
) -> Result<Option<u64>, Error> {
    let stored = tiles
        .tile(config.chunk_index(source))?
        .target(v, source, config)?;
    let conflict = match kind {
        TargetArray::Min => target > stored,
        TargetArray::Max => target < stored,
    };
    Ok(conflict.then_some(stored))
}

/// The walk of one attestation that did not conflict.
pub(crate) fn walk(
    tiles: &mut impl Tiles,
    kind: TargetArray,
    config: &Config,
    v: u64,
    (source, target): (u64, u64),
    current_epoch: u64,
) -> Result<(), Error> {
    match kind {
        TargetArray::Min => walk_min(tiles, config, v, source, target, current_epoch),
        TargetArray::Max => walk_max(tiles, config, v, source, target, current_epoch),
    }
}

/// Min walk: downwards from `source − 1`, while the new target is smaller than the stored one,
/// not below `c − (H − 1)`. Only if `source > c − H`.
fn walk_min(
    tiles: &mut impl Tiles,
    config: &Config,
    v: u64,
    source: u64,
    target: u64,
    c: u64,
) -> Result<(), Error> {
    let h = config.history_length_u64();
    let chunk_size = config.chunk_size as u64;
    if source <= c.saturating_sub(h) || source == 0 {
        return Ok(());
    }
    let lowest = c.saturating_sub(h - 1);
    let mut start = source - 1;
    loop {
        let chunk = tiles.tile(config.chunk_index(start))?;
        let mut epoch = start;
        // Walk this tile; `epoch / C` identifies the tile in absolute epochs.
        while epoch / chunk_size == start / chunk_size && epoch >= lowest {
            if target < chunk.target(v, epoch, config)? {
                chunk.set_target(v, epoch, target, config)?;
                if epoch == 0 {
                    return Ok(());
                }
                epoch -= 1;
            } else {
                return Ok(());
            }
        }
        if epoch < lowest {
            return Ok(());
        }
        // `epoch` is now the last epoch of the previous tile.
        start = epoch;
    }
}

/// Max walk: upwards from `source + 1`, while the new target is larger than the stored one,
/// not beyond `c`. Only if `source < c`.
fn walk_max(
    tiles: &mut impl Tiles,
    config: &Config,
    v: u64,
    source: u64,
    target: u64,
    c: u64,
) -> Result<(), Error> {
    let chunk_size = config.chunk_size as u64;
    if source >= c {
        return Ok(());
    }
    let mut start = source + 1;
    loop {
        let chunk = tiles.tile(config.chunk_index(start))?;
        let mut epoch = start;
        while epoch / chunk_size == start / chunk_size && epoch <= c {
            if target > chunk.target(v, epoch, config)? {
                chunk.set_target(v, epoch, target, config)?;
                epoch += 1;
            } else {
                return Ok(());
            }
        }
        if epoch > c {
            return Ok(());
        }
        start = epoch;
    }
}

impl<T: RwTransaction> Tiles for Pass<'_, T> {
    /// The tile at `chunk_index`, loading it (or a neutral one) the first time.
    fn tile(&mut self, chunk_index: usize) -> Result<&mut Chunk, Error> {
        let db = self.db();
        match self.updated.entry(chunk_index) {
            std::collections::btree_map::Entry::Occupied(e) => Ok(e.into_mut()),
            std::collections::btree_map::Entry::Vacant(e) => {
                let key = chunk_key(self.config.disk_key(self.vci, chunk_index)?);
                let chunk = match self.txn.get(db, &key)? {
                    Some(bytes) => self.codec.decode(&bytes, self.config)?,
                    None => Chunk::neutral(self.kind, self.config),
                };
                Ok(e.insert(chunk))
            }
        }
    }
}

impl<T: RwTransaction> Pass<'_, T> {
    fn db(&self) -> T::Database {
        match self.kind {
            TargetArray::Min => self.dbs.min_targets_db,
            TargetArray::Max => self.dbs.max_targets_db,
        }
    }

    /// Reset cells `prev..=current` of every validator of the chunk that has a
    /// `current_epochs` entry ([`reset_validator`]).
    fn epoch_update(&mut self, current_epoch: u64) -> Result<(), Error> {
        for v in self.config.validator_indices_in_chunk(self.vci) {
            let Some(bytes) = self
                .txn
                .get(self.dbs.current_epochs_db, &validator_key(v))?
            else {
                continue;
            };
            let prev = decode_epoch(&bytes, "current epoch")?;
            let (kind, config) = (self.kind, self.config);
            reset_validator(self, kind, config, v, prev, current_epoch)?;
        }
        Ok(())
    }

    /// Check, then (if not slashable) walk, for one validator and one attestation.
    fn apply(
        &mut self,
        v: u64,
        record: &AttesterRecord,
        current_epoch: u64,
    ) -> Result<Check, Error> {
        let (kind, config) = (self.kind, self.config);
        let vote = (record.source(), record.target());
        if let Some(stored) = conflicting_target(self, kind, config, v, vote.0, vote.1)? {
            let existing = get_attestation_for_validator(self.txn, self.dbs, config, v, stored)?;
            let surrounds = match kind {
                TargetArray::Min => record.source() < existing.data.source.epoch,
                TargetArray::Max => existing.data.source.epoch < record.source(),
            };
            if !surrounds {
                return Ok(Check::AlreadyDoubleVoted);
            }
            let mine = record.attestation.clone();
            let (attestation_1, attestation_2) = match kind {
                TargetArray::Min => (mine, existing),
                TargetArray::Max => (existing, mine),
            };
            return Ok(Check::Slashable(Box::new(AttesterSlashing {
                attestation_1,
                attestation_2,
            })));
        }
        walk(self, kind, config, v, vote, current_epoch)?;
        Ok(Check::NotSlashable)
    }

    /// Write back every tile loaded, in ascending chunk index.
    fn store(self) -> Result<usize, Error> {
        let db = self.db();
        let n = self.updated.len();
        for (chunk_index, chunk) in &self.updated {
            let key = chunk_key(self.config.disk_key(self.vci, *chunk_index)?);
            let value = self.codec.encode(chunk)?;
            self.txn.put(db, &key, &value)?;
        }
        Ok(n)
    }
}

/// Counters of one validator chunk's array update.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct ArrayCounts {
    pub(crate) tiles_written: usize,
}

/// Spec §3.2 step 6b for validator chunk `vci`: the Min pass, the Max pass, then
/// `current_epochs` := `current_epoch` for all K validators of the chunk. `subqueue` lists the
/// chunk's records with multiplicity, in `(validator, data_hash)` order.
#[allow(clippy::too_many_arguments)]
pub(crate) fn update<T: RwTransaction>(
    txn: &mut T,
    dbs: &OpenDatabases<T::Database>,
    config: &Config,
    vci: u64,
    subqueue: &[&AttesterRecord],
    current_epoch: u64,
    slashings: &mut HashSet<AttesterSlashing>,
    codec: &mut TileCodec,
) -> Result<ArrayCounts, Error> {
    // Group by the chunk index of the source, keeping subqueue order inside each group.
    let mut by_chunk: BTreeMap<usize, Vec<&AttesterRecord>> = BTreeMap::new();
    for record in subqueue {
        by_chunk
            .entry(config.chunk_index(record.source()))
            .or_default()
            .push(record);
    }
    let mut counts = ArrayCounts::default();
    for kind in [TargetArray::Min, TargetArray::Max] {
        let mut pass = Pass {
            txn: &mut *txn,
            dbs,
            config,
            kind,
            vci,
            updated: BTreeMap::new(),
            codec: &mut *codec,
        };
        pass.epoch_update(current_epoch)?;
        for records in by_chunk.values() {
            for record in records {
                for &v in record.indices() {
                    if config.validator_chunk_index(v) != vci {
                        continue;
                    }
                    if let Check::Slashable(slashing) = pass.apply(v, record, current_epoch)? {
                        slashings.insert(*slashing);
                    }
                }
            }
        }
        counts.tiles_written += pass.store()?;
    }
    let value = encode_epoch(current_epoch);
    for v in config.validator_indices_in_chunk(vci) {
        txn.put(dbs.current_epochs_db, &validator_key(v), &value)?;
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Config {
        let mut c = Config::new("/tmp/x");
        c.chunk_size = 4;
        c.validator_chunk_size = 2;
        c.history_length = 8;
        c
    }

    #[test]
    fn tile_round_trip_and_neutral_sizes() {
        let config = Config::new("/tmp/x");
        let min = Chunk::neutral(TargetArray::Min, &config);
        let raw = min.to_raw_bytes().unwrap();
        assert_eq!(raw.len(), 8 + 2 * 4096);
        assert_eq!(&raw[..8], &[0x00, 0x10, 0, 0, 0, 0, 0, 0]);
        assert!(raw[8..].iter().all(|&b| b == 0xFF));
        let enc = min.encode().unwrap();
        assert_eq!(enc[0], 0x78, "zlib header: deflate, 32 KiB window");
        let mut inflated = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(&enc[..]), &mut inflated)
            .unwrap();
        assert_eq!(
            inflated, raw,
            "C zlib (as Lighthouse reads it) inflates our stream exactly"
        );
        assert_eq!(Chunk::decode(&enc, &config).unwrap(), min);
        let max = Chunk::neutral(TargetArray::Max, &config);
        assert_eq!(Chunk::decode(&max.encode().unwrap(), &config).unwrap(), max);
    }

    /// A tile with varied cells (a neutral tile compresses to almost nothing).
    fn varied(config: &Config) -> Chunk {
        Chunk {
            data: (0..config.cells_per_chunk())
                .map(|i| ((i * 7919) % 977) as u16)
                .collect(),
        }
    }

    #[test]
    fn lighthouse_codec_writes_exactly_zlib_level_6() {
        let config = Config::new("/tmp/x");
        let chunk = varied(&config);
        let raw = chunk.to_raw_bytes().unwrap();
        // Independently: one-shot C zlib at level 6, as flate2's Compression::default() is.
        let mut expected = Vec::with_capacity(raw.len() + 64);
        flate2::Compress::new(flate2::Compression::new(6), true)
            .compress_vec(&raw, &mut expected, flate2::FlushCompress::Finish)
            .unwrap();
        let ours = TileCodec::new(TileCodecKind::Lighthouse)
            .encode(&chunk)
            .unwrap();
        assert_eq!(
            &ours[..2],
            &[0x78, 0x9C],
            "zlib header of the default level"
        );
        assert_eq!(ours, expected, "not the bytes Lighthouse writes");
        assert_eq!(
            chunk.encode().unwrap(),
            ours,
            "Chunk::encode is not Lighthouse's"
        );
        assert_eq!(Config::new("/tmp/x").tile_codec, TileCodecKind::Lighthouse);
    }

    #[test]
    fn each_codec_reads_the_others_tiles() {
        let config = Config::new("/tmp/x");
        let chunk = varied(&config);
        let mut lighthouse = TileCodec::new(TileCodecKind::Lighthouse);
        let mut fast = TileCodec::new(TileCodecKind::Fast);
        let by_lighthouse = lighthouse.encode(&chunk).unwrap();
        let by_fast = fast.encode(&chunk).unwrap();
        assert_eq!(&by_fast[..2], &[0x78, 0x01], "fast is zlib level 1");
        assert_ne!(by_fast, by_lighthouse);
        for codec in [&mut lighthouse, &mut fast] {
            assert_eq!(codec.decode(&by_lighthouse, &config).unwrap(), chunk);
            assert_eq!(codec.decode(&by_fast, &config).unwrap(), chunk);
            assert!(codec
                .decode(&by_fast[..by_fast.len() / 2], &config)
                .is_err());
        }
        assert_eq!(TileCodecKind::from_name("fast"), Some(TileCodecKind::Fast));
        assert_eq!(TileCodecKind::from_name("zlib"), None);
    }

    #[test]
    fn tile_decode_rejects_corruption() {
        let config = small();
        let chunk = Chunk::neutral(TargetArray::Min, &config);
        let enc = chunk.encode().unwrap();
        assert!(Chunk::decode(&enc[..enc.len() / 2], &config).is_err());
        assert!(Chunk::decode(b"not zlib", &config).is_err());
        let mut other = config.clone();
        other.validator_chunk_size = 4;
        assert!(matches!(
            Chunk::decode(&enc, &other),
            Err(Error::ChunkLengthMismatch {
                expected: 16,
                found: 8
            })
        ));
        // A count far larger than C·K is refused without allocating it.
        let mut raw = vec![0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0];
        raw.extend_from_slice(&[0; 16]);
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
        std::io::Write::write_all(&mut e, &raw).unwrap();
        let huge = e.finish().unwrap();
        assert!(Chunk::decode(&huge, &config).is_err());
        for kind in TileCodecKind::ALL {
            // Each codec refuses the same damage with the same typed error.
            let mut codec = TileCodec::new(kind);
            assert!(
                matches!(codec.decode(&huge, &config), Err(Error::Corrupted { reason, .. }) if reason.contains("larger than")),
                "{kind:?}: huge count"
            );
            assert!(
                matches!(
                    codec.decode(&enc, &other),
                    Err(Error::ChunkLengthMismatch {
                        expected: 16,
                        found: 8
                    })
                ),
                "{kind:?}: wrong count"
            );
            assert!(
                matches!(
                    codec.decode(&enc[..enc.len() / 2], &config),
                    Err(Error::Corrupted { .. })
                ),
                "{kind:?}: truncated stream"
            );
            // A codec reused after an error still works.
            assert!(codec.decode(b"junk", &config).is_err());
            let encoded = codec.encode(&chunk).unwrap();
            let fresh = TileCodec::new(kind).encode(&chunk).unwrap();
            assert_eq!(encoded, fresh, "{kind:?}: same stream as a fresh encoder");
            // A stream that inflates to more than a tile: the tile is read from its front.
            let mut long = chunk.to_raw_bytes().unwrap();
            long.extend_from_slice(&[0xAB; 100]);
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
            std::io::Write::write_all(&mut e, &long).unwrap();
            assert_eq!(codec.decode(&e.finish().unwrap(), &config).unwrap(), chunk);
            assert_eq!(codec.decode(&encoded, &config).unwrap(), chunk);
        }
    }

    #[test]
    fn cells_and_distances() {
        let config = small();
        let mut chunk = Chunk::neutral(TargetArray::Min, &config);
        // validator 3 → offset 1; epoch 6 → offset 2; cell 1·4 + 2 = 6.
        chunk.set_target(3, 6, 9, &config).unwrap();
        assert_eq!(chunk.data[6], 3);
        assert_eq!(chunk.target(3, 6, &config).unwrap(), 9);
        assert_eq!(chunk.target(3, 5, &config).unwrap(), 5 + 65_535);
        assert!(matches!(
            chunk.set_target(3, 6, 6 + 65_535, &config),
            Err(Error::DistanceTooLarge { distance: 65_535 })
        ));
        chunk.set_neutral(TargetArray::Min, 3, 6, &config).unwrap();
        assert_eq!(chunk.data[6], u16::MAX);
    }
}
