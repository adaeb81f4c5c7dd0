// butter_db backend for Lighthouse's slasher.
//
// This file belongs to the butter_db project (integration/lighthouse/butter_impl.rs). It is not
// part of Lighthouse: `scripts/lighthouse.sh` copies it into a Lighthouse checkout as
// `slasher/src/database/butter_impl.rs` and wires it in beside Lighthouse's own backends. It
// forwards every call to `slasher_adapters::butter`, which has the same shape as Lighthouse's
// per-backend modules; the only work done here is converting types at the boundary, and
// registering the allocator's memory-pressure function (`jemalloc_on_memory_pressure`).
#![cfg(feature = "butter")]

use crate::{
    database::{
        interface::{Key, OpenDatabases, Value},
        ATTESTERS_DB, ATTESTERS_MAX_TARGETS_DB, CURRENT_EPOCHS_DB, INDEXED_ATTESTATION_DB,
        INDEXED_ATTESTATION_ID_DB, MAX_NUM_DBS, MAX_TARGETS_DB, METADATA_DB, MIN_TARGETS_DB,
        PROPOSERS_DB,
    },
    Config, Error,
};
use slasher_adapters::{butter, BackendConfig, Environment as _, RwTransaction as _};
use std::{
    borrow::Cow,
    fmt,
    marker::PhantomData,
    path::{Path, PathBuf},
};

/// Lighthouse's table names, in the order `database.rs` declares them. The adapter opens its
/// tables under its own copy of these names (`TABLE_NAMES`); `Environment::new` checks that both
/// hold the same names, and the array types check their count (`MAX_NUM_DBS`) when this file
/// compiles. This is also what uses the names in a build where butter is the only backend.
const LIGHTHOUSE_TABLES: [&str; MAX_NUM_DBS] = [
    METADATA_DB,
    ATTESTERS_DB,
    ATTESTERS_MAX_TARGETS_DB,
    INDEXED_ATTESTATION_DB,
    INDEXED_ATTESTATION_ID_DB,
    MIN_TARGETS_DB,
    MAX_TARGETS_DB,
    CURRENT_EPOCHS_DB,
    PROPOSERS_DB,
];

fn same_tables() -> bool {
    let (mut lighthouse, mut adapter) = (LIGHTHOUSE_TABLES, slasher_adapters::TABLE_NAMES);
    lighthouse.sort_unstable();
    adapter.sort_unstable();
    lighthouse == adapter
}

/// The size of the butter_db database in `path`, for Lighthouse's `slasher_database_size`
/// gauge (re-exported as `slasher::butter_database_size`): the segments and manifest of its
/// newest generation, read from that manifest alone. `None` when `path` holds no butter
/// database or its manifest cannot be read: the gauge then measures the directory as it does
/// for the other backends, whose files sit at its top level while butter's are one level down.
pub fn database_size(path: &Path) -> Option<u64> {
    slasher_adapters::butter::database_size(path).ok().flatten()
}

/// butter_db's memory-pressure function for the beacon node's allocator, which
/// [`Environment::new`] registers (`slasher_adapters::butter::set_on_memory_pressure`) before
/// it opens a store; re-exported as `slasher::butter_on_memory_pressure` for its test.
///
/// The engine calls it with `true` when the process's cgroup holds more anonymous memory than
/// half its limit, and with `false` once it is back under. Freed pages stay with jemalloc for
/// `dirty_decay_ms` (then `muzzy_decay_ms`) before it returns them, and the cgroup counts them
/// all that time. On `true` every arena's two decay times, and `arenas.*_decay_ms` (the times
/// of arenas made later), become 0: an arena whose time is set to 0 purges its unused pages at
/// once and from then on returns pages as they are freed. On `false` they go back to
/// `opt.dirty_decay_ms` and `opt.muzzy_decay_ms`, the process's settings (jemalloc's defaults
/// or what `_RJEM_MALLOC_CONF` says). A setting jemalloc refuses (an arena index not in use)
/// is skipped: this only changes how soon memory is given back. It is the twin of
/// `jemalloc_on_memory_pressure` in the butter_db project's slasher-bench/src/main.rs, written
/// against the jemalloc control crate Lighthouse's malloc_utils uses, which patch.py adds to the
/// slasher crate as `jemalloc_ctl` (jemalloc-ctl 0.5 at Lighthouse stable, tikv-jemalloc-ctl 0.6
/// at unstable; the same safe `Access`/`AsName` API): a second crate that links jemalloc could
/// not be built beside Lighthouse's.
///
/// Lighthouse makes jemalloc its global allocator on every target but Windows, and butter_db
/// runs only on Linux, so in a beacon node this tunes the allocator that holds the memory. In a
/// program whose global allocator is another (the slasher crate's own tests and examples), the
/// jemalloc linked through this crate, under its prefixed symbols, allocates nothing: the
/// function then tunes an idle allocator, which is harmless.
pub fn jemalloc_on_memory_pressure(under: bool) {
    use jemalloc_ctl::{arenas, Access, AsName};
    let Ok(arena_count) = arenas::narenas::read() else {
        return;
    };
    // (the process's setting, the default for new arenas, one arena's setting as a pattern
    // whose index is replaced), for dirty then muzzy pages.
    let settings = [
        (
            &b"opt.dirty_decay_ms\0"[..],
            &b"arenas.dirty_decay_ms\0"[..],
            &b"arena.0.dirty_decay_ms\0"[..],
        ),
        (
            &b"opt.muzzy_decay_ms\0"[..],
            &b"arenas.muzzy_decay_ms\0"[..],
            &b"arena.0.muzzy_decay_ms\0"[..],
        ),
    ];
    for (process, new_arenas, per_arena) in settings {
        let ms: isize = if under {
            0
        } else {
            match Access::read(process.name()) {
                Ok(ms) => ms,
                Err(_) => continue,
            }
        };
        let _: Result<(), _> = Access::<isize>::write(new_arenas.name(), ms);
        let Ok(mut mib) = per_arena.name().mib::<[usize; 3]>() else {
            continue;
        };
        for arena in 0..arena_count as usize {
            mib[1] = arena;
            let _: Result<(), _> = Access::<isize>::write(&mib, ms);
        }
    }
}

/// A butter_db store: a btrfs subvolume per generation under `config.database_path`. Boxed:
/// the store is a few hundred bytes, and Lighthouse's `Environment` enum holds it inline.
#[derive(Debug)]
pub struct Environment(Box<butter::Environment>);

/// One of the nine tables (a plain handle, valid for the life of the environment).
#[derive(Debug)]
pub struct Database<'env>(butter::Database, PhantomData<&'env ()>);

/// The single write transaction; `commit` makes it durable with a read-only snapshot.
#[derive(Debug)]
pub struct RwTransaction<'env>(butter::RwTransaction<'env>);

/// A cursor on one table of the write transaction.
///
/// Lighthouse's cursor has one lifetime (the borrow of the transaction) while the adapter's has
/// two (that borrow and the environment's). A boxed trait object erases the second, which only
/// has to outlive the first.
pub struct Cursor<'txn>(Box<dyn slasher_adapters::Cursor + 'txn>);

impl fmt::Debug for Cursor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("butter_impl::Cursor")
    }
}

impl From<slasher_adapters::Error> for Error {
    fn from(e: slasher_adapters::Error) -> Self {
        Error::DatabaseButterError(e)
    }
}

impl Environment {
    pub fn new(config: &Config) -> Result<Environment, Error> {
        if !same_tables() {
            return Err(Error::DatabaseButterError(slasher_adapters::Error::Other(
                format!(
                    "the slasher's tables {LIGHTHOUSE_TABLES:?} are not the adapter's {:?}",
                    slasher_adapters::TABLE_NAMES
                ),
            )));
        }
        // Before the open, which hands the registered function to the store. The first
        // registration in the process wins, so this registers once, and not at all if the
        // program registered its own function first.
        butter::set_on_memory_pressure(jemalloc_on_memory_pressure);
        let backend_config = BackendConfig {
            max_db_size_mbs: config.max_db_size_mbs,
            ..BackendConfig::new(&config.database_path)
        };
        Ok(Environment(Box::new(butter::Environment::open(
            &backend_config,
        )?)))
    }

    pub fn create_databases(&self) -> Result<OpenDatabases<'_>, Error> {
        let tables = self.0.create_databases()?;
        let wrap =
            |table| crate::database::interface::Database::Butter(Database(table, PhantomData));
        Ok(OpenDatabases {
            indexed_attestation_db: wrap(tables.indexed_attestation_db),
            indexed_attestation_id_db: wrap(tables.indexed_attestation_id_db),
            attesters_db: wrap(tables.attesters_db),
            attesters_max_targets_db: wrap(tables.attesters_max_targets_db),
            min_targets_db: wrap(tables.min_targets_db),
            max_targets_db: wrap(tables.max_targets_db),
            current_epochs_db: wrap(tables.current_epochs_db),
            proposers_db: wrap(tables.proposers_db),
            metadata_db: wrap(tables.metadata_db),
        })
    }

    pub fn begin_rw_txn(&self) -> Result<RwTransaction<'_>, Error> {
        Ok(RwTransaction(self.0.begin_rw_txn()?))
    }

    pub fn filenames(&self, _config: &Config) -> Vec<PathBuf> {
        self.0.filenames()
    }
}

impl<'env> RwTransaction<'env> {
    pub fn get<K: AsRef<[u8]> + ?Sized>(
        &'env self,
        db: &Database<'env>,
        key: &K,
    ) -> Result<Option<Cow<'env, [u8]>>, Error> {
        Ok(self.0.get(db.0, key.as_ref())?)
    }

    pub fn put<K: AsRef<[u8]>, V: AsRef<[u8]>>(
        &mut self,
        db: &Database,
        key: K,
        value: V,
    ) -> Result<(), Error> {
        Ok(self.0.put(db.0, key.as_ref(), value.as_ref())?)
    }

    pub fn del<K: AsRef<[u8]>>(&mut self, db: &Database, key: K) -> Result<(), Error> {
        Ok(self.0.del(db.0, key.as_ref())?)
    }

    pub fn cursor<'a>(&'a mut self, db: &Database) -> Result<Cursor<'a>, Error> {
        Ok(Cursor(Box::new(self.0.cursor(db.0)?)))
    }

    pub fn commit(self) -> Result<(), Error> {
        Ok(self.0.commit()?)
    }
}

impl<'txn> Cursor<'txn> {
    pub fn first_key(&mut self) -> Result<Option<Key<'_>>, Error> {
        Ok(self.0.first_key()?.map(Cow::Owned))
    }

    pub fn last_key(&mut self) -> Result<Option<Key<'txn>>, Error> {
        Ok(self.0.last_key()?.map(Cow::Owned))
    }

    pub fn next_key(&mut self) -> Result<Option<Key<'_>>, Error> {
        Ok(self.0.next_key()?.map(Cow::Owned))
    }

    pub fn delete_current(&mut self) -> Result<(), Error> {
        Ok(self.0.delete_current()?)
    }

    /// Deletes entries from the current one while `f` accepts their keys. An error from `f` is
    /// returned as it is (not folded into a butter_db error).
    pub fn delete_while(
        &mut self,
        f: impl Fn(&[u8]) -> Result<bool, Error>,
    ) -> Result<Vec<Value<'_>>, Error> {
        let mut failure = None;
        let mut predicate = |key: &[u8]| match f(key) {
            Ok(accept) => Ok(accept),
            Err(e) => {
                failure = Some(e);
                Err(slasher_adapters::Error::Other(
                    "the slasher's delete_while predicate failed".into(),
                ))
            }
        };
        let result = self.0.delete_while(&mut predicate);
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(result?.into_iter().map(Cow::Owned).collect())
    }

    pub fn put<K: AsRef<[u8]>, V: AsRef<[u8]>>(&mut self, key: K, value: V) -> Result<(), Error> {
        Ok(self.0.put(key.as_ref(), value.as_ref())?)
    }
}
