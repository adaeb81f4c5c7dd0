//! Electra attestations (`committee_bits` + one `aggregation_bits` over the named committees)
//! imported from hand-made `GET /eth/v2/beacon/blocks/<slot>/attestations` responses with their
//! committees: the attesting indices are the members whose bits are set, committee after
//! committee in ascending order; a pre-Electra attestation in the same block still works; the
//! bounds and the rules of each fork give clear errors.

use serde_json::json;
use slasher_bench::fixtures::file::FixtureReader;
use slasher_bench::fixtures::import::{import_beacon_api, ImportOptions};
use std::io::Write;
use std::path::Path;

const SLOT: u64 = 320; // epoch 10
const EPOCH: u64 = 10;

fn zero_hex(bytes: usize) -> String {
    format!("0x{}", "00".repeat(bytes))
}

fn root(byte: u8) -> String {
    format!("0x{}", hex::encode([byte; 32]))
}

/// SSZ bitlist bytes with the given bits set and `len` bits long (the length bit after them).
fn bitlist(len: usize, set: &[usize]) -> String {
    let mut bytes = vec![0u8; len / 8 + 1];
    for &i in set {
        bytes[i / 8] |= 1 << (i % 8);
    }
    bytes[len / 8] |= 1 << (len % 8);
    format!("0x{}", hex::encode(bytes))
}

fn committee_bits(committees: &[usize]) -> String {
    let mut bytes = [0u8; 8];
    for &c in committees {
        bytes[c / 8] |= 1 << (c % 8);
    }
    format!("0x{}", hex::encode(bytes))
}

fn data(index: u64) -> serde_json::Value {
    json!({
        "slot": SLOT.to_string(), "index": index.to_string(), "beacon_block_root": root(1),
        "source": {"epoch": "9", "root": root(2)}, "target": {"epoch": "10", "root": root(3)}
    })
}

fn write_gz(path: &Path, value: &serde_json::Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut e = flate2::write::GzEncoder::new(
        std::fs::File::create(path).unwrap(),
        flate2::Compression::default(),
    );
    e.write_all(value.to_string().as_bytes()).unwrap();
    e.finish().unwrap();
}

/// Committees of epoch 10: every slot has 3 committees; committee c of slot s holds
/// validators 1000·c + 10·(s mod 32) + 0..=3 (4 members).
fn committee(slot: u64, c: u64) -> Vec<u64> {
    (0..4).map(|i| 1000 * c + 10 * (slot % 32) + i).collect()
}

fn write_inputs(dir: &Path, attestations: serde_json::Value) -> ImportOptions {
    let mut committees = Vec::new();
    for slot in EPOCH * 32..EPOCH * 32 + 32 {
        for c in 0..3 {
            committees.push(json!({
                "index": c.to_string(), "slot": slot.to_string(),
                "validators": committee(slot, c).iter().map(u64::to_string).collect::<Vec<_>>()
            }));
        }
    }
    write_gz(
        &dir.join(format!("committees/{EPOCH}.json.gz")),
        &json!({"data": committees}),
    );
    write_gz(
        &dir.join(format!("attestations/{SLOT}.json.gz")),
        &json!({"version": "electra", "execution_optimistic": false, "finalized": true,
                "data": attestations}),
    );
    write_gz(
        &dir.join(format!("headers/{SLOT}.json.gz")),
        &json!({"data": {"root": root(9), "canonical": true, "header": {
            "message": {"slot": SLOT.to_string(), "proposer_index": "7",
                        "parent_root": root(4), "state_root": root(5), "body_root": root(6)},
            "signature": zero_hex(96)}}}),
    );
    let mut opts = ImportOptions::new(dir.join("attestations"), dir.join("headers"));
    opts.committees_dir = Some(dir.join("committees"));
    opts
}

#[test]
fn electra_aggregates_span_the_committees_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let opts = write_inputs(
        dir.path(),
        json!([
            // Committees 0 and 2 (4 + 4 bits): bits 1, 3 of committee 0 and bit 0 of
            // committee 2 (position 4 of the concatenation).
            {"aggregation_bits": bitlist(8, &[1, 3, 4]), "data": data(0),
             "signature": zero_hex(96), "committee_bits": committee_bits(&[0, 2])},
            // A pre-Electra shape: committee 1 by data.index.
            {"aggregation_bits": bitlist(4, &[2]), "data": data(1), "signature": zero_hex(96)}
        ]),
    );
    let fixture = dir.path().join("f.fixture");
    import_beacon_api(&opts, &fixture).expect("import");
    let batches: Vec<_> = FixtureReader::open(&fixture)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(batches.len(), 1);
    let indices: Vec<Vec<u64>> = batches[0]
        .attestations
        .iter()
        .map(|a| a.attesting_indices.to_vec())
        .collect();
    let s = 10 * (SLOT % 32);
    assert_eq!(
        indices,
        vec![vec![s + 1, s + 3, 2000 + s], vec![1000 + s + 2]],
        "members by committee_bits, then by data.index"
    );
}

#[test]
fn electra_rules_are_enforced_with_clear_errors() {
    let cases = [
        // The bitlist must be as long as the named committees together (4 + 4).
        (
            json!([{"aggregation_bits": bitlist(7, &[0]), "data": data(0),
                    "signature": zero_hex(96), "committee_bits": committee_bits(&[0, 2])}]),
            "has 7 aggregation bits but those committees have 8 members together",
        ),
        // Electra attestations carry data.index 0.
        (
            json!([{"aggregation_bits": bitlist(4, &[0]), "data": data(1),
                    "signature": zero_hex(96), "committee_bits": committee_bits(&[1])}]),
            "has data.index 1, not 0",
        ),
        // At most 2,048 bits per named committee.
        (
            json!([{"aggregation_bits": bitlist(4097, &[0]), "data": data(0),
                    "signature": zero_hex(96), "committee_bits": committee_bits(&[0, 1])}]),
            "more than 4096 bits",
        ),
        // Without committee_bits, the pre-Electra bound of 2,048 bits.
        (
            json!([{"aggregation_bits": bitlist(2049, &[0]), "data": data(0),
                    "signature": zero_hex(96)}]),
            "more than 2048 bits",
        ),
        (
            json!([{"aggregation_bits": bitlist(4, &[0]), "data": data(0),
                    "signature": zero_hex(96), "committee_bits": committee_bits(&[])}]),
            "committee_bits names no committee",
        ),
    ];
    for (attestations, says) in cases {
        let dir = tempfile::tempdir().unwrap();
        let opts = write_inputs(dir.path(), attestations);
        let fixture = dir.path().join("f.fixture");
        let err = import_beacon_api(&opts, &fixture).expect_err(says);
        let text = slasher_bench::errors::chain_text(&anyhow::Error::from(err));
        assert!(text.contains(says), "expected {says:?} in: {text}");
        assert!(!fixture.exists(), "a fixture was written despite: {text}");
    }
}
