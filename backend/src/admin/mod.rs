//! What the operator's tool (`butter`, crate `butter-tools` in `tools/`) needs from the engine,
//! in the engine's own terms (design.md §9):
//!
//! - [`Snapshot`]: the newest committed generation of a database, opened read-only beside a
//!   live writer (no lock taken, nothing written): its tables, a full verification of every
//!   segment, per-table statistics and ordered scans.
//! - [`inspect_dir`]: what the directory holds (generations, `live/`, merge outputs, the lock's
//!   holder, the filesystem's usage).
//! - [`NewCopy`]: a new database made from a generation by btrfs snapshots (instant, no data
//!   copied, no root needed), with its own identity; [`backup`] puts the two together.
//! - [`remove_database`]: deletes a database and its read-only snapshots, refusing a directory
//!   that is not one or that a process has open.

mod copy;
mod held;
mod names;
mod remove;
mod snapshot;

pub use copy::{backup, prepare_backup, CopyInfo, NewCopy};
pub use held::shared_reason;
pub use names::{INCOMPLETE_MARKER, RECEIVE_DIR, SCRATCH_DB, STAGING_SUBVOLUME};
pub use remove::{remove_database, Removed};
pub use snapshot::{
    database_bytes, inspect_dir, DirInfo, FsUsage, GenerationFile, SegmentInfo, Snapshot,
    TableInfo, TableStats, Verified,
};
