//! The names the `butter` tool gives its own entries in a database directory, shared by the
//! copy that makes them, the removal that deletes them and the inspection that reports them.

use crate::root;

/// Marks a directory the `butter` tool is making into a database copy, or removing: the
/// engine does not open it (it has no `butter.id` while the marker matters), and
/// [`super::remove_database`] removes it.
pub const INCOMPLETE_MARKER: &str = root::INCOMPLETE_FILE;
/// The writable snapshot a copy is prepared in.
pub const STAGING_SUBVOLUME: &str = "butter.staging";
/// The subvolume `butter restore` receives `btrfs send` streams in (a plain directory in
/// versions before `btrfs receive` ran in a mount namespace of its own; removed either way).
pub const RECEIVE_DIR: &str = "butter.receive";
/// Where a compacting copy builds its new database (with the engine's own writer) before its
/// newest generation becomes the copy's; removed with the copy.
pub const SCRATCH_DB: &str = "butter.scratch";
