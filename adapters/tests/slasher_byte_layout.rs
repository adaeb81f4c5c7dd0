//! Byte compatibility with Lighthouse's on-disk format (`docs/background.md` §1.1, §1.3), on every
//! compiled backend.
//!
//! The expected keys and values are written out by hand from those byte layouts, not
//! produced by the slasher's encoders. Tiles are compared after inflating them (compressed bytes
//! are not canonical), and a zlib stream built by hand (a stored block with its Adler-32) must
//! decode, both directly and when planted in a backend for the slasher to load and rewrite.

mod slasher_support;

use slasher_adapters::backend::{Cursor, Environment, RwTransaction};
use slasher_adapters::slasher::array::Chunk;
use slasher_adapters::slasher::{
    AttestationData, AttesterRecord, BeaconBlockHeader, Checkpoint, Config, Hash256,
    IndexedAttestation, SignedBeaconBlockHeader,
};
use slasher_support::{att, TestCtx};

/// The attestation of the worked example: validator 300000, source 4096, target 4097.
fn example_attestation() -> IndexedAttestation {
    let data = AttestationData {
        slot: 4097 * 32,
        index: 0,
        beacon_block_root: Hash256::from([0x11; 32]),
        source: Checkpoint {
            epoch: 4096,
            root: Hash256::from([0x22; 32]),
        },
        target: Checkpoint {
            epoch: 4097,
            root: Hash256::from([0x33; 32]),
        },
    };
    let mut signature = [0u8; 96];
    signature[0] = 0xC0; // the point at infinity
    IndexedAttestation::new(vec![300_000], data, signature).expect("one index")
}

/// Its SSZ, by hand (`docs/background.md` §1.3: offset, data, signature, indices).
fn example_attestation_ssz() -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&[0xE4, 0x00, 0x00, 0x00]); // offset of the indices = 228
    v.extend_from_slice(&[0x20, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00]); // slot 131104
    v.extend_from_slice(&[0x00; 8]); // index
    v.extend_from_slice(&[0x11; 32]); // beacon_block_root
    v.extend_from_slice(&[0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]); // source epoch 4096
    v.extend_from_slice(&[0x22; 32]);
    v.extend_from_slice(&[0x01, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]); // target epoch 4097
    v.extend_from_slice(&[0x33; 32]);
    v.push(0xC0); // signature
    v.extend_from_slice(&[0x00; 95]);
    v.extend_from_slice(&[0xE0, 0x93, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00]); // 300000
    assert_eq!(v.len(), 236);
    v
}

fn example_block() -> SignedBeaconBlockHeader {
    SignedBeaconBlockHeader {
        message: BeaconBlockHeader {
            slot: 100,
            proposer_index: 300_000,
            parent_root: Hash256::from([0x44; 32]),
            state_root: Hash256::from([0x55; 32]),
            body_root: Hash256::from([0x66; 32]),
        },
        signature: [0xAB; 96],
    }
}

/// sha256(a ‖ b), through `tree_hash::merkle_root` of two leaves.
fn h(a: &[u8; 32], b: &[u8; 32]) -> [u8; 32] {
    let mut both = [0u8; 64];
    both[..32].copy_from_slice(a);
    both[32..].copy_from_slice(b);
    tree_hash::merkle_root(&both, 2).0
}

fn leaf_u64(x: u64) -> [u8; 32] {
    let mut leaf = [0u8; 32];
    leaf[..8].copy_from_slice(&x.to_le_bytes());
    leaf
}

/// The two hashes of `docs/background.md` §1.3, merkleised by hand.
fn example_hashes() -> ([u8; 32], [u8; 32]) {
    let zero = [0u8; 32];
    // AttestationData: 5 fields padded to 8 leaves; checkpoints are sub-containers.
    let source = h(&leaf_u64(4096), &[0x22; 32]);
    let target = h(&leaf_u64(4097), &[0x33; 32]);
    let data_root = h(
        &h(
            &h(&leaf_u64(4097 * 32), &leaf_u64(0)),
            &h(&[0x11; 32], &source),
        ),
        &h(&h(&target, &zero), &h(&zero, &zero)),
    );
    // Indices: one packed chunk under a limit of 131072 / 4 = 32768 chunks (depth 15), then
    // mixed in with the length.
    let mut node = leaf_u64(300_000);
    let mut zero_subtree = zero;
    for _ in 0..15 {
        node = h(&node, &zero_subtree);
        zero_subtree = h(&zero_subtree, &zero_subtree);
    }
    let indices_root = h(&node, &leaf_u64(1));
    // Signature: 96 bytes = 3 chunks padded to 4.
    let mut sig0 = [0u8; 32];
    sig0[0] = 0xC0;
    let signature_root = h(&h(&sig0, &zero), &h(&zero, &zero));
    // IndexedAttestationHeader {indices, data_root, signature}: 3 fields padded to 4 leaves.
    let indexed_root = h(&h(&indices_root, &data_root), &h(&signature_root, &zero));
    (data_root, indexed_root)
}

#[test]
fn hashes_match_hand_merkleisation() {
    let (data_root, indexed_root) = example_hashes();
    let record = AttesterRecord::new(example_attestation());
    assert_eq!(record.data_hash().0, data_root);
    assert_eq!(record.indexed_hash().0, indexed_root);
}

/// zlib stream of `raw` in one stored (uncompressed) deflate block, built byte by byte.
fn stored_zlib(raw: &[u8]) -> Vec<u8> {
    let len = u16::try_from(raw.len()).expect("one stored block");
    let mut out = vec![0x78, 0x01]; // CMF (deflate, 32K window), FLG (no dict, check bits)
    out.push(0x01); // BFINAL = 1, BTYPE = 00 (stored)
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(!len).to_le_bytes());
    out.extend_from_slice(raw);
    let (mut a, mut b) = (1u32, 0u32);
    for &byte in raw {
        a = (a + u32::from(byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes()); // Adler-32, big-endian
    out
}

fn small_config(ctx: &TestCtx) -> Config {
    let mut config = ctx.config();
    config.chunk_size = 2;
    config.validator_chunk_size = 2;
    config.history_length = 4;
    config
}

/// Header (count 4, u64 LE) then cells 5, 0xFFFF, 1, 0x1234 (u16 LE).
const HAND_TILE: [u8; 16] = [
    0x04, 0, 0, 0, 0, 0, 0, 0, 0x05, 0x00, 0xFF, 0xFF, 0x01, 0x00, 0x34, 0x12,
];

#[test]
fn hand_built_zlib_tile_decodes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config::new(dir.path());
    config.chunk_size = 2;
    config.validator_chunk_size = 2;
    config.history_length = 4;
    let stream = stored_zlib(&HAND_TILE);
    let chunk = Chunk::decode(&stream, &config).expect("decode the hand-built stream");
    assert_eq!(chunk.data, vec![5, 0xFFFF, 1, 0x1234]);
    // Trailing bytes after the cells inside the stream are ignored, as in Lighthouse.
    let mut longer = HAND_TILE.to_vec();
    longer.extend_from_slice(&[0xEE; 6]);
    assert_eq!(
        Chunk::decode(&stored_zlib(&longer), &config)
            .expect("decode")
            .data,
        chunk.data
    );
    // Other zlib streams of the same bytes decode the same (compressed bytes are not canonical).
    for level in [0, 1, 9] {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level));
        std::io::Write::write_all(&mut e, &HAND_TILE).expect("write");
        let stream = e.finish().expect("finish");
        assert_eq!(
            Chunk::decode(&stream, &config).expect("decode").data,
            chunk.data
        );
    }
    // Wrong count, truncated stream, bad checksum.
    let mut wrong = HAND_TILE;
    wrong[0] = 3;
    assert!(Chunk::decode(&stored_zlib(&wrong[..14]), &config).is_err());
    assert!(Chunk::decode(&stream[..stream.len() - 6], &config).is_err());
    // Our own encoder's output inflates to exactly the hand-written bytes.
    let mut inflated = Vec::new();
    let encoded = chunk.encode().expect("encode");
    std::io::Read::read_to_end(
        &mut flate2::read::ZlibDecoder::new(&encoded[..]),
        &mut inflated,
    )
    .expect("inflate");
    assert_eq!(inflated, HAND_TILE);
}

fn inflate(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(bytes), &mut out)
        .expect("stored tile is a complete zlib stream");
    out
}

fn count_keys<T: RwTransaction>(txn: &mut T, db: T::Database) -> usize {
    let mut cursor = txn.cursor(db).expect("cursor");
    let mut n = 0;
    let mut key = cursor.first_key().expect("first");
    while key.is_some() {
        n += 1;
        key = cursor.next_key().expect("next");
    }
    n
}

/// Every table after one batch with the worked example (defaults C = 16, K = 256, H = 4096).
fn tables_match_hand_written_layout<E: Environment>(ctx: &TestCtx) {
    let slasher = ctx.open::<E>(ctx.config());
    slasher.accept_attestation(example_attestation());
    slasher.accept_block_header(example_block());
    let stats = slasher.process_queued(4097).expect("process");
    assert_eq!(stats.attestation_stats.num_validator_chunks, 1172);
    let dbs = *slasher.databases();
    let mut txn = slasher.environment().begin_rw_txn().expect("txn");
    let get = |txn: &E::RwTransaction<'_>, db, key: &[u8]| -> Option<Vec<u8>> {
        txn.get(db, key).expect("get").map(|v| v.into_owned())
    };

    // indexed_attestations: id 1 → SSZ.
    let id1 = [0x00, 0x00, 0x00, 0x00, 0x00, 0x01];
    assert_eq!(
        get(&txn, dbs.indexed_attestation_db, &id1),
        Some(example_attestation_ssz())
    );

    // indexed_attestation_ids: target 4097 BE ‖ indexed hash → id 1.
    let (_, indexed_root) = example_hashes();
    let mut key = vec![0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x01];
    key.extend_from_slice(&indexed_root);
    assert_eq!(
        get(&txn, dbs.indexed_attestation_id_db, &key),
        Some(id1.to_vec())
    );
    assert_eq!(count_keys(&mut txn, dbs.indexed_attestation_id_db), 1);

    // attesters: (4097 mod 4096 = 1) u16 BE ‖ 300000 u40 BE → id 1.
    let attester = [0x00, 0x01, 0x00, 0x00, 0x04, 0x93, 0xE0];
    assert_eq!(get(&txn, dbs.attesters_db, &attester), Some(id1.to_vec()));
    assert_eq!(count_keys(&mut txn, dbs.attesters_db), 1);

    // attesters_max_targets and current_epochs: 300000 u64 BE → 4097 u64 LE.
    let v300000 = [0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x93, 0xE0];
    let e4097 = vec![0x01, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00];
    assert_eq!(
        get(&txn, dbs.attesters_max_targets_db, &v300000),
        Some(e4097.clone())
    );
    assert_eq!(
        get(&txn, dbs.current_epochs_db, &v300000),
        Some(e4097.clone())
    );
    // Every index of every validator chunk up to 1171 gets an entry: 0 ..= 300031.
    assert_eq!(
        get(&txn, dbs.current_epochs_db, &[0; 8]),
        Some(e4097.clone())
    );
    let v300031 = [0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x93, 0xFF];
    let v300032 = [0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x94, 0x00];
    assert_eq!(get(&txn, dbs.current_epochs_db, &v300031), Some(e4097));
    assert_eq!(get(&txn, dbs.current_epochs_db, &v300032), None);

    // min_targets: the walk from 4095 down to c − (H − 1) = 2 rewrote all 256 tiles of validator
    // chunk 1171 (keys 1171·256 + chunk index = 299776 ..= 300031).
    assert_eq!(count_keys(&mut txn, dbs.min_targets_db), 256);
    // Tile 255 (epochs 4080..=4095): row 224 holds distances 4097 − e = 17 ..= 2.
    let tile = get(&txn, dbs.min_targets_db, &v300031).expect("min tile 255");
    let mut expected = vec![0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]; // 4096 cells
    expected.extend_from_slice(&[0xFF; 2 * 224 * 16]);
    expected.extend_from_slice(&[
        17, 0, 16, 0, 15, 0, 14, 0, 13, 0, 12, 0, 11, 0, 10, 0, 9, 0, 8, 0, 7, 0, 6, 0, 5, 0, 4, 0,
        3, 0, 2, 0,
    ]);
    expected.extend_from_slice(&[0xFF; 2 * 31 * 16]);
    assert_eq!(inflate(&tile), expected);
    // Tile 0 (epochs 0..=15): epochs 0 and 1 are outside the window, 2..=15 hold 4095..=4082.
    let key0 = [0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x93, 0x00];
    let tile = get(&txn, dbs.min_targets_db, &key0).expect("min tile 0");
    let mut expected = vec![0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00];
    expected.extend_from_slice(&[0xFF; 2 * 224 * 16]);
    expected.extend_from_slice(&[
        0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0xFE, 0x0F, 0xFD, 0x0F, 0xFC, 0x0F, 0xFB, 0x0F, 0xFA,
        0x0F, 0xF9, 0x0F, 0xF8, 0x0F, 0xF7, 0x0F, 0xF6, 0x0F, 0xF5, 0x0F, 0xF4, 0x0F, 0xF3, 0x0F,
        0xF2, 0x0F,
    ]);
    expected.extend_from_slice(&[0xFF; 2 * 31 * 16]);
    assert_eq!(inflate(&tile), expected);

    // max_targets: only the tile holding the source (chunk index 0) was loaded; nothing changed.
    assert_eq!(count_keys(&mut txn, dbs.max_targets_db), 1);
    let tile = get(&txn, dbs.max_targets_db, &key0).expect("max tile 0");
    let mut expected = vec![0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00];
    expected.extend_from_slice(&[0x00; 8192]);
    assert_eq!(inflate(&tile), expected);

    // proposers: slot u64 BE ‖ proposer u64 BE → SSZ header (208 bytes).
    let key = [
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x64, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x93,
        0xE0,
    ];
    let mut header = vec![0x64, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]; // slot 100
    header.extend_from_slice(&[0xE0, 0x93, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00]); // proposer
    header.extend_from_slice(&[0x44; 32]);
    header.extend_from_slice(&[0x55; 32]);
    header.extend_from_slice(&[0x66; 32]);
    header.extend_from_slice(&[0xAB; 96]);
    assert_eq!(get(&txn, dbs.proposers_db, &key), Some(header));

    // metadata: schema version 3, DiskConfig {16, 256, 4096}.
    assert_eq!(
        get(&txn, dbs.metadata_db, &[0x00]),
        Some(vec![3, 0, 0, 0, 0, 0, 0, 0])
    );
    let mut disk = vec![16, 0, 0, 0, 0, 0, 0, 0];
    disk.extend_from_slice(&[0x00, 0x01, 0, 0, 0, 0, 0, 0]);
    disk.extend_from_slice(&[0x00, 0x10, 0, 0, 0, 0, 0, 0]);
    assert_eq!(get(&txn, dbs.metadata_db, &[0x01]), Some(disk));
}

/// A hand-built tile planted in the backend is loaded by the slasher, checked, and rewritten
/// with its foreign cells intact. Also checks the null fill of skipped epochs in `attesters`.
fn planted_tile_is_read_and_rewritten<E: Environment>(ctx: &TestCtx) {
    // C = 2, K = 2, H = 4: validator chunk 0, chunk index 1 = epochs 2, 3 (mod 4), disk key 1.
    let slasher = ctx.open::<E>(small_config(ctx));
    let dbs = *slasher.databases();
    {
        let mut txn = slasher.environment().begin_rw_txn().expect("txn");
        txn.put(
            dbs.min_targets_db,
            &[0, 0, 0, 0, 0, 0, 0, 1],
            &stored_zlib(&HAND_TILE),
        )
        .expect("put");
        txn.commit().expect("commit");
    }
    // Validator 0 attests 2 → 3 at c = 3: the min check reads cell (0, epoch 2) = cell 0 = 5,
    // i.e. stored target 7 > 3, so no hit; then the walk writes epochs 1 and 0.
    slasher.accept_attestation(att(&[0], 2, 3, 0));
    slasher
        .process_queued(3)
        .expect("process with a hand-built tile");
    assert!(slasher.get_attester_slashings().is_empty());
    let txn = slasher.environment().begin_rw_txn().expect("txn");
    let tile = txn
        .get(dbs.min_targets_db, &[0, 0, 0, 0, 0, 0, 0, 1])
        .expect("get")
        .expect("tile");
    assert_eq!(
        inflate(&tile),
        HAND_TILE,
        "cells untouched by the walk keep their bytes"
    );
    let tile = txn
        .get(dbs.min_targets_db, &[0; 8])
        .expect("get")
        .expect("tile 0");
    // Epochs 0 and 1, validator 0: distances 3 and 2; validator 1 neutral.
    assert_eq!(
        inflate(&tile),
        [0x04, 0, 0, 0, 0, 0, 0, 0, 0x03, 0x00, 0x02, 0x00, 0xFF, 0xFF, 0xFF, 0xFF]
    );
    drop(txn);

    // A jump of the max target from 3 to 6 nulls epochs 4 and 5 (slots 0 and 1) in attesters.
    slasher.accept_attestation(att(&[0], 5, 6, 0));
    slasher.process_queued(6).expect("process");
    let txn = slasher.environment().begin_rw_txn().expect("txn");
    for (slot, want) in [
        (0u8, [0u8; 6]),
        (1, [0; 6]),
        (2, [0, 0, 0, 0, 0, 2]),
        (3, [0, 0, 0, 0, 0, 1]),
    ] {
        let key = [0x00, slot, 0, 0, 0, 0, 0];
        let got = txn
            .get(dbs.attesters_db, &key)
            .expect("get")
            .map(|v| v.into_owned());
        assert_eq!(got, Some(want.to_vec()), "attesters slot {slot}");
    }
    assert_eq!(
        txn.get(dbs.attesters_max_targets_db, &[0; 8])
            .expect("get")
            .map(|v| v.into_owned()),
        Some(vec![6, 0, 0, 0, 0, 0, 0, 0])
    );
}

per_backend!(
    tables_match_hand_written_layout,
    planted_tile_is_read_and_rewritten
);
