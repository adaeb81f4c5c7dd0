//! The `butter` tool's exit statuses, one per kind of failure, so that a script can tell a
//! damaged database from a busy one without reading the message. Listed in `docs/operator.md`.

use crate::ToolError;

/// Success.
pub const OK: u8 = 0;
/// Any failure not listed below (a bad destination, `btrfs send`/`receive` failing, a malformed
/// dump given to `load`, a missing table, ...).
pub const OTHER: u8 = 1;
/// The command line is wrong (clap's own status for an unknown flag or a missing argument, and
/// a `dump` key bound that is not hex).
pub const USAGE: u8 = 2;
/// The path is not a butter_db database (not a directory, no identity, entries the engine did
/// not make, not on btrfs).
pub const NOT_A_DATABASE: u8 = 3;
/// The database is damaged: a checksum mismatch, a malformed or truncated file, or a format
/// version newer than this build reads.
pub const CORRUPT: u8 = 4;
/// An I/O error: permission denied, disk full, a failing device, a closed output.
pub const IO: u8 = 5;
/// Another process holds the database's writer lock (for the commands that need it:
/// `remove`, `load`).
pub const BUSY: u8 = 6;

impl ToolError {
    /// The exit status this error ends the tool with.
    pub fn exit_code(&self) -> u8 {
        use butter_db::Error as E;
        match self {
            ToolError::Engine(e) => match e {
                E::NotADatabase { .. } | E::ForeignEntry { .. } | E::NotBtrfs { .. } => {
                    NOT_A_DATABASE
                }
                E::ChecksumMismatch { .. }
                | E::Corrupted { .. }
                | E::UnsupportedFormatVersion { .. } => CORRUPT,
                E::Io { .. }
                | E::PermissionDenied { .. }
                | E::DiskFull { .. }
                | E::NotSubvolumeCapable { .. } => IO,
                E::Locked { .. } => BUSY,
                _ => OTHER,
            },
            ToolError::BadHex { .. } => USAGE,
            ToolError::NotADirectory(_) | ToolError::BenchKept(_) | ToolError::NotACopy(_) => {
                NOT_A_DATABASE
            }
            ToolError::BadCopy(_) => CORRUPT,
            ToolError::StreamFile { .. } | ToolError::Output(_) => IO,
            _ => OTHER,
        }
    }
}
