//! `slasher-bench`: replay attestation batches through the slasher on every backend.

fn main() {}
