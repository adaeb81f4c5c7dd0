//! Lighthouse's proposer-slashing scenarios (`docs/background.md` §1.7), on every compiled backend.

mod slasher_support;

use slasher_adapters::backend::Environment;
use slasher_adapters::slasher::types::SLOTS_PER_EPOCH;
use slasher_adapters::slasher::ProposerSlashing;
use slasher_support::{block, TestCtx};

fn empty_pruning<E: Environment>(ctx: &TestCtx) {
    let slasher = ctx.open::<E>(ctx.config());
    let stats = slasher.prune_database(0).expect("prune empty at 0");
    assert_eq!(
        (stats.num_proposers_deleted, stats.num_attestations_deleted),
        (0, 0)
    );
    slasher.prune_database(10_000).expect("prune empty later");
}

fn double_proposal<E: Environment>(ctx: &TestCtx) {
    let slasher = ctx.open::<E>(ctx.config());
    let first = block(1, 7, 0);
    let same = block(1, 7, 0);
    let other = block(1, 7, 1);
    let unrelated = block(1, 8, 1);
    slasher.accept_block_header(first);
    slasher.accept_block_header(same);
    let stats = slasher.process_queued(0).expect("process");
    assert_eq!(
        stats.block_stats.num_processed, 1,
        "duplicates are queued once"
    );
    assert_eq!(stats.block_stats.num_stored, 1);
    assert!(slasher.get_proposer_slashings().is_empty());

    slasher.accept_block_header(same);
    slasher.accept_block_header(other);
    slasher.accept_block_header(unrelated);
    let stats = slasher.process_queued(0).expect("process");
    assert_eq!(stats.block_stats.num_processed, 3);
    assert_eq!(stats.block_stats.num_stored, 1);
    assert_eq!(stats.block_stats.num_slashings, 1);
    let found = slasher.get_proposer_slashings();
    let expected = ProposerSlashing {
        signed_header_1: first,
        signed_header_2: other,
    };
    assert_eq!(found.into_iter().collect::<Vec<_>>(), vec![expected]);
    assert!(
        slasher.get_proposer_slashings().is_empty(),
        "slashings are drained"
    );
}

/// With H = 2 at epoch 4, pruning keeps slots ≥ 3·32; only the conflicting headers of those
/// (H − 1)·32 + 1 slots are detected afterwards. Exercises the (slot ‖ proposer) big-endian order
/// and `delete_while`.
fn block_pruning<E: Environment>(ctx: &TestCtx) {
    let mut config = ctx.config();
    config.chunk_size = 2;
    config.history_length = 2;
    let h = config.history_length as u64;
    let slasher = ctx.open::<E>(config);
    let current_epoch = 2 * h;
    slasher.prune_database(0).expect("prune empty");
    slasher.prune_database(current_epoch).expect("prune empty");

    let proposer = 100_000;
    let last_slot = current_epoch * SLOTS_PER_EPOCH;
    for slot in 1..=last_slot {
        slasher.accept_block_header(block(slot, proposer, 0));
    }
    slasher.process_queued(current_epoch).expect("process");
    let pruned = slasher.prune_database(current_epoch).expect("prune");
    let min_slot = (current_epoch + 1 - h) * SLOTS_PER_EPOCH;
    assert_eq!(pruned.num_proposers_deleted as u64, min_slot - 1);

    for slot in 1..=last_slot {
        slasher.accept_block_header(block(slot, proposer, 1));
    }
    slasher.process_queued(current_epoch).expect("process");
    let found = slasher.get_proposer_slashings();
    assert_eq!(found.len() as u64, (h - 1) * SLOTS_PER_EPOCH + 1);
    assert!(found
        .iter()
        .all(|s| s.signed_header_1.message.slot / SLOTS_PER_EPOCH > current_epoch - h));
}

per_backend!(empty_pruning, double_proposal, block_pruning);
