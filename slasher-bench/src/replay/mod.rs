//! `slasher-bench replay`: replay a fixture through the slasher on every backend and write a
//! report (what it reproduces and why: `docs/background.md` §1.4, §1.5 and §2.6).
//!
//! For each backend in turn the parent process re-executes itself as a child
//! (`slasher-bench replay --child-result FILE ...`) so that peak RSS, `/proc/self/io` counters and
//! allocator state belong to one backend alone. The child opens a fresh database with the
//! backend's concrete environment type (monomorphised through [`BackendVisitor`](slasher_adapters::BackendVisitor)), then streams
//! the fixture one batch at a time:
//!
//! 1. queue the batch's headers and attestations (hashing happens here, outside the timing, as
//!    in Lighthouse where it happens on the gossip threads);
//! 2. `process_queued(current_epoch)`: one write transaction;
//! 3. `prune_database(current_epoch)`: a second write transaction;
//! 4. record the wall time of 2–3, the commit times from `BatchStats`/`PruneStats`, the
//!    database size (sum of `filenames()` sizes), bytes written and the slashings found.
//!
//! Before the first batch the parent checks every directory it will use: `--out` and each
//! backend's `--db-dir` must exist or be creatable and be writable, none may be on tmpfs or ramfs,
//! and a backend that needs a filesystem ([`DatabaseBackend::required_filesystem`](slasher_adapters::DatabaseBackend::required_filesystem)) must be on
//! it. It then checks the
//! fixture once (which also puts it in the page cache for every backend alike), merges the
//! children's results, runs the correctness gate (every backend must find the same slashings in
//! every batch) and writes `report.json`, `batches.csv`, `report.md` and the charts.
//!
//! Interruptions ([`crate::system::interrupt`]): on SIGINT or SIGTERM the parent forwards the signal to
//! its child, the child finishes its current batch, removes its database (read-only snapshots
//! included) and hands back the batches done; the parent writes the report of those batches,
//! marked interrupted, and exits non-zero ([`Interrupted`]). A child dies with its parent
//! (parent-death signal). Leftovers of a run killed outright are removed with
//! `slasher-bench clean` ([`crate::system::clean`]). A child that dies without a result (killed by the
//! kernel's OOM killer, which the report then names, or failing) still leaves the batches it
//! finished, which it streams as it goes: the report keeps them as a partial row
//! (`partial.rs`).
//!
//! Beside the replay: [`fill`] (a database in the state of a long chain, `--fill-epochs` and
//! `slasher-bench fill`), [`soak`] (weeks of chain in one run) and [`client`] (a replay through
//! Lighthouse's own slasher, imported as a row).

mod args;
mod child;
pub mod client;
mod dirs;
pub mod fill;
mod partial;
mod run;
mod run_info;
mod settings;
pub mod soak;
mod summary;
#[cfg(test)]
mod tests;

pub use self::args::ReplayArgs;
pub use self::run::{run, run_with_exe, Interrupted};
pub use self::settings::SlasherSettings;
pub(crate) use self::settings::SECONDS_PER_SLOT;
pub use self::summary::BatchSlashings;
pub(crate) use self::summary::*;
