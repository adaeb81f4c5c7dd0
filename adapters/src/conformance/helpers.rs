//! What the checks share: one-call reads and writes that fail the check on an error, key and value
//! makers.

use std::collections::BTreeMap;
use std::fmt::Debug;

use crate::backend::{Cursor, Key, RwTransaction};
use crate::error::Error;

pub(super) type Entries = Vec<(Key, Vec<u8>)>;

pub(super) fn get<T: RwTransaction>(txn: &T, db: T::Database, key: &[u8]) -> Option<Vec<u8>> {
    txn.get(db, key)
        .expect("get should succeed")
        .map(|v| v.into_owned())
}

pub(super) fn put<T: RwTransaction>(txn: &mut T, db: T::Database, key: &[u8], value: &[u8]) {
    txn.put(db, key, value).expect("put should succeed");
}

pub(super) fn del<T: RwTransaction>(txn: &mut T, db: T::Database, key: &[u8]) {
    txn.del(db, key).expect("del should succeed");
}

/// Every entry of a table, walking with `first_key`, `get_current` and `next_key`.
pub(super) fn scan<T: RwTransaction>(txn: &mut T, db: T::Database) -> Entries {
    let mut cursor = txn.cursor(db).expect("cursor should open");
    let mut out = Vec::new();
    let mut key = cursor.first_key().expect("first_key should succeed");
    while let Some(k) = key {
        let (ck, cv) = cursor
            .get_current()
            .expect("get_current should succeed")
            .expect("get_current should return the entry next_key/first_key landed on");
        assert_eq!(
            ck, k,
            "get_current must return the key the cursor was moved to"
        );
        out.push((ck, cv));
        key = cursor.next_key().expect("next_key should succeed");
    }
    out
}

pub(super) fn scan_keys<T: RwTransaction>(txn: &mut T, db: T::Database) -> Vec<Key> {
    scan(txn, db).into_iter().map(|(k, _)| k).collect()
}

pub(super) fn first_key<T: RwTransaction>(txn: &mut T, db: T::Database) -> Option<Key> {
    txn.cursor(db)
        .expect("cursor")
        .first_key()
        .expect("first_key should succeed")
}

pub(super) fn last_key<T: RwTransaction>(txn: &mut T, db: T::Database) -> Option<Key> {
    txn.cursor(db)
        .expect("cursor")
        .last_key()
        .expect("last_key should succeed")
}

pub(super) fn commit<T: RwTransaction>(txn: T) {
    txn.commit().expect("commit should succeed");
}

pub(super) fn be(n: u64) -> Key {
    n.to_be_bytes().to_vec()
}

/// Lighthouse's 6-byte big-endian indexed-attestation id.
pub(super) fn id48(n: u64) -> Key {
    n.to_be_bytes()[2..].to_vec()
}

/// A value that differs per (tag, key) and has the given length.
pub(super) fn patterned(tag: u8, key: &[u8], len: usize) -> Vec<u8> {
    let seed = key
        .iter()
        .fold(u32::from(tag).wrapping_mul(2_654_435_761), |acc, b| {
            acc.rotate_left(5) ^ u32::from(*b).wrapping_mul(0x9E37_79B9)
        });
    (0..len)
        .map(|i| {
            let x = seed.wrapping_add(u32::try_from(i % 65_521).unwrap_or(0).wrapping_mul(31));
            x.to_le_bytes()[usize::from(x.to_le_bytes()[3]) % 3]
        })
        .collect()
}

pub(super) fn to_map(entries: Entries) -> BTreeMap<Key, Vec<u8>> {
    entries.into_iter().collect()
}

pub(super) fn assert_unpositioned<T: Debug>(result: Result<T, Error>, what: &str) {
    match result {
        Err(Error::CursorUnpositioned) => {}
        other => panic!("{what}: expected Err(CursorUnpositioned), got {other:?}"),
    }
}

/// Content written to table `i` by the multi-table checks: `count` entries unique to it.
pub(super) fn table_content(i: usize, round: u8, count: usize) -> Entries {
    (0..count)
        .map(|n| {
            let key = vec![u8::try_from(n).unwrap_or(u8::MAX), round];
            let value = patterned(
                round.wrapping_mul(16).wrapping_add(i as u8),
                &key,
                1 + n * 7,
            );
            (key, value)
        })
        .collect()
}

pub(super) fn fill<T: RwTransaction>(txn: &mut T, db: T::Database, keys: &[u64]) {
    for k in keys {
        put(
            txn,
            db,
            &be(*k),
            &patterned(3, &be(*k), 10 + (*k as usize % 50)),
        );
    }
}

pub(super) fn value_of(k: u64) -> Vec<u8> {
    patterned(3, &be(k), 10 + (k as usize % 50))
}
