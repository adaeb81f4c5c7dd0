//! The slasher: Lighthouse's batch logic over the storage interface.

pub mod types;
