//! The slasher's table operations inside one read-write transaction (Lighthouse's `SlasherDB`),
//! generic over any [`RwTransaction`].

use lru::LruCache;
use tree_hash::TreeHash;

use super::config::Config;
use super::error::Error;
use super::keys::{
    attester_key, decode_block_header, decode_disk_config, decode_epoch,
    decode_indexed_attestation, decode_schema_version, encode_block_header, encode_disk_config,
    encode_epoch, encode_indexed_attestation, encode_schema_version, indexed_attestation_id_key,
    proposer_key, slot_of_proposer_key, target_epoch_of_id_key, validator_key,
    IndexedAttestationId, METADATA_CONFIG_KEY, METADATA_SCHEMA_VERSION_KEY,
};
use super::records::AttesterRecord;
use super::types::{
    AttesterSlashing, Hash256, IndexedAttestation, ProposerSlashing, SignedBeaconBlockHeader,
    SLOTS_PER_EPOCH,
};
use crate::backend::{Cursor, RwTransaction};
use crate::tables::OpenDatabases;

/// The schema version this code reads and writes (Lighthouse's `CURRENT_SCHEMA_VERSION`).
pub const CURRENT_SCHEMA_VERSION: u64 = 3;

/// Id → attestation data root.
pub(crate) type RootCache = LruCache<u64, Hash256>;

/// Check (and on first open, write) the schema version and the on-disk geometry. Returns
/// whether anything was written.
pub(crate) fn check_and_store_metadata<T: RwTransaction>(
    txn: &mut T,
    dbs: &OpenDatabases<T::Database>,
    config: &Config,
) -> Result<bool, Error> {
    let mut wrote = false;
    match txn.get(dbs.metadata_db, &METADATA_SCHEMA_VERSION_KEY)? {
        Some(bytes) => {
            let version = decode_schema_version(&bytes)?;
            if version != CURRENT_SCHEMA_VERSION {
                return Err(Error::IncompatibleSchemaVersion {
                    database_schema_version: version,
                    software_schema_version: CURRENT_SCHEMA_VERSION,
                });
            }
        }
        None => {
            txn.put(
                dbs.metadata_db,
                &METADATA_SCHEMA_VERSION_KEY,
                &encode_schema_version(CURRENT_SCHEMA_VERSION),
            )?;
            wrote = true;
        }
    }
    let configured = config.disk_config();
    match txn.get(dbs.metadata_db, &METADATA_CONFIG_KEY)? {
        Some(bytes) => {
            let on_disk = decode_disk_config(&bytes)?;
            if on_disk != configured {
                return Err(Error::ConfigIncompatible {
                    on_disk,
                    configured,
                });
            }
        }
        None => {
            txn.put(
                dbs.metadata_db,
                &METADATA_CONFIG_KEY,
                &encode_disk_config(&configured)?,
            )?;
            wrote = true;
        }
    }
    Ok(wrote)
}

/// Spec §3.2 step 1 for one header: store it, or compare it with the stored one.
/// Returns the slashing if the stored header differs, and whether the header was newly stored.
pub(crate) fn check_or_insert_block_proposal<T: RwTransaction>(
    txn: &mut T,
    dbs: &OpenDatabases<T::Database>,
    header: &SignedBeaconBlockHeader,
) -> Result<(Option<ProposerSlashing>, bool), Error> {
    let key = proposer_key(header.message.slot, header.message.proposer_index);
    let existing = match txn.get(dbs.proposers_db, &key)? {
        Some(bytes) => Some(decode_block_header(&bytes)?),
        None => None,
    };
    match existing {
        Some(stored) if stored == *header => Ok((None, false)),
        Some(stored) => Ok((
            Some(ProposerSlashing {
                signed_header_1: stored,
                signed_header_2: *header,
            }),
            false,
        )),
        None => {
            txn.put(dbs.proposers_db, &key, &encode_block_header(header))?;
            Ok((None, true))
        }
    }
}

/// Spec §3.2 step 4 for one record: reuse the id stored under `target ‖ indexed_hash`, or
/// allocate `last_key + 1` (1 for an empty table) and store the attestation. Returns the id
/// and whether it is new.
pub(crate) fn store_indexed_attestation<T: RwTransaction>(
    txn: &mut T,
    dbs: &OpenDatabases<T::Database>,
    record: &AttesterRecord,
) -> Result<(IndexedAttestationId, bool), Error> {
    let id_key = indexed_attestation_id_key(record.target(), &record.indexed_hash);
    if let Some(bytes) = txn.get(dbs.indexed_attestation_id_db, &id_key)? {
        return Ok((IndexedAttestationId::from_bytes(&bytes)?, false));
    }
    let id = {
        let mut cursor = txn.cursor(dbs.indexed_attestation_db)?;
        let id = match cursor.last_key()? {
            Some(last) => IndexedAttestationId::from_bytes(&last)?.next()?,
            None => IndexedAttestationId::new(1)?,
        };
        cursor.put(
            &id.to_bytes(),
            &encode_indexed_attestation(&record.attestation),
        )?;
        id
    };
    txn.put(dbs.indexed_attestation_id_db, &id_key, &id.to_bytes())?;
    Ok((id, true))
}

/// Load a stored attestation.
pub(crate) fn get_indexed_attestation<T: RwTransaction>(
    txn: &T,
    dbs: &OpenDatabases<T::Database>,
    id: IndexedAttestationId,
) -> Result<IndexedAttestation, Error> {
    let bytes = txn
        .get(dbs.indexed_attestation_db, &id.to_bytes())?
        .ok_or_else(|| Error::MissingIndexedAttestation { id: id.as_u64() })?;
    decode_indexed_attestation(&bytes)
}

/// `attesters_max_targets[v]`, if any.
pub(crate) fn get_max_target<T: RwTransaction>(
    txn: &T,
    dbs: &OpenDatabases<T::Database>,
    validator_index: u64,
) -> Result<Option<u64>, Error> {
    match txn.get(
        dbs.attesters_max_targets_db,
        &validator_key(validator_index),
    )? {
        Some(bytes) => Ok(Some(decode_epoch(&bytes, "attesters max target")?)),
        None => Ok(None),
    }
}

/// The non-null id in `attesters[(target mod H) ‖ v]`, if any. Callers apply the read rule
/// (only look up targets ≤ the validator's max target).
fn get_attester_id<T: RwTransaction>(
    txn: &T,
    dbs: &OpenDatabases<T::Database>,
    config: &Config,
    validator_index: u64,
    target_epoch: u64,
) -> Result<Option<IndexedAttestationId>, Error> {
    let key = attester_key(validator_index, target_epoch, config.history_length_u64())?;
    match txn.get(dbs.attesters_db, &key)? {
        Some(bytes) => {
            let id = IndexedAttestationId::from_bytes(&bytes)?;
            Ok((!id.is_null()).then_some(id))
        }
        None => Ok(None),
    }
}

/// The attestation recorded for `(v, target)`, for a surround hit (never from the LRU).
///
/// # Errors
/// [`Error::MissingAttesterRecord`] if the target is above the validator's max target or the
/// record is missing or null; [`Error::MissingIndexedAttestation`].
pub(crate) fn get_attestation_for_validator<T: RwTransaction>(
    txn: &T,
    dbs: &OpenDatabases<T::Database>,
    config: &Config,
    validator_index: u64,
    target_epoch: u64,
) -> Result<IndexedAttestation, Error> {
    let missing = Error::MissingAttesterRecord {
        validator_index,
        target_epoch,
    };
    let Some(max_target) = get_max_target(txn, dbs, validator_index)? else {
        return Err(missing);
    };
    if target_epoch > max_target {
        return Err(missing);
    }
    let Some(id) = get_attester_id(txn, dbs, config, validator_index, target_epoch)? else {
        return Err(missing);
    };
    get_indexed_attestation(txn, dbs, id)
}

/// Spec §3.2 step 6a for one (validator, record): detect a double vote against the recorded
/// attestation for the same target, or record this one.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_and_update_attester_record<T: RwTransaction>(
    txn: &mut T,
    dbs: &OpenDatabases<T::Database>,
    config: &Config,
    cache: &mut RootCache,
    validator_index: u64,
    record: &AttesterRecord,
    id: IndexedAttestationId,
) -> Result<Option<AttesterSlashing>, Error> {
    let target = record.target();
    let prev_max = get_max_target(txn, dbs, validator_index)?;
    if prev_max.is_some_and(|max| target <= max) {
        if let Some(existing_id) = get_attester_id(txn, dbs, config, validator_index, target)? {
            if existing_id == id {
                return Ok(None);
            }
            let (existing_root, loaded) = match cache.get(&existing_id.as_u64()) {
                Some(root) => (*root, None),
                None => {
                    let existing = get_indexed_attestation(txn, dbs, existing_id)?;
                    let root = existing.data.tree_hash_root();
                    cache.put(existing_id.as_u64(), root);
                    (root, Some(existing))
                }
            };
            if existing_root == record.data_hash {
                return Ok(None);
            }
            let existing = match loaded {
                Some(existing) => existing,
                None => get_indexed_attestation(txn, dbs, existing_id)?,
            };
            if existing.data.target.epoch == target && existing.data != record.attestation.data {
                return Ok(Some(AttesterSlashing {
                    attestation_1: existing,
                    attestation_2: record.attestation.clone(),
                }));
            }
            return Err(Error::InconsistentAttestationDataRoot {
                validator_index,
                target_epoch: target,
            });
        }
    }
    // No usable record: insert this one.
    let h = config.history_length_u64();
    match prev_max {
        Some(max) if target <= max => {}
        _ => {
            if let Some(max) = prev_max {
                let null = IndexedAttestationId::NULL.to_bytes();
                let from = max
                    .saturating_add(1)
                    .max(target.saturating_add(1).saturating_sub(h));
                for epoch in from..target {
                    txn.put(
                        dbs.attesters_db,
                        &attester_key(validator_index, epoch, h)?,
                        &null,
                    )?;
                }
            }
            txn.put(
                dbs.attesters_max_targets_db,
                &validator_key(validator_index),
                &encode_epoch(target),
            )?;
        }
    }
    txn.put(
        dbs.attesters_db,
        &attester_key(validator_index, target, h)?,
        &id.to_bytes(),
    )?;
    Ok(None)
}

/// What one prune transaction deleted.
#[derive(Debug, Default)]
pub(crate) struct Pruned {
    pub(crate) proposers: usize,
    pub(crate) attestation_ids: Vec<IndexedAttestationId>,
}

/// Run `delete_while(pred)` from the first key of `db`, keeping a typed error raised by the
/// predicate (the interface only carries the storage error type).
fn delete_prefix_while<T: RwTransaction>(
    txn: &mut T,
    db: T::Database,
    mut pred: impl FnMut(&[u8]) -> Result<bool, Error>,
) -> Result<Vec<Vec<u8>>, Error> {
    let mut cursor = txn.cursor(db)?;
    if cursor.first_key()?.is_none() {
        return Ok(Vec::new());
    }
    let mut typed: Option<Error> = None;
    let result = cursor.delete_while(&mut |key| {
        pred(key).map_err(|e| {
            let message = e.to_string();
            typed = Some(e);
            crate::Error::Other(message)
        })
    });
    match (result, typed) {
        (Ok(values), _) => Ok(values),
        (Err(_), Some(e)) => Err(e),
        (Err(e), None) => Err(e.into()),
    }
}

/// The deletions of `prune_database(current_epoch)` (`docs/background.md` §1.4, last paragraph),
/// without the commit.
pub(crate) fn prune<T: RwTransaction>(
    txn: &mut T,
    dbs: &OpenDatabases<T::Database>,
    config: &Config,
    current_epoch: u64,
) -> Result<Pruned, Error> {
    let min_epoch = current_epoch
        .saturating_add(1)
        .saturating_sub(config.history_length_u64());
    let min_slot = min_epoch.saturating_mul(SLOTS_PER_EPOCH);
    let proposers = delete_prefix_while(txn, dbs.proposers_db, |key| {
        Ok(slot_of_proposer_key(key)? < min_slot)
    })?
    .len();
    let id_values = delete_prefix_while(txn, dbs.indexed_attestation_id_db, |key| {
        Ok(target_epoch_of_id_key(key)? < min_epoch)
    })?;
    let mut attestation_ids = Vec::with_capacity(id_values.len());
    for value in &id_values {
        let id = IndexedAttestationId::from_bytes(value)?;
        txn.del(dbs.indexed_attestation_db, &id.to_bytes())?;
        attestation_ids.push(id);
    }
    Ok(Pruned {
        proposers,
        attestation_ids,
    })
}
