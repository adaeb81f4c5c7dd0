//! Writing the database a replay of a [`RegularChain`] leaves, table by table in key order.
//!
//! Three passes, each writing whole tables in ascending key order (what both a B-tree and
//! butter's segments write fastest), committed every [`COMMIT_BYTES`]:
//!
//! 1. **The stream.** The chain's batches in order, as the replay sees them: headers of the
//!    final window into `proposers`; each included aggregate gets the id the replay would give
//!    it (ids count up from 1 and pruning never empties the table), and the aggregates of the
//!    final window go into `indexed_attestations` and `indexed_attestation_ids`. Kept for the
//!    next passes: each epoch's slot of every validator, and each aggregate's highest
//!    validator chunk.
//! 2. **Attester records.** `attesters[(e mod H) ‖ v]` holds the id of `v`'s latest included
//!    vote with a target `≡ e`, `attesters_max_targets[v]` its latest target.
//! 3. **Target arrays.** Each validator chunk's tiles are computed by
//!    [`ChunkArrays`], which runs the slasher's own epoch update and walks batch by batch in
//!    memory, for every batch that processes the chunk (one whose aggregate names this chunk or
//!    a higher one); then its tiles and its validators' `current_epochs` are written. Two
//!    threads compute chunks; the caller's thread writes them in order.
//!
//! Only what the replay leaves after its last batch and that batch's prune is written: headers
//! and attestations older than the final window are never stored.

use std::time::Instant;

use slasher_adapters::backend::{Cursor, Environment, RwTransaction};
use slasher_adapters::slasher::array::{TargetArray, TileCodec};
use slasher_adapters::slasher::array_memory::{ChunkArrays, Vote};
use slasher_adapters::slasher::keys::{
    attester_key, chunk_key, encode_block_header, encode_epoch, encode_indexed_attestation,
    indexed_attestation_id_key, proposer_key, validator_key, IndexedAttestationId,
};
use slasher_adapters::slasher::{AttesterRecord, Config, Slasher};
use slasher_adapters::tables::{OpenDatabases, MAX_NUM_DBS, TABLE_NAMES};

use super::chain::RegularChain;
use super::error::FillError;
use crate::fixtures::shuffle::SLOTS_PER_EPOCH;

/// A write transaction is committed once its entries' keys, values and [`ENTRY_COST`] add up
/// to this many bytes, which bounds what the backend holds in memory until the commit.
pub const COMMIT_BYTES: usize = 64 << 20;

/// What an entry costs a backend in memory beyond its key and value until the commit (butter's
/// memtable node and allocations), counted so that a transaction of small entries (13 bytes in
/// `attesters`) does not hold several times [`COMMIT_BYTES`].
const ENTRY_COST: usize = 64;

/// Validator chunks a worker computes before the writer takes them.
const CHUNKS_PER_ROUND: u64 = 64;

/// What a fill wrote.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct FillReport {
    /// Batches of the chain the database reflects.
    pub batches: u64,
    /// Entries written per table, in [`TABLE_NAMES`] order (`metadata` is the slasher's own).
    pub entries: [u64; MAX_NUM_DBS],
    /// Bytes of keys and values written.
    pub bytes: u64,
    /// Write transactions committed.
    pub commits: u64,
    /// Seconds of each pass: stream, attester records, target arrays.
    pub seconds: [f64; 3],
}

/// What the passes report as they go: the pass (1 to 3) and its progress out of a total.
pub type Progress<'p> = &'p mut dyn FnMut(u8, u64, u64);

/// Puts into one table after another, committing every [`COMMIT_BYTES`].
struct Writer<'e, E: Environment> {
    env: &'e E,
    txn: Option<E::RwTransaction<'e>>,
    pending: usize,
    report: FillReport,
}

impl<'e, E: Environment> Writer<'e, E> {
    fn put(
        &mut self,
        table: usize,
        db: E::Database,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), FillError> {
        let txn = match self.txn.as_mut() {
            Some(txn) => txn,
            None => self.txn.insert(self.env.begin_rw_txn()?),
        };
        txn.put(db, key, value)?;
        self.pending += key.len() + value.len() + ENTRY_COST;
        self.report.bytes += (key.len() + value.len()) as u64;
        if let Some(n) = self.report.entries.get_mut(table) {
            *n += 1;
        }
        if self.pending >= COMMIT_BYTES {
            self.commit()?;
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<(), FillError> {
        if let Some(txn) = self.txn.take() {
            txn.commit()?;
            self.report.commits += 1;
        }
        self.pending = 0;
        Ok(())
    }
}

/// Table positions in [`TABLE_NAMES`] order, for the report's counts.
mod table {
    pub(super) const INDEXED_ATTESTATIONS: usize = 0;
    pub(super) const INDEXED_ATTESTATION_IDS: usize = 1;
    pub(super) const ATTESTERS: usize = 2;
    pub(super) const ATTESTERS_MAX_TARGETS: usize = 3;
    pub(super) const MIN_TARGETS: usize = 4;
    pub(super) const MAX_TARGETS: usize = 5;
    pub(super) const CURRENT_EPOCHS: usize = 6;
    pub(super) const PROPOSERS: usize = 7;
}

/// Fill `slasher`'s database, which must hold nothing but its metadata, with the state a
/// replay of `chain` (one batch per slot, `process_queued` then `prune_database`) leaves.
///
/// # Errors
/// [`FillError::NotEmpty`] if a table holds data; [`FillError::Invalid`] if the chain does
/// not suit the slasher's settings; storage and encoding errors. A failed fill leaves a
/// partial database, which must be removed.
pub fn fill<E: Environment>(
    slasher: &Slasher<E>,
    chain: &RegularChain,
    progress: Progress<'_>,
) -> Result<FillReport, FillError> {
    let config = slasher.config();
    let dbs = slasher.databases();
    check_empty(slasher.environment(), dbs)?;
    if chain.first_epoch == 0 {
        return Err(FillError::Invalid(
            "the chain must start after epoch 0 (its first votes have source epoch − 1)".into(),
        ));
    }
    let mut w = Writer {
        env: slasher.environment(),
        txn: None,
        pending: 0,
        report: FillReport::default(),
    };
    let t = Instant::now();
    let stream = stream(&mut w, dbs, config, chain, progress)?;
    w.report.seconds[0] = t.elapsed().as_secs_f64();
    let t = Instant::now();
    attester_records(&mut w, dbs, config, chain, &stream.slots, progress)?;
    w.report.seconds[1] = t.elapsed().as_secs_f64();
    let t = Instant::now();
    arrays(&mut w, dbs, config, chain, &stream, progress)?;
    w.commit()?;
    w.report.seconds[2] = t.elapsed().as_secs_f64();
    w.report.batches = stream.highest.len() as u64;
    Ok(w.report)
}

fn check_empty<E: Environment>(env: &E, dbs: &OpenDatabases<E::Database>) -> Result<(), FillError> {
    let mut txn = env.begin_rw_txn()?;
    for (name, db) in TABLE_NAMES.iter().zip(dbs.all()) {
        if *name == slasher_adapters::tables::METADATA_DB {
            continue;
        }
        if txn.cursor(db)?.first_key()?.is_some() {
            return Err(FillError::NotEmpty { table: name });
        }
    }
    Ok(())
}

/// What the stream keeps for the later passes.
struct Stream {
    /// Per epoch of the chain, the slot (0..32) of every validator in it.
    slots: Vec<Vec<u8>>,
    /// Per batch, the highest validator chunk its aggregate names (`None`: no aggregate).
    highest: Vec<Option<u64>>,
}

/// Pass 1 (see the module docs).
fn stream<E: Environment>(
    w: &mut Writer<'_, E>,
    dbs: &OpenDatabases<E::Database>,
    config: &Config,
    chain: &RegularChain,
    progress: Progress<'_>,
) -> Result<Stream, FillError> {
    let h = config.history_length_u64();
    let min_epoch = (chain.last_epoch() + 1).saturating_sub(h);
    let min_slot = min_epoch * SLOTS_PER_EPOCH;
    let total = chain.epochs * SLOTS_PER_EPOCH;
    let n = usize::try_from(chain.validators)
        .map_err(|_| FillError::Invalid("--validators does not fit in memory".into()))?;
    let mut out = Stream {
        slots: Vec::with_capacity(chain.epochs as usize),
        highest: Vec::with_capacity(total as usize),
    };
    let mut next_id = IndexedAttestationId::new(1)?;
    // The id keys of the target epoch being streamed, sorted when it ends.
    let mut id_keys: Vec<([u8; 40], IndexedAttestationId)> = Vec::new();
    let mut id_target = None;
    let mut walk = chain.batches();
    while let Some(batch) = walk.next() {
        let batch = batch?;
        if batch.slot % SLOTS_PER_EPOCH == 0 {
            let committees = walk
                .committees()
                .ok_or_else(|| FillError::Invalid("internal: no committees".into()))?;
            let mut slots = vec![0u8; n];
            for slot_in_epoch in 0..SLOTS_PER_EPOCH {
                let slot = batch.slot + slot_in_epoch;
                for index in 0..committees.committees_per_slot {
                    for &v in committees.committee(slot, index).unwrap_or_default() {
                        if let Some(s) = slots.get_mut(v as usize) {
                            *s = slot_in_epoch as u8;
                        }
                    }
                }
            }
            out.slots.push(slots);
            progress(1, batch.index, total);
        }
        for header in &batch.headers {
            if batch.slot >= min_slot {
                let key = proposer_key(header.message.slot, header.message.proposer_index);
                w.put(
                    table::PROPOSERS,
                    dbs.proposers_db,
                    &key,
                    &encode_block_header(header),
                )?;
            }
        }
        let mut highest = None;
        for attestation in batch.attestations {
            let id = next_id;
            next_id = next_id.next()?;
            highest = highest.max(
                attestation
                    .attesting_indices
                    .last()
                    .map(|&v| config.validator_chunk_index(v)),
            );
            let target = attestation.data.target.epoch;
            if target < min_epoch {
                continue;
            }
            if id_target != Some(target) {
                write_id_keys(w, dbs, &mut id_keys)?;
                id_target = Some(target);
            }
            let record = AttesterRecord::new(attestation);
            w.put(
                table::INDEXED_ATTESTATIONS,
                dbs.indexed_attestation_db,
                &id.to_bytes(),
                &encode_indexed_attestation(record.attestation()),
            )?;
            id_keys.push((
                indexed_attestation_id_key(target, &record.indexed_hash()),
                id,
            ));
        }
        out.highest.push(highest);
    }
    write_id_keys(w, dbs, &mut id_keys)?;
    Ok(out)
}

fn write_id_keys<E: Environment>(
    w: &mut Writer<'_, E>,
    dbs: &OpenDatabases<E::Database>,
    keys: &mut Vec<([u8; 40], IndexedAttestationId)>,
) -> Result<(), FillError> {
    keys.sort_unstable();
    for (key, id) in keys.drain(..) {
        w.put(
            table::INDEXED_ATTESTATION_IDS,
            dbs.indexed_attestation_id_db,
            &key,
            &id.to_bytes(),
        )?;
    }
    Ok(())
}

/// Where validator `v`'s vote of `epoch` is: its slot, and whether a batch included it (every
/// aggregate but the last slot's is included).
fn vote_slot(chain: &RegularChain, slots: &[Vec<u8>], v: u64, epoch: u64) -> Option<u64> {
    let in_epoch = slots
        .get(usize::try_from(epoch.checked_sub(chain.first_epoch)?).ok()?)?
        .get(usize::try_from(v).ok()?)?;
    let slot = epoch * SLOTS_PER_EPOCH + u64::from(*in_epoch);
    (slot < chain.last_slot()).then_some(slot)
}

/// The latest included vote of `v` with a target `≡ epoch (mod h)`, at most `epoch`: its
/// target and slot.
fn latest_vote(
    chain: &RegularChain,
    slots: &[Vec<u8>],
    v: u64,
    mut epoch: u64,
    h: u64,
) -> Option<(u64, u64)> {
    while epoch >= chain.first_epoch {
        if let Some(slot) = vote_slot(chain, slots, v, epoch) {
            return Some((epoch, slot));
        }
        epoch = epoch.checked_sub(h)?;
    }
    None
}

/// Pass 2 (see the module docs).
fn attester_records<E: Environment>(
    w: &mut Writer<'_, E>,
    dbs: &OpenDatabases<E::Database>,
    config: &Config,
    chain: &RegularChain,
    slots: &[Vec<u8>],
    progress: Progress<'_>,
) -> Result<(), FillError> {
    let h = config.history_length_u64();
    let last = chain.last_epoch();
    let id_of = |slot: u64| IndexedAttestationId::new(slot - chain.first_slot() + 1);
    for j in 0..h {
        progress(2, j, h);
        // The latest epoch ≡ j (mod h) of the chain.
        let epoch = last - (last % h + h - j) % h;
        if epoch < chain.first_epoch {
            continue;
        }
        for v in 0..chain.validators {
            if let Some((target, slot)) = latest_vote(chain, slots, v, epoch, h) {
                w.put(
                    table::ATTESTERS,
                    dbs.attesters_db,
                    &attester_key(v, target, h)?,
                    &id_of(slot)?.to_bytes(),
                )?;
            }
        }
    }
    for v in 0..chain.validators {
        if let Some((target, _)) = latest_vote(chain, slots, v, last, 1) {
            w.put(
                table::ATTESTERS_MAX_TARGETS,
                dbs.attesters_max_targets_db,
                &validator_key(v),
                &encode_epoch(target),
            )?;
        }
    }
    Ok(())
}

/// One validator chunk's final state: encoded min and max tiles, and `current_epochs`.
struct ChunkOut {
    vci: u64,
    tiles: [Vec<(usize, Vec<u8>)>; 2],
    current_epoch: Option<u64>,
}

/// Run the chain's batches over validator chunk `vci` in memory.
fn simulate_chunk(
    config: &Config,
    chain: &RegularChain,
    stream: &Stream,
    vci: u64,
    codec: &mut TileCodec,
) -> Result<ChunkOut, FillError> {
    let mut arrays = ChunkArrays::new(config, vci);
    let members = config.validator_indices_in_chunk(vci);
    let members = members.start..members.end.min(chain.validators);
    let mut by_slot: Vec<Vec<Vote>> = vec![Vec::new(); SLOTS_PER_EPOCH as usize];
    for (offset, slots) in stream.slots.iter().enumerate() {
        let epoch = chain.first_epoch + offset as u64;
        by_slot.iter_mut().for_each(Vec::clear);
        for v in members.clone() {
            let s = slots.get(v as usize).copied().unwrap_or_default();
            if let Some(votes) = by_slot.get_mut(usize::from(s)) {
                votes.push(Vote {
                    validator: v,
                    source: epoch - 1,
                    target: epoch,
                });
            }
        }
        for (s, votes) in by_slot.iter().enumerate() {
            // Slot `s`'s aggregate is in the next slot's batch.
            let batch_slot = epoch * SLOTS_PER_EPOCH + s as u64 + 1;
            let Some(highest) = stream
                .highest
                .get((batch_slot - chain.first_slot()) as usize)
            else {
                break;
            };
            if highest.is_some_and(|h| h >= vci) {
                arrays.batch(batch_slot / SLOTS_PER_EPOCH, votes)?;
            }
        }
    }
    let mut tiles = [Vec::new(), Vec::new()];
    for (out, kind) in tiles.iter_mut().zip([TargetArray::Min, TargetArray::Max]) {
        for (chunk_index, chunk) in arrays.tiles(kind) {
            out.push((chunk_index, codec.encode(chunk)?));
        }
    }
    Ok(ChunkOut {
        vci,
        tiles,
        current_epoch: arrays.current_epoch(),
    })
}

/// Pass 3 (see the module docs).
fn arrays<E: Environment>(
    w: &mut Writer<'_, E>,
    dbs: &OpenDatabases<E::Database>,
    config: &Config,
    chain: &RegularChain,
    stream: &Stream,
    progress: Progress<'_>,
) -> Result<(), FillError> {
    let chunks = chain
        .validators
        .div_ceil(config.validator_chunk_size as u64);
    let mut start = 0;
    while start < chunks {
        progress(3, start, chunks);
        let mid = (start + CHUNKS_PER_ROUND).min(chunks);
        let end = (mid + CHUNKS_PER_ROUND).min(chunks);
        let work = |range: std::ops::Range<u64>| -> Result<Vec<ChunkOut>, FillError> {
            let mut codec = TileCodec::new(config.tile_codec);
            range
                .map(|vci| simulate_chunk(config, chain, stream, vci, &mut codec))
                .collect()
        };
        let (first, second) = std::thread::scope(|scope| {
            let other = scope.spawn(|| work(mid..end));
            let first = work(start..mid);
            (first, other.join())
        });
        let second = second.map_err(|_| FillError::Invalid("a fill thread panicked".into()))?;
        let mut outs = first?;
        outs.extend(second?);
        write_chunks(w, dbs, config, &outs)?;
        start = end;
    }
    Ok(())
}

fn write_chunks<E: Environment>(
    w: &mut Writer<'_, E>,
    dbs: &OpenDatabases<E::Database>,
    config: &Config,
    outs: &[ChunkOut],
) -> Result<(), FillError> {
    for out in outs {
        for ((table, db), tiles) in [
            (table::MIN_TARGETS, dbs.min_targets_db),
            (table::MAX_TARGETS, dbs.max_targets_db),
        ]
        .into_iter()
        .zip(&out.tiles)
        {
            for (chunk_index, bytes) in tiles {
                let key = chunk_key(config.disk_key(out.vci, *chunk_index)?);
                w.put(table, db, &key, bytes)?;
            }
        }
        if let Some(epoch) = out.current_epoch {
            let value = encode_epoch(epoch);
            for v in config.validator_indices_in_chunk(out.vci) {
                w.put(
                    table::CURRENT_EPOCHS,
                    dbs.current_epochs_db,
                    &validator_key(v),
                    &value,
                )?;
            }
        }
    }
    Ok(())
}
