//! Every filesystem side effect of the engine goes through [`Fs`], so tests can inject faults
//! (fail the N-th operation, stop making anything durable) without touching engine code,
//! including the database directory's creation and the lock file's. Reads (open, read, list)
//! go straight to `std::fs`: they have no side effects.

mod at;
mod btrfs;
#[cfg(any(test, feature = "testing"))]
mod faulty;
mod ops;

pub use at::{is_within, open_dir_at, open_dir_nofollow, replaced_error, FileId};
pub use btrfs::{BtrfsFs, Deletion};
#[cfg(any(test, feature = "testing"))]
pub use faulty::{FaultPlan, FaultTiming, FaultyFs};
pub use ops::Fs;

pub use crate::sys::{
    filesystem_type, is_subvolume_root, open_file_limit, output_in_private_mount, send,
    set_open_file_soft_limit, subvolume_id, validate_subvolume_name, FsType, PRIVATE_MOUNT,
    SUBVOL_NAME_MAX,
};
