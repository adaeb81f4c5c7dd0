//! The backend conformance suite (feature `test-utils`).
//!
//! Every check is a generic function over `E: Environment` taking a [`FreshDir`], a function
//! that returns a new, empty [`TempDir`] for the store.
//! [`conformance_tests!`](crate::conformance_tests) turns the whole list into one `#[test]` per
//! check for one backend:
//!
//! ```ignore
//! mod conformance {
//!     slasher_adapters::conformance_tests!(
//!         lmdb,
//!         slasher_adapters::lmdb::Environment,
//!         slasher_adapters::conformance::default_temp_dir
//!     );
//! }
//! ```
//!
//! which yields tests named `conformance::lmdb::<check>`. The directory function is up to the
//! caller, so a backend that needs a particular filesystem (butter_db needs btrfs) passes its
//! own; [`default_temp_dir`] uses `BUTTER_TEST_DIR` if set, else the system temp directory.
//!
//! What the checks pin, beyond the trait documentation, so that every backend behaves alike:
//! - after `delete_current`, the cursor stands before the successor of the deleted key: the
//!   next `get_current` or `next_key` returns that successor and moves onto it (LMDB's
//!   behaviour, which Lighthouse's own `delete_while` loops rely on);
//! - cursor `put` leaves the cursor on the key it wrote;
//! - once `next_key` (or `first_key`/`last_key` on an empty table) has returned `None`, there
//!   is no current entry: `get_current` is `None`, `next_key` stays `None`, and
//!   `delete_current`/`delete_while` are
//!   [`Error::CursorUnpositioned`](crate::Error::CursorUnpositioned);
//! - a value of zero bytes is stored and returned as `Some(empty)`, not as "missing".
//!
//! The model-based checks run seeded random operation sequences against a `BTreeMap` model.
//! They print their seed first; `CONFORMANCE_SEED=<n>` replays one.
//!
//! These functions panic (through assertions and `expect`) on any deviation: they are test
//! code.
//!
//! The files, by concern: `store` (the store under test and its directory), `helpers`,
//! `basic`, `cursors`, `delete_while`, `transactions`, `model` (the checks) and `generate` (the
//! macro).

mod basic;
mod cursors;
mod delete_while;
mod generate;
mod helpers;
mod model;
mod store;
mod transactions;

pub use basic::*;
pub use cursors::*;
pub use delete_while::*;
pub use model::*;
pub use store::*;
pub use transactions::*;
