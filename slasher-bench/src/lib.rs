//! `slasher-bench` as a library, one module per job:
//!
//! - [`fixtures`]: the fixture file and the commands that produce one (import, record,
//!   generate, inject; the Beacon API responses and the committee shuffle they use).
//! - [`replay`]: replaying a fixture through the slasher on every backend (with `fill`, `soak`
//!   and the Lighthouse client's rows).
//! - [`report`]: the report's schema, merging, the correctness gate and its renderings.
//! - [`migrate`]: moving a slasher database from one backend to another.
//! - [`system`]: what a run needs from the machine (filesystems, measurements, output
//!   directories, cleanup, signals).
//! - [`errors`]: how the binary prints an error.
//!
//! The replay reads fixtures with [`fixtures::file::FixtureReader`], which yields one
//! [`fixtures::file::Batch`] at a time.
#![warn(missing_docs)]

pub mod errors;
pub mod fixtures;
pub mod migrate;
pub mod replay;
pub mod report;
pub mod system;

/// `slasher-bench <version>`, recorded in manifests.
pub const TOOL: &str = concat!("slasher-bench ", env!("CARGO_PKG_VERSION"));
