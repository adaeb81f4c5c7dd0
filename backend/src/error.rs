//! Errors.

use std::path::PathBuf;

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong, by cause.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database directory is not on btrfs.
    #[error(
        "{path} is on {found} (statfs magic {magic:#x}), not btrfs; butter_db needs btrfs for \
         atomic snapshots. Make one with: truncate -s 8G img && mkfs.btrfs -q -f -m single img \
         && mount -o loop,noatime img DIR"
    )]
    NotBtrfs {
        /// The directory.
        path: PathBuf,
        /// Name of the filesystem found.
        found: &'static str,
        /// Its statfs magic number.
        magic: u64,
    },
    /// btrfs refused to create a subvolume or snapshot here.
    #[error("cannot create btrfs subvolumes under {path}: {source}")]
    NotSubvolumeCapable {
        /// The directory.
        path: PathBuf,
        /// What btrfs said.
        #[source]
        source: std::io::Error,
    },
    /// The process may not read or write the database directory.
    #[error("permission denied: {op} {path}: {source}")]
    PermissionDenied {
        /// The operation.
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Another process holds the database's writer lock.
    #[error("database {path} is locked by another process (lock file {lock})")]
    Locked {
        /// The database directory.
        path: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// The filesystem is full. The transaction was not committed; the database stays at its
    /// last commit. Reopen to write again.
    #[error("disk full during {op} {path}")]
    DiskFull {
        /// The operation.
        op: &'static str,
        /// The path.
        path: PathBuf,
    },
    /// Any other I/O error.
    #[error("I/O error during {op} {path}: {source}")]
    Io {
        /// The operation.
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file's checksum does not match its contents.
    #[error(
        "checksum mismatch in {path}: {region}, bytes {offset}..{end} ({len} bytes): expected \
         {expected:#010x}, got {got:#010x}",
        end = .offset.saturating_add(*.len)
    )]
    ChecksumMismatch {
        /// The file.
        path: PathBuf,
        /// What the checksummed region is: `block 3` of a segment, `segment footer`, `segment
        /// index`, `manifest`, `identity file`.
        region: String,
        /// Offset of the checksummed region.
        offset: u64,
        /// Its length in bytes (the checksum included).
        len: u64,
        /// Stored checksum.
        expected: u32,
        /// Computed checksum.
        got: u32,
    },
    /// A file is malformed or truncated.
    #[error("corrupt file {path}: {reason}")]
    Corrupted {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A file was written by an unknown (newer) format version.
    #[error("{path} has format version {found}; this build reads versions up to {supported}")]
    UnsupportedFormatVersion {
        /// The file.
        path: PathBuf,
        /// Version found.
        found: u32,
        /// The newest version this build understands.
        supported: u32,
    },
    /// A table handle from another environment, or a name that is not a table.
    #[error("no table {0:?} in this environment")]
    TableNotFound(String),
    /// A key longer than the format allows.
    #[error("key of {0} bytes is longer than the maximum of 65535")]
    KeyTooLong(usize),
    /// A value too long for the format (4 GiB - 1 bytes at most).
    #[error("value of {0} bytes is longer than the maximum of 4294967294")]
    ValueTooLong(usize),
    /// A commit failed at its commit point: the snapshot ioctl that makes a generation durable
    /// reported an error, and it can do so after the snapshot exists. The transaction may or
    /// may not be durable; reopening the environment opens the newest generation and so
    /// settles it. Every other error from [`crate::WriteTxn::commit`] means "not committed".
    #[error(
        "the commit of generation {generation} failed at its commit point and may or may not \
         be durable (reopen to find out): {source}"
    )]
    CommitOutcomeUnknown {
        /// The generation the commit was creating.
        generation: u64,
        /// What the snapshot ioctl reported.
        #[source]
        source: Box<Error>,
    },
    /// A previous commit failed; writes are refused until the environment is reopened.
    #[error("environment is poisoned by an earlier failed commit; reopen it")]
    Poisoned,
    /// Something under the database directory was not made by this database: a symlink, an
    /// entry of the wrong type, a generation of another database, a file in `compact/` that is
    /// not a merge output, or a database directory without its identity file. Nothing was
    /// changed or deleted.
    #[error("{path} was not made by this butter_db database ({reason}); nothing was changed")]
    ForeignEntry {
        /// The entry.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A table name longer than the manifest can store.
    #[error("table name of {0} bytes is longer than the maximum of 65535")]
    NameTooLong(usize),
    /// A cursor operation needed a current entry.
    #[error("cursor is not positioned on an entry")]
    CursorUnpositioned,
    /// The directory holds no database the `admin` functions may read, copy or remove (no
    /// identity, no committed generation, or entries butter_db does not make). Nothing was
    /// changed.
    #[error("{path} is not a butter_db database: {reason}; nothing was changed")]
    NotADatabase {
        /// The directory.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A copy's destination cannot be used: not empty, inside the database copied, not a
    /// directory, or on another filesystem. Nothing was changed.
    #[error("cannot copy into {path}: {reason}; nothing was changed")]
    BadDestination {
        /// The destination.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A directory given to a command that writes or deletes in it can be written by a user
    /// other than the caller and root (its owner, its group, or everyone without the sticky
    /// bit), who could swap what the command works on. Nothing was changed.
    #[error(
        "{path} is refused: {reason}; another user could swap what this command works on \
         there. Nothing was changed (use a directory only you or root can write: owned by \
         you, chmod go-w, or chmod +t on one of your own)"
    )]
    SharedDirectory {
        /// The directory, as given.
        path: PathBuf,
        /// Who else can write it.
        reason: String,
    },
}

impl Error {
    /// Wrap an I/O error with the operation and path, mapping ENOSPC and EACCES/EPERM to their
    /// own variants.
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let path = path.into();
        match source.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EDQUOT) => Error::DiskFull { op, path },
            Some(libc::EACCES) | Some(libc::EPERM) => Error::PermissionDenied { op, path, source },
            _ => Error::Io { op, path, source },
        }
    }

    /// Whether this is [`Error::DiskFull`], itself or as the cause of
    /// [`Error::CommitOutcomeUnknown`].
    pub fn is_disk_full(&self) -> bool {
        match self {
            Error::DiskFull { .. } => true,
            Error::CommitOutcomeUnknown { source, .. } => source.is_disk_full(),
            _ => false,
        }
    }

    /// A [`Error::ForeignEntry`] for `path`.
    pub(crate) fn foreign(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::ForeignEntry {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// The same error, naming `to` where it named the file `from`: segments are opened through
    /// `live/`, a fresh snapshot of the newest `gen-N`, so damage found in `live/<file>` is
    /// damage to `gen-N/<file>`, the copy that stays.
    pub(crate) fn naming(mut self, from: &std::path::Path, to: &std::path::Path) -> Self {
        match &mut self {
            Error::PermissionDenied { path, .. }
            | Error::DiskFull { path, .. }
            | Error::Io { path, .. }
            | Error::ChecksumMismatch { path, .. }
            | Error::Corrupted { path, .. }
            | Error::UnsupportedFormatVersion { path, .. }
            | Error::ForeignEntry { path, .. }
                if path.as_path() == from =>
            {
                *path = to.to_path_buf();
            }
            _ => {}
        }
        self
    }

    /// The same error, naming paths under `to` where they were under `from`: the admin
    /// functions reach a directory given by the user through its handle
    /// (`/proc/self/fd/N/.`), and their errors name the path the user gave instead.
    pub fn rebased(mut self, from: &std::path::Path, to: &std::path::Path) -> Self {
        let swap = |path: &mut PathBuf| {
            if let Ok(rest) = path.strip_prefix(from) {
                *path = if rest.as_os_str().is_empty() {
                    to.to_path_buf()
                } else {
                    to.join(rest)
                };
            }
        };
        let (from_s, to_s) = (from.display().to_string(), to.display().to_string());
        let swap_text = |text: &mut String| {
            if text.contains(&from_s) {
                *text = text.replace(&from_s, &to_s);
            }
        };
        match &mut self {
            Error::NotBtrfs { path, .. }
            | Error::NotSubvolumeCapable { path, .. }
            | Error::PermissionDenied { path, .. }
            | Error::DiskFull { path, .. }
            | Error::Io { path, .. }
            | Error::ChecksumMismatch { path, .. }
            | Error::UnsupportedFormatVersion { path, .. } => swap(path),
            Error::Locked { path, lock } => {
                swap(path);
                swap(lock);
            }
            Error::Corrupted { path, reason }
            | Error::ForeignEntry { path, reason }
            | Error::NotADatabase { path, reason }
            | Error::BadDestination { path, reason }
            | Error::SharedDirectory { path, reason } => {
                swap(path);
                swap_text(reason);
            }
            Error::CommitOutcomeUnknown { source, .. } => {
                let inner = std::mem::replace(source.as_mut(), Error::Poisoned);
                **source = inner.rebased(from, to);
            }
            _ => {}
        }
        self
    }

    /// A [`Error::Corrupted`] for `path`.
    pub(crate) fn corrupted(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Corrupted {
            path: path.into(),
            reason: reason.into(),
        }
    }
}
