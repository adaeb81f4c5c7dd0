//! `import-beacon-api` on the real mainnet sample committed in `data/mainnet-merge-2022` (read in
//! place, never copied): whole-sample counts, the inferred active-set sizes, a golden check of one
//! attestation's indices against an independent implementation of the spec shuffle, and the
//! error for a bitlist whose length is not its committee's size.

use serde_json::Value;
use sha2::{Digest, Sha256};
use slasher_bench::fixtures::file::{CommitteeAssignment, FixtureReader, SourceKind};
use slasher_bench::fixtures::import::{
    ensure_default_fixture, import_beacon_api, ImportError, ImportOptions, DEFAULT_FIXTURE_NAME,
};
use std::io::Read;
use std::path::PathBuf;

/// The sample committed in the repository (`data/` beside this crate).
fn sample_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../data/mainnet-merge-2022"
    ));
    assert!(
        dir.join("attestations").is_dir(),
        "the mainnet sample is missing at {} (it is committed in the repository)",
        dir.display()
    );
    dir
}

fn sample_options() -> ImportOptions {
    let dir = sample_dir();
    ImportOptions::new(dir.join("attestations"), dir.join("headers"))
}

fn read_json_gz(path: PathBuf) -> Value {
    let raw = std::fs::read(&path).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(raw.as_slice())
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn whole_sample_counts() {
    let out = tempfile::tempdir().unwrap();
    let path = out.path().join("sample.fixture");
    let mut opts = sample_options();
    opts.name = Some(DEFAULT_FIXTURE_NAME.into());
    let summary = import_beacon_api(&opts, &path).unwrap();
    // The default benchmark fixture is exactly this import; an existing one is reused.
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    let reused = ensure_default_fixture(&sample_dir(), &path).unwrap();
    assert_eq!(reused, summary.manifest);
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        modified
    );
    let c = &summary.manifest.contents;
    assert_eq!(c.batch_count, 1012);
    assert_eq!(c.header_count, 1012);
    assert_eq!(c.attestation_count, 115_607);
    assert_eq!(c.first_slot, Some(4_699_968));
    assert_eq!(c.last_slot, Some(4_700_991));
    assert_eq!(summary.missed_slots.len(), 12);
    assert!(summary.missed_slots.contains(&4_700_065));

    // Active validators per epoch, inferred from the bitlists (data/mainnet-merge-2022/
    // PROVENANCE.md): 427,192 up to epoch 146,879 and 427,191 from epoch 146,880 on (one
    // validator left the active set). Each value is the only one whose compute_committee sizes
    // match all 2,048 committees of the epoch.
    let d = &summary.manifest.description;
    let CommitteeAssignment::SyntheticShuffle {
        active_validators, ..
    } = &d.committees
    else {
        panic!("expected synthetic committees, got {:?}", d.committees);
    };
    assert_eq!(active_validators.len(), 33, "epochs 146873..=146905");
    for a in active_validators {
        let want = if a.epoch <= 146_879 { 427_192 } else { 427_191 };
        assert_eq!(a.active_validators, want, "epoch {}", a.epoch);
        match a.epoch {
            146_873 => assert_eq!(a.committees_seen, 141),
            146_905 => assert_eq!(a.committees_seen, 1984),
            _ => {
                assert_eq!(a.committees_seen, 2048, "epoch {}", a.epoch);
                assert_eq!(a.inferred_from, "complete epoch");
            }
        }
    }
    assert_eq!(d.validator_count, 427_192);
    assert_eq!(d.provenance.kind, SourceKind::BeaconApi);
    assert_eq!(d.expected_slashings, None);

    // Stream it back: every batch one block, current epoch = slot / 32, indices sorted and
    // below the active count, each validator at most once per (slot, committee) aggregate.
    let mut attestations = 0u64;
    let mut previous_slot = 0;
    for batch in FixtureReader::open(&path).unwrap() {
        let batch = batch.unwrap();
        assert!(batch.slot > previous_slot);
        previous_slot = batch.slot;
        assert_eq!(batch.current_epoch, batch.slot / 32);
        assert_eq!(batch.headers.len(), 1);
        assert_eq!(batch.headers[0].message.slot, batch.slot);
        for a in &batch.attestations {
            assert!(a.attesting_indices.windows(2).all(|w| w[0] < w[1]));
            assert!(a.attesting_indices.iter().all(|v| *v < 427_192));
            assert!(!a.attesting_indices.is_empty());
        }
        attestations += batch.attestations.len() as u64;
    }
    assert_eq!(attestations, 115_607);
}

// ---- An independent, literal transcription of the consensus spec (not the library's code). ----

fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// consensus-specs `compute_shuffled_index`, written out step by step.
fn spec_compute_shuffled_index(mut index: u64, index_count: u64, seed: &[u8; 32]) -> u64 {
    assert!(index < index_count);
    for current_round in 0u8..90 {
        let h = sha256(&[seed, &[current_round]]);
        let pivot = u64::from_le_bytes(h[0..8].try_into().unwrap()) % index_count;
        let flip = (pivot + index_count - index) % index_count;
        let position = std::cmp::max(index, flip);
        let source = sha256(&[
            seed,
            &[current_round],
            &((position / 256) as u32).to_le_bytes(),
        ]);
        let byte = source[((position % 256) / 8) as usize];
        let bit = (byte >> (position % 8)) % 2;
        if bit == 1 {
            index = flip;
        }
    }
    index
}

#[test]
fn golden_attestation_indices_match_the_spec_shuffle() {
    // Block 4,700,100 (epoch 146,878); its first attestation.
    let block_slot = 4_700_100u64;
    let sample = sample_dir();
    let raw = read_json_gz(sample.join(format!("attestations/{block_slot}.json.gz")));
    let att = &raw["data"][0];
    let slot: u64 = att["data"]["slot"].as_str().unwrap().parse().unwrap();
    let index: u64 = att["data"]["index"].as_str().unwrap().parse().unwrap();
    let bits = hex::decode(
        att["aggregation_bits"]
            .as_str()
            .unwrap()
            .trim_start_matches("0x"),
    )
    .unwrap();
    let epoch = slot / 32;
    assert_eq!(epoch, 146_878);

    // The documented substitute seed, N from PROVENANCE.md (epoch 146,878), C = 32 * 64.
    let n = 427_192u64;
    let committees_per_epoch = 32 * 64;
    let seed = sha256(&[b"butter_db synthetic committee seed", &epoch.to_le_bytes()]);
    let k = (slot % 32) * 64 + index;
    let start = n * k / committees_per_epoch;
    let end = n * (k + 1) / committees_per_epoch;
    let committee: Vec<u64> = (start..end)
        .map(|i| spec_compute_shuffled_index(i, n, &seed))
        .collect();
    let bit_len = (bits.len() - 1) * 8 + (7 - bits.last().unwrap().leading_zeros() as usize);
    assert_eq!(bit_len, committee.len(), "bitlist length = committee size");
    let mut expected: Vec<u64> = committee
        .iter()
        .enumerate()
        .filter(|(i, _)| bits[i / 8] >> (i % 8) & 1 == 1)
        .map(|(_, v)| *v)
        .collect();
    expected.sort_unstable();
    assert!(expected.len() > 100, "a real aggregate");

    let mut opts = sample_options();
    opts.from_slot = Some(block_slot - 40);
    opts.to_slot = Some(block_slot);
    let out = tempfile::tempdir().unwrap();
    let path = out.path().join("slice.fixture");
    import_beacon_api(&opts, &path).unwrap();
    let batch = FixtureReader::open(&path)
        .unwrap()
        .map(Result::unwrap)
        .find(|b| b.slot == block_slot)
        .unwrap();
    let got = &batch.attestations[0];
    assert_eq!(got.data.slot, slot);
    assert_eq!(got.data.index, index);
    assert_eq!(got.attesting_indices.to_vec(), expected);
    let signature =
        hex::decode(att["signature"].as_str().unwrap().trim_start_matches("0x")).unwrap();
    assert_eq!(got.signature.to_vec(), signature);
}

#[test]
fn bitlist_of_the_wrong_length_is_an_error() {
    // Copy a short slice of the sample to a temp dir and lengthen one bitlist by one bit.
    let sample = sample_dir();
    let tmp = tempfile::tempdir().unwrap();
    let (att_dir, header_dir) = (tmp.path().join("attestations"), tmp.path().join("headers"));
    std::fs::create_dir_all(&att_dir).unwrap();
    std::fs::create_dir_all(&header_dir).unwrap();
    let slots = 4_700_100u64..4_700_140;
    for slot in slots.clone() {
        for (dir, kind) in [(&att_dir, "attestations"), (&header_dir, "headers")] {
            let value = read_json_gz(sample.join(format!("{kind}/{slot}.json.gz")));
            std::fs::write(dir.join(format!("{slot}.json")), value.to_string()).unwrap();
        }
    }
    let victim_slot = 4_700_139u64;
    let victim = att_dir.join(format!("{victim_slot}.json"));
    let mut value: Value =
        serde_json::from_str(&std::fs::read_to_string(&victim).unwrap()).unwrap();
    // The committees were all inferred consistently; now make one attestation disagree.
    let bits_hex = value["data"][3]["aggregation_bits"]
        .as_str()
        .unwrap()
        .to_string();
    let mut bits = hex::decode(bits_hex.trim_start_matches("0x")).unwrap();
    let lengthened = bits.len() * 8; // the old length bit becomes a vote bit
    bits.push(0x01);
    value["data"][3]["aggregation_bits"] = Value::String(format!("0x{}", hex::encode(&bits)));
    std::fs::write(&victim, value.to_string()).unwrap();

    let err = import_beacon_api(
        &ImportOptions::new(&att_dir, &header_dir),
        &tmp.path().join("out.fixture"),
    )
    .unwrap_err();
    // Pass 1 sees two lengths for the same committee.
    assert!(matches!(err, ImportError::CommitteeSizes { .. }), "{err}");

    // With exact committees the same attestation is a BitlistLength error.
    let data = &value["data"][3]["data"];
    let slot: u64 = data["slot"].as_str().unwrap().parse().unwrap();
    let index: u64 = data["index"].as_str().unwrap().parse().unwrap();
    let committees_dir = tmp.path().join("committees");
    std::fs::create_dir_all(&committees_dir).unwrap();
    for epoch in (slots.start - 32) / 32..=slots.end / 32 {
        let committees =
            slasher_bench::fixtures::shuffle::EpochCommittees::synthetic(epoch, 427_192);
        let data: Vec<Value> = (epoch * 32..epoch * 32 + 32)
            .flat_map(|s| (0..64).map(move |i| (s, i)))
            .map(|(s, i)| {
                let members: Vec<String> =
                    committees.committee(s, i).unwrap().iter().map(u64::to_string).collect();
                serde_json::json!({"index": i.to_string(), "slot": s.to_string(), "validators": members})
            })
            .collect();
        let body = serde_json::json!({"execution_optimistic": false, "data": data});
        std::fs::write(
            committees_dir.join(format!("{epoch}.json")),
            body.to_string(),
        )
        .unwrap();
    }
    let mut opts = ImportOptions::new(&att_dir, &header_dir);
    opts.committees_dir = Some(committees_dir);
    let err = import_beacon_api(&opts, &tmp.path().join("out.fixture")).unwrap_err();
    match &err {
        ImportError::BitlistLength {
            path,
            position,
            slot: s,
            index: i,
            bits,
            committee_size,
        } => {
            assert_eq!(path, &victim);
            assert_eq!(*position, 3);
            assert_eq!((*s, *i), (slot, index));
            assert_eq!(*bits, lengthened);
            assert!(*bits > *committee_size);
        }
        other => panic!("expected BitlistLength, got {other:?}"),
    }
    assert!(!tmp.path().join("out.fixture").exists());
}
