//! `generate`: deterministic, mainnet-shaped synthetic batches with injected slashable events.
//!
//! One batch per slot from `start_epoch * 32` for `epochs` epochs. Model:
//!
//! - **Committees**: the spec's `compute_committee` over validators `0..N` with
//!   [`crate::shuffle::synthetic_seed`] (the same committees the importer synthesises).
//! - **Blocks**: one header per slot (1 % of slots missed: no header, no attestations), the
//!   proposer drawn uniformly, `parent_root` chaining the headers' tree-hash roots, state and body
//!   roots derived from the seed. Signatures are 96 zero bytes (Lighthouse's empty signature).
//! - **Attestations** of slot `t` vote for the head at `t` with source `(e-1, checkpoint)` (the
//!   justified checkpoint of a chain that finalises every epoch) and target `(e, checkpoint)`. Per
//!   committee member: 1 % offline, 3 % late, the rest on time. The unit of aggregation depends on
//!   the fork ([`Fork`]): before Electra it is one committee (`data.index` = the committee index);
//!   from Electra on it is the whole slot (`data.index` = 0, and one on-chain aggregate names
//!   several committees with `committee_bits`, so its attesting indices are the union of its
//!   committees' attesters). On-time members of a unit are split into 1–3 overlapping aggregates
//!   included in the next block; late members form one aggregate included 2–5 slots later (1 % of
//!   them up to 32); 2 % of aggregates are included a second time (duplicates) a few slots later.
//!   Attestations waiting for a missed block go into the next one.
//! - **Injected slashings** (listed in the manifest's `expected_slashings`):
//!   - double vote: validator `v`, on time in epoch `e`, also signs the same source and target
//!     with another head root, included 1–4 slots later;
//!   - surround vote: validator `v`, on time in epoch `e` with `(e-1, e)`, is offline in `e+1` and
//!     instead signs `(e-2, e+1)`, included early in epoch `e+1`;
//!   - double proposal: a second header for slot `t` by the same proposer with another body root,
//!     in the batch of slot `t+1..t+3`.
//!
//! Every random choice comes from one SplitMix64 stream seeded with `seed`, in a fixed order, so
//! the same options always give the same bytes.

use crate::fixture::{
    Batch, CommitteeAssignment, EpochActiveCount, ExpectedSlashing, FixtureDescription,
    FixtureError, FixtureWriter, Manifest, Provenance, SlasherConfigHint, SourceKind, VoteSummary,
};
use crate::shuffle::{EpochCommittees, SHUFFLE_DESCRIPTION, SLOTS_PER_EPOCH, SYNTHETIC_SEED_RULE};
use sha2::{Digest, Sha256};
use slasher_adapters::slasher::types::{
    AttestationData, BeaconBlockHeader, Checkpoint, Hash256, IndexedAttestation,
    SignedBeaconBlockHeader,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use tree_hash::TreeHash;

/// Why generation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenerateError {
    /// Options that cannot produce a fixture.
    #[error("invalid generate options: {0}")]
    Invalid(String),
    /// Writing failed.
    #[error(transparent)]
    Fixture(#[from] FixtureError),
}

/// Which fork's attestation shape the fixture has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Fork {
    /// One aggregate per committee, `data.index` = committee index (phase0 to Deneb).
    Phase0,
    /// One aggregate per slot over all its committees, `data.index` = 0 (Electra and later,
    /// EIP-7549): mainnet today.
    Electra,
}

impl Fork {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Fork::Phase0 => "phase0",
            Fork::Electra => "electra",
        }
    }
}

/// The validator count of `generate` when none is given: about mainnet's active set in 2026.
pub const DEFAULT_VALIDATORS: u64 = 1_100_000;

/// The default first epoch: about mainnet's in late 2026 (genesis 2020-12-01 12:00:23 UTC,
/// 225 epochs a day), after Electra (epoch 364,032) and more than Lighthouse's 4096-epoch
/// history after genesis. A slasher started there has a full window behind it, so its first
/// epoch rewrites every tile of every validator chunk, as a node started today does; on a
/// chain younger than the history (start epoch 100, the default before) only the epochs
/// that exist have tiles, and the cold start costs a fraction of a real one.
pub const DEFAULT_START_EPOCH: u64 = 491_000;

/// Generator settings.
#[derive(Debug, Clone)]
pub struct GenerateOptions {
    /// Active validators N (at least 64).
    pub validators: u64,
    /// Epochs to generate.
    pub epochs: u64,
    /// Seed of every random choice.
    pub seed: u64,
    /// First epoch.
    pub start_epoch: u64,
    /// Injected double votes.
    pub double_votes: u32,
    /// Injected surround votes.
    pub surround_votes: u32,
    /// Injected double proposals.
    pub double_proposals: u32,
    /// Fixture name; derived from the options if `None`.
    pub name: Option<String>,
    /// The slasher history (epochs) the manifest's config hint names, which `replay` uses by
    /// default: a short history makes a short chain wrap around it and prune (the soak).
    pub history_length: u64,
    /// Attestation shape.
    pub fork: Fork,
}

impl GenerateOptions {
    /// Defaults: start epoch [`DEFAULT_START_EPOCH`], two events of each kind, Electra
    /// attestations.
    pub fn new(validators: u64, epochs: u64, seed: u64) -> Self {
        Self {
            validators,
            epochs,
            seed,
            start_epoch: DEFAULT_START_EPOCH,
            double_votes: 2,
            surround_votes: 2,
            double_proposals: 2,
            name: None,
            history_length: SlasherConfigHint::default().history_length,
            fork: Fork::Electra,
        }
    }

    /// The command line that reproduces these options (without `--out`).
    pub fn command(&self) -> String {
        format!(
            "slasher-bench generate --validators {} --epochs {} --seed {} --start-epoch {} \
             --double-votes {} --surround-votes {} --double-proposals {} --history-length {} \
             --fork {}",
            self.validators,
            self.epochs,
            self.seed,
            self.start_epoch,
            self.double_votes,
            self.surround_votes,
            self.double_proposals,
            self.history_length,
            self.fork.name()
        )
    }
}

/// SplitMix64: small, fast, and fixed forever (unlike a library RNG whose algorithms may change),
/// so fixtures stay reproducible.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `per_mille / 1000`.
    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Force {
    OnTime,
    Offline,
}

#[derive(Debug, Clone, Copy)]
struct PlannedSurround {
    validator: u64,
    epoch: u64,
    inclusion_slot: u64,
}

/// Derive a 32-byte value from a label, the seed and some integers.
pub(crate) fn derived_root(label: &str, seed: u64, values: &[u64]) -> Hash256 {
    let mut hasher = Sha256::new();
    hasher.update(b"butter_db generate ");
    hasher.update(label.as_bytes());
    hasher.update(seed.to_le_bytes());
    for v in values {
        hasher.update(v.to_le_bytes());
    }
    Hash256::from(<[u8; 32]>::from(hasher.finalize()))
}

pub(crate) fn summary(data: &AttestationData) -> VoteSummary {
    VoteSummary {
        source_epoch: data.source.epoch,
        target_epoch: data.target.epoch,
        data_root: format!("0x{}", hex::encode(data.tree_hash_root())),
    }
}

/// Generate a fixture at `out`.
///
/// # Errors
/// [`GenerateError::Invalid`] for unusable options; writer errors.
pub fn generate(opts: &GenerateOptions, out: &Path) -> Result<Manifest, GenerateError> {
    let n = opts.validators;
    if n < 64 {
        return Err(GenerateError::Invalid(format!(
            "--validators {n}: need at least 64"
        )));
    }
    if n > u64::from(u32::MAX) {
        return Err(GenerateError::Invalid(format!(
            "--validators {n}: at most 2^32 - 1"
        )));
    }
    if opts.epochs == 0 {
        return Err(GenerateError::Invalid("--epochs must be at least 1".into()));
    }
    let chunk_size = SlasherConfigHint::default().chunk_size;
    if opts.history_length == 0 || opts.history_length % chunk_size != 0 {
        return Err(GenerateError::Invalid(format!(
            "--history-length {}: must be a positive multiple of the slasher's chunk size \
             ({chunk_size})",
            opts.history_length
        )));
    }
    let injected = u64::from(opts.double_votes) + u64::from(opts.surround_votes);
    if (injected > 0 || opts.double_proposals > 0) && opts.epochs < 3 {
        return Err(GenerateError::Invalid(
            "injected slashings need --epochs >= 3".into(),
        ));
    }
    if injected > n / 2 {
        return Err(GenerateError::Invalid(
            "too many injected votes for the validator count".into(),
        ));
    }
    let first_epoch = opts.start_epoch;
    let last_epoch = first_epoch
        .checked_add(opts.epochs - 1)
        .filter(|e| e.checked_mul(SLOTS_PER_EPOCH).is_some())
        .ok_or_else(|| GenerateError::Invalid("epoch range overflows".into()))?;
    let first_slot = first_epoch * SLOTS_PER_EPOCH;
    let last_slot = last_epoch * SLOTS_PER_EPOCH + SLOTS_PER_EPOCH - 1;
    let seed = opts.seed;
    let mut rng = SplitMix64(seed);

    // Plan the injected events.
    let mut used = BTreeSet::new();
    let mut pick_validator = |rng: &mut SplitMix64| loop {
        let v = rng.below(n);
        if used.insert(v) {
            return v;
        }
    };
    let mut force: HashMap<(u64, u64), Force> = HashMap::new();
    let mut double_votes: BTreeMap<(u64, u64), usize> = BTreeMap::new();
    let mut surrounds = Vec::new();
    let mut expected: Vec<Option<ExpectedSlashing>> = Vec::new();
    for _ in 0..opts.double_votes {
        let epoch = rng.range(first_epoch + 1, last_epoch - 1);
        let v = pick_validator(&mut rng);
        force.insert((epoch, v), Force::OnTime);
        double_votes.insert((epoch, v), expected.len());
        expected.push(None);
    }
    for _ in 0..opts.surround_votes {
        let epoch = rng.range(first_epoch + 1, last_epoch - 1);
        let v = pick_validator(&mut rng);
        force.insert((epoch, v), Force::OnTime);
        force.insert((epoch + 1, v), Force::Offline);
        let inclusion_slot = (epoch + 1) * SLOTS_PER_EPOCH + rng.range(1, 8);
        surrounds.push((
            PlannedSurround {
                validator: v,
                epoch,
                inclusion_slot,
            },
            expected.len(),
        ));
        expected.push(None);
    }
    let mut double_proposals: BTreeMap<u64, (u64, usize)> = BTreeMap::new();
    for _ in 0..opts.double_proposals {
        let slot = loop {
            let s = rng.range(first_slot + SLOTS_PER_EPOCH, last_slot - 4);
            if !double_proposals.contains_key(&s) {
                break s;
            }
        };
        let shown_at = slot + rng.range(1, 3);
        double_proposals.insert(slot, (shown_at, expected.len()));
        expected.push(None);
    }

    let mut writer = FixtureWriter::create(out)?;
    let mut committees: BTreeMap<u64, EpochCommittees> = BTreeMap::new();
    let mut checkpoints: BTreeMap<u64, Hash256> = BTreeMap::new();
    let mut honest: HashMap<(u64, u64), AttestationData> = HashMap::new();
    let mut pending: BTreeMap<u64, Vec<IndexedAttestation>> = BTreeMap::new();
    let mut extra_headers: BTreeMap<u64, Vec<SignedBeaconBlockHeader>> = BTreeMap::new();
    let mut head_root = derived_root("genesis parent", seed, &[first_slot]);

    for slot in first_slot..=last_slot {
        let epoch = slot / SLOTS_PER_EPOCH;
        let checkpoint = |checkpoints: &BTreeMap<u64, Hash256>, e: u64| Checkpoint {
            epoch: e,
            root: checkpoints
                .get(&e)
                .copied()
                .unwrap_or_else(|| derived_root("pre-start checkpoint", seed, &[e])),
        };

        // Surround votes due in this slot.
        for (plan, which) in surrounds.iter().filter(|(p, _)| p.inclusion_slot == slot) {
            let e = plan.epoch;
            let data = AttestationData {
                slot: (e + 1) * SLOTS_PER_EPOCH,
                index: 0,
                beacon_block_root: derived_root("surround head", seed, &[plan.validator]),
                source: checkpoint(&checkpoints, e.saturating_sub(2)),
                target: checkpoint(&checkpoints, e + 1),
            };
            let honest_data = honest.get(&(e, plan.validator)).copied().ok_or_else(|| {
                GenerateError::Invalid(format!("internal: no honest vote of {}", plan.validator))
            })?;
            if let Some(slot_entry) = expected.get_mut(*which) {
                *slot_entry = Some(ExpectedSlashing::SurroundVote {
                    validator_index: plan.validator,
                    attestation_1: summary(&data),
                    attestation_2: summary(&honest_data),
                });
            }
            pending
                .entry(slot)
                .or_default()
                .push(single(plan.validator, data)?);
        }

        // The block.
        let forced_block = double_proposals.contains_key(&slot);
        let missed = !forced_block && rng.chance(10);
        let mut headers = Vec::new();
        let mut attestations = Vec::new();
        if !missed {
            let message = BeaconBlockHeader {
                slot,
                proposer_index: rng.below(n),
                parent_root: head_root,
                state_root: derived_root("state", seed, &[slot]),
                body_root: derived_root("body", seed, &[slot]),
            };
            head_root = message.tree_hash_root();
            headers.push(SignedBeaconBlockHeader {
                message,
                signature: [0; 96],
            });
            if let Some((shown_at, which)) = double_proposals.get(&slot) {
                let mut other = message;
                other.body_root = derived_root("double proposal body", seed, &[slot]);
                extra_headers
                    .entry(*shown_at)
                    .or_default()
                    .push(SignedBeaconBlockHeader {
                        message: other,
                        signature: [0; 96],
                    });
                if let Some(entry) = expected.get_mut(*which) {
                    *entry = Some(ExpectedSlashing::DoubleProposal {
                        proposer_index: message.proposer_index,
                        slot,
                    });
                }
            }
            let due: Vec<u64> = pending.range(..=slot).map(|(s, _)| *s).collect();
            for s in due {
                attestations.extend(pending.remove(&s).unwrap_or_default());
            }
        }
        if slot % SLOTS_PER_EPOCH == 0 {
            checkpoints.insert(epoch, head_root);
        }
        headers.extend(extra_headers.remove(&slot).unwrap_or_default());
        writer.write_batch(&Batch {
            index: writer.batch_count(),
            slot,
            current_epoch: epoch,
            headers,
            attestations,
        })?;

        // Attestations of this slot's committees, for later blocks.
        committees.retain(|e, _| *e + 1 >= epoch);
        let epoch_committees = committees
            .entry(epoch)
            .or_insert_with(|| EpochCommittees::synthetic(epoch, n));
        // The units of aggregation: each committee, or (Electra) the whole slot.
        let slot_committees = (0..epoch_committees.committees_per_slot).map(|index| {
            (
                index,
                epoch_committees.committee(slot, index).unwrap_or_default(),
            )
        });
        let units: Vec<(u64, Vec<u64>)> = match opts.fork {
            Fork::Phase0 => slot_committees.map(|(i, m)| (i, m.to_vec())).collect(),
            Fork::Electra => vec![(
                0,
                slot_committees
                    .flat_map(|(_, m)| m.iter().copied())
                    .collect(),
            )],
        };
        for (index, members) in units {
            let data = AttestationData {
                slot,
                index,
                beacon_block_root: head_root,
                source: checkpoint(&checkpoints, epoch.saturating_sub(1)),
                target: checkpoint(&checkpoints, epoch),
            };
            let mut on_time = Vec::new();
            let mut late = Vec::new();
            for &v in &members {
                let roll = rng.below(1000);
                match force.get(&(epoch, v)) {
                    Some(Force::OnTime) => on_time.push(v),
                    Some(Force::Offline) => {}
                    None if roll < 10 => {}
                    None if roll < 40 => late.push(v),
                    None => on_time.push(v),
                }
            }
            for &v in &on_time {
                if force.contains_key(&(epoch, v)) {
                    honest.insert((epoch, v), data);
                }
                if let Some(which) = double_votes.get(&(epoch, v)) {
                    let mut other = data;
                    other.beacon_block_root = derived_root("double vote head", seed, &[v]);
                    let at = slot + rng.range(1, 4);
                    pending.entry(at).or_default().push(single(v, other)?);
                    if let Some(entry) = expected.get_mut(*which) {
                        *entry = Some(ExpectedSlashing::DoubleVote {
                            validator_index: v,
                            attestation_1: summary(&data),
                            attestation_2: summary(&other),
                        });
                    }
                }
            }
            for aggregate in split_aggregates(&mut rng, &on_time) {
                let attestation = indexed(aggregate, data)?;
                if rng.chance(20) {
                    let again = slot + rng.range(2, 6);
                    pending.entry(again).or_default().push(attestation.clone());
                }
                pending.entry(slot + 1).or_default().push(attestation);
            }
            if !late.is_empty() {
                let delay = if rng.chance(100) {
                    rng.range(2, 32)
                } else {
                    rng.range(2, 5)
                };
                pending
                    .entry(slot + delay)
                    .or_default()
                    .push(indexed(late, data)?);
            }
        }
    }

    let expected: Vec<ExpectedSlashing> = expected.into_iter().flatten().collect();
    let planned = u64::from(opts.double_votes)
        + u64::from(opts.surround_votes)
        + u64::from(opts.double_proposals);
    if expected.len() as u64 != planned {
        return Err(GenerateError::Invalid(format!(
            "internal: {} of {planned} planned slashings were emitted",
            expected.len()
        )));
    }
    let description = FixtureDescription {
        name: opts.name.clone().unwrap_or_else(|| {
            format!(
                "synthetic-v{}-e{}-s{}",
                opts.validators, opts.epochs, opts.seed
            )
        }),
        network: "mainnet".into(),
        provenance: Provenance {
            kind: SourceKind::Synthetic,
            tool: crate::TOOL.into(),
            command: opts.command(),
            seed: Some(seed),
            source: format!(
                "synthetic mainnet-shaped batches, {} attestations, slots \
                 {first_slot}..={last_slot}; all signatures are 96 zero bytes",
                opts.fork.name()
            ),
        },
        validator_count: n,
        slasher_config: SlasherConfigHint {
            history_length: opts.history_length,
            ..SlasherConfigHint::default()
        },
        committees: CommitteeAssignment::SyntheticShuffle {
            seed_rule: SYNTHETIC_SEED_RULE.into(),
            shuffle: SHUFFLE_DESCRIPTION.into(),
            active_validators: (first_epoch..=last_epoch)
                .map(|epoch| EpochActiveCount {
                    epoch,
                    active_validators: n,
                    committees_seen: crate::shuffle::committees_per_slot(n) * SLOTS_PER_EPOCH,
                    inferred_from: "generator input".into(),
                })
                .collect(),
        },
        expected_slashings: Some(expected),
        expected_from_batch: None,
    };
    Ok(writer.finish(description)?)
}

/// Split on-time members into 1–3 overlapping aggregates covering all of them.
fn split_aggregates(rng: &mut SplitMix64, members: &[u64]) -> Vec<Vec<u64>> {
    if members.is_empty() {
        return Vec::new();
    }
    let roll = rng.below(100);
    let count = if roll < 50 {
        1
    } else if roll < 85 {
        2
    } else {
        3
    };
    let mut aggregates = vec![Vec::new(); count];
    for &v in members {
        let mut placed = false;
        for (j, aggregate) in aggregates.iter_mut().enumerate() {
            let per_mille = if j == 0 { 900 } else { 500 };
            if rng.chance(per_mille) {
                aggregate.push(v);
                placed = true;
            }
        }
        if !placed {
            if let Some(first) = aggregates.first_mut() {
                first.push(v);
            }
        }
    }
    aggregates.retain(|a| !a.is_empty());
    aggregates
}

fn indexed(
    mut members: Vec<u64>,
    data: AttestationData,
) -> Result<IndexedAttestation, GenerateError> {
    members.sort_unstable();
    IndexedAttestation::new(members, data, [0; 96])
        .map_err(|e| GenerateError::Invalid(format!("aggregate too large: {e:?}")))
}

fn single(v: u64, data: AttestationData) -> Result<IndexedAttestation, GenerateError> {
    indexed(vec![v], data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_length_must_be_a_positive_multiple_of_the_chunk_size() {
        let dir = tempfile::tempdir().expect("temp dir");
        for bad in [0, 24] {
            let mut opts = GenerateOptions::new(64, 3, 1);
            opts.history_length = bad;
            let err = generate(&opts, &dir.path().join("f")).expect_err("refused");
            assert!(
                err.to_string()
                    .contains(&format!("--history-length {bad}: must be")),
                "{err}"
            );
            assert!(
                !dir.path().join("f").exists(),
                "a file was written for {bad}"
            );
        }
        let mut opts = GenerateOptions::new(64, 3, 1);
        opts.history_length = 32;
        let manifest = generate(&opts, &dir.path().join("f")).expect("generated");
        assert_eq!(manifest.description.slasher_config.history_length, 32);
    }
}
