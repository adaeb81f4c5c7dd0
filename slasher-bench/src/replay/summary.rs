//! A backend's slashings: per-batch digests for the gate, the summary in its row, and the
//! check against the slashings the fixture's manifest expects.

use super::*;

/// SHA-256 over the sorted, tagged SSZ encodings of a batch's slashings; `None` if there are
/// none. Equal sets give equal digests whatever order a backend found them in.
pub(crate) fn slashings_digest(
    attester: &HashSet<AttesterSlashing>,
    proposer: &HashSet<ProposerSlashing>,
) -> Option<String> {
    let mut encoded: Vec<Vec<u8>> = Vec::with_capacity(attester.len() + proposer.len());
    for s in attester {
        let mut bytes = vec![b'A'];
        bytes.extend(s.as_ssz_bytes());
        encoded.push(bytes);
    }
    for s in proposer {
        let mut bytes = vec![b'P'];
        bytes.extend(s.as_ssz_bytes());
        encoded.push(bytes);
    }
    digest_of_slashings(encoded)
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

/// Human-readable summaries of one batch's slashings, in a deterministic order.
pub(crate) fn summarise(
    batch: u64,
    attester: &HashSet<AttesterSlashing>,
    proposer: &HashSet<ProposerSlashing>,
) -> Vec<SlashingRecord> {
    let mut out: Vec<SlashingRecord> = attester
        .iter()
        .map(|s| {
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
    out.extend(proposer.iter().map(|s| SlashingRecord {
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
