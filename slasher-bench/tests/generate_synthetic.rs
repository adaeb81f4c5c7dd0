//! `generate`: deterministic output, mainnet shape (one batch per slot, committees from the
//! shuffle, aggregates, late and duplicate inclusions, zero signatures), and injected slashings
//! that a brute-force detector over the whole fixture finds exactly as the manifest lists them.

use slasher_adapters::slasher::types::{AttestationData, SignedBeaconBlockHeader};
use slasher_bench::fixtures::file::{Batch, ExpectedSlashing, FixtureReader, VoteSummary};
use slasher_bench::fixtures::generate::{generate, Fork, GenerateError, GenerateOptions};
use slasher_bench::fixtures::shuffle::EpochCommittees;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use tree_hash::TreeHash;

fn read(path: &Path) -> Vec<Batch> {
    FixtureReader::open(path)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn summary(d: &AttestationData) -> VoteSummary {
    VoteSummary {
        source_epoch: d.source.epoch,
        target_epoch: d.target.epoch,
        data_root: format!("0x{}", hex::encode(d.tree_hash_root())),
    }
}

#[test]
fn same_options_same_bytes_other_seed_other_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let opts = GenerateOptions::new(4096, 4, 11);
    let (a, b, c) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("c"),
    );
    generate(&opts, &a).unwrap();
    generate(&opts, &b).unwrap();
    generate(&GenerateOptions::new(4096, 4, 12), &c).unwrap();
    let bytes = std::fs::read(&a).unwrap();
    assert_eq!(bytes, std::fs::read(&b).unwrap());
    assert_ne!(bytes, std::fs::read(&c).unwrap());
}

#[test]
fn batches_are_mainnet_shaped_before_electra() {
    batches_are_mainnet_shaped(Fork::Phase0);
}

#[test]
fn batches_are_mainnet_shaped_from_electra_on() {
    batches_are_mainnet_shaped(Fork::Electra);
}

fn batches_are_mainnet_shaped(fork: Fork) {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("shape.fixture");
    // 8192 validators: 2 committees per slot of 128, so Electra aggregates span committees.
    let n = 8192;
    let mut opts = GenerateOptions::new(n, 5, 3);
    opts.fork = fork;
    let manifest = generate(&opts, &path).unwrap();
    assert!(
        manifest
            .description
            .provenance
            .command
            .ends_with(&format!("--fork {}", fork.name())),
        "{}",
        manifest.description.provenance.command
    );
    let batches = read(&path);
    assert_eq!(batches.len(), 5 * 32);
    assert_eq!(manifest.contents.batch_count, 160);
    assert_eq!(manifest.description.validator_count, n);
    let mut votes_per_epoch: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut missed = 0;
    let mut cache: HashMap<u64, EpochCommittees> = HashMap::new();
    let mut late = 0;
    let mut largest_aggregate = 0;
    for (i, batch) in batches.iter().enumerate() {
        assert_eq!(batch.index, i as u64);
        assert_eq!(batch.slot, opts.start_epoch * 32 + i as u64);
        assert_eq!(batch.current_epoch, batch.slot / 32);
        if batch.headers.is_empty() {
            missed += 1;
            assert!(batch.attestations.is_empty(), "a missed slot has no block");
        }
        for h in &batch.headers {
            assert_eq!(h.signature, [0; 96]);
            assert!(h.message.proposer_index < n);
        }
        for a in &batch.attestations {
            assert_eq!(a.signature, [0; 96]);
            assert!(a.attesting_indices.windows(2).all(|w| w[0] < w[1]));
            assert!(a.data.slot < batch.slot || a.attesting_indices.len() == 1);
            if batch.slot - a.data.slot > 1 {
                late += 1;
            }
            // Every honest attester is a member of the committee it claims: before Electra the
            // one named by `data.index`, from Electra on any committee of the slot (index 0).
            if a.attesting_indices.len() > 1 {
                largest_aggregate = largest_aggregate.max(a.attesting_indices.len());
                let epoch = a.data.slot / 32;
                let committees = cache
                    .entry(epoch)
                    .or_insert_with(|| EpochCommittees::synthetic(epoch, n));
                let claimed = match fork {
                    Fork::Phase0 => a.data.index..a.data.index + 1,
                    Fork::Electra => {
                        assert_eq!(a.data.index, 0, "Electra attestation data has index 0");
                        0..committees.committees_per_slot
                    }
                };
                let members: BTreeSet<u64> = claimed
                    .flat_map(|i| {
                        committees
                            .committee(a.data.slot, i)
                            .unwrap()
                            .iter()
                            .copied()
                    })
                    .collect();
                assert!(a.attesting_indices.iter().all(|v| members.contains(v)));
                votes_per_epoch
                    .entry(epoch)
                    .or_default()
                    .extend(a.attesting_indices.iter());
            }
            *seen.entry(ssz::Encode::as_ssz_bytes(a)).or_default() += 1;
        }
    }
    assert!(missed < 10, "about 1 % of slots are missed, got {missed}");
    // A committee here has n / 32 / 2 = 128 members: only an Electra aggregate is larger.
    let committee_size = (n / 32 / 2) as usize;
    match fork {
        Fork::Phase0 => assert!(largest_aggregate <= committee_size, "{largest_aggregate}"),
        Fork::Electra => assert!(largest_aggregate > committee_size, "{largest_aggregate}"),
    }
    assert!(late > 0, "late inclusions");
    assert!(seen.values().any(|c| *c > 1), "duplicate inclusions");
    // Middle epochs: nearly every validator attests (1 % offline).
    for epoch in opts.start_epoch + 1..opts.start_epoch + 4 {
        let voters = votes_per_epoch[&epoch].len() as f64;
        assert!(
            voters > 0.97 * n as f64 && voters <= n as f64,
            "epoch {epoch}: {voters}"
        );
    }
}

/// Find every slashable pair in the fixture by brute force.
fn brute_force_slashings(batches: &[Batch]) -> BTreeSet<(String, u64)> {
    let mut votes: HashMap<u64, BTreeSet<(u64, u64, [u8; 32])>> = HashMap::new();
    let mut proposals: HashMap<(u64, u64), BTreeSet<Vec<u8>>> = HashMap::new();
    let mut found = BTreeSet::new();
    for batch in batches {
        for a in &batch.attestations {
            let root: [u8; 32] = a.data.tree_hash_root().0;
            for v in a.attesting_indices.iter() {
                votes.entry(*v).or_default().insert((
                    a.data.source.epoch,
                    a.data.target.epoch,
                    root,
                ));
            }
        }
        for h in &batch.headers {
            let h: &SignedBeaconBlockHeader = h;
            proposals
                .entry((h.message.slot, h.message.proposer_index))
                .or_default()
                .insert(ssz::Encode::as_ssz_bytes(h));
        }
    }
    for (v, set) in &votes {
        let list: Vec<_> = set.iter().collect();
        for (i, a) in list.iter().enumerate() {
            for b in &list[i + 1..] {
                if a.1 == b.1 && a.2 != b.2 {
                    found.insert(("double_vote".into(), *v));
                }
                let surrounds =
                    |x: &(u64, u64, [u8; 32]), y: &(u64, u64, [u8; 32])| x.0 < y.0 && y.1 < x.1;
                if surrounds(a, b) || surrounds(b, a) {
                    found.insert(("surround_vote".into(), *v));
                }
            }
        }
    }
    for ((_, proposer), headers) in proposals {
        if headers.len() > 1 {
            found.insert(("double_proposal".into(), proposer));
        }
    }
    found
}

#[test]
fn injected_slashings_are_exactly_the_listed_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("slashings.fixture");
    let mut opts = GenerateOptions::new(4096, 6, 42);
    opts.double_votes = 3;
    opts.surround_votes = 3;
    opts.double_proposals = 2;
    let manifest = generate(&opts, &path).unwrap();
    let expected = manifest.description.expected_slashings.clone().unwrap();
    assert_eq!(expected.len(), 8);

    let batches = read(&path);
    let mut want = BTreeSet::new();
    let mut listed_votes = BTreeSet::new();
    for s in &expected {
        match s {
            ExpectedSlashing::DoubleVote {
                validator_index,
                attestation_1,
                attestation_2,
            } => {
                assert_eq!(attestation_1.target_epoch, attestation_2.target_epoch);
                assert_ne!(attestation_1.data_root, attestation_2.data_root);
                want.insert(("double_vote".to_string(), *validator_index));
                listed_votes.insert((*validator_index, attestation_1.clone()));
                listed_votes.insert((*validator_index, attestation_2.clone()));
            }
            ExpectedSlashing::SurroundVote {
                validator_index,
                attestation_1,
                attestation_2,
            } => {
                assert!(attestation_1.source_epoch < attestation_2.source_epoch);
                assert!(attestation_2.target_epoch < attestation_1.target_epoch);
                want.insert(("surround_vote".to_string(), *validator_index));
                listed_votes.insert((*validator_index, attestation_1.clone()));
                listed_votes.insert((*validator_index, attestation_2.clone()));
            }
            ExpectedSlashing::DoubleProposal {
                proposer_index,
                slot,
            } => {
                want.insert(("double_proposal".to_string(), *proposer_index));
                let headers: BTreeSet<Vec<u8>> = batches
                    .iter()
                    .flat_map(|b| &b.headers)
                    .filter(|h| {
                        h.message.slot == *slot && h.message.proposer_index == *proposer_index
                    })
                    .map(ssz::Encode::as_ssz_bytes)
                    .collect();
                assert_eq!(headers.len(), 2, "two different headers for slot {slot}");
            }
        }
    }
    assert_eq!(brute_force_slashings(&batches), want);

    // The (source, target, data root) listed for each vote are really in the fixture for that
    // validator, and every slashable attestation is included when its target epoch is current.
    let mut present = BTreeSet::new();
    for batch in &batches {
        for a in &batch.attestations {
            assert!(a.data.target.epoch <= batch.current_epoch);
            for v in a.attesting_indices.iter() {
                present.insert((*v, summary(&a.data)));
            }
        }
    }
    for vote in &listed_votes {
        assert!(present.contains(vote), "{vote:?} not found");
    }
}

#[test]
fn too_few_epochs_for_injections_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let err = generate(&GenerateOptions::new(4096, 2, 1), &tmp.path().join("x")).unwrap_err();
    assert!(matches!(err, GenerateError::Invalid(_)), "{err}");
    let err = generate(&GenerateOptions::new(10, 4, 1), &tmp.path().join("x")).unwrap_err();
    assert!(matches!(err, GenerateError::Invalid(_)), "{err}");
    assert!(!tmp.path().join("x").exists());
}
