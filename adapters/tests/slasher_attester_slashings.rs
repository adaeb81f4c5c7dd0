//! Lighthouse's attester-slashing scenarios (`docs/background.md` §1.7), on every compiled backend.
//!
//! Each case opens a fresh slasher with Lighthouse's default configuration, feeds the
//! attestations through a driver, compares the slashings found with the expected set, then
//! prunes (which must not fail).

mod slasher_support;

use std::collections::HashSet;

use slasher_adapters::backend::Environment;
use slasher_adapters::slasher::{AttesterSlashing, IndexedAttestation, Slasher};
use slasher_support::{att, slashing, TestCtx};

/// How attestations reach `process_queued`.
#[derive(Debug, Clone, Copy)]
enum Driver {
    /// Process after every attestation, and once more at the end.
    Individual,
    /// Process once at the end: every attestation shares one write transaction.
    Batch,
    /// One thread per attestation, each accepting it and calling `process_queued`.
    Parallel,
}

fn run_case<E: Environment>(
    ctx: &TestCtx,
    driver: Driver,
    attestations: &[IndexedAttestation],
    expected: &[AttesterSlashing],
    current_epoch: u64,
) -> Slasher<E> {
    let slasher = ctx.open::<E>(ctx.config());
    match driver {
        Driver::Individual => {
            for a in attestations {
                slasher.accept_attestation(a.clone());
                slasher.process_queued(current_epoch).expect("process");
            }
        }
        Driver::Batch => {
            for a in attestations {
                slasher.accept_attestation(a.clone());
            }
        }
        Driver::Parallel => std::thread::scope(|s| {
            for a in attestations {
                let slasher = &slasher;
                s.spawn(move || {
                    slasher.accept_attestation(a.clone());
                    slasher.process_queued(current_epoch).expect("process");
                });
            }
        }),
    }
    slasher
        .process_queued(current_epoch)
        .expect("final process");
    let found = slasher.get_attester_slashings();
    let expected: HashSet<AttesterSlashing> = expected.iter().cloned().collect();
    assert_eq!(
        found, expected,
        "{}: slashings at epoch {current_epoch} ({driver:?})",
        ctx.backend
    );
    slasher.prune_database(current_epoch).expect("prune");
    slasher
}

fn individual<E: Environment>(
    ctx: &TestCtx,
    attestations: &[IndexedAttestation],
    expected: &[AttesterSlashing],
    epochs: &[u64],
) {
    for &epoch in epochs {
        run_case::<E>(ctx, Driver::Individual, attestations, expected, epoch);
    }
}

fn double_vote_single_val<E: Environment>(ctx: &TestCtx) {
    let a = att(&[99], 0, 1, 0);
    let b = att(&[99], 0, 1, 1);
    individual::<E>(
        ctx,
        &[a.clone(), b.clone()],
        &[slashing(&a, &b)],
        &[1, 1000],
    );
}

fn double_vote_multi_vals<E: Environment>(ctx: &TestCtx) {
    let a = att(&[0, 1, 2], 0, 1, 0);
    let b = att(&[0, 1, 2], 0, 1, 1);
    individual::<E>(
        ctx,
        &[a.clone(), b.clone()],
        &[slashing(&a, &b)],
        &[1, 1000],
    );
}

fn double_vote_some_vals<E: Environment>(ctx: &TestCtx) {
    let a = att(&[0, 1, 2, 3, 4, 5, 6], 0, 1, 0);
    let b = att(&[0, 2, 4, 6], 0, 1, 1);
    individual::<E>(
        ctx,
        &[a.clone(), b.clone()],
        &[slashing(&a, &b)],
        &[1, 1000],
    );
}

fn double_vote_some_vals_repeat<E: Environment>(ctx: &TestCtx) {
    let a = att(&[0, 1, 2, 3, 4, 5, 6], 0, 1, 0);
    let b = att(&[0, 2, 4, 6], 0, 1, 1);
    let c = att(&[1, 3, 5], 0, 1, 0);
    individual::<E>(
        ctx,
        &[a.clone(), b.clone(), c],
        &[slashing(&a, &b)],
        &[1, 1000],
    );
}

fn no_double_vote_same_target<E: Environment>(ctx: &TestCtx) {
    let a = att(&[0, 1, 2, 3, 4, 5, 6], 0, 1, 0);
    let b = att(&[0, 1, 2, 3, 4, 5, 7, 8], 0, 1, 0);
    individual::<E>(ctx, &[a, b], &[], &[1, 1000]);
}

fn no_double_vote_distinct_vals<E: Environment>(ctx: &TestCtx) {
    let a = att(&[0, 1, 2, 3], 0, 1, 0);
    let b = att(&[4, 5, 6, 7], 0, 1, 1);
    individual::<E>(ctx, &[a, b], &[], &[1, 1000]);
}

fn no_double_vote_repeated<E: Environment>(ctx: &TestCtx) {
    let a = att(&[0, 1, 2, 3, 4], 0, 1, 0);
    let atts = [a.clone(), a];
    for driver in [Driver::Individual, Driver::Batch, Driver::Parallel] {
        run_case::<E>(ctx, driver, &atts, &[], 1);
    }
}

fn surrounds_existing_single_val_single_chunk<E: Environment>(ctx: &TestCtx) {
    let existing = att(&[0], 1, 2, 0);
    let new = att(&[0], 0, 3, 0);
    individual::<E>(
        ctx,
        &[existing.clone(), new.clone()],
        &[slashing(&new, &existing)],
        &[3],
    );
}

fn surrounds_existing_multi_vals_single_chunk<E: Environment>(ctx: &TestCtx) {
    let validators = [0, 16, 1024, 300_000, 300_001];
    let existing = att(&validators, 1, 2, 0);
    let new = att(&validators, 0, 3, 0);
    individual::<E>(
        ctx,
        &[existing.clone(), new.clone()],
        &[slashing(&new, &existing)],
        &[3],
    );
}

fn surrounds_existing_many_chunks<E: Environment>(ctx: &TestCtx) {
    let c = 16;
    let existing = att(&[0], 3 * c, 3 * c + 1, 0);
    let new = att(&[0], 0, 3 * c + 2, 0);
    individual::<E>(
        ctx,
        &[existing.clone(), new.clone()],
        &[slashing(&new, &existing)],
        &[4 * c],
    );
}

fn surrounded_by_single_val_single_chunk<E: Environment>(ctx: &TestCtx) {
    let existing = att(&[0], 0, 15, 0);
    let new = att(&[0], 1, 14, 0);
    individual::<E>(
        ctx,
        &[existing.clone(), new.clone()],
        &[slashing(&existing, &new)],
        &[15],
    );
}

fn surrounded_by_single_val_multi_chunk<E: Environment>(ctx: &TestCtx) {
    let c = 16;
    let existing = att(&[0], 0, 3 * c, 0);
    let new = att(&[0], c, c + 1, 0);
    individual::<E>(
        ctx,
        &[existing.clone(), new.clone()],
        &[slashing(&existing, &new)],
        &[3 * c, 4 * c],
    );
}

/// In one batch the pair is ordered by the attestations' data hashes (`docs/background.md` §1.4
/// step 5), so only the slashed validators are compared here, not the order inside the slashing.
fn double_vote_in_one_batch<E: Environment>(ctx: &TestCtx) {
    let a = att(&[0, 1, 2], 0, 1, 0);
    let b = att(&[1, 2, 3], 0, 1, 1);
    let slasher = ctx.open::<E>(ctx.config());
    slasher.accept_attestation(a.clone());
    slasher.accept_attestation(b.clone());
    let stats = slasher.process_queued(1).expect("process");
    assert_eq!(stats.attestation_stats.num_stored, 2);
    let found = slasher.get_attester_slashings();
    assert_eq!(found.len(), 1);
    assert!(found.contains(&slashing(&a, &b)) || found.contains(&slashing(&b, &a)));
    assert_eq!(stats.attestation_stats.num_double_votes, 1);
}

per_backend!(
    double_vote_single_val,
    double_vote_multi_vals,
    double_vote_some_vals,
    double_vote_some_vals_repeat,
    no_double_vote_same_target,
    no_double_vote_distinct_vals,
    no_double_vote_repeated,
    surrounds_existing_single_val_single_chunk,
    surrounds_existing_multi_vals_single_chunk,
    surrounds_existing_many_chunks,
    surrounded_by_single_val_single_chunk,
    surrounded_by_single_val_multi_chunk,
    double_vote_in_one_batch,
);
