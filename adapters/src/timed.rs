//! `Timed<E>`: any backend, with a clock on every storage call.
//!
//! The replay needs to say how much of a batch is the storage engine's and how much is the
//! slasher's own work (decoding tiles, the slashing logic), which is the same CPU for every
//! backend. `Timed<E>` forwards every call of the storage interface to `E` and adds the wall
//! time spent inside it to one counter: `begin_rw_txn`, `get`, `put`, `del`, opening a cursor,
//! every cursor call and `commit`. Opening the environment and the tables is not counted.
//!
//! It also counts the calls. `delete_while` is counted as one call, including the slasher's
//! predicate, which only compares key bytes.
//!
//! The clock is not free: each call reads it twice (`Instant::now()`, about 20 ns each on a KVM
//! guest with the TSC clock source), and part of that lands inside the interval it measures.
//! That part is the same for every backend, so it pulls their ratios towards 1 when calls are
//! cheap. [`clock_cost_ns`] measures it (an empty call timed the same way), so that a report can
//! give the calls, the clock's share and the storage time without it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::backend::{Cursor, Environment, Key, RwTransaction, Value};
use crate::config::BackendConfig;
use crate::error::Error;
use crate::tables::OpenDatabases;

/// A backend whose storage calls are timed; see the module documentation.
#[derive(Debug)]
pub struct Timed<E> {
    inner: E,
    clock: Clock,
}

impl<E> Timed<E> {
    /// The wrapped backend.
    pub fn inner(&self) -> &E {
        &self.inner
    }

    /// Total wall time spent inside storage calls since the environment was opened.
    pub fn storage_time(&self) -> Duration {
        Duration::from_nanos(self.clock.nanos.load(Ordering::Relaxed))
    }

    /// Storage calls made since the environment was opened.
    pub fn storage_calls(&self) -> u64 {
        self.clock.calls.load(Ordering::Relaxed)
    }
}

/// What the clock adds to [`Timed::storage_time`] per call, in nanoseconds, measured now on
/// this thread: the median over 7 rounds of 20,000 empty calls timed exactly as storage calls
/// are. Takes a few milliseconds; call it outside timed work, on the core the storage calls ran
/// on.
pub fn clock_cost_ns() -> f64 {
    const CALLS: u32 = 20_000;
    let clock = Clock::default();
    let mut rounds: Vec<u64> = (0..7)
        .map(|_| {
            let before = clock.nanos.load(Ordering::Relaxed);
            for _ in 0..CALLS {
                clock.time(|| std::hint::black_box(()));
            }
            clock.nanos.load(Ordering::Relaxed) - before
        })
        .collect();
    rounds.sort_unstable();
    rounds[rounds.len() / 2] as f64 / f64::from(CALLS)
}

/// The counters the environment, its transaction and its cursors add to.
#[derive(Debug, Default)]
struct Clock {
    nanos: AtomicU64,
    calls: AtomicU64,
}

impl Clock {
    fn time<T>(&self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        let spent = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.nanos.fetch_add(spent, Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
        out
    }
}

/// The write transaction of a [`Timed`] backend.
#[derive(Debug)]
pub struct TimedTxn<'env, T> {
    inner: T,
    clock: &'env Clock,
}

/// A cursor of a [`TimedTxn`].
#[derive(Debug)]
pub struct TimedCursor<'env, C> {
    inner: C,
    clock: &'env Clock,
}

impl<E: Environment> Environment for Timed<E> {
    const NAME: &'static str = E::NAME;

    type Database = E::Database;

    type RwTransaction<'env> = TimedTxn<'env, E::RwTransaction<'env>>;

    fn open(config: &BackendConfig) -> Result<Self, Error> {
        Ok(Timed {
            inner: E::open(config)?,
            clock: Clock::default(),
        })
    }

    fn create_databases(&self) -> Result<OpenDatabases<Self::Database>, Error> {
        self.inner.create_databases()
    }

    fn begin_rw_txn(&self) -> Result<Self::RwTransaction<'_>, Error> {
        let inner = self.clock.time(|| self.inner.begin_rw_txn())?;
        Ok(TimedTxn {
            inner,
            clock: &self.clock,
        })
    }

    fn filenames(&self) -> Vec<std::path::PathBuf> {
        self.inner.filenames()
    }

    fn durable(&self) -> bool {
        self.inner.durable()
    }

    fn stats(&self) -> Option<&dyn crate::stats::EngineStats> {
        self.inner.stats()
    }
}

impl<'env, T: RwTransaction> RwTransaction for TimedTxn<'env, T> {
    type Database = T::Database;

    type Cursor<'txn>
        = TimedCursor<'env, T::Cursor<'txn>>
    where
        Self: 'txn;

    fn get(&self, db: Self::Database, key: &[u8]) -> Result<Option<Value<'_>>, Error> {
        self.clock.time(|| self.inner.get(db, key))
    }

    fn put(&mut self, db: Self::Database, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let clock = self.clock;
        clock.time(|| self.inner.put(db, key, value))
    }

    fn del(&mut self, db: Self::Database, key: &[u8]) -> Result<(), Error> {
        let clock = self.clock;
        clock.time(|| self.inner.del(db, key))
    }

    fn cursor(&mut self, db: Self::Database) -> Result<Self::Cursor<'_>, Error> {
        let clock = self.clock;
        let inner = clock.time(|| self.inner.cursor(db))?;
        Ok(TimedCursor { inner, clock })
    }

    fn commit(self) -> Result<(), Error> {
        let TimedTxn { inner, clock } = self;
        clock.time(|| inner.commit())
    }
}

impl<C: Cursor> Cursor for TimedCursor<'_, C> {
    fn first_key(&mut self) -> Result<Option<Key>, Error> {
        let clock = self.clock;
        clock.time(|| self.inner.first_key())
    }

    fn last_key(&mut self) -> Result<Option<Key>, Error> {
        let clock = self.clock;
        clock.time(|| self.inner.last_key())
    }

    fn next_key(&mut self) -> Result<Option<Key>, Error> {
        let clock = self.clock;
        clock.time(|| self.inner.next_key())
    }

    fn get_current(&mut self) -> Result<Option<(Key, Vec<u8>)>, Error> {
        let clock = self.clock;
        clock.time(|| self.inner.get_current())
    }

    fn delete_current(&mut self) -> Result<(), Error> {
        let clock = self.clock;
        clock.time(|| self.inner.delete_current())
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        let clock = self.clock;
        clock.time(|| self.inner.put(key, value))
    }

    fn delete_while(
        &mut self,
        f: &mut dyn FnMut(&[u8]) -> Result<bool, Error>,
    ) -> Result<Vec<Vec<u8>>, Error> {
        let clock = self.clock;
        clock.time(|| self.inner.delete_while(f))
    }
}

#[cfg(all(test, feature = "lmdb"))]
mod tests {
    use super::*;
    use crate::lmdb;

    fn open(dir: &std::path::Path) -> Timed<lmdb::Environment> {
        let config = BackendConfig {
            max_db_size_mbs: 64,
            ..BackendConfig::new(dir)
        };
        Timed::<lmdb::Environment>::open(&config).expect("open")
    }

    #[test]
    fn storage_calls_are_counted_and_open_is_not() {
        let dir = tempfile::tempdir().expect("temp dir");
        let env = open(dir.path());
        let dbs = env.create_databases().expect("tables");
        assert_eq!(env.storage_time(), Duration::ZERO, "opening was counted");
        assert_eq!(env.storage_calls(), 0, "opening was counted");
        let db = dbs.attesters_db;

        let mut txn = env.begin_rw_txn().expect("txn");
        for i in 0u32..2_000 {
            txn.put(db, &i.to_be_bytes(), &[7u8; 64]).expect("put");
        }
        txn.commit().expect("commit");
        let after_writes = env.storage_time();
        assert!(after_writes > Duration::ZERO, "puts and commit not counted");
        // begin, 2,000 puts, commit.
        assert_eq!(env.storage_calls(), 2_002);

        // Time spent outside storage calls is not counted.
        let txn = env.begin_rw_txn().expect("txn");
        let before_sleep = env.storage_time();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(env.storage_time(), before_sleep, "a sleep was counted");
        assert_eq!(
            txn.get(db, &5u32.to_be_bytes()).expect("get").as_deref(),
            Some(&[7u8; 64][..])
        );
        drop(txn);

        let mut txn = env.begin_rw_txn().expect("txn");
        let before_scan = env.storage_time();
        let mut cursor = txn.cursor(db).expect("cursor");
        let mut n = 0;
        let mut key = cursor.first_key().expect("first");
        while key.is_some() {
            n += 1;
            key = cursor.next_key().expect("next");
        }
        assert_eq!(n, 2_000);
        assert!(env.storage_time() > before_scan, "cursor calls not counted");
        // Two more begins, the get, the cursor, first and 2,000 next.
        assert_eq!(env.storage_calls(), 2_002 + 2 + 1 + 1 + 1 + 2_000);
    }

    #[test]
    fn the_clock_cost_is_measured_not_assumed() {
        // An empty call timed like a storage call costs something, and far less than a
        // microsecond on any machine this runs on; a zero or a huge figure means the
        // measurement is broken.
        let ns = clock_cost_ns();
        assert!(ns > 0.0 && ns < 1_000.0, "clock cost {ns} ns per call");
    }
}
