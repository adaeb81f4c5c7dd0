//! Errors of the storage interface.

/// An error from the storage interface or one of its backends.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An LMDB error.
    #[cfg(feature = "lmdb")]
    #[error("LMDB: {0}")]
    DatabaseLmdbError(#[from] lmdb::Error),
    /// An MDBX error.
    #[cfg(feature = "mdbx")]
    #[error("MDBX: {0}")]
    DatabaseMdbxError(#[from] libmdbx::Error),
    /// A redb error (redb has several error types; all are converted into this one). Boxed
    /// because `redb::Error` is large and would bloat every `Result` of the interface.
    #[cfg(feature = "redb")]
    #[error("redb: {0}")]
    DatabaseRedbError(#[source] Box<redb::Error>),
    /// A butter_db error.
    #[cfg(feature = "butter")]
    #[error("butter_db: {0}")]
    DatabaseButterError(#[from] butter_db::Error),
    /// An I/O error outside any engine (creating the directory, listing files).
    #[error("I/O error on {path}: {source}")]
    DatabaseIOError {
        /// The path involved.
        path: std::path::PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A backend name that no backend has.
    #[error("unknown database backend {0:?}; expected one of lmdb, mdbx, redb, butter")]
    UnknownBackend(String),
    /// The backend exists but this build does not include it.
    #[error("database backend `{backend}` is not compiled in; rebuild with cargo feature `{feature}` (e.g. `--features {feature}`)")]
    BackendNotCompiled {
        /// The backend asked for.
        backend: &'static str,
        /// The cargo feature that enables it.
        feature: &'static str,
    },
    /// An environment variable that configures a backend holds a value it cannot use.
    #[error("{name}={value:?}: expected {expected}")]
    BadEnvironmentVariable {
        /// The variable.
        name: &'static str,
        /// Its value (lossily decoded).
        value: String,
        /// What it should hold.
        expected: &'static str,
    },
    /// A cursor operation needed a current entry and the cursor has none.
    #[error("cursor is not positioned on an entry")]
    CursorUnpositioned,
    /// A backend reported no current entry where it must have one (Lighthouse's `MissingKey`).
    #[error("missing key")]
    MissingKey,
    /// An error raised by a caller's predicate or by the slasher logic on top of the interface.
    #[error("{0}")]
    Other(String),
}

#[cfg(feature = "redb")]
impl From<redb::Error> for Error {
    fn from(e: redb::Error) -> Self {
        Error::DatabaseRedbError(Box::new(e))
    }
}
