//! The slasher: Lighthouse's batch logic over the storage interface
//! (tables, tiles and batch order summarised in `docs/background.md` §1.1–§1.4).
//!
//! [`Slasher`] owns its [`Environment`] (no `Box::leak`). Attestations and block headers are
//! queued by [`Slasher::accept_attestation`] and [`Slasher::accept_block_header`] (both hashes
//! of an attestation are computed there, on the caller's thread, as in Lighthouse);
//! [`Slasher::process_queued`] then runs one batch in **one** write transaction, in the order of
//! `docs/background.md` §1.4:
//!
//! 1. block headers (double proposals);
//! 2. validation: drop if `source > target` or `source + H ≤ c`; defer (re-queue) if `target > c`;
//! 3. de-duplication by `(validator, data_hash)`, keeping the record with strictly more indices;
//! 4. storing the surviving indexed attestations (ids allocated as `last_key + 1`);
//! 5. grouping by validator chunk, empty chunks included up to the highest;
//! 6. per validator chunk: the double-vote pass, the min and max array passes, then the
//!    `current_epochs` puts;
//! 7. the commit.
//!
//! [`Slasher::prune_database`] then deletes what fell out of the history window, in its own
//! transaction.
//!
//! **Signatures are never verified.** Attestation and block-header signatures are stored and
//! compared as the 96 bytes given; the caller must only pass objects whose signatures it has
//! checked (Lighthouse feeds its slasher signature-verified gossip and block contents). Unlike
//! Lighthouse we do not parse them as BLS points either, so any 96 bytes are accepted and
//! decoded back.
//!
//! **Differences from Lighthouse** (each deliberate):
//! - The schema version (3) and the 24-byte `DiskConfig` are written to `metadata` on first open
//!   and checked on every open ([`Error::IncompatibleSchemaVersion`],
//!   [`Error::ConfigIncompatible`]); Lighthouse has not written them since 2021.
//! - Block headers of one batch are processed in arrival order (de-duplicated), not in
//!   `HashSet` order, so runs are reproducible.
//! - An attestation naming a validator index ≥ 2^40 is dropped at validation instead of
//!   panicking in the `attesters` key writer.
//! - The epoch reset of the arrays visits at most the last H epochs of `prev..=c` (older epochs
//!   alias the same cells, so the result is identical).

pub mod array;
pub mod array_memory;
pub mod batch_stats;
pub mod config;
mod database;
mod disk_config;
pub mod error;
pub mod keys;
pub mod records;
pub mod reference;
pub mod types;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use lru::LruCache;
use parking_lot::Mutex;

pub use batch_stats::{AttestationStats, BatchStats, BatchTimings, BlockStats, PruneStats};
pub use config::{Config, TileCodecKind};
pub use database::CURRENT_SCHEMA_VERSION;
pub use disk_config::DiskConfig;
pub use error::Error;
pub use records::AttesterRecord;
pub use types::{
    AttestationData, AttesterSlashing, BeaconBlockHeader, Checkpoint, Hash256, IndexedAttestation,
    ProposerSlashing, SignedBeaconBlockHeader,
};

use batch_stats::micros_since;
use database::RootCache;
use keys::IndexedAttestationId;
use records::{classify, AttestationBatch, AttestationQueue, BlockQueue, Validity};

use crate::backend::{Environment, RwTransaction};
use crate::tables::OpenDatabases;

/// A slasher over one storage environment.
///
/// Share it between threads behind an `Arc`: every method takes `&self`. Concurrent
/// `process_queued` / `prune_database` calls serialise on the backend's single write
/// transaction.
#[derive(Debug)]
pub struct Slasher<E: Environment> {
    env: E,
    dbs: OpenDatabases<E::Database>,
    config: Config,
    attestation_queue: AttestationQueue,
    block_queue: BlockQueue,
    attester_slashings: Mutex<HashSet<AttesterSlashing>>,
    proposer_slashings: Mutex<HashSet<ProposerSlashing>>,
    root_cache: Mutex<RootCache>,
}

/// Slashings found during one batch, merged into the slasher's sets even if the batch fails.
#[derive(Default)]
struct Found {
    attester: HashSet<AttesterSlashing>,
    proposer: HashSet<ProposerSlashing>,
    double_votes: usize,
}

impl<E: Environment> Slasher<E> {
    /// Create `config.path` if needed, open the backend `E` there, and [`Slasher::open`] it.
    ///
    /// # Errors
    /// As [`Slasher::open`], plus [`Error::Io`] for the directory and backend open errors.
    pub fn create(config: Config) -> Result<Self, Error> {
        config.validate()?;
        std::fs::create_dir_all(&config.path).map_err(|source| Error::Io {
            path: config.path.clone(),
            source,
        })?;
        let env = E::open(&config.backend_config())?;
        Self::open(config, env)
    }

    /// Take ownership of an opened environment: validate the config, open the nine tables, and
    /// check (on first open: write) the schema version and geometry in `metadata`.
    ///
    /// # Errors
    /// - config validation errors ([`Config::validate`]);
    /// - [`Error::IncompatibleSchemaVersion`] if `metadata[0x00]` is not 3;
    /// - [`Error::ConfigIncompatible`] if `metadata[0x01]` differs from the configured C, K, H;
    /// - [`Error::Corrupted`] for undecodable metadata; storage errors.
    pub fn open(config: Config, env: E) -> Result<Self, Error> {
        config.validate()?;
        let dbs = env.create_databases()?;
        {
            let mut txn = env.begin_rw_txn()?;
            database::check_and_store_metadata(&mut txn, &dbs, &config)?;
            txn.commit()?;
        }
        let root_cache = Mutex::new(LruCache::new(config.attestation_root_cache_size));
        Ok(Self {
            env,
            dbs,
            config,
            attestation_queue: AttestationQueue::default(),
            block_queue: BlockQueue::default(),
            attester_slashings: Mutex::new(HashSet::new()),
            proposer_slashings: Mutex::new(HashSet::new()),
            root_cache,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The storage environment (for inspection and reporting, e.g. `filenames`).
    pub fn environment(&self) -> &E {
        &self.env
    }

    /// The nine table handles.
    pub fn databases(&self) -> &OpenDatabases<E::Database> {
        &self.dbs
    }

    /// Queue an attestation for the next batch, computing its data root and indexed-attestation
    /// root now. The signature is not verified.
    pub fn accept_attestation(&self, attestation: IndexedAttestation) {
        self.attestation_queue
            .push(Arc::new(AttesterRecord::new(attestation)));
    }

    /// Queue an attestation whose hashes were computed earlier by [`AttesterRecord::new`] (on
    /// another thread, or once for several slashers, as a replay benchmark may want). Equivalent
    /// to [`Slasher::accept_attestation`] otherwise.
    pub fn accept_attester_record(&self, record: Arc<AttesterRecord>) {
        self.attestation_queue.push(record);
    }

    /// Queue a block header for the next batch (duplicates are ignored). The signature is not
    /// verified.
    pub fn accept_block_header(&self, header: SignedBeaconBlockHeader) {
        self.block_queue.push(header);
    }

    /// Attestations waiting (including deferred ones).
    pub fn num_queued_attestations(&self) -> usize {
        self.attestation_queue.len()
    }

    /// Distinct block headers waiting.
    pub fn num_queued_blocks(&self) -> usize {
        self.block_queue.len()
    }

    /// Take every attester slashing found so far.
    pub fn get_attester_slashings(&self) -> HashSet<AttesterSlashing> {
        std::mem::take(&mut *self.attester_slashings.lock())
    }

    /// Take every proposer slashing found so far.
    pub fn get_proposer_slashings(&self) -> HashSet<ProposerSlashing> {
        std::mem::take(&mut *self.proposer_slashings.lock())
    }

    /// Process everything queued as one batch at `current_epoch`, in one write transaction
    /// (`docs/background.md` §1.4).
    ///
    /// # Errors
    /// Any storage or decoding error aborts the batch: the transaction is rolled back and the
    /// dequeued blocks and attestations are lost (deferred ones stay queued). Slashings found
    /// before the error are kept.
    pub fn process_queued(&self, current_epoch: u64) -> Result<BatchStats, Error> {
        let start = Instant::now();
        let mut stats = BatchStats {
            current_epoch,
            ..BatchStats::default()
        };
        let mut found = Found::default();
        let result = self.process_batch(current_epoch, &mut stats, &mut found);
        stats.block_stats.num_slashings = found.proposer.len();
        stats.attestation_stats.num_slashings = found.attester.len();
        stats.attestation_stats.num_double_votes = found.double_votes;
        self.attester_slashings.lock().extend(found.attester);
        self.proposer_slashings.lock().extend(found.proposer);
        result?;
        stats.timings.total_us = micros_since(start);
        Ok(stats)
    }

    fn process_batch(
        &self,
        current_epoch: u64,
        stats: &mut BatchStats,
        found: &mut Found,
    ) -> Result<(), Error> {
        let config = &self.config;
        let dbs = &self.dbs;
        let t = Instant::now();
        let mut txn = self.env.begin_rw_txn()?;
        stats.timings.begin_us = micros_since(t);

        // Step 1: blocks.
        let t = Instant::now();
        let blocks = self.block_queue.dequeue();
        stats.block_stats.num_processed = blocks.len();
        for header in &blocks {
            let (slashing, stored) =
                database::check_or_insert_block_proposal(&mut txn, dbs, header)?;
            if let Some(slashing) = slashing {
                found.proposer.insert(slashing);
            }
            stats.block_stats.num_stored += usize::from(stored);
        }
        stats.timings.blocks_us = micros_since(t);

        // Step 2: validation.
        let t = Instant::now();
        let a = &mut stats.attestation_stats;
        let dequeued = self.attestation_queue.dequeue();
        a.num_dequeued = dequeued.len();
        let mut valid = Vec::with_capacity(dequeued.len());
        let mut deferred = Vec::new();
        for record in dequeued {
            match classify(&record, current_epoch, config) {
                Validity::Valid => valid.push(record),
                Validity::Deferred => deferred.push(record),
                Validity::Invalid => a.num_dropped += 1,
            }
        }
        a.num_processed = valid.len();
        a.num_deferred = deferred.len();
        self.attestation_queue.extend(deferred);

        // Step 3: de-duplication.
        let batch = AttestationBatch::new(valid);
        let surviving = batch.surviving();
        a.num_deduplicated = surviving.len();

        // Step 4: store, priming the LRU.
        let mut cache = self.root_cache.lock();
        let mut ids: Vec<Option<IndexedAttestationId>> = vec![None; batch.records.len()];
        for pos in surviving {
            let (Some(record), Some(slot)) = (batch.records.get(pos), ids.get_mut(pos)) else {
                continue;
            };
            let (id, new) = database::store_indexed_attestation(&mut txn, dbs, record)?;
            *slot = Some(id);
            a.num_stored += usize::from(new);
            cache.put(id.as_u64(), record.data_hash);
        }
        stats.timings.store_us = micros_since(t);

        // Steps 5 and 6: per validator chunk.
        let subqueues = batch.group_by_validator_chunk(config);
        stats.attestation_stats.num_validator_chunks = subqueues.len();
        let mut double_vote_us = 0;
        let mut arrays_us = 0;
        let mut codec = array::TileCodec::new(config.tile_codec);
        for (vci, subqueue) in subqueues.iter().enumerate() {
            let vci = vci as u64;
            let records: Vec<(&AttesterRecord, IndexedAttestationId)> = subqueue
                .iter()
                .filter_map(|&pos| Some((batch.records.get(pos)?.as_ref(), (*ids.get(pos)?)?)))
                .collect();

            let t = Instant::now();
            for &(record, id) in &records {
                for &v in record.indices() {
                    if config.validator_chunk_index(v) != vci {
                        continue;
                    }
                    if let Some(slashing) = database::check_and_update_attester_record(
                        &mut txn, dbs, config, &mut cache, v, record, id,
                    )? {
                        if found.attester.insert(slashing) {
                            found.double_votes += 1;
                        }
                    }
                }
            }
            double_vote_us += micros_since(t);

            let t = Instant::now();
            let only_records: Vec<&AttesterRecord> = records.iter().map(|&(r, _)| r).collect();
            let counts = array::update(
                &mut txn,
                dbs,
                config,
                vci,
                &only_records,
                current_epoch,
                &mut found.attester,
                &mut codec,
            )?;
            stats.attestation_stats.num_tiles_written += counts.tiles_written;
            arrays_us += micros_since(t);
        }
        drop(cache);
        stats.timings.double_vote_us = double_vote_us;
        stats.timings.arrays_us = arrays_us;

        // Step 7.
        let t = Instant::now();
        txn.commit()?;
        stats.timings.commit_us = micros_since(t);
        Ok(())
    }

    /// Delete block headers with `slot < e_min · 32` and attestations with
    /// `target < e_min`, where `e_min = current_epoch + 1 − H` (saturating), in one write
    /// transaction; evict the deleted ids from the LRU.
    ///
    /// # Errors
    /// Storage errors; [`Error::IndexedAttestationIdCorrupt`] or [`Error::Corrupted`] for bad
    /// stored keys or ids. Nothing is deleted if it fails.
    pub fn prune_database(&self, current_epoch: u64) -> Result<PruneStats, Error> {
        let t = Instant::now();
        let mut txn = self.env.begin_rw_txn()?;
        let pruned = database::prune(&mut txn, &self.dbs, &self.config, current_epoch)?;
        {
            let mut cache = self.root_cache.lock();
            for id in &pruned.attestation_ids {
                cache.pop(&id.as_u64());
            }
        }
        let prune_us = micros_since(t);
        let t = Instant::now();
        txn.commit()?;
        Ok(PruneStats {
            current_epoch,
            min_epoch: current_epoch
                .saturating_add(1)
                .saturating_sub(self.config.history_length_u64()),
            num_proposers_deleted: pruned.proposers,
            num_attestations_deleted: pruned.attestation_ids.len(),
            prune_us,
            commit_us: micros_since(t),
        })
    }
}
