//! Validation at batch time (deferral, dropping) and the history window wrap-around
//! (`docs/background.md` §1.4 step 2, §1.7), on every compiled backend.

mod slasher_support;

use slasher_adapters::backend::{Environment, RwTransaction};
use slasher_support::{att, slashing, TestCtx};

/// An attestation whose target is ahead of the current epoch waits in the queue (behind newer
/// arrivals) and is processed in the first batch whose epoch reaches its target.
fn deferred_until_target_epoch<E: Environment>(ctx: &TestCtx) {
    let slasher = ctx.open::<E>(ctx.config());
    let early = att(&[3], 4, 5, 0);
    let conflicting = att(&[3], 4, 5, 1);
    slasher.accept_attestation(early.clone());
    for epoch in 2..5 {
        let stats = slasher.process_queued(epoch).expect("process");
        assert_eq!(stats.attestation_stats.num_deferred, 1, "epoch {epoch}");
        assert_eq!(stats.attestation_stats.num_processed, 0);
        assert_eq!(slasher.num_queued_attestations(), 1);
    }
    slasher.accept_attestation(conflicting.clone());
    let stats = slasher.process_queued(5).expect("process");
    assert_eq!(stats.attestation_stats.num_deferred, 0);
    assert_eq!(stats.attestation_stats.num_processed, 2);
    assert_eq!(slasher.num_queued_attestations(), 0);
    let found = slasher.get_attester_slashings();
    assert_eq!(found.len(), 1);
    assert!(
        found.contains(&slashing(&early, &conflicting))
            || found.contains(&slashing(&conflicting, &early))
    );
}

/// `source + H ≤ c` and `source > target` are dropped (before the defer rule), so they never
/// produce slashings.
fn dropped_as_too_old<E: Environment>(ctx: &TestCtx) {
    let mut config = ctx.config();
    config.chunk_size = 4;
    config.history_length = 16;
    let slasher = ctx.open::<E>(config);
    slasher.accept_attestation(att(&[1], 10, 11, 0));
    slasher.process_queued(11).expect("process");

    // Source 10 + H = 26 ≤ 26: too old, although it would double-vote.
    slasher.accept_attestation(att(&[1], 10, 11, 1));
    // Source after target.
    slasher.accept_attestation(att(&[1], 12, 11, 1));
    // Too old *and* in the future: dropped, not deferred.
    slasher.accept_attestation(att(&[1], 10, 30, 1));
    let stats = slasher.process_queued(26).expect("process");
    assert_eq!(stats.attestation_stats.num_dequeued, 3);
    assert_eq!(stats.attestation_stats.num_dropped, 3);
    assert_eq!(stats.attestation_stats.num_deferred, 0);
    assert_eq!(slasher.num_queued_attestations(), 0);

    // One epoch earlier the same double vote is still inside the window.
    slasher.accept_attestation(att(&[1], 10, 11, 1));
    slasher.process_queued(25).expect("process");
    assert_eq!(slasher.get_attester_slashings().len(), 1);
}

/// With K = 1, C = 16, H = 16: store one attestation, prune until the database is empty (so ids
/// restart at 1 and attester keys wrap modulo H), then process 2H − 3 → 2H − 2 without error.
fn history_wrap_around<E: Environment>(ctx: &TestCtx) {
    let mut config = ctx.config();
    config.validator_chunk_size = 1;
    config.chunk_size = 16;
    config.history_length = 16;
    let h = config.history_length as u64;
    let slasher = ctx.open::<E>(config);

    slasher.accept_attestation(att(&[0], 0, 1, 0));
    slasher.process_queued(1).expect("process");
    let mut epoch = 1;
    loop {
        let stats = slasher.prune_database(epoch).expect("prune");
        if stats.num_attestations_deleted > 0 {
            break;
        }
        epoch += 1;
        assert!(epoch < 4 * h, "the attestation was never pruned");
    }
    {
        let dbs = *slasher.databases();
        let txn = slasher.environment().begin_rw_txn().expect("txn");
        assert!(txn
            .get(dbs.indexed_attestation_db, &[0, 0, 0, 0, 0, 1])
            .expect("get")
            .is_none());
    }

    let late = att(&[0], 2 * h - 3, 2 * h - 2, 0);
    slasher.accept_attestation(late.clone());
    let stats = slasher
        .process_queued(2 * h - 2)
        .expect("process after wrap-around");
    assert_eq!(stats.attestation_stats.num_stored, 1);
    assert!(slasher.get_attester_slashings().is_empty());
    {
        let dbs = *slasher.databases();
        let txn = slasher.environment().begin_rw_txn().expect("txn");
        assert!(txn
            .get(dbs.indexed_attestation_db, &[0, 0, 0, 0, 0, 1])
            .expect("get")
            .is_some());
        // Target 2H − 2 = 30 sits at 30 mod 16 = 14 in the attesters key.
        let key = [0x00, 0x0E, 0, 0, 0, 0, 0];
        let value = txn
            .get(dbs.attesters_db, &key)
            .expect("get")
            .expect("attester record");
        assert_eq!(&*value, &[0, 0, 0, 0, 0, 1]);
    }

    // A double vote after the wrap-around is still detected.
    slasher.accept_attestation(att(&[0], 2 * h - 3, 2 * h - 2, 1));
    slasher.process_queued(2 * h - 2).expect("process");
    assert_eq!(slasher.get_attester_slashings().len(), 1);
    slasher.prune_database(2 * h - 2).expect("prune");
}

per_backend!(
    deferred_until_target_epoch,
    dropped_as_too_old,
    history_wrap_around
);
