//! The workload oracle run through the slasher storage interface, so the kill and power-loss
//! tiers can hold LMDB, MDBX and redb to the same standard as butter_db.
//!
//! The workload's four tables are stored in four of the nine slasher tables ([`TABLE_MAP`]);
//! the adapters themselves never write to any table (only the slasher logic, which is not used
//! here, writes `metadata`, and that one is left out). One workload transaction is one
//! read-write transaction: its puts and deletes in order, then `commit`. Creating a table is a
//! no-op, because all nine tables exist from the first open. To make a state read back
//! comparable with the model, a workload table is included when it holds something or when the
//! transaction named by the marker has created it; the five unmapped tables are included only
//! when they hold something (which is always wrong).

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use slasher_adapters::tables::{
    ATTESTERS_DB, CURRENT_EPOCHS_DB, MIN_TARGETS_DB, PROPOSERS_DB, TABLE_NAMES,
};
use slasher_adapters::{
    with_backend, BackendConfig, BackendVisitor, Cursor, DatabaseBackend, Durability, Environment,
    Error, OpenDatabases, RwTransaction,
};

use crate::workload::{marker_of, Model, Txn, Workload, TABLES};

/// Workload table → the slasher table that stores it.
pub const TABLE_MAP: [(&str, &str); 4] = [
    (crate::workload::META, CURRENT_EPOCHS_DB),
    ("alpha", ATTESTERS_DB),
    ("beta", MIN_TARGETS_DB),
    ("gamma", PROPOSERS_DB),
];

/// The backends these tiers run against (butter_db has its own tiers).
pub const BACKENDS: [DatabaseBackend; 3] = [
    DatabaseBackend::Lmdb,
    DatabaseBackend::Mdbx,
    DatabaseBackend::Redb,
];

/// `max_db_size_mbs` for every store: LMDB's map size and MDBX's upper geometry (both
/// virtual until written; the power-loss image is only 256 MiB).
pub const MAX_DB_SIZE_MBS: usize = 1024;

/// Environment variable naming the backend of a workload child (`lmdb`, `mdbx`, `redb`).
pub const CHILD_BACKEND: &str = "CHILD_BACKEND";

/// How [`verify_recovered`]'s message starts when the store does not open at all.
pub const REOPEN_FAILED: &str = "reopen failed";

/// A store the workload runs on, whichever backend is behind it.
pub trait WorkloadStore: std::fmt::Debug {
    /// Runs one workload transaction in one read-write transaction and commits it.
    ///
    /// # Errors
    /// Whatever the backend reports.
    fn apply(&self, txn: &Txn) -> Result<(), Error>;

    /// Everything the store holds, shaped like the model (see the module documentation). Read
    /// in one read-write transaction that is dropped (aborted) afterwards.
    ///
    /// # Errors
    /// Whatever the backend reports.
    fn state(&self) -> Result<Model, Error>;
}

/// One open backend and its nine tables.
#[derive(Debug)]
pub struct AdapterStore<E: Environment> {
    env: E,
    dbs: OpenDatabases<E::Database>,
}

impl<E: Environment> AdapterStore<E> {
    /// Opens (creating it and its directory if needed) the store in `dir`, durable commits.
    ///
    /// # Errors
    /// Creating the directory, opening the backend or its tables.
    pub fn open(dir: &Path) -> Result<Self, Error> {
        std::fs::create_dir_all(dir).map_err(|source| Error::DatabaseIOError {
            path: dir.to_path_buf(),
            source,
        })?;
        let config = BackendConfig {
            max_db_size_mbs: MAX_DB_SIZE_MBS,
            durability: Durability::Immediate,
            ..BackendConfig::new(dir)
        };
        let env = E::open(&config)?;
        if !env.durable() {
            return Err(Error::Other(format!("{} opened non-durable", E::NAME)));
        }
        let dbs = env.create_databases()?;
        Ok(Self { env, dbs })
    }

    /// The handle of a slasher table, by name.
    fn handle(&self, slasher_table: &str) -> Result<E::Database, Error> {
        TABLE_NAMES
            .iter()
            .position(|n| *n == slasher_table)
            .and_then(|i| self.dbs.all().get(i).copied())
            .ok_or_else(|| Error::Other(format!("no slasher table {slasher_table}")))
    }

    /// The handle storing a workload table.
    fn workload_handle(&self, table: &str) -> Result<E::Database, Error> {
        self.handle(slasher_table(table)?)
    }
}

impl<E: Environment> WorkloadStore for AdapterStore<E> {
    fn apply(&self, txn: &Txn) -> Result<(), Error> {
        let mut w = self.env.begin_rw_txn()?;
        for op in &txn.ops {
            let db = self.workload_handle(op.table)?;
            match &op.value {
                Some(v) => w.put(db, &op.key, v)?,
                None => w.del(db, &op.key)?,
            }
        }
        w.commit()
    }

    fn state(&self) -> Result<Model, Error> {
        let mut txn = self.env.begin_rw_txn()?;
        let mut raw = Model::new();
        for name in TABLE_NAMES {
            let contents = read_table(&mut txn, self.handle(name)?)?;
            let label = TABLE_MAP
                .iter()
                .find(|(_, slasher)| *slasher == name)
                .map_or(name, |(workload, _)| workload);
            raw.insert(label.to_string(), contents);
        }
        // Dropping the transaction aborts it; it wrote nothing.
        drop(txn);
        Ok(comparable(raw))
    }
}

/// The slasher table storing workload table `table`.
///
/// # Errors
/// A table the mapping does not know.
pub fn slasher_table(table: &str) -> Result<&'static str, Error> {
    TABLE_MAP
        .iter()
        .find(|(w, _)| *w == table)
        .map(|(_, s)| *s)
        .ok_or_else(|| Error::Other(format!("workload table {table} has no slasher table")))
}

/// Every entry of one table, walked with a cursor.
fn read_table<T: RwTransaction>(
    txn: &mut T,
    db: T::Database,
) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, Error> {
    let mut cursor = txn.cursor(db)?;
    let mut entries = BTreeMap::new();
    let mut key = cursor.first_key()?;
    while let Some(k) = key {
        let (current, value) = cursor.get_current()?.ok_or(Error::MissingKey)?;
        if current != k {
            return Err(Error::Other(format!(
                "cursor moved to {:?} but its current entry is {:?}",
                String::from_utf8_lossy(&k),
                String::from_utf8_lossy(&current)
            )));
        }
        entries.insert(current, value);
        key = cursor.next_key()?;
    }
    Ok(entries)
}

/// Drops the empty tables the model would not have: a workload table the marker's transaction
/// has not created yet, and every empty table outside the mapping.
fn comparable(mut raw: Model) -> Model {
    // A malformed marker keeps every mapped table; the oracle then reports the marker.
    let j = marker_of(&raw).unwrap_or(u64::MAX);
    raw.retain(|name, contents| {
        !contents.is_empty() || TABLES.iter().any(|(t, at)| t == name && *at <= j)
    });
    raw
}

/// Opens a store with the concrete environment type of the backend chosen at run time.
#[derive(Debug)]
struct Opener<'a>(&'a Path);

impl BackendVisitor for Opener<'_> {
    type Output = Result<Box<dyn WorkloadStore>, Error>;

    fn visit<E: Environment>(self) -> Self::Output {
        Ok(Box::new(AdapterStore::<E>::open(self.0)?))
    }
}

/// Opens (creating if needed) the `backend` store in `dir`.
///
/// # Errors
/// The backend is not compiled in, or opening fails.
pub fn open_store(backend: DatabaseBackend, dir: &Path) -> Result<Box<dyn WorkloadStore>, Error> {
    with_backend(backend, Opener(dir))?
}

/// The oracle on a reopened store: its state must be `model(j)` for the `j` its marker names,
/// with `acked <= j <= started`. Returns `j`.
///
/// # Errors
/// The violation, or a read error, as text.
pub fn check_store(
    store: &dyn WorkloadStore,
    wl: &Workload,
    acked: u64,
    started: u64,
) -> Result<u64, String> {
    let state = store
        .state()
        .map_err(|e| format!("read after reopen: {e}"))?;
    wl.check(&state, acked, started)
}

/// Reopens the `backend` store in `dir`, applies the oracle, then commits transaction `j + 1`
/// (when the workload has one) and checks the state is `model(j + 1)`. Returns `j`.
///
/// # Errors
/// A store that does not open, the oracle's violation, or a failed extra commit, as text.
pub fn verify_recovered(
    backend: DatabaseBackend,
    dir: &Path,
    wl: &Workload,
    acked: u64,
    started: u64,
) -> Result<u64, String> {
    let store = open_store(backend, dir).map_err(|e| format!("{REOPEN_FAILED}: {e}"))?;
    let j = check_store(store.as_ref(), wl, acked, started)?;
    if j < wl.len() {
        store
            .apply(wl.txn(j + 1))
            .map_err(|e| format!("commit {} after recovery: {e}", j + 1))?;
        let state = store.state().map_err(|e| format!("read: {e}"))?;
        if &state != wl.model(j + 1) {
            return Err(format!("state after the extra commit {} is wrong", j + 1));
        }
    }
    Ok(j)
}

/// The body of an adapter workload child (`tier-child adapters`).
///
/// Opens the `CHILD_BACKEND` store in `CHILD_DB`, reads the marker j it holds, and commits
/// transactions j+1 ..= j+`CHILD_TXNS` of the workload seeded by `CHILD_SEED`, printing
/// `START i` before and `ACK i` after each commit (with `CHILD_ACK_EARLY=1`, a deliberately
/// broken acknowledgement before the commit). On an error it prints `ERR i <error>` and
/// exits with status 1; after the last transaction it closes the store and exits with 0.
pub fn child_main() {
    let name = std::env::var(CHILD_BACKEND).expect("CHILD_BACKEND");
    let backend = DatabaseBackend::from_str(&name).expect("CHILD_BACKEND names a backend");
    let db = std::env::var_os("CHILD_DB").expect("CHILD_DB");
    let var = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let seed = var("CHILD_SEED").expect("CHILD_SEED");
    let count = var("CHILD_TXNS").expect("CHILD_TXNS");
    let early = std::env::var("CHILD_ACK_EARLY").is_ok_and(|v| v == "1");
    let store = open_store(backend, Path::new(&db)).unwrap_or_else(|e| fail(0, &e));
    let state = store.state().unwrap_or_else(|e| fail(0, &e));
    let j = marker_of(&state).unwrap_or_else(|e| fail(0, &e));
    let wl = Workload::new(seed, j + count);
    for i in j + 1..=j + count {
        say(&format!("START {i}"));
        if early {
            say(&format!("ACK {i}"));
        }
        if let Err(e) = store.apply(wl.txn(i)) {
            fail(i, &e);
        }
        if !early {
            say(&format!("ACK {i}"));
        }
    }
    drop(store);
    std::process::exit(0);
}

/// Prints a line and flushes it into the pipe at once (the parent may kill us next).
fn say(line: &str) {
    println!("{line}");
    std::io::Write::flush(&mut std::io::stdout()).expect("stdout");
}

/// Reports the error of transaction `i` and exits with status 1.
fn fail(i: u64, e: &dyn std::fmt::Display) -> ! {
    say(&format!("ERR {i} {e}"));
    std::process::exit(1);
}
