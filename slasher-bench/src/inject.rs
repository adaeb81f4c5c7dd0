//! `inject`: slashable events added to an existing fixture, so that a replay of real batches
//! has slashings to find and its correctness gate can fail.
//!
//! The mainnet sample holds no slashing, so on it every backend "agrees" even if none of them
//! would ever report one. `inject` reads a fixture, picks validators and proposers from its
//! own batches, adds to a copy of it:
//!
//! - **double vote**: validator `v` attested data `D` (target `t`) in batch `b`; the next batch
//!   (with `same_batch`: batch `b` itself) also carries `v` attesting `D` with another head
//!   root. Reported once that batch is processed.
//! - **surround vote**: validator `v` attested `(e-1, e)` in a batch of epoch `e` and attests
//!   nothing with target `e+1` anywhere in the fixture; the first batch of epoch `e+1` carries
//!   `v` attesting `(e-2, e+1)`, which surrounds it. (A validator that did attest `e+1` would
//!   also be caught for a double vote, which would muddle the expectation.)
//! - **double proposal**: a batch with one header gets a second header for the same slot and
//!   proposer with another body root. Both headers are in one batch, the case where
//!   Lighthouse's order of the two (its block queue is a `HashSet`) varies from run to run
//!   (docs/lighthouse.md §4).
//!
//! Each injected event is listed in the manifest's `expected_slashings`, with the batch that
//! completes it in `expected_from_batch`, so a replay of the first N batches checks the ones
//! within them. Injected attestations and headers carry 96 zero bytes as signature (the slasher
//! checks no signature). Choices come from a [`SplitMix64`] stream seeded with `--seed`: the
//! same input and options always give the same bytes.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use slasher_adapters::slasher::types::{
    AttestationData, Checkpoint, IndexedAttestation, SignedBeaconBlockHeader,
};

use crate::fixture::{
    Batch, ExpectedSlashing, FixtureError, FixtureReader, FixtureWriter, Manifest,
};
use crate::generate::{derived_root, summary, SplitMix64};
use crate::shuffle::SLOTS_PER_EPOCH;

/// How many slashable events to add, and where.
#[derive(Debug, Clone)]
pub struct InjectOptions {
    /// Double votes to add.
    pub double_votes: u32,
    /// Surround votes to add.
    pub surround_votes: u32,
    /// Double proposals to add.
    pub double_proposals: u32,
    /// Seed of the choices.
    pub seed: u64,
    /// Put each double vote's second attestation in the batch of the first, not the next one
    /// (double proposals always are in one batch), so that the slasher sees both conflicting
    /// attestations in one batch.
    pub same_batch: bool,
    /// Every event is complete at or after this batch…
    pub first_batch: u64,
    /// …and at or before this one (default: the fixture's last batch).
    pub last_batch: Option<u64>,
}

/// Why an injection failed.
#[derive(Debug, thiserror::Error)]
pub enum InjectError {
    /// Options that the fixture cannot satisfy.
    #[error("cannot inject: {0}")]
    Invalid(String),
    /// Reading or writing a fixture failed.
    #[error(transparent)]
    Fixture(#[from] FixtureError),
}

/// What pass 1 keeps of a batch in the window: little enough for a thousand mainnet batches.
struct WindowBatch {
    index: u64,
    current_epoch: u64,
    /// The header, when the batch has exactly one.
    header: Option<SignedBeaconBlockHeader>,
    /// Each attestation's data and its first [`KEPT_INDICES`] validators.
    attestations: Vec<(AttestationData, Vec<u64>)>,
}

const KEPT_INDICES: usize = 64;
/// Random picks tried per requested event before giving up.
const ATTEMPTS_PER_EVENT: u32 = 2_000;
/// Surround candidates gathered per requested surround vote (most validators attest every
/// epoch, so few candidates qualify).
const SURROUND_CANDIDATES_PER_EVENT: usize = 400;

/// One event to add to a batch.
enum Addition {
    Attestation(IndexedAttestation),
    Header(SignedBeaconBlockHeader),
}

/// A surround candidate: `validator` attested `data` (`(e-1, e)`) in a batch of epoch `e`.
struct SurroundCandidate {
    validator: u64,
    data: AttestationData,
    /// The first window batch of epoch `e+1`.
    inject_at: u64,
}

/// Copy the fixture at `input` to `out` with the requested slashable events added.
///
/// # Errors
/// [`InjectError::Invalid`] when the window is empty or outside the fixture, nothing is
/// requested, or the fixture does not hold enough suitable validators or headers;
/// [`InjectError::Fixture`] for unreadable input or unwritable output.
pub fn inject(input: &Path, out: &Path, opts: &InjectOptions) -> Result<Manifest, InjectError> {
    let invalid = |m: String| InjectError::Invalid(m);
    let reader = FixtureReader::open(input)?;
    let source = reader.manifest().clone();
    let count = source.contents.batch_count;
    let last = opts.last_batch.unwrap_or(count.saturating_sub(1));
    if count == 0 || last >= count || opts.first_batch > last {
        return Err(invalid(format!(
            "batches {}..={last} are not a window of this fixture's {count} batches",
            opts.first_batch
        )));
    }
    if opts.double_votes == 0 && opts.surround_votes == 0 && opts.double_proposals == 0 {
        return Err(invalid(
            "nothing requested (--double-votes, --surround-votes, --double-proposals)".into(),
        ));
    }
    if source.description.expected_from_batch.is_none()
        && source
            .description
            .expected_slashings
            .as_ref()
            .is_some_and(|e| !e.is_empty())
    {
        return Err(invalid(
            "the fixture already lists expected slashings without their batches (a generated \
             fixture): generate it with the slashings wanted instead"
                .into(),
        ));
    }

    // Pass 1: what the window holds.
    let mut window = Vec::new();
    for batch in reader {
        let batch = batch?;
        if batch.index > last {
            break;
        }
        if batch.index < opts.first_batch.saturating_sub(1) {
            continue;
        }
        window.push(WindowBatch {
            index: batch.index,
            current_epoch: batch.current_epoch,
            header: match batch.headers.as_slice() {
                [one] => Some(*one),
                _ => None,
            },
            attestations: batch
                .attestations
                .iter()
                .map(|a| {
                    let kept = a.attesting_indices.iter().take(KEPT_INDICES).copied();
                    (a.data, kept.collect())
                })
                .filter(|(_, v): &(AttestationData, Vec<u64>)| !v.is_empty())
                .collect(),
        });
    }

    let mut rng = SplitMix64(opts.seed);
    let seed = opts.seed;
    let mut additions: HashMap<u64, Vec<Addition>> = HashMap::new();
    let mut expected: Vec<(u64, ExpectedSlashing)> = Vec::new();
    let mut used: HashSet<u64> = HashSet::new();

    // Double votes: from a batch of the window to the next one, or within the batch.
    let step = u64::from(!opts.same_batch);
    let voting: Vec<&WindowBatch> = window
        .iter()
        .filter(|b| b.index + step >= opts.first_batch && b.index + step <= last)
        .filter(|b| !b.attestations.is_empty())
        .collect();
    let mut attempts = 0;
    while (expected.len() as u32) < opts.double_votes {
        attempts += 1;
        if attempts > ATTEMPTS_PER_EVENT * opts.double_votes || voting.is_empty() {
            return Err(invalid(format!(
                "found {} of {} double votes' validators in batches {}..={last}",
                expected.len(),
                opts.double_votes,
                opts.first_batch
            )));
        }
        let Some(b) = pick(&mut rng, &voting) else {
            continue;
        };
        let Some((data, validators)) = pick(&mut rng, &b.attestations) else {
            continue;
        };
        let Some(&v) = pick(&mut rng, validators) else {
            continue;
        };
        if !used.insert(v) {
            continue;
        }
        let mut other = *data;
        other.beacon_block_root = derived_root("inject double vote head", seed, &[v]);
        let at = b.index + step;
        additions
            .entry(at)
            .or_default()
            .push(Addition::Attestation(single(v, other)?));
        expected.push((
            at,
            ExpectedSlashing::DoubleVote {
                validator_index: v,
                attestation_1: summary(data),
                attestation_2: summary(&other),
            },
        ));
    }

    // Surround votes: candidates first, then those that attest nothing with target e+1.
    if opts.surround_votes > 0 {
        let candidates = surround_candidates(&mut rng, &window, opts, &mut used)?;
        let disqualified = votes_at_next_target(input, &candidates)?;
        let chosen: Vec<&SurroundCandidate> = candidates
            .iter()
            .enumerate()
            .filter(|(i, _)| !disqualified.contains(i))
            .map(|(_, c)| c)
            .take(opts.surround_votes as usize)
            .collect();
        if chosen.len() < opts.surround_votes as usize {
            return Err(invalid(format!(
                "of {} candidates, {} validators attest no target after the one picked; {} \
                 surround votes were asked for",
                candidates.len(),
                chosen.len(),
                opts.surround_votes
            )));
        }
        for c in chosen {
            let e = c.data.target.epoch;
            let surrounding = AttestationData {
                slot: (e + 1) * SLOTS_PER_EPOCH,
                index: 0,
                beacon_block_root: derived_root("inject surround head", seed, &[c.validator]),
                source: Checkpoint {
                    epoch: c.data.source.epoch - 1,
                    root: derived_root("inject surround source", seed, &[e]),
                },
                target: Checkpoint {
                    epoch: e + 1,
                    root: derived_root("inject surround target", seed, &[e]),
                },
            };
            additions
                .entry(c.inject_at)
                .or_default()
                .push(Addition::Attestation(single(c.validator, surrounding)?));
            expected.push((
                c.inject_at,
                ExpectedSlashing::SurroundVote {
                    validator_index: c.validator,
                    attestation_1: summary(&surrounding),
                    attestation_2: summary(&c.data),
                },
            ));
        }
    }

    // Double proposals: a second header in the batch of the first.
    let proposing: Vec<&WindowBatch> = window
        .iter()
        .filter(|b| b.index >= opts.first_batch && b.header.is_some())
        .collect();
    let mut slots: HashSet<u64> = HashSet::new();
    let mut proposals = 0;
    let mut attempts = 0;
    while proposals < opts.double_proposals {
        attempts += 1;
        if attempts > ATTEMPTS_PER_EVENT * opts.double_proposals || proposing.is_empty() {
            return Err(invalid(format!(
                "found {proposals} of {} batches with one header for double proposals",
                opts.double_proposals
            )));
        }
        let Some(b) = pick(&mut rng, &proposing) else {
            continue;
        };
        let Some(header) = &b.header else { continue };
        let slot = header.message.slot;
        if !slots.insert(slot) {
            continue;
        }
        let mut other = *header;
        other.message.body_root = derived_root("inject double proposal body", seed, &[slot]);
        other.signature = [0; 96];
        additions
            .entry(b.index)
            .or_default()
            .push(Addition::Header(other));
        expected.push((
            b.index,
            ExpectedSlashing::DoubleProposal {
                proposer_index: header.message.proposer_index,
                slot,
            },
        ));
        proposals += 1;
    }

    // Pass 2: the copy.
    let mut writer = FixtureWriter::create(out)?;
    for batch in FixtureReader::open(input)? {
        let mut batch: Batch = batch?;
        for addition in additions.remove(&batch.index).unwrap_or_default() {
            match addition {
                Addition::Attestation(a) => batch.attestations.push(a),
                Addition::Header(h) => batch.headers.push(h),
            }
        }
        writer.write_batch(&batch)?;
    }
    let mut description = source.description;
    let (mut list, mut from) = (
        description.expected_slashings.take().unwrap_or_default(),
        description.expected_from_batch.take().unwrap_or_default(),
    );
    expected.sort_by_key(|(at, _)| *at);
    for (at, e) in expected {
        from.push(at);
        list.push(e);
    }
    description.name = format!("{}+slashings", description.name);
    description.provenance.command = format!(
        "{} | slasher-bench inject --double-votes {} --surround-votes {} --double-proposals {} \
         --seed {} --first-batch {} --last-batch {last}{}",
        description.provenance.command,
        opts.double_votes,
        opts.surround_votes,
        opts.double_proposals,
        opts.seed,
        opts.first_batch,
        if opts.same_batch { " --same-batch" } else { "" }
    );
    description.provenance.source = format!(
        "{}; plus {} slashable events added by slasher-bench inject (seed {}) in batches \
         {}..={last}, listed in expected_slashings; their signatures are 96 zero bytes",
        description.provenance.source,
        list.len(),
        opts.seed,
        opts.first_batch
    );
    description.expected_slashings = Some(list);
    description.expected_from_batch = Some(from);
    Ok(writer.finish(description)?)
}

fn pick<'a, T>(rng: &mut SplitMix64, items: &'a [T]) -> Option<&'a T> {
    if items.is_empty() {
        return None;
    }
    items.get(rng.below(items.len() as u64) as usize)
}

fn single(v: u64, data: AttestationData) -> Result<IndexedAttestation, InjectError> {
    IndexedAttestation::new(vec![v], data, [0; 96])
        .map_err(|e| InjectError::Invalid(format!("attestation: {e:?}")))
}

/// Validators that attested `(e-1, e)` in a batch of epoch `e` (so any vote of theirs with
/// target `e+1` comes in a later batch), where the window has a batch of epoch `e+1` after it.
fn surround_candidates(
    rng: &mut SplitMix64,
    window: &[WindowBatch],
    opts: &InjectOptions,
    used: &mut HashSet<u64>,
) -> Result<Vec<SurroundCandidate>, InjectError> {
    let first_of_epoch = |epoch: u64, after: u64| {
        window
            .iter()
            .find(|b| b.current_epoch == epoch && b.index > after && b.index >= opts.first_batch)
            .map(|b| b.index)
    };
    let usable: Vec<(&WindowBatch, u64)> = window
        .iter()
        .filter_map(|b| Some((b, first_of_epoch(b.current_epoch + 1, b.index)?)))
        .collect();
    let wanted = SURROUND_CANDIDATES_PER_EVENT * opts.surround_votes as usize;
    let mut out = Vec::new();
    let mut attempts = 0;
    while out.len() < wanted && attempts < ATTEMPTS_PER_EVENT as usize * wanted {
        attempts += 1;
        let Some((b, inject_at)) = pick(rng, &usable) else {
            break;
        };
        let Some((data, validators)) = pick(rng, &b.attestations) else {
            continue;
        };
        let e = data.target.epoch;
        if e != b.current_epoch || data.source.epoch + 1 != e || e < 2 {
            continue;
        }
        let Some(&v) = pick(rng, validators) else {
            continue;
        };
        if used.insert(v) {
            out.push(SurroundCandidate {
                validator: v,
                data: *data,
                inject_at: *inject_at,
            });
        }
    }
    if out.is_empty() {
        return Err(InjectError::Invalid(format!(
            "no batch in {}..={} has an attestation (e-1, e) of its own epoch with a batch of \
             epoch e+1 after it",
            opts.first_batch,
            opts.last_batch
                .map_or_else(|| "the end".to_string(), |l| l.to_string())
        )));
    }
    Ok(out)
}

/// Positions in `candidates` of those whose validator attests with target `e+1` anywhere in
/// the fixture.
fn votes_at_next_target(
    input: &Path,
    candidates: &[SurroundCandidate],
) -> Result<HashSet<usize>, InjectError> {
    let by_validator: HashMap<u64, usize> = candidates
        .iter()
        .enumerate()
        .map(|(i, c)| (c.validator, i))
        .collect();
    let mut out = HashSet::new();
    for batch in FixtureReader::open(input)? {
        for a in &batch?.attestations {
            for v in a.attesting_indices.iter() {
                if let Some(&i) = by_validator.get(v) {
                    let next = candidates.get(i).map(|c| c.data.target.epoch + 1);
                    if next == Some(a.data.target.epoch) {
                        out.insert(i);
                    }
                }
            }
        }
    }
    Ok(out)
}
