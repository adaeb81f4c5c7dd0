//! `import-beacon-api`: turn beacon-node REST API responses (see [`crate::beacon_api`]) into a
//! fixture with one batch per non-missed slot (the block's header and its attestations,
//! `current_epoch = slot / 32`).
//!
//! Attesting indices come either from committee responses (exact) or from synthetic committees:
//! the committee sizes are read off the bitlists, the active-set size N of each epoch is inferred
//! from them (see [`infer_active_counts`]), and members are assigned by the spec's
//! `compute_committee` over `0..N` with [`crate::shuffle::synthetic_seed`].

use crate::beacon_api::{
    self, ApiAttestation, ApiAttestationShape, ApiFileError, AttestationsResponse,
    CommitteesResponse, HeaderResponse,
};
use crate::fixture::{
    Batch, CommitteeAssignment, EpochActiveCount, FixtureDescription, FixtureError, FixtureWriter,
    Manifest, Provenance, SlasherConfigHint, SourceKind,
};
use crate::shuffle::{
    committee_size, committees_per_slot, EpochCommittees, MAX_COMMITTEES_PER_SLOT,
    SHUFFLE_DESCRIPTION, SLOTS_PER_EPOCH, SYNTHETIC_SEED_RULE,
};
use slasher_adapters::slasher::types::IndexedAttestation;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// A response file could not be read or parsed.
    #[error(transparent)]
    File(#[from] ApiFileError),
    /// Writing the fixture failed.
    #[error(transparent)]
    Fixture(#[from] FixtureError),
    /// No response files in the slot range.
    #[error("no attestation or header files in {} for the requested slots", dir.display())]
    NoInput {
        /// The attestations directory.
        dir: PathBuf,
    },
    /// Every slot in range is a missed slot: the fixture would hold 0 batches.
    #[error(
        "0 batches: the {slots} slot(s) in range {first}..={last} are all missed slots (their \
         files hold null or no data); no fixture written"
    )]
    NoBatches {
        /// Slots with files in range.
        slots: usize,
        /// First slot.
        first: u64,
        /// Last slot.
        last: u64,
    },
    /// Attestations and header of a slot disagree (one missing, or the header is for another
    /// slot).
    #[error("slot {slot}: {reason}")]
    Inconsistent {
        /// The block slot.
        slot: u64,
        /// What disagrees.
        reason: String,
    },
    /// An `aggregation_bits` value is not a valid bitlist.
    #[error("{}: attestation {position}: invalid aggregation_bits: {reason}", path.display())]
    InvalidBitlist {
        /// The attestations file.
        path: PathBuf,
        /// Position in the block.
        position: usize,
        /// Why.
        reason: String,
    },
    /// A bitlist's length is not its committee's size.
    #[error(
        "{}: attestation {position} (slot {slot}, committee {index}) has {bits} aggregation bits \
         but the committee has {committee_size} members",
        path.display()
    )]
    BitlistLength {
        /// The attestations file.
        path: PathBuf,
        /// Position in the block.
        position: usize,
        /// `data.slot`.
        slot: u64,
        /// `data.index`.
        index: u64,
        /// Bitlist length.
        bits: usize,
        /// Committee size.
        committee_size: usize,
    },
    /// An Electra aggregate's bitlist is not as long as the committees it names together.
    #[error(
        "{}: attestation {position} (slot {slot}, committees {committees:?}) has {bits} \
         aggregation bits but those committees have {members} members together",
        path.display()
    )]
    ElectraBitlistLength {
        /// The attestations file.
        path: PathBuf,
        /// Position in the block.
        position: usize,
        /// `data.slot`.
        slot: u64,
        /// The committees `committee_bits` names.
        committees: Vec<u64>,
        /// Bitlist length.
        bits: usize,
        /// Members of those committees.
        members: usize,
    },
    /// The bitlists of an epoch do not fit any committee structure, or fit several.
    #[error("epoch {epoch}: cannot infer committees from bitlist lengths: {reason}")]
    CommitteeSizes {
        /// The epoch.
        epoch: u64,
        /// Why.
        reason: String,
    },
    /// The committee an attestation names is not in the committee files.
    #[error("no committee for slot {slot} index {index} (epoch {epoch}) in {}", dir.display())]
    MissingCommittee {
        /// The committees directory.
        dir: PathBuf,
        /// Epoch.
        epoch: u64,
        /// Slot.
        slot: u64,
        /// Committee index.
        index: u64,
    },
    /// The committees file of an epoch is missing or holds no committees.
    #[error("no committees file <epoch>.json[.gz] for epoch {epoch} in {}", dir.display())]
    MissingCommitteeFile {
        /// The committees directory.
        dir: PathBuf,
        /// Epoch.
        epoch: u64,
    },
    /// More attesters than an `IndexedAttestation` can hold.
    #[error("slot {slot}: attestation {position}: {reason}")]
    TooManyIndices {
        /// Block slot.
        slot: u64,
        /// Position in the block.
        position: usize,
        /// The type's error.
        reason: String,
    },
}

/// Inputs of an import.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// Directory of `<slot>.json[.gz]` attestation responses.
    pub attestations_dir: PathBuf,
    /// Directory of `<slot>.json[.gz]` header responses.
    pub headers_dir: PathBuf,
    /// Directory of `<epoch>.json[.gz]` committee responses; `None` for synthetic committees.
    pub committees_dir: Option<PathBuf>,
    /// First slot to import (inclusive).
    pub from_slot: Option<u64>,
    /// Last slot to import (inclusive).
    pub to_slot: Option<u64>,
    /// Fixture name; derived from the slot range if `None`.
    pub name: Option<String>,
    /// Network name for the manifest.
    pub network: String,
}

impl ImportOptions {
    /// Options for the given directories, all slots, synthetic committees, mainnet.
    pub fn new(attestations_dir: impl Into<PathBuf>, headers_dir: impl Into<PathBuf>) -> Self {
        Self {
            attestations_dir: attestations_dir.into(),
            headers_dir: headers_dir.into(),
            committees_dir: None,
            from_slot: None,
            to_slot: None,
            name: None,
            network: "mainnet".into(),
        }
    }
}

/// What an import did.
#[derive(Debug, Clone)]
pub struct ImportSummary {
    /// The manifest written.
    pub manifest: Manifest,
    /// Slots in range whose files held no block.
    pub missed_slots: Vec<u64>,
    /// Synthetic mode: N per epoch (empty for exact committees).
    pub active_validators: Vec<EpochActiveCount>,
}

/// Import the responses selected by `opts` into a fixture at `out`.
///
/// # Errors
/// See [`ImportError`].
pub fn import_beacon_api(opts: &ImportOptions, out: &Path) -> Result<ImportSummary, ImportError> {
    let slots = input_slots(opts)?;
    let (first, last) = match (slots.first(), slots.last()) {
        (Some(f), Some(l)) => (*f, *l),
        _ => {
            return Err(ImportError::NoInput {
                dir: opts.attestations_dir.clone(),
            })
        }
    };

    if let Some(dir) = &opts.committees_dir {
        // Checks the committee files' names (and duplicates) before anything is written.
        beacon_api::list_keys(dir)?;
    }
    let mut committees = match &opts.committees_dir {
        Some(dir) => Committees::Exact(ExactCommittees {
            dir: dir.clone(),
            epochs: BTreeMap::new(),
            validator_count: 0,
        }),
        None => {
            let sizes = collect_committee_sizes(opts, &slots)?;
            let counts = infer_active_counts(&sizes)?;
            Committees::Synthetic {
                counts,
                epochs: BTreeMap::new(),
            }
        }
    };

    let mut writer = FixtureWriter::create(out)?;
    let mut missed_slots = Vec::new();
    for &slot in &slots {
        let Some(batch) = read_block(opts, slot, writer.batch_count(), &mut committees)? else {
            missed_slots.push(slot);
            continue;
        };
        writer.write_batch(&batch)?;
        committees.evict_before(slot / SLOTS_PER_EPOCH);
    }
    if writer.batch_count() == 0 {
        // Dropping the writer removes its temporary files; nothing appears at `out`.
        return Err(ImportError::NoBatches {
            slots: slots.len(),
            first,
            last,
        });
    }

    let (assignment, validator_count, active_validators) = match committees {
        Committees::Exact(exact) => (
            CommitteeAssignment::Exact,
            exact.validator_count,
            Vec::new(),
        ),
        Committees::Synthetic { counts, .. } => {
            let list: Vec<EpochActiveCount> = counts.into_values().collect();
            let max = list
                .iter()
                .map(|c| c.active_validators)
                .max()
                .unwrap_or_default();
            let assignment = CommitteeAssignment::SyntheticShuffle {
                seed_rule: SYNTHETIC_SEED_RULE.into(),
                shuffle: SHUFFLE_DESCRIPTION.into(),
                active_validators: list.clone(),
            };
            (assignment, max, list)
        }
    };
    let exact = matches!(assignment, CommitteeAssignment::Exact);
    let description =
        FixtureDescription {
            name: opts
                .name
                .clone()
                .unwrap_or_else(|| format!("beacon-api-slots-{first}-{last}")),
            network: opts.network.clone(),
            provenance: Provenance {
                kind: SourceKind::BeaconApi,
                tool: crate::TOOL.into(),
                command: if exact {
                    "slasher-bench import-beacon-api --committees".into()
                } else {
                    "slasher-bench import-beacon-api".into()
                },
                seed: None,
                source: format!(
                "beacon-node REST API responses (blocks/<slot>/attestations, headers/<slot>{}) \
                 for slots {first}..={last}; {} missed slots skipped",
                if exact { ", states/<id>/committees" } else { "" },
                missed_slots.len()
            ),
            },
            validator_count,
            slasher_config: SlasherConfigHint::default(),
            committees: assignment,
            expected_slashings: None,
            expected_from_batch: None,
        };
    let manifest = writer.finish(description)?;
    Ok(ImportSummary {
        manifest,
        missed_slots,
        active_validators,
    })
}

/// Slots with an attestations or a headers file, within the requested range.
fn input_slots(opts: &ImportOptions) -> Result<Vec<u64>, ImportError> {
    let mut slots = beacon_api::list_keys(&opts.attestations_dir)?;
    slots.extend(beacon_api::list_keys(&opts.headers_dir)?);
    slots.sort_unstable();
    slots.dedup();
    let lo = opts.from_slot.unwrap_or(0);
    let hi = opts.to_slot.unwrap_or(u64::MAX);
    slots.retain(|s| (lo..=hi).contains(s));
    Ok(slots)
}

/// Read one slot: `None` for a missed slot.
fn read_block(
    opts: &ImportOptions,
    slot: u64,
    index: u64,
    committees: &mut Committees,
) -> Result<Option<Batch>, ImportError> {
    let att_path = beacon_api::response_file(&opts.attestations_dir, slot);
    let header_path = beacon_api::response_file(&opts.headers_dir, slot);
    let attestations = match &att_path {
        Some(p) => beacon_api::read_response::<AttestationsResponse<ApiAttestation>>(p)?
            .and_then(|r| r.data),
        None => None,
    };
    let header = match &header_path {
        Some(p) => beacon_api::read_response::<HeaderResponse>(p)?.and_then(|r| r.data),
        None => None,
    };
    let (attestations, header, att_path) = match (attestations, header, att_path) {
        (None, None, _) => return Ok(None),
        (Some(a), Some(h), Some(p)) => (a, h, p),
        (Some(_), None, _) => {
            return Err(ImportError::Inconsistent {
                slot,
                reason: "the block has attestations but no header".into(),
            })
        }
        _ => {
            return Err(ImportError::Inconsistent {
                slot,
                reason: "the block has a header but no attestations response".into(),
            })
        }
    };
    let header = header.header.to_header();
    if header.message.slot != slot {
        return Err(ImportError::Inconsistent {
            slot,
            reason: format!("the header file holds slot {}", header.message.slot),
        });
    }
    let mut indexed = Vec::with_capacity(attestations.len());
    for (position, att) in attestations.iter().enumerate() {
        let bits = beacon_api::bitlist_len(&att.aggregation_bits).ok_or_else(|| {
            ImportError::InvalidBitlist {
                path: att_path.clone(),
                position,
                reason: "no length bit (last byte is zero or the list is empty)".into(),
            }
        })?;
        let data_slot = att.data.slot;
        // The validators the aggregation bits run over, in bit order.
        let bit_owners: Cow<[u64]> = match &att.committee_bits {
            None => {
                let committee_index = att.data.index;
                let committee = committees.committee(data_slot, committee_index)?;
                if committee.len() != bits {
                    return Err(ImportError::BitlistLength {
                        path: att_path.clone(),
                        position,
                        slot: data_slot,
                        index: committee_index,
                        bits,
                        committee_size: committee.len(),
                    });
                }
                Cow::Borrowed(committee)
            }
            // Electra: the bitlist runs over the named committees in ascending order.
            Some(committee_bits) => {
                let named = beacon_api::committee_indices(committee_bits);
                let mut concatenated = Vec::new();
                for &index in &named {
                    concatenated.extend_from_slice(committees.committee(data_slot, index)?);
                }
                if concatenated.len() != bits {
                    return Err(ImportError::ElectraBitlistLength {
                        path: att_path.clone(),
                        position,
                        slot: data_slot,
                        committees: named,
                        bits,
                        members: concatenated.len(),
                    });
                }
                Cow::Owned(concatenated)
            }
        };
        let mut members: Vec<u64> = bit_owners
            .iter()
            .enumerate()
            .filter(|(i, _)| beacon_api::bit(&att.aggregation_bits, *i))
            .map(|(_, v)| *v)
            .collect();
        members.sort_unstable();
        let attestation = IndexedAttestation::new(members, att.data.to_data(), att.signature)
            .map_err(|e| ImportError::TooManyIndices {
                slot,
                position,
                reason: format!("{e:?}"),
            })?;
        indexed.push(attestation);
    }
    Ok(Some(Batch {
        index,
        slot,
        current_epoch: slot / SLOTS_PER_EPOCH,
        headers: vec![header],
        attestations: indexed,
    }))
}

/// Committee sizes seen in the input: epoch -> (slot, committee index) -> bitlist length.
pub type ObservedSizes = BTreeMap<u64, BTreeMap<(u64, u64), u64>>;

/// Pass 1 of a synthetic import: the bitlist length of every (slot, committee index), checked
/// to be the same wherever the committee appears.
fn collect_committee_sizes(
    opts: &ImportOptions,
    slots: &[u64],
) -> Result<ObservedSizes, ImportError> {
    let mut sizes = ObservedSizes::new();
    for &slot in slots {
        let Some(path) = beacon_api::response_file(&opts.attestations_dir, slot) else {
            continue;
        };
        let response =
            beacon_api::read_response::<AttestationsResponse<ApiAttestationShape>>(&path)?;
        let Some(attestations) = response.and_then(|r| r.data) else {
            continue;
        };
        for (position, att) in attestations.iter().enumerate() {
            let bits = beacon_api::bitlist_len(&att.aggregation_bits).ok_or_else(|| {
                ImportError::InvalidBitlist {
                    path: path.clone(),
                    position,
                    reason: "no length bit (last byte is zero or the list is empty)".into(),
                }
            })?;
            let s = att.data.slot;
            let i = match &att.committee_bits {
                None => att.data.index,
                // An Electra aggregate of one committee shows that committee's size; one of
                // several shows only their sum, which cannot be split without the committees.
                Some(bits) => match beacon_api::committee_indices(bits).as_slice() {
                    [one] => *one,
                    several => {
                        return Err(ImportError::CommitteeSizes {
                            epoch: s / SLOTS_PER_EPOCH,
                            reason: format!(
                                "{} attestation {position} is an Electra aggregate of committees \
                                 {several:?}: bitlist lengths cannot be split into committee \
                                 sizes; import with the committees (--committees, which \
                                 `slasher-bench record` fetches)",
                                path.display()
                            ),
                        })
                    }
                },
            };
            let epoch = s / SLOTS_PER_EPOCH;
            let seen = sizes
                .entry(epoch)
                .or_default()
                .entry((s, i))
                .or_insert(bits as u64);
            if *seen != bits as u64 {
                return Err(ImportError::CommitteeSizes {
                    epoch,
                    reason: format!(
                        "committee (slot {s}, index {i}) has bitlists of length {seen} and {bits} \
                         (second in {}, attestation {position})",
                        path.display()
                    ),
                });
            }
        }
    }
    Ok(sizes)
}

/// Every active-set size N whose `compute_committee` sizes match all observed committees of one
/// epoch. `observed` maps (slot, committee index) to size.
pub fn consistent_active_counts(observed: &BTreeMap<(u64, u64), u64>) -> Vec<u64> {
    let (Some(min), Some(max)) = (observed.values().min(), observed.values().max()) else {
        return Vec::new();
    };
    let max_index = observed.keys().map(|(_, i)| *i).max().unwrap_or_default();
    let mut out = Vec::new();
    for cps in (max_index + 1).max(1)..=MAX_COMMITTEES_PER_SLOT {
        let c = cps * SLOTS_PER_EPOCH;
        // N values whose committee count is `cps` per slot.
        let by_count_lo = if cps == 1 {
            0
        } else {
            cps * SLOTS_PER_EPOCH * 128
        };
        let by_count_hi = if cps == MAX_COMMITTEES_PER_SLOT {
            u64::MAX
        } else {
            (cps + 1) * SLOTS_PER_EPOCH * 128
        };
        // Every committee has floor(N/C) or floor(N/C) + 1 members.
        let by_size_lo = c.saturating_mul(max.saturating_sub(1));
        let by_size_hi = c.saturating_mul(min + 1);
        for n in by_count_lo.max(by_size_lo)..by_count_hi.min(by_size_hi) {
            let fits = observed.iter().all(|((slot, index), size)| {
                committee_size(n, (slot % SLOTS_PER_EPOCH) * cps + index) == *size
            });
            if fits && committees_per_slot(n) == cps {
                out.push(n);
            }
        }
    }
    out
}

/// Infer N for every epoch in `sizes`.
///
/// - An epoch with all `32 × committees_per_slot(N)` committees seen (2,048 on mainnet) is
///   complete: N is the sum of the sizes, and every size must be what `compute_committee` gives
///   for that N.
/// - Otherwise N is the only value whose committee sizes match every committee seen, or, if
///   several match, the N of the nearest complete epoch if it is among them.
///
/// # Errors
/// [`ImportError::CommitteeSizes`] when no N fits an epoch, or several do and none is the
/// nearest complete epoch's.
pub fn infer_active_counts(
    sizes: &ObservedSizes,
) -> Result<BTreeMap<u64, EpochActiveCount>, ImportError> {
    let mut result = BTreeMap::new();
    let mut ambiguous = Vec::new();
    for (&epoch, observed) in sizes {
        let candidates = consistent_active_counts(observed);
        let seen = observed.len() as u64;
        let total: u64 = observed.values().sum();
        let complete = candidates
            .iter()
            .copied()
            .find(|n| *n == total && committees_per_slot(*n) * SLOTS_PER_EPOCH == seen);
        let entry = |n: u64, how: &str| EpochActiveCount {
            epoch,
            active_validators: n,
            committees_seen: seen,
            inferred_from: how.into(),
        };
        match (complete, candidates.as_slice()) {
            (Some(n), _) => {
                result.insert(epoch, entry(n, "complete epoch"));
            }
            (None, []) => {
                return Err(ImportError::CommitteeSizes {
                    epoch,
                    reason: format!(
                        "the {seen} committees seen (sizes summing to {total}) match no \
                         active-set size"
                    ),
                })
            }
            (None, [n]) => {
                result.insert(epoch, entry(*n, "unique size pattern"));
            }
            (None, _) => ambiguous.push((epoch, candidates)),
        }
    }
    for (epoch, candidates) in ambiguous {
        let nearest = result
            .values()
            .filter(|c| c.inferred_from == "complete epoch")
            .min_by_key(|c| c.epoch.abs_diff(epoch))
            .map(|c| c.active_validators);
        match nearest.filter(|n| candidates.contains(n)) {
            Some(n) => {
                let seen = sizes.get(&epoch).map_or(0, |o| o.len() as u64);
                result.insert(
                    epoch,
                    EpochActiveCount {
                        epoch,
                        active_validators: n,
                        committees_seen: seen,
                        inferred_from: "nearest complete epoch".into(),
                    },
                );
            }
            None => {
                return Err(ImportError::CommitteeSizes {
                    epoch,
                    reason: format!(
                        "{} active-set sizes fit the committees seen ({}..={}) and no complete \
                         epoch decides",
                        candidates.len(),
                        candidates.first().copied().unwrap_or_default(),
                        candidates.last().copied().unwrap_or_default()
                    ),
                })
            }
        }
    }
    Ok(result)
}

#[derive(Debug)]
struct ExactCommittees {
    dir: PathBuf,
    epochs: BTreeMap<u64, HashMap<(u64, u64), Vec<u64>>>,
    validator_count: u64,
}

#[derive(Debug)]
enum Committees {
    Exact(ExactCommittees),
    Synthetic {
        counts: BTreeMap<u64, EpochActiveCount>,
        epochs: BTreeMap<u64, EpochCommittees>,
    },
}

impl Committees {
    fn committee(&mut self, slot: u64, index: u64) -> Result<&[u64], ImportError> {
        let epoch = slot / SLOTS_PER_EPOCH;
        match self {
            Committees::Exact(exact) => {
                if !exact.epochs.contains_key(&epoch) {
                    let loaded = load_committees(&exact.dir, epoch)?;
                    let max = loaded.values().flatten().max().map_or(0, |v| v + 1);
                    exact.validator_count = exact.validator_count.max(max);
                    exact.epochs.insert(epoch, loaded);
                }
                exact
                    .epochs
                    .get(&epoch)
                    .and_then(|e| e.get(&(slot, index)))
                    .map(Vec::as_slice)
                    .ok_or_else(|| ImportError::MissingCommittee {
                        dir: exact.dir.clone(),
                        epoch,
                        slot,
                        index,
                    })
            }
            Committees::Synthetic { counts, epochs } => {
                let n = counts
                    .get(&epoch)
                    .map(|c| c.active_validators)
                    .ok_or_else(|| ImportError::CommitteeSizes {
                        epoch,
                        reason: "no attestation of this epoch was seen in pass 1".into(),
                    })?;
                let committees = epochs
                    .entry(epoch)
                    .or_insert_with(|| EpochCommittees::synthetic(epoch, n));
                committees
                    .committee(slot, index)
                    .ok_or(ImportError::CommitteeSizes {
                        epoch,
                        reason: format!("committee index {index} at slot {slot} out of range"),
                    })
            }
        }
    }

    /// Drop cached committees of epochs before `epoch - 1` (blocks include attestations of the
    /// current and the previous epoch only).
    fn evict_before(&mut self, epoch: u64) {
        let keep_from = epoch.saturating_sub(1);
        match self {
            Committees::Exact(exact) => exact.epochs.retain(|e, _| *e >= keep_from),
            Committees::Synthetic { epochs, .. } => epochs.retain(|e, _| *e >= keep_from),
        }
    }
}

/// Load `<dir>/<epoch>.json[.gz]` as (slot, index) -> members.
fn load_committees(dir: &Path, epoch: u64) -> Result<HashMap<(u64, u64), Vec<u64>>, ImportError> {
    let missing = || ImportError::MissingCommitteeFile {
        dir: dir.to_path_buf(),
        epoch,
    };
    let path = beacon_api::response_file(dir, epoch).ok_or_else(missing)?;
    let response = beacon_api::read_response::<CommitteesResponse>(&path)?;
    let committees = response.and_then(|r| r.data).ok_or_else(missing)?;
    Ok(committees
        .into_iter()
        .map(|c| ((c.slot, c.index), c.validators))
        .collect())
}

/// Where the mainnet sample is committed, relative to the repository root (provenance and
/// checksums in that directory's `PROVENANCE.md` and `SHA256SUMS`).
pub const MAINNET_SAMPLE_DIR: &str = "data/mainnet-merge-2022";

/// Manifest name of the default benchmark fixture.
pub const DEFAULT_FIXTURE_NAME: &str = "mainnet-merge-2022";

/// The default benchmark fixture: the whole mainnet sample in `sample_dir` (see
/// [`MAINNET_SAMPLE_DIR`]) imported with synthetic committees, 1,012 batches. Imports it to `out`
/// unless `out` already holds a fixture whose header and manifest read back with that name and
/// the current tool version; returns the manifest either way.
///
/// # Errors
/// Import errors (a missing sample is [`ImportError::File`] or [`ImportError::NoInput`]).
pub fn ensure_default_fixture(sample_dir: &Path, out: &Path) -> Result<Manifest, ImportError> {
    if let Ok(reader) = crate::fixture::FixtureReader::open(out) {
        let manifest = reader.manifest();
        if manifest.description.name == DEFAULT_FIXTURE_NAME
            && manifest.description.provenance.tool == crate::TOOL
        {
            return Ok(manifest.clone());
        }
    }
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| {
            ImportError::Fixture(FixtureError::Io {
                op: "create directory",
                path: parent.to_path_buf(),
                source,
            })
        })?;
    }
    let mut opts = ImportOptions::new(sample_dir.join("attestations"), sample_dir.join("headers"));
    opts.name = Some(DEFAULT_FIXTURE_NAME.into());
    Ok(import_beacon_api(&opts, out)?.manifest)
}
