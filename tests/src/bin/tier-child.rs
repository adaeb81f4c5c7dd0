//! The child process of the reliability tiers: `tier-child MODE`, configured by environment
//! variables set by the parent test. It prints `START i` before and `ACK i` after each commit
//! (the oracle's acknowledgements, `docs/reliability.md` §1) and is killed, cut off from its
//! disk or left to finish by the parent.
//!
//! Modes: `workload` (butter_db, the seeded workload: power-loss and disk-error tiers),
//! `adapters` (the same through the slasher adapters), `crash` (the process-kill tier's
//! counter workload), `lock` (try to open `LOCK_CHILD_DB`; print LOCKED, OPENED or OTHER).

use std::path::PathBuf;

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    match mode.as_str() {
        "workload" => butter_tests::power::child_main(),
        "adapters" => butter_tests::adapter_workload::child_main(),
        "crash" => butter_tests::crash_workload::child_main(),
        "lock" => {
            let db = std::env::var_os("LOCK_CHILD_DB").expect("LOCK_CHILD_DB");
            match butter_db::Env::open_path(PathBuf::from(db)) {
                Err(butter_db::Error::Locked { .. }) => println!("LOCKED"),
                Err(e) => println!("OTHER {e:?}"),
                Ok(_) => println!("OPENED"),
            }
        }
        other => {
            eprintln!("tier-child: unknown mode {other:?} (workload, adapters, crash, lock)");
            std::process::exit(2);
        }
    }
}
