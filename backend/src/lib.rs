//! butter_db: a key-value store whose write transactions are made atomic and durable by btrfs
//! subvolume snapshots.
//!
//! The database is a directory on btrfs. The writer works in a writable subvolume `live/`
//! holding immutable sorted segment files and a manifest; a commit writes the transaction's
//! segments and a new manifest, then takes one read-only snapshot `gen-N` of `live/`. Creating
//! that snapshot is a btrfs transaction commit, so it is both the atomic commit point and the
//! durability point: no fsync and no write-ahead log. Recovery opens the newest `gen-N`.
//! See `docs/design.md` for the on-disk layout and the commit protocol.
//!
//! # Caveats
//! - btrfs is required: opening a directory on another filesystem fails with
//!   [`Error::NotBtrfs`].
//! - One writer process per database (an exclusive lock file); one write transaction at a time
//!   inside it.
//! - A long-lived [`ReadTxn`] pins its generation's segments (and keeps their disk space).
//! - No network filesystems.
#![deny(missing_docs)]
// Library code returns errors instead of panicking on bytes it reads or indexes it computes; a
// local `#[expect(.., reason = ..)]` marks the few places whose bounds hold by construction.
// Tests may unwrap and index freely.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

pub mod admin;
pub mod budget;
mod cursor;
mod env;
mod error;
pub mod fs;
#[cfg(test)]
mod fuzz_tests;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod iter;
mod manifest;
mod memkey;
pub mod memory;
mod memtable;
mod root;
mod segment;
mod sys;
mod txn;
mod version;
mod view;

pub use cursor::Cursor;
pub use env::{CommitInfo, Env, EnvBuilder, Merges};
pub use error::{Error, Result};
pub use root::{holds_only_database_remains, lock_held};
pub use txn::{ReadTxn, TableHandle, WriteTxn};
