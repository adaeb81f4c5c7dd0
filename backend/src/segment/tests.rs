//! Unit tests of the segment format.

use std::sync::Arc;

use super::cache::BlockCache;
use crate::error::{Error, Result};

use super::block::{partition_near, search_prefixed, Block};
use super::format::{BLOCK_TARGET_BYTES, FOOTER_VERSION_OFFSET};
use super::reader::Pos;
use super::*;

fn build(entries: &[(Vec<u8>, Option<Vec<u8>>)]) -> (Vec<u8>, Vec<Arc<Block>>) {
    let mut b = SegmentBuilder::in_memory();
    for (k, v) in entries {
        b.add(k, v.as_deref()).unwrap();
    }
    let (len, file) = b.finish().unwrap();
    assert_eq!(file.bytes.len() as u64, len);
    (file.bytes, file.blocks)
}

/// `keys`, sorted and deduplicated, built into blocks with `value_len`-byte values; more than
/// one block, so that searches cross block boundaries.
fn blocks_of(keys: &mut Vec<Vec<u8>>, value_len: usize) -> Vec<Arc<Block>> {
    keys.sort();
    keys.dedup();
    let entries: Vec<_> = keys
        .iter()
        .map(|k| (k.clone(), Some(vec![7u8; value_len])))
        .collect();
    let (_, blocks) = build(&entries);
    assert!(blocks.len() > 1, "one block only");
    blocks
}

fn write_and_open(bytes: &[u8], entries: u64) -> Result<Segment> {
    write_and_open_with(bytes, entries, 1, Arc::new(BlockCache::new(1 << 20)))
}

/// `bytes` written to a new file in the temp directory and opened as segment `seq` with
/// `cache`.
fn write_and_open_with(
    bytes: &[u8],
    entries: u64,
    seq: u64,
    cache: Arc<BlockCache>,
) -> Result<Segment> {
    let path = std::env::temp_dir().join(format!(
        "butter-seg-{}-{}.seg",
        std::process::id(),
        rand::random::<u64>()
    ));
    std::fs::write(&path, bytes).unwrap();
    let segment = Segment::open(path.clone(), seq, bytes.len() as u64, entries, cache);
    // The open segment reads through its own descriptor; the name is no longer needed.
    std::fs::remove_file(&path).unwrap();
    segment
}

fn sample() -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    (0u32..5000)
        .map(|i| {
            let v = if i % 7 == 0 {
                None
            } else {
                Some(vec![i as u8; (i % 300) as usize])
            };
            (i.to_be_bytes().to_vec(), v)
        })
        .collect()
}

#[test]
fn key_cmp_orders_like_byte_slices() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let key = |rng: &mut rand_chacha::ChaCha8Rng| -> Vec<u8> {
        let len = rng.gen_range(0..20);
        (0..len)
            .map(|_| *[0u8, 1, 0x7f, 0x80, 0xff].get(rng.gen_range(0..5)).unwrap())
            .collect()
    };
    for _ in 0..100_000 {
        let (a, b) = (key(&mut rng), key(&mut rng));
        assert_eq!(key_cmp(&a, &b), a.cmp(&b), "{a:?} vs {b:?}");
        assert_eq!(key_cmp(&a, &a), std::cmp::Ordering::Equal);
    }
}

#[test]
fn key_prefix_orders_like_byte_slices_when_it_differs() {
    let keys: [&[u8]; 10] = [
        b"",
        b"\0",
        b"a",
        b"a\0",
        b"a\0\x01",
        b"ab",
        b"abcdefgh",
        b"abcdefgh\0",
        b"abcdefgi",
        &[0xff; 9],
    ];
    for a in keys {
        for b in keys {
            let (pa, pb) = (key_prefix(a), key_prefix(b));
            if pa != pb {
                assert_eq!(pa.cmp(&pb), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }
}

/// `Block::cmp_key` (prefix and length for keys of up to 8 bytes) orders every entry against
/// every probe as the bytes do, across block boundaries, zero bytes and the 8/9-byte edge.
#[test]
fn block_cmp_key_orders_like_byte_slices() {
    let mut keys: Vec<Vec<u8>> = vec![
        vec![],
        vec![0],
        vec![0, 0],
        vec![0; 8],
        vec![0; 9],
        b"a".to_vec(),
        b"a\0".to_vec(),
        b"a\0\0\0\0\0\0\0".to_vec(),
        b"a\0\0\0\0\0\0\0\0".to_vec(),
        b"a\0\x01".to_vec(),
        b"abcdefgh".to_vec(),
        b"abcdefgh\0".to_vec(),
        b"abcdefgi".to_vec(),
        vec![0xff; 8],
        vec![0xff; 9],
    ];
    // Slasher-like 8-byte keys, enough for several blocks.
    keys.extend((0u64..3_000).map(|i| (i * 7).to_be_bytes().to_vec()));
    let blocks = blocks_of(&mut keys, 40);
    let mut probes = keys.clone();
    probes.extend([
        vec![0, 1],
        vec![0; 7],
        b"a\0\0".to_vec(),
        21u64.to_le_bytes().to_vec(),
    ]);
    for b in &blocks {
        for i in 0..b.len() {
            for p in &probes {
                assert_eq!(
                    b.cmp_key(i, p, key_prefix(p)),
                    b.key(i).cmp(p),
                    "{:?} vs {p:?}",
                    b.key(i)
                );
            }
        }
    }
}

/// `search_prefixed` finds the same partition point as a scan, whatever the spread of the
/// prefixes (even, skewed, runs of equal ones) and wherever the probe falls: its guess only
/// decides where the search starts.
#[test]
fn search_prefixed_agrees_with_a_scan() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    for round in 0..2_000 {
        let n = rng.gen_range(0..300);
        let mut prefixes: Vec<u64> = (0..n)
            .map(|_| match round % 4 {
                0 => rng.gen_range(0..1_000),
                1 => rng.gen::<u64>(),
                2 => 1u64 << rng.gen_range(0..64),
                _ => rng.gen_range(0..4),
            })
            .collect();
        prefixes.sort_unstable();
        // Among equal prefixes, the keys' order decides: entry i's tie-break key is i.
        for _ in 0..20 {
            let probe = match rng.gen_range(0..3) {
                0 => prefixes
                    .get(rng.gen_range(0..n.max(1)))
                    .copied()
                    .unwrap_or(5),
                1 => rng.gen::<u64>(),
                _ => rng.gen_range(0..1_000),
            };
            // From any starting guess, in range or past it.
            let guess = rng.gen_range(0..n + 3);
            let below = prefixes.iter().filter(|&&p| p < probe).count();
            assert_eq!(
                partition_near(prefixes.as_slice(), guess, |p| p < probe),
                below
            );
            let cut = rng.gen_range(0..=n);
            let before = |i: usize| i < cut;
            let want = prefixes
                .iter()
                .enumerate()
                .filter(|&(i, &p)| p < probe || (p == probe && before(i)))
                .count();
            assert_eq!(
                search_prefixed(prefixes.as_slice(), probe, before),
                want,
                "{prefixes:?} probe {probe} cut {cut}"
            );
        }
    }
}

/// `Block::lower_bound` and `Block::search_from` (from every expected position, the right one
/// and wrong ones) answer as a scan of the keys does, for keys that share prefixes and keys
/// of every length around 8 bytes.
#[test]
fn block_searches_agree_with_a_scan() {
    let mut keys: Vec<Vec<u8>> = (0u64..600)
        .map(|i| (i * 3).to_be_bytes().to_vec())
        .collect();
    for i in (0u64..600).step_by(37) {
        let k = (i * 3).to_be_bytes();
        keys.push(k[..7].to_vec());
        keys.push([&k[..], &[0]].concat());
        keys.push([&k[..], &[0, 9]].concat());
        keys.push([&k[..], b"a long tail"].concat());
    }
    keys.extend([vec![], vec![0], vec![0xff; 9]]);
    let blocks = blocks_of(&mut keys, 30);
    let mut probes = keys.clone();
    probes.extend((0u64..1_900).map(|i| i.to_be_bytes().to_vec()));
    probes.extend([
        vec![0; 8],
        vec![0xff; 8],
        vec![0xff; 10],
        vec![1],
        vec![0, 0],
    ]);
    for b in &blocks {
        let block_keys: Vec<&[u8]> = (0..b.len()).map(|i| b.key(i)).collect();
        for p in &probes {
            let ge = block_keys.iter().filter(|k| **k < &p[..]).count();
            let gt = block_keys.iter().filter(|k| **k <= &p[..]).count();
            assert_eq!(b.lower_bound(p, true), ge, "{p:?}");
            assert_eq!(b.lower_bound(p, false), gt, "{p:?}");
            let want = block_keys.binary_search(&&p[..]);
            for expect in [0, ge.saturating_sub(1), ge, ge + 1, b.len(), b.len() + 1] {
                assert_eq!(b.search_from(p, expect), want, "{p:?} from {expect}");
            }
        }
    }
}

/// A segment larger than a run is written in runs of about `RUN_BYTES` as it is built (the
/// builder never holds the whole file), and the runs together are the file.
#[test]
fn large_segment_is_written_in_runs() {
    let entries: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0u32..40_000)
        .map(|i| {
            (
                i.to_be_bytes().to_vec(),
                Some(vec![i as u8; 150 + (i % 151) as usize]),
            )
        })
        .collect();
    let mut b = SegmentBuilder::in_memory();
    for (k, v) in &entries {
        b.add(k, v.as_deref()).unwrap();
    }
    let (len, file) = b.finish().unwrap();
    assert_eq!(file.bytes.len() as u64, len);
    assert!(file.appends.len() >= 2, "appends {:?}", file.appends);
    let (last, runs) = file.appends.split_last().unwrap();
    for run in runs {
        assert!(
            (builder::RUN_BYTES..builder::RUN_BYTES + 2 * BLOCK_TARGET_BYTES).contains(run),
            "a run of {run} bytes"
        );
    }
    assert!(
        *last < builder::RUN_BYTES + 64 * 1024,
        "the last run: {last} bytes"
    );
    let seg = write_and_open(&file.bytes, entries.len() as u64).unwrap();
    assert_eq!(seg.block_count().unwrap(), file.blocks.len());
    let mut hint = None;
    for (k, v) in entries.iter().step_by(97) {
        let got = seg
            .get_with(k, &mut hint, |v| v.map(<[u8]>::to_vec))
            .unwrap();
        assert_eq!(got.expect("key present"), *v);
    }
}

#[test]
fn round_trip_lookup_and_seek() {
    let entries = sample();
    let (bytes, blocks) = build(&entries);
    assert!(
        blocks.len() > 10,
        "expected several blocks, got {}",
        blocks.len()
    );
    let seg = write_and_open(&bytes, entries.len() as u64).unwrap();
    let mut hint = None;
    for (k, v) in &entries {
        let got = seg
            .get_with(k, &mut hint, |v| v.map(<[u8]>::to_vec))
            .unwrap();
        assert_eq!(got.expect("key present"), *v);
    }
    assert!(seg
        .get_with(&9999u32.to_be_bytes(), &mut hint, |_| ())
        .unwrap()
        .is_none());
    assert!(seg.get_with(&[0, 0], &mut hint, |_| ()).unwrap().is_none());
    let p = seg.seek_ge(&[0, 0, 0x10, 0], true).unwrap().unwrap();
    assert_eq!(
        seg.block(p.block).unwrap().key(p.entry),
        &4096u32.to_be_bytes()
    );
    let p = seg.seek_ge(&4096u32.to_be_bytes(), false).unwrap().unwrap();
    assert_eq!(
        seg.block(p.block).unwrap().key(p.entry),
        &4097u32.to_be_bytes()
    );
    let p = seg.seek_lt(Some(&4096u32.to_be_bytes())).unwrap().unwrap();
    assert_eq!(
        seg.block(p.block).unwrap().key(p.entry),
        &4095u32.to_be_bytes()
    );
    let p = seg.seek_lt(None).unwrap().unwrap();
    assert_eq!(
        seg.block(p.block).unwrap().key(p.entry),
        &4999u32.to_be_bytes()
    );
    assert!(seg.seek_lt(Some(&0u32.to_be_bytes())).unwrap().is_none());
    assert!(seg
        .seek_ge(&4999u32.to_be_bytes(), false)
        .unwrap()
        .is_none());
    let seg = Arc::new(seg);
    let mut it = seg.iter_using(CacheUse::Fill);
    let mut n = 0;
    while let Some((k, v)) = it.peek().unwrap() {
        assert_eq!(k, entries[n].0.as_slice());
        assert_eq!(v, entries[n].1.as_deref());
        it.advance();
        n += 1;
    }
    assert_eq!(n, entries.len());
}

/// `probes` ascending as given, then descending, then shuffled with `seed`: the orders the
/// lookup tests ask in (ascending is the case the lookup hint is for).
fn in_three_orders<T: Clone>(mut probes: Vec<T>, seed: u64) -> [Vec<T>; 3] {
    use rand::seq::SliceRandom;
    use rand::SeedableRng;
    let ascending = probes.clone();
    probes.reverse();
    let descending = probes.clone();
    probes.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
    [ascending, descending, probes]
}

/// The lookup finger must not change any answer, whatever order the keys come in: present
/// and absent keys ascending (the finger's case), descending, and random.
#[test]
fn lookups_in_any_order_agree_with_the_entries() {
    let entries: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0u32..6000)
        .filter(|i| i % 3 != 1)
        .map(|i| {
            (
                i.to_be_bytes().to_vec(),
                Some(vec![i as u8; (i % 50) as usize]),
            )
        })
        .collect();
    let (bytes, _) = build(&entries);
    let seg = write_and_open(&bytes, entries.len() as u64).unwrap();
    let mut hint = None;
    for order in in_three_orders((0..6100u32).collect(), 3) {
        for i in order {
            let got = seg
                .get_with(&i.to_be_bytes(), &mut hint, |v| v.map(<[u8]>::to_vec))
                .unwrap();
            let want = (i < 6000 && i % 3 != 1).then(|| vec![i as u8; (i % 50) as usize]);
            assert_eq!(got, want.map(Some), "key {i}");
        }
    }
}

/// Keys longer than 8 bytes sharing their 8-byte prefixes over many blocks, as the slasher's
/// 40-byte indexed-attestation keys do, so that the block index breaks its ties on the prefix
/// by the blocks' first keys (`Segment::block_for`). Lookups in any order and both seeks,
/// for present keys, absent ones between them and the bare prefixes, agree with a model.
#[test]
fn long_keys_sharing_prefixes_agree_with_a_model() {
    use std::collections::BTreeMap;
    use std::ops::Bound::{Excluded, Unbounded};
    let key = |prefix: u64, suffix: u32| {
        let mut k = prefix.to_be_bytes().to_vec();
        k.extend_from_slice(&[0xab; 28]);
        k.extend_from_slice(&suffix.to_be_bytes());
        k
    };
    // Four prefixes with 1,500 keys each (even suffixes only).
    let model: BTreeMap<Vec<u8>, Vec<u8>> = (1..5u64)
        .flat_map(|p| (0..3000u32).step_by(2).map(move |s| (p, s)))
        .map(|(p, s)| (key(p, s), vec![s as u8; (s % 40) as usize]))
        .collect();
    let entries: Vec<_> = model
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
    let (bytes, _) = build(&entries);
    let seg = write_and_open(&bytes, entries.len() as u64).unwrap();
    let ties = seg
        .index()
        .unwrap()
        .first_prefixes
        .windows(2)
        .filter(|w| w[0] == w[1])
        .count();
    assert!(
        ties > 10,
        "only {ties} blocks start on their predecessor's prefix"
    );

    let probes: Vec<Vec<u8>> = (0..6u64)
        .flat_map(|p| {
            let keys = (0..3002u32).map(move |s| key(p, s));
            std::iter::once(p.to_be_bytes().to_vec()).chain(keys)
        })
        .collect();
    let at = |pos: Option<Pos>| pos.map(|p| seg.block(p.block).unwrap().key(p.entry).to_vec());
    let first = |r: Option<(&Vec<u8>, &Vec<u8>)>| r.map(|(k, _)| k.clone());
    let mut hint = None;
    for order in in_three_orders(probes, 5) {
        for k in order {
            let got = seg
                .get_with(&k, &mut hint, |v| v.map(<[u8]>::to_vec))
                .unwrap();
            assert_eq!(got, model.get(&k).cloned().map(Some), "get {k:?}");
            assert_eq!(
                at(seg.seek_ge(&k, true).unwrap()),
                first(model.range(k.clone()..).next()),
                "seek_ge {k:?}"
            );
            assert_eq!(
                at(seg.seek_ge(&k, false).unwrap()),
                first(model.range((Excluded(k.clone()), Unbounded)).next()),
                "seek_gt {k:?}"
            );
            assert_eq!(
                at(seg.seek_lt(Some(&k)).unwrap()),
                first(model.range(..k.clone()).next_back()),
                "seek_lt {k:?}"
            );
        }
    }
}

#[test]
fn rejects_truncation_and_bit_flips() {
    let entries = sample();
    let (bytes, _) = build(&entries);
    let n = entries.len() as u64;
    let truncated = &bytes[..bytes.len() - 3];
    assert!(matches!(
        write_and_open(truncated, n),
        Err(Error::ChecksumMismatch { .. })
    ));
    let mut flipped = bytes.clone();
    flipped[100] ^= 0x40;
    let seg = write_and_open(&flipped, n).unwrap();
    let err = (0..seg.block_count().unwrap())
        .map(|i| seg.block(i))
        .find_map(|r| r.err());
    assert!(
        matches!(err, Some(Error::ChecksumMismatch { .. })),
        "{err:?}"
    );
    let mut footer = bytes.clone();
    let at = footer.len() - FOOTER_LEN + FOOTER_VERSION_OFFSET;
    footer[at] = 9;
    let crc = crc32fast::hash(&footer[footer.len() - FOOTER_LEN..footer.len() - 4]);
    let l = footer.len();
    footer[l - 4..].copy_from_slice(&crc.to_le_bytes());
    assert!(matches!(
        write_and_open(&footer, n),
        Err(Error::UnsupportedFormatVersion { found: 9, .. })
    ));
}

/// The merge over a newer and an older segment: the newer wins on equal keys and its
/// tombstones hide the older values.
#[test]
fn merge_iter_newest_wins_and_an_unreadable_block_fails_every_retry() {
    use crate::iter::{MemLookup, MergeIter};
    let key = |i: u32| i.to_be_bytes().to_vec();
    let newer: Vec<_> = (0u32..4000)
        .step_by(2)
        .map(|i| (key(i), (i % 10 != 0).then(|| b"new".to_vec())))
        .collect();
    let older: Vec<_> = (0u32..4000)
        .map(|i| (key(i), Some(b"old".to_vec())))
        .collect();
    let mut model = std::collections::BTreeMap::new();
    for (k, v) in older.iter().chain(&newer) {
        model.insert(k.clone(), v.clone());
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .into_iter()
        .filter_map(|(k, v)| Some((k, v?)))
        .collect();
    let (newer_bytes, _) = build(&newer);
    let (older_bytes, _) = build(&older);
    let open = |older_bytes: &[u8]| {
        [
            Arc::new(write_and_open(&newer_bytes, newer.len() as u64).unwrap()),
            Arc::new(write_and_open(older_bytes, older.len() as u64).unwrap()),
        ]
    };

    let segments = open(&older_bytes);
    let mut it = MergeIter::new(&segments);
    let mut got = Vec::new();
    while let Some((k, v)) = it.next(&mut MemLookup(None), true).unwrap() {
        got.push((k.to_vec(), v.unwrap().to_vec()));
    }
    assert_eq!(got, want);

    // Damage the older segment's middle block: the merge returns the keys before it in
    // order, then fails, and fails again each time it is called, instead of going on past it.
    let probe = open(&older_bytes);
    let [_, older_segment] = &probe;
    assert!(
        older_segment.block_count().unwrap() >= 3,
        "too few blocks to damage the middle one"
    );
    let middle = older_segment
        .index()
        .unwrap()
        .blocks
        .get(older_segment.block_count().unwrap() / 2)
        .unwrap();
    let first_lost = key(u32::from_be_bytes(
        middle.first_key.as_ref().try_into().unwrap(),
    ));
    let mut damaged = older_bytes.clone();
    damaged[middle.offset as usize + 1] ^= 0x40;
    let segments = open(&damaged);
    let mut it = MergeIter::new(&segments);
    let mut last: Option<Vec<u8>> = None;
    let err = loop {
        match it.next(&mut MemLookup(None), true) {
            Ok(Some((k, _))) => {
                assert!(last.as_deref().is_none_or(|l| l < k), "out of order");
                last = Some(k.to_vec());
            }
            Ok(None) => panic!("the merge ended without reading the damaged block"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, Error::ChecksumMismatch { .. }), "{err:?}");
    assert!(
        last.is_some_and(|l| l < first_lost),
        "returned a key of the damaged block"
    );
    for _ in 0..3 {
        assert!(matches!(
            it.next(&mut MemLookup(None), true),
            Err(Error::ChecksumMismatch { .. })
        ));
    }
}

/// A merge's reads use the cache as told: `Fill` keeps every block, `Bypass` keeps none and
/// leaves cached ones, `Take` hands out cached blocks and removes them.
#[test]
fn merge_reads_use_the_cache_as_told() {
    let entries = sample();
    let (bytes, blocks) = build(&entries);
    let cache = Arc::new(BlockCache::new(64 << 20));
    let seg = write_and_open_with(&bytes, entries.len() as u64, 7, cache.clone());
    let seg = Arc::new(seg.unwrap());
    let cached = |cache: &BlockCache| {
        (0..blocks.len())
            .filter(|&i| cache.get(7, i).is_some())
            .count()
    };
    let walk = |cache_use| {
        let mut it = seg.iter_using(cache_use);
        let mut n = 0;
        while it.peek().unwrap().is_some() {
            it.advance();
            n += 1;
        }
        assert_eq!(n, entries.len());
    };
    // Opening may have read a block (for the segment's last key) through the cache.
    let at_open = cached(&cache);
    walk(CacheUse::Bypass);
    assert_eq!(cached(&cache), at_open, "Bypass kept blocks");
    walk(CacheUse::Fill);
    assert_eq!(
        cached(&cache),
        blocks.len(),
        "Fill did not keep every block"
    );
    walk(CacheUse::Bypass);
    assert_eq!(cached(&cache), blocks.len(), "Bypass removed blocks");
    walk(CacheUse::Take);
    assert_eq!(cached(&cache), 0, "Take left blocks");
}

/// The entries of `testdata/format1.seg`.
fn format1_entries() -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut entries: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0u64..1200)
        .map(|i| {
            let v = (i * 37).to_be_bytes();
            let key = vec![0, (i / 600) as u8, v[3], v[4], v[5], v[6], v[7]];
            let value = (i % 11 != 0).then(|| (i * 5 + 1_000_000).to_be_bytes()[2..].to_vec());
            (key, value)
        })
        .collect();
    let mut long = vec![0xfe; 300];
    long.push(1);
    entries.push((
        long,
        Some((0..20_000u32).map(|i| (i % 251) as u8).collect()),
    ));
    entries.push((vec![0xff; 9], Some(Vec::new())));
    entries
}

/// A segment file written by format 1 (by this builder before format 2, `testdata/format1.seg`,
/// made from [`format1_entries`]) still opens, reads, seeks and verifies entry for entry.
#[test]
fn a_format1_segment_still_reads() {
    let bytes = include_bytes!("testdata/format1.seg");
    let footer = bytes.len() - FOOTER_LEN;
    assert_eq!(
        super::format::le_u32(bytes, footer + FOOTER_VERSION_OFFSET),
        Some(1),
        "the fixture is a format-1 file"
    );
    let entries = format1_entries();
    let seg = Arc::new(write_and_open(bytes, entries.len() as u64).unwrap());
    assert!(
        seg.block_count().unwrap() > 2,
        "{} blocks",
        seg.block_count().unwrap()
    );
    let mut it = seg.iter_using(CacheUse::Fill);
    for (k, v) in &entries {
        let (key, value) = it.peek().unwrap().expect("an entry");
        assert_eq!((key, value), (&k[..], v.as_deref()));
        it.advance();
    }
    assert!(it.peek().unwrap().is_none());
    let mut hint = None;
    for (k, v) in entries.iter().rev() {
        let got = seg
            .get_with(k, &mut hint, |x| x.map(<[u8]>::to_vec))
            .unwrap();
        assert_eq!(got, Some(v.clone()), "{k:?}");
    }
    let check = seg.verify().unwrap();
    assert_eq!(check.entries, entries.len() as u64);
    // Rebuilt today, the same entries make a format-2 file that reads the same and is smaller.
    let (rebuilt, _) = build(&entries);
    let again = write_and_open(&rebuilt, entries.len() as u64).unwrap();
    assert_eq!(
        again.verify().unwrap(),
        check,
        "same counts and entry bytes"
    );
    assert!(
        rebuilt.len() < bytes.len(),
        "{} >= {}",
        rebuilt.len(),
        bytes.len()
    );
}

/// The slasher's `attesters` shape (7-byte keys of neighbouring validators, 6-byte ids): format
/// 2 stores it in under half of format 1's 23 bytes an entry, and reads it back exactly.
#[test]
fn neighbouring_keys_take_under_half_of_format1() {
    let entries: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0u64..50_000)
        .map(|i| {
            let v = (3 * i).to_be_bytes();
            let id = (7_000_000 + (i * 7919) % 60_000).to_be_bytes();
            (
                vec![0, 9, v[3], v[4], v[5], v[6], v[7]],
                Some(id[2..].to_vec()),
            )
        })
        .collect();
    let (bytes, blocks) = build(&entries);
    let format1 = 23 * entries.len();
    assert!(
        2 * bytes.len() < format1,
        "{} bytes for {} entries",
        bytes.len(),
        entries.len()
    );
    let seg = Arc::new(write_and_open(&bytes, entries.len() as u64).unwrap());
    assert_eq!(seg.block_count().unwrap(), blocks.len());
    let mut it = seg.iter_using(CacheUse::Bypass);
    for (k, v) in &entries {
        assert_eq!(it.peek().unwrap(), Some((&k[..], v.as_deref())));
        it.advance();
    }
}

/// Hand-made format-2 blocks that a builder never writes are refused by name: sharing more
/// than the entry before holds, and entries that would expand the block past its size.
#[test]
fn damaged_format2_blocks_are_refused() {
    let path = std::path::Path::new("x.seg");
    let block = |body: &[u8], n: u32| {
        let mut b = body.to_vec();
        b.extend_from_slice(&n.to_le_bytes());
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    };
    let reason = |r: Result<Block>| match r {
        Err(Error::Corrupted { reason, .. }) => reason,
        other => panic!("{other:?}"),
    };
    // The first entry shares a byte of a key before it: there is none.
    let first_shares = block(&[1, 1, 2, 0, 7, 9], 1);
    assert!(reason(Block::decode(first_shares, 2, path, 0)).contains("shares more"));
    // Read as format 2 the same body is one entry (key [7], value [9]).
    let fine = block(&[0, 1, 2, 0, 7, 9], 1);
    let b = Block::decode(fine, 2, path, 0).unwrap();
    assert_eq!((b.key(0), b.value(0)), (&[7u8][..], Some(&[9u8][..])));
    // A 10,000-byte value, then entries that each repeat it from one byte of their own: the
    // third would start past the block's size.
    let mut body = vec![0u8, 1];
    super::format::put_varint(&mut body, 10_001);
    body.extend_from_slice(&[0, 1]);
    body.extend(std::iter::repeat_n(5u8, 10_000));
    for k in [2u8, 3] {
        body.extend_from_slice(&[0, 1, 1]);
        super::format::put_varint(&mut body, 10_000);
        body.push(k);
    }
    let two = Block::decode(block(&body[..body.len() - 6], 2), 2, path, 0).unwrap();
    assert_eq!(two.value(1).map(<[u8]>::len), Some(10_000));
    assert!(reason(Block::decode(block(&body, 3), 2, path, 0)).contains("past the block's size"));
}

/// `bytes` written to a new file in the temp directory (removed when the guard drops) and
/// opened as a manifest of version 2 lists it: `file_len` bytes, `entries` entries, `keys` its
/// key range.
fn write_and_list(
    bytes: &[u8],
    file_len: u64,
    entries: u64,
    keys: [&[u8]; 2],
    cache: Arc<BlockCache>,
) -> (Result<Segment>, RemoveOnDrop) {
    let path = std::env::temp_dir().join(format!(
        "butter-listed-{}-{}.seg",
        std::process::id(),
        rand::random::<u64>()
    ));
    std::fs::write(&path, bytes).unwrap();
    let meta = crate::manifest::SegmentMeta {
        seq: 7,
        file_len,
        entries,
        min_key: keys[0].into(),
        max_key: keys[1].into(),
    };
    let guard = RemoveOnDrop(path.clone());
    (Segment::open_listed(path, &meta, cache), guard)
}

struct RemoveOnDrop(std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn a_listed_segment_reads_its_index_on_first_use_only() {
    let entries = sample();
    let (bytes, _) = build(&entries);
    let (min, max) = (entries[0].0.clone(), entries[entries.len() - 1].0.clone());
    let cache = Arc::new(BlockCache::new(1 << 20));
    let (seg, _file) = write_and_list(
        &bytes,
        bytes.len() as u64,
        entries.len() as u64,
        [&min, &max],
        cache.clone(),
    );
    let seg = seg.unwrap();
    // Opened: nothing read but the file's length, nothing counted, no block known.
    assert!(!seg.index_loaded());
    assert_eq!((cache.index_bytes(), seg.cacheable_blocks()), (0, 0));
    // A key outside its range, and a lookup that may not read from disk, leave it unread.
    let mut hint = None;
    let outside = 9999u32.to_be_bytes();
    assert!(matches!(
        seg.probe(&outside, &mut hint, Load::Read, |_| ()).unwrap(),
        Probe::Absent
    ));
    let inside = 1234u32.to_be_bytes();
    let cached_only = seg
        .probe(&inside, &mut hint, Load::CachedOnly, |_| ())
        .unwrap();
    assert!(matches!(cached_only, Probe::NotRead));
    assert!(!seg.index_loaded());
    // The first lookup that may read loads it, and counts it.
    let got = seg
        .get_with(&inside, &mut hint, |v| v.map(<[u8]>::to_vec))
        .unwrap();
    assert_eq!(got, Some(entries[1234].1.clone()));
    assert!(seg.index_loaded());
    let counted = cache.index_bytes();
    assert!(counted > 0);
    assert!(seg.cacheable_blocks() > 1);
    // Everything reads back, and a full check passes with the manifest's range.
    assert_eq!(seg.verify().unwrap().entries, entries.len() as u64);
    // The same file opened at once counts the same index.
    let eager = write_and_open(&bytes, entries.len() as u64).unwrap();
    assert_eq!(
        (&eager.min_key, &eager.max_key),
        (&seg.min_key, &seg.max_key)
    );
    assert_eq!(eager.cache.index_bytes(), counted);
    drop(seg);
    assert_eq!(cache.index_bytes(), 0);
}

#[test]
fn a_listed_segment_that_does_not_match_its_record_is_refused() {
    let entries = sample();
    let (bytes, _) = build(&entries);
    let (n, len) = (entries.len() as u64, bytes.len() as u64);
    let (min, max) = (entries[0].0.clone(), entries[entries.len() - 1].0.clone());
    let cache = || Arc::new(BlockCache::new(1 << 20));
    // A length other than the record's: refused as it opens.
    let (seg, _f) = write_and_list(&bytes, len - 1, n, [&min, &max], cache());
    let err = seg.unwrap_err();
    assert!(matches!(err, Error::Corrupted { .. }), "{err}");
    assert!(err.to_string().contains("manifest says"), "{err}");
    // A symlink in its place: refused as it opens.
    let (target, _t) = write_and_list(&bytes, len, n, [&min, &max], cache());
    let link = target.unwrap().path.with_extension("link");
    std::os::unix::fs::symlink(&_t.0, &link).unwrap();
    let _l = RemoveOnDrop(link.clone());
    let meta = crate::manifest::SegmentMeta {
        seq: 7,
        file_len: len,
        entries: n,
        min_key: min.clone().into(),
        max_key: max.clone().into(),
    };
    let err = Segment::open_listed(link, &meta, cache()).unwrap_err();
    assert!(err.to_string().contains("symlink"), "{err}");
    // Another entry count, or another smallest key: refused on first use, every time, and
    // nothing is counted.
    let (seg, _f) = write_and_list(&bytes, len, n + 1, [&min, &max], cache());
    let seg = seg.unwrap();
    for _ in 0..2 {
        let err = seg.seek_ge(&min, true).unwrap_err();
        assert!(err.to_string().contains("manifest says"), "{err}");
    }
    assert_eq!(seg.cache.index_bytes(), 0);
    let (seg, _f) = write_and_list(&bytes, len, n, [&entries[1].0, &max], cache());
    let err = seg.unwrap().seek_ge(&max, true).unwrap_err();
    assert!(err.to_string().contains("smallest key"), "{err}");
    // Another largest key: lookups cannot tell, the full check does.
    let wrong_max = entries[entries.len() - 2].0.clone();
    let (seg, _f) = write_and_list(&bytes, len, n, [&min, &wrong_max], cache());
    let err = seg.unwrap().verify().unwrap_err();
    assert!(err.to_string().contains("largest key"), "{err}");
}

/// `n` entries with keys of `klen` bytes (every third number, big-endian, so that absent keys
/// lie between them) and values of `vlen` bytes.
fn uniform_entries(n: u64, klen: usize, vlen: usize) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    (0..n)
        .map(|i| {
            let key = (3 * i).to_be_bytes()[8 - klen..].to_vec();
            // The first half changes every 50 entries, the rest every 7: entries share all,
            // part or none of the value before them.
            let value = (0..vlen)
                .map(|j| match j < vlen / 2 {
                    true => (i / 50) as u8,
                    false => (i as usize / 7 + j) as u8,
                })
                .collect();
            (key, Some(value))
        })
        .collect()
}

/// Every entry of `seg` reads back as `entries` says, by lookup (with the hint and without) and
/// by iteration, and the keys between them are absent.
fn reads_back(seg: &Arc<Segment>, entries: &[(Vec<u8>, Option<Vec<u8>>)]) {
    let mut hint = None;
    for (k, v) in entries {
        let got = seg
            .get_with(k, &mut hint, |v| v.map(<[u8]>::to_vec))
            .unwrap();
        assert_eq!(got.as_ref(), Some(v), "key {k:?}");
        let mut fresh = None;
        let got = seg
            .get_with(k, &mut fresh, |v| v.map(<[u8]>::to_vec))
            .unwrap();
        assert_eq!(got.as_ref(), Some(v), "key {k:?} unhinted");
        let mut absent = k.clone();
        if let Some(last) = absent.last_mut() {
            *last = last.wrapping_add(1);
        }
        if !entries.iter().any(|(e, _)| *e == absent) {
            assert!(seg.get_with(&absent, &mut hint, |_| ()).unwrap().is_none());
        }
    }
    let mut it = seg.iter_using(CacheUse::Bypass);
    for (k, v) in entries {
        assert_eq!(it.peek().unwrap(), Some((&k[..], v.as_deref())));
        it.advance();
    }
    assert_eq!(it.peek().unwrap(), None);
}

/// Blocks whose entries are all values, with one key length up to 8 bytes and one value
/// length, are held in the fixed layout, built or read: 16 bytes an entry for 8-byte keys and
/// values instead of 36, and every lookup, seek and scan agrees with the entries.
#[test]
fn uniform_short_entries_take_the_fixed_layout() {
    for (klen, vlen) in [(8, 8), (7, 6), (2, 0), (1, 3), (8, 40)] {
        let n = if klen == 1 { 80 } else { 20_000 };
        let entries = uniform_entries(n, klen, vlen);
        let (bytes, built) = build(&entries);
        let seg = Arc::new(write_and_open(&bytes, n).unwrap());
        assert_eq!(seg.block_count().unwrap(), built.len());
        for (i, b) in built.iter().enumerate() {
            let read = seg.block_using(i, CacheUse::Bypass).unwrap();
            for block in [b, &read] {
                assert!(block.is_fixed(), "{klen}/{vlen} block {i}");
                assert_eq!(block.weight(), block.len() * (klen + vlen) + 64);
            }
            assert_eq!(read.len(), b.len());
        }
        reads_back(&seg, &entries);
        let (first, last) = (&entries[0].0, &entries[entries.len() - 1].0);
        let p = seg.seek_ge(first, false).unwrap().unwrap();
        assert_eq!(seg.block(p.block).unwrap().key(p.entry), &entries[1].0[..]);
        let p = seg.seek_lt(Some(last)).unwrap().unwrap();
        assert_eq!(
            seg.block(p.block).unwrap().key(p.entry),
            &entries[entries.len() - 2].0[..]
        );
    }
    let entries = uniform_entries(20_000, 8, 8);
    let (_, blocks) = build(&entries);
    let per_entry = blocks.iter().map(|b| b.weight()).sum::<usize>() as f64 / 20_000.0;
    assert!(per_entry < 17.0, "{per_entry} bytes an entry");
}

/// A deletion (also as the first entry), a key longer than 8 bytes, or a second key or value
/// length keeps a block in the listed layout, and it reads back the same.
#[test]
fn other_blocks_stay_listed() {
    let mut with_deletion = uniform_entries(500, 8, 8);
    with_deletion[250].1 = None;
    let mut starting_with_deletion = uniform_entries(500, 8, 8);
    starting_with_deletion[0].1 = None;
    let mut two_value_lengths = uniform_entries(500, 8, 8);
    two_value_lengths[100].1 = Some(vec![1, 2, 3]);
    let mut two_key_lengths = uniform_entries(500, 8, 8);
    two_key_lengths.insert(0, (vec![0, 0, 0, 0, 0, 0, 0], Some(vec![9; 8])));
    let long_keys = uniform_entries(500, 8, 8)
        .into_iter()
        .map(|(k, v)| ([&k[..], &[7]].concat(), v))
        .collect::<Vec<_>>();
    for entries in [
        with_deletion,
        starting_with_deletion,
        two_value_lengths,
        two_key_lengths,
        long_keys,
    ] {
        let (bytes, built) = build(&entries);
        assert_eq!(built.len(), 1);
        let seg = Arc::new(write_and_open(&bytes, entries.len() as u64).unwrap());
        let read = seg.block_using(0, CacheUse::Bypass).unwrap();
        assert!(!built[0].is_fixed() && !read.is_fixed());
        let mut hint = None;
        for (k, v) in &entries {
            let got = seg
                .get_with(k, &mut hint, |v| v.map(<[u8]>::to_vec))
                .unwrap();
            assert_eq!(got, Some(v.clone()), "key {k:?}");
        }
    }
}
