//! Basic reads and writes: gets, puts and deletes in and across transactions, value and key sizes,
//! key order, the nine tables, durability.

use super::helpers::*;
use super::store::{test_config, FreshDir, Store};
use crate::backend::{Environment, Key, RwTransaction};
use crate::config::{BackendConfig, Durability};
use crate::tables::TABLE_NAMES;

/// A new store: every table is empty (`get` is `None`, `first_key`/`last_key` are `None`).
pub fn empty_tables_are_empty<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let mut txn = store.txn();
    for (db, name) in store.dbs().all().into_iter().zip(TABLE_NAMES) {
        assert_eq!(get(&txn, db, &[0]), None, "get on empty table {name}");
        assert_eq!(get(&txn, db, &be(1)), None, "get on empty table {name}");
        assert_eq!(
            first_key(&mut txn, db),
            None,
            "first_key on empty table {name}"
        );
        assert_eq!(
            last_key(&mut txn, db),
            None,
            "last_key on empty table {name}"
        );
        assert!(scan(&mut txn, db).is_empty(), "scan of empty table {name}");
    }
}

/// `get` sees a `put` made earlier in the same transaction, before any commit.
pub fn get_sees_put_in_same_txn<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().attesters_max_targets_db;
    let mut txn = store.txn();
    put(&mut txn, db, &be(7), b"seven");
    assert_eq!(get(&txn, db, &be(7)).as_deref(), Some(&b"seven"[..]));
    assert_eq!(get(&txn, db, &be(8)), None);
    commit(txn);
    let txn = store.txn();
    assert_eq!(get(&txn, db, &be(7)).as_deref(), Some(&b"seven"[..]));
}

/// `last_key` includes a key `put` earlier in the same transaction (id allocation).
pub fn last_key_sees_put_in_same_txn<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_db;
    let mut txn = store.txn();
    assert_eq!(last_key(&mut txn, db), None);
    put(&mut txn, db, &id48(1), b"a");
    assert_eq!(last_key(&mut txn, db), Some(id48(1)));
    commit(txn);
    let mut txn = store.txn();
    put(&mut txn, db, &id48(2), b"b");
    assert_eq!(
        last_key(&mut txn, db),
        Some(id48(2)),
        "last_key must see the uncommitted put"
    );
    put(&mut txn, db, &id48(1_000_000), b"c");
    assert_eq!(last_key(&mut txn, db), Some(id48(1_000_000)));
    del(&mut txn, db, &id48(1_000_000));
    assert_eq!(
        last_key(&mut txn, db),
        Some(id48(2)),
        "last_key must see the uncommitted del"
    );
}

/// `first_key` includes a smaller key `put` earlier in the same transaction.
pub fn first_key_sees_put_in_same_txn<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().proposers_db;
    let mut txn = store.txn();
    put(&mut txn, db, &be(50), b"x");
    commit(txn);
    let mut txn = store.txn();
    assert_eq!(first_key(&mut txn, db), Some(be(50)));
    put(&mut txn, db, &be(10), b"y");
    assert_eq!(first_key(&mut txn, db), Some(be(10)));
    del(&mut txn, db, &be(10));
    del(&mut txn, db, &be(50));
    assert_eq!(
        first_key(&mut txn, db),
        None,
        "first_key after deleting everything"
    );
}

/// Deleting a key that does not exist is `Ok` (empty table, other keys present, after a
/// commit, and twice in a row).
pub fn del_missing_key_is_ok<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_db;
    let mut txn = store.txn();
    txn.del(db, &id48(1))
        .expect("del on an empty table must be Ok");
    put(&mut txn, db, &id48(2), b"v");
    txn.del(db, &id48(1))
        .expect("del of a missing key must be Ok");
    txn.del(db, &id48(3))
        .expect("del of a missing key must be Ok");
    commit(txn);
    let mut txn = store.txn();
    txn.del(db, &id48(2)).expect("del of an existing key");
    txn.del(db, &id48(2))
        .expect("second del of the same key must be Ok");
    assert_eq!(get(&txn, db, &id48(2)), None);
    commit(txn);
    let txn = store.txn();
    assert_eq!(get(&txn, db, &id48(2)), None);
}

/// `get` after `del` is `None`, in the same transaction and after commit.
pub fn get_after_del_is_none<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_id_db;
    let mut txn = store.txn();
    put(&mut txn, db, b"committed", b"1");
    commit(txn);
    let mut txn = store.txn();
    put(&mut txn, db, b"fresh", b"2");
    del(&mut txn, db, b"fresh");
    del(&mut txn, db, b"committed");
    assert_eq!(get(&txn, db, b"fresh"), None, "deleted uncommitted key");
    assert_eq!(get(&txn, db, b"committed"), None, "deleted committed key");
    assert!(scan(&mut txn, db).is_empty());
    commit(txn);
    let mut txn = store.txn();
    assert_eq!(get(&txn, db, b"committed"), None);
    assert!(scan(&mut txn, db).is_empty());
}

/// A zero-byte value is stored and read back as `Some(empty)`, distinct from a missing key.
pub fn empty_value_is_not_missing<E: Environment>(fresh: FreshDir<'_>) {
    let mut store = Store::<E>::new(fresh);
    let db = store.dbs().attesters_db;
    let mut txn = store.txn();
    put(&mut txn, db, b"k", b"");
    assert_eq!(get(&txn, db, b"k"), Some(Vec::new()));
    commit(txn);
    store.reopen();
    let db = store.dbs().attesters_db;
    let mut txn = store.txn();
    assert_eq!(get(&txn, db, b"k"), Some(Vec::new()));
    assert_eq!(scan(&mut txn, db), vec![(b"k".to_vec(), Vec::new())]);
}

/// Overwriting a key with growing and shrinking values keeps only the latest value.
pub fn overwrite_grows_and_shrinks_values<E: Environment>(fresh: FreshDir<'_>) {
    let mut store = Store::<E>::new(fresh);
    let sizes = [10, 200, 5_000, 100_000, 3, 0, 70_000, 1, 8_192, 6];
    let db = store.dbs().min_targets_db;
    for (round, size) in sizes.into_iter().enumerate() {
        let tag = round as u8;
        let mut txn = store.txn();
        let value = patterned(tag, b"chunk", size);
        put(&mut txn, db, b"chunk", &value);
        // A neighbour that must not be disturbed.
        put(&mut txn, db, b"chunk+", &[tag]);
        let got = get(&txn, db, b"chunk").expect("value present");
        assert!(
            got == value,
            "round {round}: same-txn value of len {} != {size}",
            got.len()
        );
        commit(txn);
        let txn = store.txn();
        let got = get(&txn, db, b"chunk").expect("value present");
        assert!(
            got == value,
            "round {round}: committed value of len {} != {size}",
            got.len()
        );
        assert_eq!(get(&txn, db, b"chunk+"), Some(vec![tag]));
    }
    // Overwrite several times inside one transaction too.
    let mut txn = store.txn();
    for size in [1, 50_000, 2, 0, 9] {
        put(&mut txn, db, b"chunk", &patterned(1, b"chunk", size));
    }
    assert_eq!(get(&txn, db, b"chunk"), Some(patterned(1, b"chunk", 9)));
    commit(txn);
    store.reopen();
    let db = store.dbs().min_targets_db;
    let mut txn = store.txn();
    assert_eq!(get(&txn, db, b"chunk"), Some(patterned(1, b"chunk", 9)));
    assert_eq!(
        scan_keys(&mut txn, db),
        vec![b"chunk".to_vec(), b"chunk+".to_vec()]
    );
}

/// Values from 0 bytes to just over 1 MiB (the largest Electra indexed attestation) round-trip
/// in the same transaction, after commit and after reopen.
pub fn value_sizes_zero_to_one_mib<E: Environment>(fresh: FreshDir<'_>) {
    let sizes: [usize; 13] = [
        0,
        1,
        6,
        208,
        511,
        512,
        4_095,
        4_096,
        4_097,
        65_536,
        300_000,
        1 << 20,
        1_048_804,
    ];
    let mut store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_db;
    let values: Vec<(Key, Vec<u8>)> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| (id48(i as u64 + 1), patterned(9, &be(n as u64), n)))
        .collect();
    let check = |txn: &E::RwTransaction<'_>, when: &str| {
        for (key, value) in &values {
            let got = get(txn, db, key).unwrap_or_else(|| panic!("{when}: missing {key:?}"));
            assert!(
                got == *value,
                "{when}: value of len {} read back as len {}",
                value.len(),
                got.len()
            );
        }
    };
    let mut txn = store.txn();
    for (key, value) in &values {
        put(&mut txn, db, key, value);
    }
    check(&txn, "same txn");
    commit(txn);
    check(&store.txn(), "after commit");
    store.reopen();
    let db2 = store.dbs().indexed_attestation_db;
    let mut txn = store.txn();
    for (key, value) in &values {
        let got = get(&txn, db2, key).unwrap_or_else(|| panic!("after reopen: missing {key:?}"));
        assert!(
            got == *value,
            "after reopen: len {} read back as len {}",
            value.len(),
            got.len()
        );
    }
    let scanned = scan(&mut txn, db2);
    assert_eq!(scanned.len(), values.len());
    assert!(scanned == values, "cursor scan of large values differs");
}

/// Keys of every length from 1 to 40 bytes are stored, found and ordered.
pub fn key_sizes_one_to_forty_bytes<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_id_db;
    let mut keys: Vec<Key> = Vec::new();
    for len in 1..=40usize {
        keys.push(vec![0x5a; len]);
        let mut k = vec![0u8; len];
        k[len - 1] = len as u8;
        keys.push(k);
        keys.push(vec![0xff; len]);
    }
    let mut txn = store.txn();
    for (i, key) in keys.iter().enumerate() {
        put(&mut txn, db, key, &be(i as u64));
    }
    commit(txn);
    let mut txn = store.txn();
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(
            get(&txn, db, key),
            Some(be(i as u64)),
            "key of length {}",
            key.len()
        );
    }
    let mut expected = keys.clone();
    expected.sort();
    expected.dedup();
    assert_eq!(scan_keys(&mut txn, db), expected);
}

/// Keys compare as unsigned bytes, lexicographically, a shorter prefix first.
pub fn keys_sort_bytewise_shorter_prefix_first<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().attesters_db;
    let expected: Vec<Key> = vec![
        vec![0x00],
        vec![0x00, 0x00],
        vec![0x00, 0x00, 0x00],
        vec![0x00, 0x01],
        vec![0x00, 0xff],
        vec![0x01],
        vec![0x01, 0x00],
        vec![0x7f],
        vec![0x7f, 0xff, 0xff],
        vec![0x80],
        vec![0x80, 0x00],
        vec![0xfe, 0xff],
        vec![0xff],
        vec![0xff, 0x00],
        vec![0xff, 0xff],
        vec![0xff, 0xff, 0xff],
    ];
    let mut txn = store.txn();
    // Insert in a scrambled order.
    for i in [7, 3, 15, 0, 12, 9, 1, 14, 5, 10, 2, 13, 8, 4, 11, 6] {
        put(&mut txn, db, &expected[i], &[i as u8]);
    }
    assert_eq!(
        scan_keys(&mut txn, db),
        expected,
        "order inside the writing transaction"
    );
    assert_eq!(first_key(&mut txn, db), Some(vec![0x00]));
    assert_eq!(last_key(&mut txn, db), Some(vec![0xff, 0xff, 0xff]));
    commit(txn);
    let mut txn = store.txn();
    assert_eq!(scan_keys(&mut txn, db), expected, "order after commit");
}

/// Big-endian integer keys (as the slasher writes them) iterate in numeric order.
pub fn big_endian_keys_iterate_numerically<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().proposers_db;
    let mut nums: Vec<u64> = vec![
        0,
        1,
        255,
        256,
        65_535,
        65_536,
        1 << 32,
        u64::MAX,
        42,
        1 << 56,
    ];
    let mut txn = store.txn();
    for n in &nums {
        // slot ‖ proposer index, both big-endian, as in `proposers`.
        let mut key = be(*n);
        key.extend_from_slice(&be(n % 7));
        put(&mut txn, db, &key, &be(*n));
    }
    nums.sort_unstable();
    let got: Vec<u64> = scan(&mut txn, db)
        .into_iter()
        .map(|(_, v)| u64::from_be_bytes(v.try_into().expect("8-byte value")))
        .collect();
    assert_eq!(got, nums);
}

/// Two tables are independent: the same key holds different values, and deleting or scanning
/// in one does not touch the other.
pub fn tables_are_independent<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let all = store.dbs().all();
    let mut txn = store.txn();
    for (i, db) in all.into_iter().enumerate() {
        put(&mut txn, db, b"shared", &[i as u8]);
    }
    for (i, db) in all.into_iter().enumerate() {
        assert_eq!(
            get(&txn, db, b"shared"),
            Some(vec![i as u8]),
            "table {}",
            TABLE_NAMES[i]
        );
    }
    del(&mut txn, all[3], b"shared");
    put(&mut txn, all[4], b"only-in-4", b"x");
    commit(txn);
    let mut txn = store.txn();
    for (i, db) in all.into_iter().enumerate() {
        let expected: Entries = match i {
            3 => vec![],
            4 => vec![
                (b"only-in-4".to_vec(), b"x".to_vec()),
                (b"shared".to_vec(), vec![4]),
            ],
            _ => vec![(b"shared".to_vec(), vec![i as u8])],
        };
        assert_eq!(scan(&mut txn, db), expected, "table {}", TABLE_NAMES[i]);
    }
}

/// Lighthouse's open sequence: a transaction that only reads `metadata` and is dropped, then
/// one that reads it and commits; then reopen and do it again.
pub fn lighthouse_open_sequence<E: Environment>(fresh: FreshDir<'_>) {
    let mut store = Store::<E>::new(fresh);
    for _ in 0..2 {
        let db = store.dbs().metadata_db;
        let txn = store.txn();
        assert_eq!(
            get(&txn, db, &[0x00]),
            None,
            "no schema version is ever written"
        );
        drop(txn);
        let txn = store.txn();
        assert_eq!(get(&txn, db, &[0x01]), None, "no config is ever written");
        commit(txn);
        store.reopen();
    }
}

/// `filenames()` lists files that exist after open, inside the store's directory.
pub fn filenames_exist<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().metadata_db;
    let mut txn = store.txn();
    put(&mut txn, db, &[0x01], b"cfg");
    commit(txn);
    let files = store.env().filenames();
    assert!(
        !files.is_empty(),
        "filenames() must list the backend's files"
    );
    for file in &files {
        assert!(
            file.starts_with(store.dir()),
            "{} is outside {}",
            file.display(),
            store.dir().display()
        );
        assert!(
            file.exists(),
            "{} listed by filenames() does not exist",
            file.display()
        );
    }
    let mut unique = files.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), files.len(), "filenames() lists a file twice");
}

/// With `Durability::Immediate` (the default) the environment reports itself durable.
pub fn durable_with_immediate_durability<E: Environment>(fresh: FreshDir<'_>) {
    let dir = fresh();
    let config = BackendConfig {
        durability: Durability::Immediate,
        ..test_config(&dir)
    };
    let store = Store::<E>::with_config(dir, config);
    assert!(
        store.env().durable(),
        "{} must be durable with Durability::Immediate",
        E::NAME
    );
}

/// A backend that keeps engine statistics counts each commit once, and the named parts of its
/// time fit inside the commit's wall time. butter_db (alone or timed) must keep them; the
/// others have none.
pub fn commit_stats_count_each_commit<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let stats = store.env().stats();
    assert_eq!(
        stats.is_some(),
        E::NAME == "butter",
        "{}: engine statistics are kept by butter_db alone",
        E::NAME
    );
    let Some(stats) = stats else {
        return;
    };
    let before = stats.commit_totals();
    // A new span of peaks starts here.
    let _ = stats.take_commit_peaks();
    let db = store.dbs().attesters_db;
    let mut txn = store.txn();
    for k in 0..1000u64 {
        put(&mut txn, db, &be(k), &patterned(1, &be(k), 100));
    }
    let started = std::time::Instant::now();
    commit(txn);
    let wall = started.elapsed();
    let span = stats.commit_totals().since(&before);
    assert_eq!(span.commits, 1, "{span:?}");
    let mut names: Vec<&str> = span.parts.iter().map(|(n, _)| *n).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(
        names.len(),
        span.parts.len(),
        "a part named twice: {span:?}"
    );
    assert!(
        span.part("snapshot") > Some(std::time::Duration::ZERO),
        "a commit that wrote takes its snapshot: {span:?}"
    );
    let parts: std::time::Duration = span.parts.iter().map(|(_, t)| *t).sum();
    assert!(
        parts <= wall,
        "parts {parts:?} exceed the commit's {wall:?}"
    );
    // 1,000 entries of 108 bytes are in the commit's own segment.
    assert!(span.commit_bytes > 100_000, "{span:?}");
    let peaks = stats.take_commit_peaks();
    assert_eq!(peaks.largest_commit_bytes, span.commit_bytes, "{peaks:?}");
    assert_eq!(
        stats.take_commit_peaks(),
        crate::CommitPeaks::default(),
        "taking the peaks starts a new span"
    );
}
