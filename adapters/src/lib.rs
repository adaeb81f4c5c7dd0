//! The slasher storage interface of Lighthouse, with one adapter per engine, and the slasher's
//! batch logic on top of it.
//!
//! # The contract
//!
//! An [`Environment`] is opened from a [`BackendConfig`] (a directory, a size cap for the
//! engines that have one, and a durability). [`Environment::create_databases`] opens the nine
//! tables named in [`tables`] once; the handles are plain `Copy` values valid for the life of
//! the environment.
//!
//! All access goes through one read-write transaction at a time: a second
//! [`Environment::begin_rw_txn`] blocks until the first one is committed or dropped. Dropping a
//! transaction without committing aborts it. Inside a transaction every read sees the
//! transaction's own writes, including `last_key` on a cursor after a `put`. `commit` publishes
//! the writes to all nine tables atomically; with [`Durability::Immediate`] (the default) a
//! commit that returned `Ok` survives power loss.
//!
//! Keys are compared as unsigned bytes, lexicographically, a shorter prefix first. Keys are
//! 1–40 bytes in the slasher, values 0 bytes to about 1 MiB.
//!
//! Cursors start unpositioned. `first_key`/`last_key` position them; `next_key` advances;
//! `delete_current` deletes the entry under the cursor and leaves it on the successor;
//! `delete_while(f)` deletes from the current position while `f(key)` holds and **stops at the
//! first key for which it does not**, returning the deleted values, owned, in key order.
//!
//! # Where we differ from a Lighthouse backend, and why
//!
//! - `del` of a missing key is `Ok` on every backend. Lighthouse's LMDB backend returns
//!   `NotFound` as an error; MDBX and redb return `Ok`. Lighthouse's only caller, pruning,
//!   deletes ids it has just read from another table, so the key always exists there.
//! - redb: table handles are opened once per transaction and cached instead of re-opening the
//!   table on every operation; `delete_while` stops at the first non-match like LMDB (Lighthouse's
//!   redb uses `extract_from_if`, which deletes *every* match to the end of the table and counts
//!   predicate errors as false); predicate errors propagate; `next_key` is exclusive of the
//!   current key. Commits are `Durability::Immediate` unless [`Durability::Eventual`] is asked
//!   for explicitly, and then the environment reports itself non-durable.
//! - `delete_while` on a cursor that was never positioned is [`Error::CursorUnpositioned`] on
//!   every backend (LMDB answers `EINVAL`, redb returns an empty vector).
//! - Keys returned by cursors and values returned by `delete_while` are always owned, on every
//!   backend (Lighthouse fixed the LMDB use-after-mutation bug in PR #6211 the same way).
//! - Static dispatch: each backend is a type implementing [`Environment`]; there is no
//!   `Disabled` variant and no run-time variant-mismatch error. Run-time selection is
//!   [`DatabaseBackend`] plus [`with_backend`].
//! - No `Box::leak`: the slasher owns its environment.
#![warn(missing_docs)]

pub mod backend;
pub mod cleanup;
pub mod config;
pub mod error;
#[cfg(feature = "slasher")]
pub mod slasher;
pub mod stats;
pub mod tables;
pub mod timed;

#[cfg(feature = "butter")]
pub mod butter;
#[cfg(feature = "lmdb")]
pub mod lmdb;
#[cfg(feature = "mdbx")]
pub mod mdbx;
#[cfg(feature = "redb")]
pub mod redb;

#[cfg(feature = "test-utils")]
pub mod conformance;

pub use backend::{Cursor, Environment, Key, RwTransaction, Value};
pub use cleanup::{destroy_database_dir, DatabaseDirGuard};
pub use config::{BackendConfig, DatabaseBackend, Durability, BUTTER_CACHE_MIB_VAR};
pub use error::Error;
pub use stats::{CommitPeaks, CommitTotals, EngineStats};
pub use tables::{OpenDatabases, MAX_NUM_DBS, TABLE_NAMES};

/// Something to run with a backend chosen at run time (see [`with_backend`]).
pub trait BackendVisitor {
    /// What the visit returns.
    type Output;
    /// Called with the concrete environment type of the chosen backend.
    fn visit<E: Environment>(self) -> Self::Output;
}

/// Run `visitor` with the concrete environment type of `backend`.
///
/// # Errors
/// [`Error::BackendNotCompiled`] (naming the cargo feature) if this build lacks the backend.
pub fn with_backend<V: BackendVisitor>(
    backend: DatabaseBackend,
    visitor: V,
) -> Result<V::Output, Error> {
    backend.ensure_compiled()?;
    #[allow(unreachable_patterns)]
    match backend {
        #[cfg(feature = "lmdb")]
        DatabaseBackend::Lmdb => Ok(visitor.visit::<lmdb::Environment>()),
        #[cfg(feature = "mdbx")]
        DatabaseBackend::Mdbx => Ok(visitor.visit::<mdbx::Environment>()),
        #[cfg(feature = "redb")]
        DatabaseBackend::Redb => Ok(visitor.visit::<redb::Environment>()),
        #[cfg(feature = "butter")]
        DatabaseBackend::Butter => Ok(visitor.visit::<butter::Environment>()),
        _ => Err(Error::BackendNotCompiled {
            backend: backend.name(),
            feature: backend.cargo_feature(),
        }),
    }
}
