//! Every fixture committed under `fixtures/` reads back completely, matches the SHA-256 listed in
//! `fixtures/README.md`, and says what the README says it is.

use sha2::{Digest, Sha256};
use slasher_bench::fixtures::file::{
    CommitteeAssignment, ExpectedSlashing, FixtureReader, SourceKind,
};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

/// `sha256  file` lines of the README.
fn listed_hashes() -> BTreeMap<String, String> {
    let readme = std::fs::read_to_string(fixtures_dir().join("README.md")).unwrap();
    readme
        .lines()
        .filter_map(|line| {
            let (hash, file) = line.split_once("  ")?;
            (hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| (file.trim().to_string(), hash.to_string()))
        })
        .collect()
}

#[test]
fn every_committed_fixture_is_listed_and_matches_its_hash() {
    let listed = listed_hashes();
    let mut on_disk: Vec<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".fixture"))
        .collect();
    on_disk.sort();
    assert_eq!(
        on_disk,
        listed.keys().cloned().collect::<Vec<_>>(),
        "README lists every fixture"
    );
    for (file, hash) in &listed {
        let bytes = std::fs::read(fixtures_dir().join(file)).unwrap();
        assert_eq!(&hex::encode(Sha256::digest(&bytes)), hash, "{file}");
        let reader = FixtureReader::open(fixtures_dir().join(file)).unwrap();
        let batch_count = reader.manifest().contents.batch_count;
        assert_eq!(reader.verify().unwrap(), batch_count, "{file}");
    }
}

#[test]
fn synthetic_tiny_is_what_the_readme_says() {
    let reader = FixtureReader::open(fixtures_dir().join("synthetic-tiny.fixture")).unwrap();
    let m = reader.manifest().clone();
    assert_eq!(m.description.provenance.kind, SourceKind::Synthetic);
    assert_eq!(m.description.provenance.seed, Some(1));
    assert_eq!(m.description.validator_count, 16_384);
    assert_eq!(m.contents.batch_count, 128);
    assert_eq!(m.contents.attestation_count, 1_341);
    let expected = m.description.expected_slashings.unwrap();
    let kinds: Vec<&str> = expected
        .iter()
        .map(|s| match s {
            ExpectedSlashing::DoubleVote { .. } => "double_vote",
            ExpectedSlashing::SurroundVote { .. } => "surround_vote",
            ExpectedSlashing::DoubleProposal { .. } => "double_proposal",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "double_vote",
            "double_vote",
            "surround_vote",
            "surround_vote",
            "double_proposal",
            "double_proposal"
        ]
    );
    let attestations: usize = reader.map(|b| b.unwrap().attestations.len()).sum();
    assert_eq!(attestations, 1_341);
}

#[test]
fn mainnet_first_64_slots_is_what_the_readme_says() {
    let path = fixtures_dir().join("mainnet-merge-2022-first-64-slots.fixture");
    let reader = FixtureReader::open(&path).unwrap();
    let m = reader.manifest().clone();
    assert_eq!(m.description.provenance.kind, SourceKind::BeaconApi);
    assert_eq!(m.description.expected_slashings, None);
    assert_eq!(
        (m.contents.first_slot, m.contents.last_slot),
        (Some(4_699_968), Some(4_700_031))
    );
    assert_eq!(m.contents.batch_count, 64);
    assert_eq!(m.contents.attestation_count, 6_475);
    let CommitteeAssignment::SyntheticShuffle {
        active_validators, ..
    } = &m.description.committees
    else {
        panic!("synthetic committees expected");
    };
    assert!(active_validators
        .iter()
        .all(|a| a.active_validators == 427_192));
    let mut slots = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        assert_eq!(batch.headers.len(), 1);
        slots.push(batch.slot);
    }
    assert_eq!(slots, (4_699_968..=4_700_031).collect::<Vec<_>>());
}
