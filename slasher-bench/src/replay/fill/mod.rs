//! `fill`: bring a slasher database to the state its own code leaves after a long regular chain
//! (Lighthouse's whole history window, every table, the target arrays included) without
//! replaying the chain batch by batch. The chain is [`RegularChain`]; how each table is computed
//! is in [`write`]. `tests/fill_equals_replay.rs` replays a small chain batch by batch, fills the
//! same chain, and compares every table entry by entry.

mod chain;
mod error;
pub mod write;

pub use chain::{ChainWalk, RegularChain, DEFAULT_SEED};
pub use error::FillError;
pub use write::{fill, FillReport, COMMIT_BYTES};
