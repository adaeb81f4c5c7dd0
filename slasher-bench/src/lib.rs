//! `slasher-bench` as a library: the replay fixture format ([`fixture`]), the committee shuffle
//! ([`shuffle`]), and the producers of fixtures: the Beacon API importer ([`import`]), the live
//! recorder ([`record`]) and the synthetic generator ([`generate`]).
//!
//! The replay engine reads fixtures with [`fixture::FixtureReader`], which yields one
//! [`fixture::Batch`] at a time.
#![warn(missing_docs)]

pub mod beacon_api;
pub mod clean;
pub mod client;
pub mod environment;
pub mod errors;
pub mod fill;
pub mod fixture;
pub mod generate;
pub mod import;
pub mod inject;
pub mod interrupt;
pub mod measure;
pub mod migrate;
pub mod outdir;
pub mod record;
pub mod replay;
pub mod report;
pub mod shuffle;
pub mod soak;

/// `slasher-bench <version>`, recorded in manifests.
pub const TOOL: &str = concat!("slasher-bench ", env!("CARGO_PKG_VERSION"));
