//! Cursors: walking, positions, `delete_current`, cursor `put`.

use super::helpers::*;
use super::store::{FreshDir, Store};
use crate::backend::{Cursor, Environment, Key, RwTransaction};

/// `next_key` walks the keys in order, never returns the current key again, and returns
/// `None` at the end; afterwards there is no current entry and `next_key` stays `None`.
pub fn next_key_walks_in_order_then_none<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().attesters_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[10, 20, 30]);
    let mut c = txn.cursor(db).expect("cursor");
    assert_eq!(c.first_key().expect("first"), Some(be(10)));
    assert_eq!(
        c.next_key().expect("next"),
        Some(be(20)),
        "next_key is exclusive of the current key"
    );
    assert_eq!(c.next_key().expect("next"), Some(be(30)));
    assert_eq!(
        c.next_key().expect("next"),
        None,
        "next_key past the last key"
    );
    assert_eq!(
        c.get_current().expect("get_current"),
        None,
        "no current entry past the end"
    );
    assert_eq!(
        c.next_key().expect("next"),
        None,
        "next_key stays None past the end"
    );
    assert_unpositioned(c.delete_current(), "delete_current past the end");
    // Repositioning works after running off the end.
    assert_eq!(c.last_key().expect("last"), Some(be(30)));
    assert_eq!(
        c.get_current().expect("get_current"),
        Some((be(30), value_of(30)))
    );
    assert_eq!(
        c.next_key().expect("next"),
        None,
        "next_key from the last key"
    );
    drop(c);
    commit(txn);
}

/// `next_key` from a key in the middle returns the following key; with a single key it
/// returns `None`.
pub fn next_key_is_exclusive_of_current<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().proposers_db;
    let mut txn = store.txn();
    put(&mut txn, db, &be(5), b"only");
    {
        let mut c = txn.cursor(db).expect("cursor");
        assert_eq!(c.first_key().expect("first"), Some(be(5)));
        assert_eq!(
            c.next_key().expect("next"),
            None,
            "single key: next_key must not repeat it"
        );
    }
    {
        let mut c = txn.cursor(db).expect("cursor");
        assert_eq!(c.last_key().expect("last"), Some(be(5)));
        assert_eq!(c.next_key().expect("next"), None);
    }
    fill(&mut txn, db, &[1, 9]);
    let mut c = txn.cursor(db).expect("cursor");
    c.put(&be(5), b"again").expect("cursor put");
    assert_eq!(
        c.next_key().expect("next"),
        Some(be(9)),
        "next_key after cursor put"
    );
}

/// A new cursor is unpositioned: `get_current` is `None`; `next_key`, `delete_current` and
/// `delete_while` are `Err(CursorUnpositioned)` and change nothing.
pub fn fresh_cursor_is_unpositioned<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[1, 2, 3]);
    {
        let mut c = txn.cursor(db).expect("cursor");
        assert_eq!(c.get_current().expect("get_current"), None);
        assert_unpositioned(c.next_key(), "next_key on a fresh cursor");
    }
    {
        let mut c = txn.cursor(db).expect("cursor");
        assert_unpositioned(c.delete_current(), "delete_current on a fresh cursor");
    }
    {
        let mut c = txn.cursor(db).expect("cursor");
        let mut calls = 0;
        let result = c.delete_while(&mut |_| {
            calls += 1;
            Ok(true)
        });
        assert_unpositioned(result, "delete_while on a fresh cursor");
        assert_eq!(calls, 0, "the predicate must not be called");
    }
    assert_eq!(
        scan_keys(&mut txn, db),
        vec![be(1), be(2), be(3)],
        "nothing was deleted"
    );
}

/// On an empty table `first_key`/`last_key` are `None` and leave no current entry:
/// `delete_while` is `Err(CursorUnpositioned)` (callers return early on `None`).
pub fn cursor_on_empty_table<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().proposers_db;
    let mut txn = store.txn();
    let mut c = txn.cursor(db).expect("cursor");
    assert_eq!(c.first_key().expect("first"), None);
    assert_eq!(c.get_current().expect("get_current"), None);
    assert_eq!(c.next_key().expect("next"), None);
    assert_unpositioned(
        c.delete_while(&mut |_| Ok(true)),
        "delete_while on an empty table",
    );
    assert_eq!(c.last_key().expect("last"), None);
    assert_unpositioned(c.delete_current(), "delete_current on an empty table");
}

/// `delete_current` leaves the cursor before the successor: `get_current` returns the
/// successor's entry; at the last key it returns `None`.
pub fn delete_current_then_get_current_is_successor<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().attesters_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[1, 2, 3, 4]);
    commit(txn);
    let mut txn = store.txn();
    {
        let mut c = txn.cursor(db).expect("cursor");
        assert_eq!(c.first_key().expect("first"), Some(be(1)));
        assert_eq!(c.next_key().expect("next"), Some(be(2)));
        c.delete_current().expect("delete 2");
        assert_eq!(
            c.get_current().expect("get_current"),
            Some((be(3), value_of(3)))
        );
        assert_eq!(
            c.get_current().expect("get_current"),
            Some((be(3), value_of(3))),
            "stable"
        );
        assert_eq!(
            c.next_key().expect("next"),
            Some(be(4)),
            "after get_current the cursor is on 3"
        );
        c.delete_current().expect("delete 4 (the last key)");
        assert_eq!(
            c.get_current().expect("get_current"),
            None,
            "no successor of the last key"
        );
        assert_eq!(c.next_key().expect("next"), None);
        assert_unpositioned(c.delete_current(), "delete_current with no current entry");
    }
    assert_eq!(scan_keys(&mut txn, db), vec![be(1), be(3)]);
    assert_eq!(get(&txn, db, &be(2)), None);
    commit(txn);
    let mut txn = store.txn();
    assert_eq!(scan_keys(&mut txn, db), vec![be(1), be(3)]);
}

/// Right after `delete_current`, `next_key` returns the successor of the deleted key (it does
/// not skip it), as LMDB's `MDB_NEXT` does.
pub fn next_key_after_delete_current_returns_successor<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[1, 2, 3, 4, 5]);
    {
        let mut c = txn.cursor(db).expect("cursor");
        assert_eq!(c.first_key().expect("first"), Some(be(1)));
        c.delete_current().expect("delete 1");
        assert_eq!(
            c.next_key().expect("next"),
            Some(be(2)),
            "the successor is not skipped"
        );
        c.delete_current().expect("delete 2");
        c.delete_current()
            .expect("delete 3 (the successor) without moving first");
        assert_eq!(
            c.get_current().expect("get_current"),
            Some((be(4), value_of(4)))
        );
        assert_eq!(c.next_key().expect("next"), Some(be(5)));
        c.delete_current().expect("delete 5");
        assert_eq!(c.next_key().expect("next"), None);
    }
    assert_eq!(scan_keys(&mut txn, db), vec![be(4)]);
}

/// Lighthouse's LMDB/MDBX prune loop, driven by hand: `get_current`, delete, `next_key`.
pub fn manual_delete_loop_visits_every_key<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().proposers_db;
    let keys: Vec<u64> = (0..200).map(|i| i * 3).collect();
    let mut txn = store.txn();
    fill(&mut txn, db, &keys);
    commit(txn);
    let mut txn = store.txn();
    let mut seen = Vec::new();
    {
        let mut c = txn.cursor(db).expect("cursor");
        c.first_key().expect("first");
        while let Some((k, v)) = c.get_current().expect("get_current") {
            let n = u64::from_be_bytes(k.as_slice().try_into().expect("8 bytes"));
            if n >= 300 {
                break;
            }
            assert_eq!(v, value_of(n));
            c.delete_current().expect("delete_current");
            seen.push(n);
            if c.next_key().expect("next_key").is_none() {
                break;
            }
        }
    }
    let expected: Vec<u64> = keys.iter().copied().filter(|n| *n < 300).collect();
    assert_eq!(
        seen, expected,
        "the loop must visit (and delete) every key below 300 once"
    );
    let rest: Vec<Key> = keys.iter().filter(|n| **n >= 300).map(|n| be(*n)).collect();
    assert_eq!(scan_keys(&mut txn, db), rest);
}

/// Cursor `put` writes through the transaction and leaves the cursor on the written key;
/// the `last_key() + 1` id allocation of `store_indexed_attestation` works repeatedly in one
/// transaction.
pub fn cursor_put_allocates_sequential_ids<E: Environment>(fresh: FreshDir<'_>) {
    let mut store = Store::<E>::new(fresh);
    let alloc = |txn: &mut E::RwTransaction<'_>, db: E::Database, round: u8| -> u64 {
        let mut c = txn.cursor(db).expect("cursor");
        let next = match c.last_key().expect("last_key") {
            Some(k) => {
                let mut buf = [0u8; 8];
                buf[2..].copy_from_slice(&k);
                u64::from_be_bytes(buf) + 1
            }
            None => 1,
        };
        let value = patterned(round, &id48(next), 228 + 8 * (next as usize % 10));
        c.put(&id48(next), &value).expect("cursor put");
        assert_eq!(
            c.get_current().expect("get_current"),
            Some((id48(next), value))
        );
        next
    };
    for round in 0..3u8 {
        // Handles belong to one environment; take them afresh after every reopen.
        let db = store.dbs().indexed_attestation_db;
        let mut txn = store.txn();
        for i in 0..50u64 {
            let id = alloc(&mut txn, db, round);
            assert_eq!(id, u64::from(round) * 50 + i + 1, "ids must be consecutive");
        }
        commit(txn);
        store.reopen();
    }
    let mut txn = store.txn();
    let db = store.dbs().indexed_attestation_db;
    let keys = scan_keys(&mut txn, db);
    assert_eq!(keys, (1..=150).map(id48).collect::<Vec<_>>());
    for (i, key) in keys.iter().enumerate() {
        let round = (i / 50) as u8;
        let n = i as u64 + 1;
        assert_eq!(
            get(&txn, db, key),
            Some(patterned(round, &id48(n), 228 + 8 * (n as usize % 10)))
        );
    }
}

/// Cursor `put` overwrites an existing key and the overwrite is visible to `get`.
pub fn cursor_put_overwrites<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().metadata_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[1, 2, 3]);
    {
        let mut c = txn.cursor(db).expect("cursor");
        c.put(&be(2), &[7; 5000]).expect("cursor put grows");
        assert_eq!(
            c.get_current().expect("get_current"),
            Some((be(2), vec![7; 5000]))
        );
        c.put(&be(2), b"s").expect("cursor put shrinks");
        assert_eq!(c.next_key().expect("next"), Some(be(3)));
        c.put(&be(0), b"new first").expect("cursor put new key");
        assert_eq!(
            c.get_current().expect("get_current"),
            Some((be(0), b"new first".to_vec()))
        );
        assert_eq!(c.next_key().expect("next"), Some(be(1)));
    }
    assert_eq!(get(&txn, db, &be(2)), Some(b"s".to_vec()));
    assert_eq!(scan_keys(&mut txn, db), vec![be(0), be(1), be(2), be(3)]);
    commit(txn);
    let txn = store.txn();
    assert_eq!(get(&txn, db, &be(0)), Some(b"new first".to_vec()));
}
