//! `delete_while`: where it stops, what it returns, how it fails.

use super::helpers::*;
use super::store::{FreshDir, Store};
use crate::backend::{Cursor, Environment, RwTransaction};
use crate::error::Error;
use crate::tables::TABLE_NAMES;

/// `delete_while` stops at the first key the predicate rejects, even when later keys would
/// match again (a non-monotone predicate); it leaves the cursor on that key.
pub fn delete_while_stops_at_first_false<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().proposers_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[1, 2, 3, 4, 5, 6, 7, 8]);
    commit(txn);
    let mut txn = store.txn();
    let mut asked = Vec::new();
    let deleted = {
        let mut c = txn.cursor(db).expect("cursor");
        c.first_key().expect("first");
        let deleted = c
            .delete_while(&mut |k| {
                let n = u64::from_be_bytes(k.try_into().expect("8 bytes"));
                asked.push(n);
                Ok(matches!(n, 1 | 2 | 3 | 5 | 6 | 8))
            })
            .expect("delete_while");
        assert_eq!(
            c.get_current().expect("get_current"),
            Some((be(4), value_of(4)))
        );
        deleted
    };
    assert_eq!(
        asked,
        vec![1, 2, 3, 4],
        "the predicate is asked in key order up to the first false"
    );
    assert_eq!(deleted, vec![value_of(1), value_of(2), value_of(3)]);
    assert_eq!(
        scan_keys(&mut txn, db),
        vec![be(4), be(5), be(6), be(7), be(8)]
    );
    commit(txn);
    let mut txn = store.txn();
    assert_eq!(
        scan_keys(&mut txn, db),
        vec![be(4), be(5), be(6), be(7), be(8)]
    );
}

/// `delete_while` returns the deleted values in key order, whatever the insertion order, and
/// also deletes keys written earlier in the same transaction.
pub fn delete_while_returns_values_in_key_order<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_db;
    let order = [17u64, 3, 250, 99, 1, 64, 128, 7, 200, 42];
    let mut txn = store.txn();
    fill(&mut txn, db, &order[..5]);
    commit(txn);
    let mut txn = store.txn();
    fill(&mut txn, db, &order[5..]);
    let deleted = {
        let mut c = txn.cursor(db).expect("cursor");
        c.first_key().expect("first");
        c.delete_while(&mut |k| Ok(u64::from_be_bytes(k.try_into().expect("8 bytes")) < 200))
            .expect("delete_while")
    };
    let mut sorted: Vec<u64> = order.iter().copied().filter(|n| *n < 200).collect();
    sorted.sort_unstable();
    assert_eq!(
        deleted,
        sorted.iter().map(|n| value_of(*n)).collect::<Vec<_>>()
    );
    assert_eq!(scan_keys(&mut txn, db), vec![be(200), be(250)]);
}

/// The values returned by `delete_while` are owned copies: they stay correct after further
/// writes that reuse the freed space (Lighthouse PR #6211).
pub fn delete_while_values_owned_after_writes<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_db;
    let other = store.dbs().attesters_db;
    let big = |n: u64| patterned(5, &be(n), 500 + (n as usize * 997) % 6_000);
    let mut txn = store.txn();
    for n in 0..40 {
        put(&mut txn, db, &be(n), &big(n));
    }
    commit(txn);
    let mut txn = store.txn();
    // Dirty some of the pages first, so values come from both clean and dirty pages.
    for n in (0..40).step_by(3) {
        put(&mut txn, db, &be(n), &big(n + 1_000));
    }
    let expected: Vec<Vec<u8>> = (0..30)
        .map(|n| if n % 3 == 0 { big(n + 1_000) } else { big(n) })
        .collect();
    let deleted = {
        let mut c = txn.cursor(db).expect("cursor");
        c.first_key().expect("first");
        c.delete_while(&mut |k| Ok(u64::from_be_bytes(k.try_into().expect("8 bytes")) < 30))
            .expect("delete_while")
    };
    // Reuse the freed space with different bytes, in the same and another table.
    for n in 0..30 {
        put(&mut txn, db, &be(n), &vec![0xee; 7_000]);
        put(&mut txn, other, &be(n), &vec![0x11; 7_000]);
    }
    for n in 0..30 {
        del(&mut txn, db, &be(n));
    }
    assert_eq!(deleted.len(), expected.len());
    for (i, (got, want)) in deleted.iter().zip(&expected).enumerate() {
        assert!(
            got == want,
            "deleted value {i} changed after later writes (len {})",
            got.len()
        );
    }
    commit(txn);
    let txn = store.txn();
    assert_eq!(get(&txn, db, &be(35)), Some(big(35)));
}

/// `delete_while` started in the middle (after `next_key`) deletes from there only.
pub fn delete_while_from_middle<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().attesters_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[1, 2, 3, 4, 5]);
    let deleted = {
        let mut c = txn.cursor(db).expect("cursor");
        c.first_key().expect("first");
        c.next_key().expect("next");
        let deleted = c.delete_while(&mut |_| Ok(true)).expect("delete_while");
        assert_eq!(
            c.get_current().expect("get_current"),
            None,
            "ran off the end"
        );
        deleted
    };
    assert_eq!(
        deleted,
        vec![value_of(2), value_of(3), value_of(4), value_of(5)]
    );
    assert_eq!(scan_keys(&mut txn, db), vec![be(1)]);
}

/// `delete_while` right after `delete_current` starts at the successor.
pub fn delete_while_after_delete_current<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().attesters_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[1, 2, 3, 4, 5]);
    let deleted = {
        let mut c = txn.cursor(db).expect("cursor");
        c.first_key().expect("first");
        c.delete_current().expect("delete 1");
        c.delete_while(&mut |k| Ok(k != be(4).as_slice()))
            .expect("delete_while")
    };
    assert_eq!(deleted, vec![value_of(2), value_of(3)]);
    assert_eq!(scan_keys(&mut txn, db), vec![be(4), be(5)]);
}

/// An error from the predicate stops `delete_while` and is returned; entries deleted before it
/// stay deleted in the transaction, later ones are untouched, and the cursor is usable.
pub fn delete_while_predicate_error_propagates<E: Environment>(fresh: FreshDir<'_>) {
    let store = Store::<E>::new(fresh);
    let db = store.dbs().indexed_attestation_id_db;
    let mut txn = store.txn();
    fill(&mut txn, db, &[1, 2, 3, 4, 5]);
    {
        let mut c = txn.cursor(db).expect("cursor");
        c.first_key().expect("first");
        let result = c.delete_while(&mut |k| {
            if k == be(3).as_slice() {
                Err(Error::Other("predicate failed on purpose".into()))
            } else {
                Ok(true)
            }
        });
        match result {
            Err(Error::Other(msg)) => assert_eq!(msg, "predicate failed on purpose"),
            other => panic!("expected the predicate's error, got {other:?}"),
        }
        assert_eq!(
            c.get_current().expect("get_current"),
            Some((be(3), value_of(3)))
        );
    }
    assert_eq!(scan_keys(&mut txn, db), vec![be(3), be(4), be(5)]);
    commit(txn);
    let mut txn = store.txn();
    assert_eq!(scan_keys(&mut txn, db), vec![be(3), be(4), be(5)]);
}

/// Lighthouse's pruning shape (`first_key`, then `delete_while(key < bound)`) and its
/// test-only reset (`delete_while(|_| true)` on all nine tables).
pub fn delete_while_prune_and_reset<E: Environment>(fresh: FreshDir<'_>) {
    let mut store = Store::<E>::new(fresh);
    let all = store.dbs().all();
    let mut txn = store.txn();
    for (i, db) in all.into_iter().enumerate() {
        for (k, v) in table_content(i, 1, 20 + i) {
            put(&mut txn, db, &k, &v);
        }
    }
    commit(txn);
    let mut txn = store.txn();
    let proposers = store.dbs().proposers_db;
    let pruned = {
        let mut c = txn.cursor(proposers).expect("cursor");
        assert!(c.first_key().expect("first").is_some());
        c.delete_while(&mut |k| Ok(k[0] < 10)).expect("prune")
    };
    assert_eq!(pruned.len(), 10);
    assert_eq!(scan(&mut txn, proposers).len(), 20 + 7 - 10);
    commit(txn);
    store.reopen();
    let all = store.dbs().all();
    let mut txn = store.txn();
    for db in all {
        let mut c = txn.cursor(db).expect("cursor");
        if c.first_key().expect("first").is_some() {
            c.delete_while(&mut |_| Ok(true)).expect("reset");
        }
    }
    commit(txn);
    let mut txn = store.txn();
    for (i, db) in all.into_iter().enumerate() {
        assert!(
            scan(&mut txn, db).is_empty(),
            "table {} not empty after reset",
            TABLE_NAMES[i]
        );
    }
}
