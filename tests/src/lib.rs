//! Shared helpers for the reliability tiers (`docs/reliability.md`): the workload oracle, child
//! processes, loop devices and mounts, and the FUSE lazy disk that simulates power loss.

pub mod adapter_workload;
pub mod blockdev;
pub mod crash_workload;
pub mod harness;
pub mod lazy_disk;
pub mod power;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod swap;
pub mod workload;
