//! The test generator: `conformance_tests!` makes one `#[test]` per check for one backend.

/// Expands to one `#[test]` per conformance check, inside `mod $name`, for the environment
/// type `$env`, with `$fresh` (a `Fn() -> TempDir`, e.g.
/// [`default_temp_dir`](super::default_temp_dir)) providing each store's directory. Invoke it
/// inside a `mod conformance { ... }` so that test names read
/// `conformance::<backend>::<check>`.
#[macro_export]
macro_rules! conformance_tests {
    ($name:ident, $env:ty, $fresh:expr $(,)?) => {
        $crate::conformance_tests!($name, $env, $fresh, available = || true);
    };
    ($name:ident, $env:ty, $fresh:expr, available = $available:expr $(,)?) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $crate::__conformance_test_fns!(
                $env,
                $fresh,
                $available;
                empty_tables_are_empty,
                get_sees_put_in_same_txn,
                last_key_sees_put_in_same_txn,
                first_key_sees_put_in_same_txn,
                del_missing_key_is_ok,
                get_after_del_is_none,
                empty_value_is_not_missing,
                overwrite_grows_and_shrinks_values,
                value_sizes_zero_to_one_mib,
                key_sizes_one_to_forty_bytes,
                keys_sort_bytewise_shorter_prefix_first,
                big_endian_keys_iterate_numerically,
                tables_are_independent,
                lighthouse_open_sequence,
                filenames_exist,
                durable_with_immediate_durability,
                commit_stats_count_each_commit,
                next_key_walks_in_order_then_none,
                next_key_is_exclusive_of_current,
                fresh_cursor_is_unpositioned,
                cursor_on_empty_table,
                delete_current_then_get_current_is_successor,
                next_key_after_delete_current_returns_successor,
                manual_delete_loop_visits_every_key,
                cursor_put_allocates_sequential_ids,
                cursor_put_overwrites,
                delete_while_stops_at_first_false,
                delete_while_returns_values_in_key_order,
                delete_while_values_owned_after_writes,
                delete_while_from_middle,
                delete_while_after_delete_current,
                delete_while_predicate_error_propagates,
                delete_while_prune_and_reset,
                abort_by_drop_discards_all_nine_tables,
                reopen_after_commit_sees_all_nine_tables,
                many_keys_full_scan,
                second_writer_blocks_until_commit,
                second_writer_blocks_until_abort,
                concurrent_writers_are_serialised,
                model_random_seed,
                model_fixed_seed,
            );
        }
    };
}

/// Implementation detail of [`conformance_tests!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_test_fns {
    ($env:ty, $fresh:expr, $available:expr; $($check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                // `$available` returns false (after printing why) when the backend cannot run
                // here, e.g. no btrfs mount outside CI.
                if !($available)() {
                    return;
                }
                $crate::conformance::$check::<$env>(&$fresh);
            }
        )*
    };
}
