//! The engine's test hooks (feature `testing`; without it they do nothing): named fail
//! points that abort the process, and the broken-acknowledgement mode the durability tests
//! must catch. Both are read from the process environment.

/// Test-only: acknowledge commits before their snapshot exists (the snapshot is taken at the
/// start of the next commit). Deliberately breaks durability so the power-loss and kill tests
/// can prove they catch a store that acknowledges too early. Only with feature `testing`.
pub(super) fn broken_ack_before_snapshot() -> bool {
    cfg!(feature = "testing") && std::env::var_os("BUTTER_BROKEN_ACK_BEFORE_SNAPSHOT").is_some()
}

pub(super) fn fail_point(name: &str) {
    #[cfg(feature = "testing")]
    {
        if std::env::var("BUTTER_FAILPOINT").is_ok_and(|v| v == name) {
            eprintln!("butter_db: fail point {name} reached, aborting");
            std::process::abort();
        }
    }
    let _ = name;
}
