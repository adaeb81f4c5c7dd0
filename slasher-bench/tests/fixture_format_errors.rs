//! The fixture reader round-trips what the writer wrote, streams it batch by batch, and reports
//! bad magic, unknown versions, corruption and truncation as typed errors naming the file and the
//! byte offset.

use slasher_adapters::slasher::types::{
    AttestationData, BeaconBlockHeader, Checkpoint, IndexedAttestation, SignedBeaconBlockHeader,
};
use slasher_bench::fixtures::file::format::{FILE_HEADER_LEN, RECORD_HEADER_LEN, VERSION_OFFSET};
use slasher_bench::fixtures::file::{
    Batch, CommitteeAssignment, FixtureDescription, FixtureError, FixtureReader, FixtureWriter,
    Manifest, Provenance, SlasherConfigHint, SourceKind,
};
use std::path::{Path, PathBuf};

fn description() -> FixtureDescription {
    FixtureDescription {
        name: "unit".into(),
        network: "mainnet".into(),
        provenance: Provenance {
            kind: SourceKind::Synthetic,
            tool: "test".into(),
            command: "test".into(),
            seed: Some(7),
            source: "fixture_format_errors.rs".into(),
        },
        validator_count: 1000,
        slasher_config: SlasherConfigHint::default(),
        committees: CommitteeAssignment::Exact,
        expected_slashings: Some(Vec::new()),
        expected_from_batch: None,
    }
}

fn batch(index: u64) -> Batch {
    let slot = 320 + index;
    let data = AttestationData {
        slot: slot - 1,
        index: index % 3,
        beacon_block_root: [index as u8; 32].into(),
        source: Checkpoint {
            epoch: 8,
            root: [1; 32].into(),
        },
        target: Checkpoint {
            epoch: 9,
            root: [2; 32].into(),
        },
    };
    let attestations = (0..3)
        .map(|j| IndexedAttestation::new((j..j + 50 + index).collect(), data, [0; 96]))
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let header = SignedBeaconBlockHeader {
        message: BeaconBlockHeader {
            slot,
            proposer_index: index * 7,
            parent_root: [3; 32].into(),
            state_root: [4; 32].into(),
            body_root: [5; 32].into(),
        },
        signature: [0; 96],
    };
    Batch {
        index,
        slot,
        current_epoch: slot / 32,
        headers: vec![header],
        attestations,
    }
}

fn write_fixture(dir: &Path, batches: u64) -> (PathBuf, Manifest) {
    let path = dir.join("unit.fixture");
    let mut writer = FixtureWriter::create(&path).unwrap();
    for i in 0..batches {
        writer.write_batch(&batch(i)).unwrap();
    }
    let manifest = writer.finish(description()).unwrap();
    (path, manifest)
}

fn read_all(path: &Path) -> Result<Vec<Batch>, FixtureError> {
    FixtureReader::open(path)?.collect()
}

/// Offset of record `i` in a file written by `write_fixture`.
fn record_offsets(path: &Path) -> Vec<u64> {
    let bytes = std::fs::read(path).unwrap();
    let manifest_len = u64::from_le_bytes(bytes[16..24].try_into().unwrap());
    let mut offset = FILE_HEADER_LEN as u64 + manifest_len;
    let mut out = Vec::new();
    while (offset as usize) < bytes.len() {
        out.push(offset);
        let o = offset as usize;
        let len = u32::from_le_bytes(bytes[o + 4..o + 8].try_into().unwrap());
        offset += RECORD_HEADER_LEN as u64 + u64::from(len);
    }
    out
}

#[test]
fn round_trip_streams_every_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (path, manifest) = write_fixture(dir.path(), 5);
    assert_eq!(manifest.contents.batch_count, 5);
    assert_eq!(manifest.contents.attestation_count, 15);
    assert_eq!(manifest.contents.first_slot, Some(320));
    assert_eq!(manifest.contents.last_slot, Some(324));
    let reader = FixtureReader::open(&path).unwrap();
    assert_eq!(reader.manifest(), &manifest);
    let batches: Vec<Batch> = reader.collect::<Result<_, _>>().unwrap();
    assert_eq!(batches, (0..5).map(batch).collect::<Vec<_>>());
    assert!(!dir.path().join("unit.fixture.tmp").exists());
    assert!(!dir.path().join("unit.fixture.records.tmp").exists());
}

#[test]
fn empty_fixture_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let (path, manifest) = write_fixture(dir.path(), 0);
    assert_eq!(manifest.contents.first_slot, None);
    assert!(read_all(&path).unwrap().is_empty());
}

#[test]
fn writer_rejects_out_of_order_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = FixtureWriter::create(dir.path().join("x.fixture")).unwrap();
    let err = writer.write_batch(&batch(1)).unwrap_err();
    assert!(matches!(err, FixtureError::InvalidBatch { .. }), "{err}");
    drop(writer);
    assert!(!dir.path().join("x.fixture").exists());
    assert!(!dir.path().join("x.fixture.records.tmp").exists());
}

#[test]
fn bad_magic_is_reported_with_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("not-a-fixture.json");
    std::fs::write(&path, b"{\"hello\": \"world\"}\n").unwrap();
    let err = FixtureReader::open(&path).unwrap_err();
    match &err {
        FixtureError::BadMagic {
            path: p,
            offset,
            what,
            ..
        } => {
            assert_eq!(p, &path);
            assert_eq!(*offset, 0);
            assert_eq!(*what, "file");
        }
        other => panic!("expected BadMagic, got {other:?}"),
    }
    assert!(err.to_string().contains("not-a-fixture.json"), "{err}");

    let empty = dir.path().join("empty.fixture");
    std::fs::write(&empty, b"").unwrap();
    let err = FixtureReader::open(&empty).unwrap_err();
    assert!(
        matches!(err, FixtureError::BadMagic { offset: 0, .. }),
        "{err:?}"
    );
}

#[test]
fn unknown_version_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write_fixture(dir.path(), 2);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[VERSION_OFFSET..VERSION_OFFSET + 4].copy_from_slice(&2u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let err = FixtureReader::open(&path).unwrap_err();
    match &err {
        FixtureError::UnsupportedVersion {
            path: p,
            offset,
            found,
            supported,
        } => {
            assert_eq!(p, &path);
            assert_eq!(*offset, VERSION_OFFSET as u64);
            assert_eq!((*found, *supported), (2, 1));
        }
        other => panic!("expected UnsupportedVersion, got {other:?}"),
    }
    assert!(err.to_string().contains("unit.fixture"), "{err}");
}

#[test]
fn corrupt_record_is_a_checksum_error_at_the_record_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write_fixture(dir.path(), 4);
    let offsets = record_offsets(&path);
    assert_eq!(offsets.len(), 4);
    let mut bytes = std::fs::read(&path).unwrap();
    let victim = offsets[2] as usize + RECORD_HEADER_LEN + 10;
    bytes[victim] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();

    let mut reader = FixtureReader::open(&path).unwrap();
    assert!(reader.next().unwrap().is_ok());
    assert!(reader.next().unwrap().is_ok());
    let err = reader.next().unwrap().unwrap_err();
    match &err {
        FixtureError::ChecksumMismatch {
            path: p,
            offset,
            what,
            ..
        } => {
            assert_eq!(p, &path);
            assert_eq!(*offset, offsets[2]);
            assert!(what.contains("batch record 2 of 4"), "{what}");
        }
        other => panic!("expected ChecksumMismatch, got {other:?}"),
    }
    assert!(reader.next().is_none(), "the reader stops after an error");
}

#[test]
fn corrupt_manifest_is_a_checksum_error() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write_fixture(dir.path(), 1);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[FILE_HEADER_LEN + 5] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let err = FixtureReader::open(&path).unwrap_err();
    assert!(
        matches!(&err, FixtureError::ChecksumMismatch { offset, what, .. }
            if *offset == FILE_HEADER_LEN as u64 && what == "manifest"),
        "{err:?}"
    );
}

#[test]
fn corrupt_file_header_is_a_checksum_error() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write_fixture(dir.path(), 1);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[17] ^= 0x01; // manifest length
    std::fs::write(&path, &bytes).unwrap();
    let err = FixtureReader::open(&path).unwrap_err();
    assert!(
        matches!(&err, FixtureError::ChecksumMismatch { offset: 0, what, .. } if what == "file header"),
        "{err:?}"
    );
}

#[test]
fn truncation_anywhere_is_reported_with_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write_fixture(dir.path(), 3);
    let full = std::fs::read(&path).unwrap();
    let offsets = record_offsets(&path);
    let cut_path = dir.path().join("cut.fixture");
    let cases: Vec<(usize, u64, &str)> = vec![
        (4, 0, "file header"),
        (20, 0, "file header"),
        (FILE_HEADER_LEN + 3, FILE_HEADER_LEN as u64, "manifest"),
        (offsets[1] as usize + 7, offsets[1], "batch record 1 of 3"),
        (
            offsets[1] as usize + RECORD_HEADER_LEN + 3,
            offsets[1],
            "batch record 1 of 3",
        ),
        (offsets[2] as usize, offsets[2], "batch record 2 of 3"),
        (full.len() - 1, offsets[2], "batch record 2 of 3"),
    ];
    for (len, want_offset, want_what) in cases {
        std::fs::write(&cut_path, &full[..len]).unwrap();
        let err = read_all(&cut_path).unwrap_err();
        match &err {
            FixtureError::Truncated {
                path: p,
                offset,
                what,
                needed,
                available,
            } => {
                assert_eq!(p, &cut_path);
                assert_eq!(*offset, want_offset, "cut at {len}: {err}");
                assert_eq!(what, want_what, "cut at {len}");
                assert!(available < needed, "cut at {len}: {err}");
            }
            other => panic!("cut at {len}: expected Truncated, got {other:?}"),
        }
        assert!(err.to_string().contains("cut.fixture"), "{err}");
    }
}

#[test]
fn trailing_bytes_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write_fixture(dir.path(), 2);
    let mut bytes = std::fs::read(&path).unwrap();
    let end = bytes.len() as u64;
    bytes.extend_from_slice(b"junk");
    std::fs::write(&path, &bytes).unwrap();
    let err = read_all(&path).unwrap_err();
    assert!(
        matches!(&err, FixtureError::TrailingData { offset, extra: 4, .. } if *offset == end),
        "{err:?}"
    );
}

#[test]
fn swapped_records_fail_the_order_or_digest_check() {
    // Two valid records in the wrong order pass their CRCs; the batch index catches it.
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write_fixture(dir.path(), 2);
    let bytes = std::fs::read(&path).unwrap();
    let offsets = record_offsets(&path);
    let (a, b) = (offsets[0] as usize, offsets[1] as usize);
    let mut swapped = bytes[..a].to_vec();
    swapped.extend_from_slice(&bytes[b..]);
    swapped.extend_from_slice(&bytes[a..b]);
    std::fs::write(&path, &swapped).unwrap();
    let err = read_all(&path).unwrap_err();
    assert!(
        matches!(&err, FixtureError::Corrupted { offset, reason, .. }
            if *offset == a as u64 && reason.contains("out of order")),
        "{err:?}"
    );
}

#[test]
fn records_digest_mismatch_is_reported_after_the_last_batch() {
    use slasher_bench::fixtures::file::format::{crc32, HEADER_CRC_OFFSET, MANIFEST_CRC_OFFSET};
    let dir = tempfile::tempdir().unwrap();
    let (path, manifest) = write_fixture(dir.path(), 2);
    let mut bytes = std::fs::read(&path).unwrap();
    let manifest_len = u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize;
    let text =
        String::from_utf8(bytes[FILE_HEADER_LEN..FILE_HEADER_LEN + manifest_len].to_vec()).unwrap();
    let digest = &manifest.contents.records_sha256;
    let forged = text.replace(digest.as_str(), &"ab".repeat(32));
    assert_eq!(forged.len(), text.len());
    bytes[FILE_HEADER_LEN..FILE_HEADER_LEN + manifest_len].copy_from_slice(forged.as_bytes());
    let manifest_crc = crc32(&[forged.as_bytes()]);
    bytes[MANIFEST_CRC_OFFSET..MANIFEST_CRC_OFFSET + 4]
        .copy_from_slice(&manifest_crc.to_le_bytes());
    let header_crc = crc32(&[&bytes[..HEADER_CRC_OFFSET]]);
    bytes[HEADER_CRC_OFFSET..HEADER_CRC_OFFSET + 4].copy_from_slice(&header_crc.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();

    let mut reader = FixtureReader::open(&path).unwrap();
    assert!(reader.next().unwrap().is_ok());
    assert!(reader.next().unwrap().is_ok());
    let err = reader.next().unwrap().unwrap_err();
    assert!(
        matches!(&err, FixtureError::ChecksumMismatch { what, got, .. }
            if what.contains("records_sha256") && got == digest),
        "{err:?}"
    );
    assert!(reader.next().is_none());
}
