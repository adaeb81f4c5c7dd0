//! One validator chunk's min and max target arrays held in memory and driven batch by batch
//! with the code of a database batch ([`super::array::update`]): the same epoch reset, conflict
//! check and walks, on tiles that live in a map instead of a transaction.
//!
//! `slasher-bench fill` uses it to compute the tiles a replay of a long, slashing-free chain
//! would leave, without a database (or a tile codec) in the loop. It supports what such a chain
//! needs and refuses the rest with [`Error::MemoryArrays`]: a vote that conflicts with a stored
//! target (resolving it needs the stored attestation) and two votes of one validator in one
//! batch (their order would depend on data hashes).

use std::collections::BTreeMap;

use super::array::{conflicting_target, reset_epochs, walk, Chunk, TargetArray, Tiles};
use super::config::Config;
use super::error::Error;

/// One validator's vote in one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vote {
    /// The validator (it must belong to the chunk).
    pub validator: u64,
    /// Source epoch.
    pub source: u64,
    /// Target epoch.
    pub target: u64,
}

/// The tiles of one validator chunk and its validators' `current_epochs` value (one for all:
/// a batch writes it for every validator of the chunk at once).
#[derive(Debug)]
pub struct ChunkArrays<'c> {
    config: &'c Config,
    vci: u64,
    min: BTreeMap<usize, Chunk>,
    max: BTreeMap<usize, Chunk>,
    current_epoch: Option<u64>,
}

/// One array's tiles as a pass sees them: a tile is created neutral on first access, as a
/// database pass loads a missing key, and every tile ever accessed is stored.
struct MemoryTiles<'a> {
    tiles: &'a mut BTreeMap<usize, Chunk>,
    kind: TargetArray,
    config: &'a Config,
}

impl Tiles for MemoryTiles<'_> {
    fn tile(&mut self, chunk_index: usize) -> Result<&mut Chunk, Error> {
        let (kind, config) = (self.kind, self.config);
        Ok(self
            .tiles
            .entry(chunk_index)
            .or_insert_with(|| Chunk::neutral(kind, config)))
    }
}

impl<'c> ChunkArrays<'c> {
    /// A chunk no batch has touched: no tiles, no `current_epochs` entries.
    pub fn new(config: &'c Config, vci: u64) -> Self {
        Self {
            config,
            vci,
            min: BTreeMap::new(),
            max: BTreeMap::new(),
            current_epoch: None,
        }
    }

    /// One batch at `current_epoch` that processes this chunk (a batch whose attestations name
    /// a validator of this chunk or of a higher one): the epoch update, the Min pass, the Max
    /// pass, then `current_epochs` := `current_epoch` for every validator of the chunk.
    ///
    /// # Errors
    /// [`Error::MemoryArrays`] for a vote outside the chunk, a second vote of one validator, or
    /// a vote that conflicts with a stored target; cell errors as in a database batch.
    pub fn batch(&mut self, current_epoch: u64, votes: &[Vote]) -> Result<(), Error> {
        let config = self.config;
        let mut seen = std::collections::HashSet::with_capacity(votes.len());
        for vote in votes {
            if config.validator_chunk_index(vote.validator) != self.vci {
                return Err(Error::MemoryArrays(format!(
                    "validator {} is not in validator chunk {}",
                    vote.validator, self.vci
                )));
            }
            if !seen.insert(vote.validator) {
                return Err(Error::MemoryArrays(format!(
                    "validator {} votes twice in the batch at epoch {current_epoch}",
                    vote.validator
                )));
            }
        }
        // The database pass groups its records by the tile of their source.
        let mut ordered: Vec<&Vote> = votes.iter().collect();
        ordered.sort_by_key(|v| (config.chunk_index(v.source), v.validator));
        for (kind, tiles) in [
            (TargetArray::Min, &mut self.min),
            (TargetArray::Max, &mut self.max),
        ] {
            let mut tiles = MemoryTiles {
                tiles,
                kind,
                config,
            };
            // The epoch update, epoch by epoch: every validator of the chunk shares `prev`.
            if let Some(prev) = self.current_epoch {
                for epoch in reset_epochs(config, prev, current_epoch) {
                    let tile = tiles.tile(config.chunk_index(epoch))?;
                    for v in config.validator_indices_in_chunk(self.vci) {
                        tile.set_neutral(kind, v, epoch, config)?;
                    }
                }
            }
            for vote in &ordered {
                let (v, source, target) = (vote.validator, vote.source, vote.target);
                if let Some(stored) =
                    conflicting_target(&mut tiles, kind, config, v, source, target)?
                {
                    return Err(Error::MemoryArrays(format!(
                        "validator {v}'s vote {source}→{target} conflicts with the stored \
                         target {stored} in {}",
                        kind.table_name()
                    )));
                }
                walk(&mut tiles, kind, config, v, (source, target), current_epoch)?;
            }
        }
        self.current_epoch = Some(current_epoch);
        Ok(())
    }

    /// The `current_epochs` value of every validator of the chunk, if a batch processed it.
    pub fn current_epoch(&self) -> Option<u64> {
        self.current_epoch
    }

    /// The tiles a database would hold, by chunk index (ascending, as their keys).
    pub fn tiles(&self, kind: TargetArray) -> impl Iterator<Item = (usize, &Chunk)> {
        match kind {
            TargetArray::Min => self.min.iter(),
            TargetArray::Max => self.max.iter(),
        }
        .map(|(i, c)| (*i, c))
    }
}
