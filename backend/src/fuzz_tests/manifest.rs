//! The fuzz tier of `Manifest::decode`.

use super::*;
use crate::fuzzing::decode_manifest;
use crate::manifest::{Manifest, SegmentMeta, TableMeta};

fn manifest_seeds() -> Vec<Seed> {
    // Key ranges: empty for a segment without entries, else from the sequence number.
    let seg = |seq: u64, file_len, entries| SegmentMeta {
        seq,
        file_len,
        entries,
        min_key: if entries == 0 {
            Box::default()
        } else {
            seq.to_be_bytes()[..7].into()
        },
        max_key: if entries == 0 {
            Box::default()
        } else {
            (seq + entries).to_be_bytes().into()
        },
    };
    let manifests = [
        Manifest {
            keys_recorded: true,
            table_format: 0,
            generation: 1,
            next_seq: 1,
            tables: vec![],
        },
        Manifest {
            keys_recorded: true,
            table_format: 0,
            generation: 42,
            next_seq: 10,
            tables: vec![
                TableMeta {
                    name: "attesters".into(),
                    segments: vec![seg(9, 100, 3), seg(2, 5000, 300)],
                },
                TableMeta {
                    name: "metadata".into(),
                    segments: vec![],
                },
                TableMeta {
                    name: "proposers".into(),
                    segments: vec![seg(8, 1 << 20, 40_000), seg(7, 44, 0), seg(1, 9, 1)],
                },
            ],
        },
        Manifest {
            keys_recorded: true,
            table_format: 1,
            generation: u64::MAX - 1,
            next_seq: 0,
            tables: vec![TableMeta {
                name: "tábla-ünïcode".into(),
                segments: vec![],
            }],
        },
        Manifest {
            keys_recorded: true,
            table_format: 0,
            generation: 7,
            next_seq: 1000,
            tables: (0..6)
                .map(|t| TableMeta {
                    name: format!("t{t}"),
                    segments: (0..t).map(|s| seg(999 - s, 4096 * s, s)).collect(),
                })
                .collect(),
        },
    ];
    manifests
        .iter()
        .map(|m| Seed {
            bytes: m.encode(),
            fields: length_fields(m),
        })
        .chain(manifests.iter().take(2).map(|m| {
            // As version 1 wrote them (still read): no key ranges.
            let m = m.clone().into_version_1();
            Seed {
                fields: length_fields(&m),
                bytes: m.encode(),
            }
        }))
        .collect()
}

/// Where `m`'s length and count fields are in its encoding: the table count, then per table the
/// name's length and the segment count, and (version 2) per segment its two keys' lengths.
fn length_fields(m: &Manifest) -> Vec<(usize, usize)> {
    let mut fields = vec![(32, 4)];
    let mut at = 36;
    for t in &m.tables {
        fields.push((at, 2));
        at += 2 + t.name.len();
        fields.push((at, 4));
        at += 4;
        for s in &t.segments {
            at += 24;
            if m.keys_recorded {
                for key in [&s.min_key, &s.max_key] {
                    fields.push((at, 2));
                    at += 2 + key.len();
                }
            }
        }
    }
    fields
}

/// Recompute a manifest's trailing CRC.
fn fix_manifest_crc(b: &mut [u8]) {
    if let Some(body) = b.len().checked_sub(4) {
        let crc = crc32fast::hash(&b[..body]);
        b[body..].copy_from_slice(&crc.to_le_bytes());
    }
}

#[test]
fn fuzz_manifest_decode() {
    let seeds = manifest_seeds();
    let tier = run_tier("manifest", &seeds, fix_manifest_crc, |b| {
        decode_manifest(b).map(|_| ())
    });
    check("manifest", &tier);
}
