//! A backend's slashings: per-batch digests for the gate, the summary in its row, and the
//! check against the slashings the fixture's manifest expects.

use crate::fixtures::file::{ExpectedSlashing, Manifest};
use crate::report::{ExpectedCheck, SlashingRecord, VoteRecord};
use sha2::{Digest, Sha256};
use slasher_adapters::slasher::{AttesterSlashing, IndexedAttestation, ProposerSlashing};
use ssz::Encode;
use std::collections::BTreeSet;

/// One batch's slashings in canonical form, the only form the bench digests, counts and lists
/// (docs/lighthouse.md §4, *What the gate tolerates*). Which of two conflicting objects a
/// slasher calls "1" depends on the order it processed them in, and Lighthouse processes the
/// block headers of a batch in `HashSet` order, so that order is not part of a slashing here:
/// - a proposer slashing holds its two headers ordered by their SSZ bytes;
/// - a double vote (both attestations with one target epoch) holds its two attestations ordered
///   by their SSZ bytes;
/// - a surround vote is kept as found: the consensus spec accepts it only with the surrounding
///   attestation first, so its order is fixed by its content and a reversed one is a real
///   difference.
///
/// Two slashings that are equal once canonical count once; each list is sorted by SSZ bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchSlashings {
    /// Attester slashings, each with its SSZ encoding.
    attester: Vec<(Vec<u8>, AttesterSlashing)>,
    /// Proposer slashings, each with its SSZ encoding.
    proposer: Vec<(Vec<u8>, ProposerSlashing)>,
}

impl BatchSlashings {
    /// The canonical form of the slashings a slasher returned for one batch.
    pub fn canonical<'a>(
        attester: impl IntoIterator<Item = &'a AttesterSlashing>,
        proposer: impl IntoIterator<Item = &'a ProposerSlashing>,
    ) -> Self {
        Self {
            attester: sorted_unique(attester.into_iter().map(canonical_attester)),
            proposer: sorted_unique(proposer.into_iter().map(canonical_proposer)),
        }
    }

    /// How many attester slashings.
    pub fn attester_count(&self) -> usize {
        self.attester.len()
    }

    /// How many proposer slashings.
    pub fn proposer_count(&self) -> usize {
        self.proposer.len()
    }

    /// SHA-256 over the tagged SSZ encodings of the canonical slashings; `None` if there are
    /// none. Every order a slasher may find or list them in gives the same digest.
    pub fn digest(&self) -> Option<String> {
        let tagged = |tag: u8, ssz: &[u8]| {
            let mut bytes = Vec::with_capacity(ssz.len() + 1);
            bytes.push(tag);
            bytes.extend_from_slice(ssz);
            bytes
        };
        let encoded = self
            .attester
            .iter()
            .map(|(ssz, _)| tagged(b'A', ssz))
            .chain(self.proposer.iter().map(|(ssz, _)| tagged(b'P', ssz)))
            .collect();
        digest_of_slashings(encoded)
    }
}

/// A proposer slashing with its headers in SSZ byte order.
fn canonical_proposer(s: &ProposerSlashing) -> ProposerSlashing {
    let mut out = s.clone();
    if s.signed_header_1.as_ssz_bytes() > s.signed_header_2.as_ssz_bytes() {
        std::mem::swap(&mut out.signed_header_1, &mut out.signed_header_2);
    }
    out
}

/// A double vote with its attestations in SSZ byte order; a surround vote unchanged.
fn canonical_attester(s: &AttesterSlashing) -> AttesterSlashing {
    let mut out = s.clone();
    let double_vote = s.attestation_1.data.target.epoch == s.attestation_2.data.target.epoch;
    if double_vote && s.attestation_1.as_ssz_bytes() > s.attestation_2.as_ssz_bytes() {
        std::mem::swap(&mut out.attestation_1, &mut out.attestation_2);
    }
    out
}

/// `items` with their SSZ encodings, sorted by them, each distinct encoding once.
fn sorted_unique<T: Encode>(items: impl Iterator<Item = T>) -> Vec<(Vec<u8>, T)> {
    let mut out: Vec<(Vec<u8>, T)> = items.map(|t| (t.as_ssz_bytes(), t)).collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// The digest of one batch's slashings, each given as a tag byte (`A` attester, `P` proposer)
/// followed by its SSZ: SHA-256 over the sorted entries, each preceded by its length as a
/// little-endian u64; `None` when there are none.
fn digest_of_slashings(mut entries: Vec<Vec<u8>>) -> Option<String> {
    if entries.is_empty() {
        return None;
    }
    entries.sort();
    let mut hasher = Sha256::new();
    for e in &entries {
        hasher.update((e.len() as u64).to_le_bytes());
        hasher.update(e);
    }
    Some(hex::encode(hasher.finalize()))
}

pub(super) fn vote(a: &IndexedAttestation) -> VoteRecord {
    VoteRecord {
        source_epoch: a.data.source.epoch,
        target_epoch: a.data.target.epoch,
        data_root: format!("0x{}", hex::encode(a.data_root())),
    }
}

/// Human-readable summaries of one batch's canonical slashings, in a deterministic order.
pub(crate) fn summarise(batch: u64, slashings: &BatchSlashings) -> Vec<SlashingRecord> {
    let mut out: Vec<SlashingRecord> = slashings
        .attester
        .iter()
        .map(|(_, s)| {
            let first: BTreeSet<u64> = s.attestation_1.attesting_indices.iter().copied().collect();
            let both = s
                .attestation_2
                .attesting_indices
                .iter()
                .filter(|v| first.contains(v))
                .copied()
                .collect::<BTreeSet<u64>>();
            let same_target =
                s.attestation_1.data.target.epoch == s.attestation_2.data.target.epoch;
            SlashingRecord {
                batch,
                kind: if same_target {
                    "double_vote"
                } else {
                    "surround_vote"
                }
                .into(),
                validators: both.into_iter().collect(),
                attestation_1: Some(vote(&s.attestation_1)),
                attestation_2: Some(vote(&s.attestation_2)),
                slot: None,
            }
        })
        .collect();
    out.extend(slashings.proposer.iter().map(|(_, s)| SlashingRecord {
        batch,
        kind: "double_proposal".into(),
        validators: vec![s.signed_header_1.message.proposer_index],
        attestation_1: None,
        attestation_2: None,
        slot: Some(s.signed_header_1.message.slot),
    }));
    out.sort_by(|a, b| {
        (
            &a.kind,
            &a.validators,
            &a.attestation_1,
            &a.attestation_2,
            a.slot,
        )
            .cmp(&(
                &b.kind,
                &b.validators,
                &b.attestation_1,
                &b.attestation_2,
                b.slot,
            ))
    });
    out
}

/// The manifest's expected slashings that a replay of the first `replayed` batches must have
/// found: all of them after a full replay; after a prefix, those whose completing batch
/// (`expected_from_batch`) is within it. `None` when there is nothing to check.
pub(crate) fn expected_within(manifest: &Manifest, replayed: u64) -> Option<Vec<ExpectedSlashing>> {
    let expected = manifest.description.expected_slashings.as_ref()?;
    if replayed >= manifest.contents.batch_count {
        return Some(expected.clone());
    }
    let from = manifest.description.expected_from_batch.as_ref()?;
    let within: Vec<ExpectedSlashing> = expected
        .iter()
        .zip(from)
        .filter(|(_, &at)| at < replayed)
        .map(|(e, _)| e.clone())
        .collect();
    (!within.is_empty()).then_some(within)
}

/// Match the manifest's injected slashings against what was found.
pub(crate) fn check_expected(
    expected: &[ExpectedSlashing],
    found: &[SlashingRecord],
) -> ExpectedCheck {
    let mut matched = vec![false; found.len()];
    let mut missing = Vec::new();
    for e in expected {
        let hit = found
            .iter()
            .enumerate()
            .position(|(i, f)| !matched.get(i).copied().unwrap_or(true) && matches_expected(e, f));
        match hit {
            Some(i) => {
                if let Some(m) = matched.get_mut(i) {
                    *m = true;
                }
            }
            None => missing.push(describe_expected(e)),
        }
    }
    ExpectedCheck {
        expected: expected.len(),
        found: expected.len() - missing.len(),
        missing,
        unexpected: matched.iter().filter(|m| !**m).count(),
    }
}

pub(super) fn matches_expected(e: &ExpectedSlashing, f: &SlashingRecord) -> bool {
    let roots = |a: Option<&VoteRecord>, b: Option<&VoteRecord>| {
        let mut r: Vec<String> = a
            .into_iter()
            .chain(b)
            .map(|v| v.data_root.clone())
            .collect();
        r.sort();
        r
    };
    match e {
        ExpectedSlashing::DoubleVote {
            validator_index,
            attestation_1,
            attestation_2,
        }
        | ExpectedSlashing::SurroundVote {
            validator_index,
            attestation_1,
            attestation_2,
        } => {
            let mut want = vec![
                attestation_1.data_root.clone(),
                attestation_2.data_root.clone(),
            ];
            want.sort();
            f.kind != "double_proposal"
                && f.validators.contains(validator_index)
                && roots(f.attestation_1.as_ref(), f.attestation_2.as_ref()) == want
        }
        ExpectedSlashing::DoubleProposal {
            proposer_index,
            slot,
        } => {
            f.kind == "double_proposal"
                && f.validators.first() == Some(proposer_index)
                && f.slot == Some(*slot)
        }
    }
}

pub(super) fn describe_expected(e: &ExpectedSlashing) -> String {
    match e {
        ExpectedSlashing::DoubleVote {
            validator_index,
            attestation_1,
            ..
        } => format!(
            "double vote by {validator_index} at target {}",
            attestation_1.target_epoch
        ),
        ExpectedSlashing::SurroundVote {
            validator_index,
            attestation_1,
            attestation_2,
        } => {
            format!(
                "surround vote by {validator_index} ({}→{} around {}→{})",
                attestation_1.source_epoch,
                attestation_1.target_epoch,
                attestation_2.source_epoch,
                attestation_2.target_epoch
            )
        }
        ExpectedSlashing::DoubleProposal {
            proposer_index,
            slot,
        } => {
            format!("double proposal by {proposer_index} at slot {slot}")
        }
    }
}
