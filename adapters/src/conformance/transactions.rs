//! Transactions: abort by drop, reopen, one writer at a time.

use std::collections::BTreeMap;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::helpers::*;
use super::store::{FreshDir, Store};
use crate::backend::{Cursor, Environment, Key, RwTransaction};
use crate::tables::{MAX_NUM_DBS, TABLE_NAMES};

/// Dropping a transaction aborts it: puts, overwrites, deletes, cursor puts and `delete_while`
/// in all nine tables are discarded, before and after reopen.
pub fn abort_by_drop_discards_all_nine_tables<E: Environment>(fresh: FreshDir<'_>) {
    let mut store = Store::<E>::new(fresh);
    let all = store.dbs().all();
    let mut txn = store.txn();
    for (i, db) in all.into_iter().enumerate() {
        for (k, v) in table_content(i, 1, 5 + i) {
            put(&mut txn, db, &k, &v);
        }
    }
    commit(txn);
    let baseline: Vec<Entries> = {
        let mut txn = store.txn();
        all.into_iter().map(|db| scan(&mut txn, db)).collect()
    };
    for (i, entries) in baseline.iter().enumerate() {
        assert_eq!(
            *entries,
            table_content(i, 1, 5 + i),
            "committed table {}",
            TABLE_NAMES[i]
        );
    }
    let mut txn = store.txn();
    for (i, db) in all.into_iter().enumerate() {
        put(&mut txn, db, b"new", b"uncommitted");
        put(&mut txn, db, &baseline[i][0].0, b"overwritten");
        del(&mut txn, db, &baseline[i][1].0);
        let mut c = txn.cursor(db).expect("cursor");
        c.put(&[0xff, 0xff], b"cursor put").expect("cursor put");
        c.first_key().expect("first");
        c.delete_while(&mut |k| Ok(k[0] < 2)).expect("delete_while");
        drop(c);
        assert_eq!(
            get(&txn, db, b"new"),
            Some(b"uncommitted".to_vec()),
            "own write visible"
        );
    }
    drop(txn);
    let mut txn = store.txn();
    for (i, db) in all.into_iter().enumerate() {
        assert_eq!(
            scan(&mut txn, db),
            baseline[i],
            "table {} after abort",
            TABLE_NAMES[i]
        );
    }
    drop(txn);
    store.reopen();
    let all = store.dbs().all();
    let mut txn = store.txn();
    for (i, db) in all.into_iter().enumerate() {
        assert_eq!(
            scan(&mut txn, db),
            baseline[i],
            "table {} after abort + reopen",
            TABLE_NAMES[i]
        );
    }
}

/// A committed transaction is visible to the next one, and after closing and reopening the
/// environment, in all nine tables; a later commit after reopen is too.
pub fn reopen_after_commit_sees_all_nine_tables<E: Environment>(fresh: FreshDir<'_>) {
    let mut store = Store::<E>::new(fresh);
    let mut expected: Vec<BTreeMap<Key, Vec<u8>>> = vec![BTreeMap::new(); MAX_NUM_DBS];
    for round in 1..=3u8 {
        let all = store.dbs().all();
        let mut txn = store.txn();
        for (i, db) in all.into_iter().enumerate() {
            for (k, v) in table_content(i, round, 3 * i + usize::from(round)) {
                put(&mut txn, db, &k, &v);
                expected[i].insert(k, v);
            }
            if round == 3 {
                let k = table_content(i, 1, 1).remove(0).0;
                del(&mut txn, db, &k);
                expected[i].remove(&k);
            }
        }
        commit(txn);
        let mut txn = store.txn();
        for (i, db) in all.into_iter().enumerate() {
            assert_eq!(
                to_map(scan(&mut txn, db)),
                expected[i],
                "round {round}, table {}",
                TABLE_NAMES[i]
            );
        }
        drop(txn);
        store.reopen();
        let all = store.dbs().all();
        let mut txn = store.txn();
        for (i, db) in all.into_iter().enumerate() {
            let got = to_map(scan(&mut txn, db));
            assert_eq!(
                got, expected[i],
                "round {round} after reopen, table {}",
                TABLE_NAMES[i]
            );
            for (k, v) in &expected[i] {
                assert_eq!(get(&txn, db, k).as_ref(), Some(v));
            }
        }
    }
}

/// Many keys (20,000 in random order) in one transaction: a full cursor scan returns them all,
/// in order, before and after commit and reopen.
pub fn many_keys_full_scan<E: Environment>(fresh: FreshDir<'_>) {
    let mut store = Store::<E>::new(fresh);
    let db = store.dbs().current_epochs_db;
    let mut rng = ChaCha8Rng::seed_from_u64(20_000);
    let mut ids: Vec<u64> = (0..20_000u64).map(|i| i * 7 + 3).collect();
    // Fisher-Yates with our seeded RNG.
    for i in (1..ids.len()).rev() {
        let j = rng.gen_range(0..=i);
        ids.swap(i, j);
    }
    let mut txn = store.txn();
    for id in &ids {
        put(&mut txn, db, &be(*id), &id.to_le_bytes());
    }
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    let expected: Entries = sorted
        .iter()
        .map(|id| (be(*id), id.to_le_bytes().to_vec()))
        .collect();
    assert!(
        scan(&mut txn, db) == expected,
        "scan inside the writing transaction"
    );
    commit(txn);
    store.reopen();
    let db = store.dbs().current_epochs_db;
    let mut txn = store.txn();
    let got = scan(&mut txn, db);
    assert_eq!(got.len(), expected.len());
    assert!(got == expected, "scan after reopen");
    assert_eq!(first_key(&mut txn, db), Some(be(sorted[0])));
    assert_eq!(last_key(&mut txn, db), sorted.last().map(|n| be(*n)));
}

enum SecondWriter {
    Calling,
    Began,
    Saw(Option<Vec<u8>>),
    Failed(String),
}

fn second_writer_waits<E: Environment>(fresh: FreshDir<'_>, first_commits: bool) {
    let store = Arc::new(Store::<E>::new(fresh));
    let db = store.dbs().metadata_db;
    let mut txn = store.txn();
    put(&mut txn, db, b"k", b"from the first writer");
    let (tx, rx) = mpsc::channel();
    let thread_store = Arc::clone(&store);
    // Set just before the first transaction ends: a second writer that began with it unset
    // began while the first was open, however the threads were scheduled.
    let first_ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let thread_first_ended = Arc::clone(&first_ended);
    let handle = std::thread::spawn(move || {
        let _ = tx.send(SecondWriter::Calling);
        let message = match thread_store.env().begin_rw_txn() {
            Ok(mut txn2) => {
                if !thread_first_ended.load(std::sync::atomic::Ordering::SeqCst) {
                    let _ = tx.send(SecondWriter::Failed(
                        "began while the first transaction was open".into(),
                    ));
                    return;
                }
                let _ = tx.send(SecondWriter::Began);
                let seen = get(&txn2, db, b"k");
                put(&mut txn2, db, b"second", b"yes");
                commit(txn2);
                SecondWriter::Saw(seen)
            }
            Err(e) => SecondWriter::Failed(format!("{e}")),
        };
        let _ = tx.send(message);
    });
    // The window below starts only once the thread is about to call begin_rw_txn.
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(SecondWriter::Calling) => {}
        _ => panic!("the second writer thread never started"),
    }
    match rx.recv_timeout(Duration::from_millis(300)) {
        Err(mpsc::RecvTimeoutError::Timeout) => {}
        Ok(SecondWriter::Failed(e)) => {
            panic!("second begin_rw_txn failed instead of blocking: {e}")
        }
        Ok(_) => panic!("second begin_rw_txn returned while the first transaction was open"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("second writer thread died"),
    }
    first_ended.store(true, std::sync::atomic::Ordering::SeqCst);
    if first_commits {
        commit(txn);
    } else {
        drop(txn);
    }
    let mut began = false;
    let seen = loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(SecondWriter::Began) => began = true,
            Ok(SecondWriter::Calling) => {}
            Ok(SecondWriter::Saw(seen)) => break seen,
            Ok(SecondWriter::Failed(e)) => panic!("second begin_rw_txn failed: {e}"),
            Err(e) => panic!("second writer did not proceed after the first ended: {e}"),
        }
    };
    assert!(began);
    handle.join().expect("second writer thread");
    let expected = first_commits.then(|| b"from the first writer".to_vec());
    assert_eq!(seen, expected, "what the second writer saw of the first");
    let txn = store.txn();
    assert_eq!(get(&txn, db, b"second"), Some(b"yes".to_vec()));
    assert_eq!(get(&txn, db, b"k"), expected);
}

/// A second `begin_rw_txn` from another thread blocks (does not fail) while the first
/// transaction is open, and proceeds once it commits, seeing its writes.
pub fn second_writer_blocks_until_commit<E: Environment>(fresh: FreshDir<'_>) {
    second_writer_waits::<E>(fresh, true);
}

/// As above, but the first transaction is dropped: the second proceeds and sees nothing of it.
pub fn second_writer_blocks_until_abort<E: Environment>(fresh: FreshDir<'_>) {
    second_writer_waits::<E>(fresh, false);
}

/// Several threads each run many short write transactions (read-modify-write of a counter):
/// transactions are serialised, so no increment is lost.
pub fn concurrent_writers_are_serialised<E: Environment>(fresh: FreshDir<'_>) {
    let store = Arc::new(Store::<E>::new(fresh));
    let db = store.dbs().metadata_db;
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for _ in 0..25 {
                    let mut txn = store.txn();
                    let n = get(&txn, db, b"counter")
                        .map_or(0, |v| u64::from_be_bytes(v.try_into().expect("8 bytes")));
                    put(&mut txn, db, b"counter", &be(n + 1));
                    commit(txn);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer thread");
    }
    let txn = store.txn();
    assert_eq!(get(&txn, db, b"counter"), Some(be(100)));
}
