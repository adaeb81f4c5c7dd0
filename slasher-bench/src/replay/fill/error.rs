//! Why a fill failed.

/// An error of `slasher-bench fill`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FillError {
    /// Options that describe no chain.
    #[error("invalid fill options: {0}")]
    Invalid(String),
    /// The database already holds data: a fill writes only into a database it starts.
    #[error("the slasher database is not empty: table `{table}` holds data (a fill only writes a new database)")]
    NotEmpty {
        /// The first table found with an entry.
        table: &'static str,
    },
    /// The slasher's encodings, its in-memory arrays or its storage.
    #[error(transparent)]
    Slasher(#[from] slasher_adapters::slasher::Error),
    /// The storage interface.
    #[error(transparent)]
    Storage(#[from] slasher_adapters::Error),
}
