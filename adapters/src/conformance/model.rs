//! Model-based checks: seeded random operation sequences against a `BTreeMap` model.

use std::collections::BTreeMap;
use std::fmt::Debug;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::helpers::*;
use super::store::{FreshDir, Store, MODEL_OPS};
use crate::backend::{Cursor, Environment, Key, RwTransaction};
use crate::error::Error;

/// Tables the model exercises (indices into [`OpenDatabases::all`]).
const MODEL_TABLES: [usize; 4] = [0, 2, 7, 8];
/// Key bytes: few, and including both extremes, so keys collide and order edge cases occur.
const KEY_ALPHABET: [u8; 4] = [0x00, 0x01, 0x80, 0xff];

type Map = BTreeMap<Key, Vec<u8>>;

/// The model of a cursor position (see the module docs for the semantics).
#[derive(Debug, Clone, PartialEq, Eq)]
enum ModelPos {
    Fresh,
    On(Key),
    AfterDelete(Key),
    End,
}

#[derive(Debug)]
struct ModelCursor<'a> {
    map: &'a mut Map,
    pos: ModelPos,
}

impl ModelCursor<'_> {
    fn land(&mut self, entry: Option<(Key, Vec<u8>)>) -> Option<(Key, Vec<u8>)> {
        self.pos = match &entry {
            Some((k, _)) => ModelPos::On(k.clone()),
            None => ModelPos::End,
        };
        entry
    }

    fn after(&self, key: &[u8]) -> Option<(Key, Vec<u8>)> {
        use std::ops::Bound;
        self.map
            .range::<[u8], _>((Bound::Excluded(key), Bound::Unbounded))
            .next()
            .map(|(k, v)| (k.clone(), v.clone()))
    }

    fn first_key(&mut self) -> Option<Key> {
        let e = self.map.iter().next().map(|(k, v)| (k.clone(), v.clone()));
        self.land(e).map(|(k, _)| k)
    }

    fn last_key(&mut self) -> Option<Key> {
        let e = self
            .map
            .iter()
            .next_back()
            .map(|(k, v)| (k.clone(), v.clone()));
        self.land(e).map(|(k, _)| k)
    }

    fn next_key(&mut self) -> Result<Option<Key>, Error> {
        let from = match &self.pos {
            ModelPos::Fresh => return Err(Error::CursorUnpositioned),
            ModelPos::End => return Ok(None),
            ModelPos::On(k) | ModelPos::AfterDelete(k) => k.clone(),
        };
        let e = self.after(&from);
        Ok(self.land(e).map(|(k, _)| k))
    }

    fn get_current(&mut self) -> Option<(Key, Vec<u8>)> {
        match self.pos.clone() {
            ModelPos::Fresh | ModelPos::End => None,
            ModelPos::On(k) => {
                let v = self.map.get(&k).cloned().expect("model: cursor key exists");
                Some((k, v))
            }
            ModelPos::AfterDelete(k) => {
                let e = self.after(&k);
                self.land(e)
            }
        }
    }

    fn delete_current(&mut self) -> Result<(), Error> {
        let Some((k, _)) = self.get_current() else {
            return Err(Error::CursorUnpositioned);
        };
        self.map.remove(&k);
        self.pos = ModelPos::AfterDelete(k);
        Ok(())
    }

    fn put(&mut self, key: &[u8], value: &[u8]) {
        self.map.insert(key.to_vec(), value.to_vec());
        self.pos = ModelPos::On(key.to_vec());
    }

    fn delete_while(
        &mut self,
        f: &mut dyn FnMut(&[u8]) -> Result<bool, Error>,
    ) -> Result<Vec<Vec<u8>>, Error> {
        let mut deleted = Vec::new();
        let mut current = self.get_current();
        if current.is_none() {
            return Err(Error::CursorUnpositioned);
        }
        while let Some((k, v)) = current {
            if !f(&k)? {
                break;
            }
            self.delete_current()?;
            deleted.push(v);
            current = self.get_current();
        }
        Ok(deleted)
    }
}

/// How a random `delete_while` predicate decides.
#[derive(Debug, Clone)]
enum Predicate {
    /// `key < bound` (monotone, like Lighthouse's).
    Below(Key),
    /// A scattered, non-monotone subset of keys.
    Scattered(u8),
    /// Always true (Lighthouse's reset).
    All,
    /// True, except an error at this key.
    FailAt(Key),
}

impl Predicate {
    fn decide(&self, key: &[u8]) -> Result<bool, Error> {
        match self {
            Predicate::Below(bound) => Ok(key < bound.as_slice()),
            Predicate::Scattered(salt) => {
                let h = key
                    .iter()
                    .fold(u32::from(*salt), |a, b| a.wrapping_mul(31) ^ u32::from(*b));
                Ok(h % 4 != 0)
            }
            Predicate::All => Ok(true),
            Predicate::FailAt(bad) if key == bad.as_slice() => {
                Err(Error::Other(format!("injected predicate error at {bad:?}")))
            }
            Predicate::FailAt(_) => Ok(true),
        }
    }
}

fn same_outcome<T: PartialEq + Debug>(got: &Result<T, Error>, want: &Result<T, Error>) -> bool {
    match (got, want) {
        (Ok(a), Ok(b)) => a == b,
        (Err(Error::CursorUnpositioned), Err(Error::CursorUnpositioned)) => true,
        (Err(Error::Other(a)), Err(Error::Other(b))) => a == b,
        _ => false,
    }
}

fn random_key(rng: &mut ChaCha8Rng) -> Key {
    let len = if rng.gen_bool(0.6) { 1 } else { 2 };
    (0..len)
        .map(|_| KEY_ALPHABET[rng.gen_range(0..KEY_ALPHABET.len())])
        .collect()
}

fn random_value(rng: &mut ChaCha8Rng) -> Vec<u8> {
    let len = match rng.gen_range(0..40) {
        0..=2 => 0,
        3 => rng.gen_range(2_000..12_000),
        _ => rng.gen_range(1..40),
    };
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

fn random_predicate(rng: &mut ChaCha8Rng) -> Predicate {
    match rng.gen_range(0..4) {
        0 => Predicate::Below(random_key(rng)),
        1 => Predicate::Scattered(rng.gen()),
        2 => Predicate::All,
        _ => Predicate::FailAt(random_key(rng)),
    }
}

/// The seed for a model run: `CONFORMANCE_SEED` if set (decimal or `0x` hex), else `default`.
fn model_seed(default: Option<u64>) -> u64 {
    if let Some(text) = std::env::var_os("CONFORMANCE_SEED") {
        let text = text.to_string_lossy().trim().to_string();
        let parsed = match text.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => text.parse(),
        };
        return parsed.unwrap_or_else(|e| panic!("CONFORMANCE_SEED={text:?} is not a u64: {e}"));
    }
    default.unwrap_or_else(rand::random)
}

/// Outcome of one write transaction in the model run.
enum TxnEnd {
    Commit,
    Abort,
    Reopen { commit_first: bool },
}

struct ModelRun {
    seed: u64,
    op: usize,
    /// The operations of the current cursor session, for failure messages.
    trail: Vec<String>,
}

impl ModelRun {
    fn ctx(&self, what: &str) -> String {
        format!(
            "seed {} (CONFORMANCE_SEED={}), op {}: {what}\ncursor session so far: {:?}",
            self.seed, self.seed, self.op, self.trail
        )
    }
}

fn check_tables<T: RwTransaction>(
    txn: &mut T,
    dbs: &[T::Database],
    model: &[Map],
    run: &ModelRun,
    when: &str,
) {
    for (t, db) in dbs.iter().enumerate() {
        let got = scan(txn, *db);
        let want: Entries = model[t]
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert!(
            got == want,
            "{}",
            run.ctx(&format!("{when}: table {t} is {got:?}, model {want:?}"))
        );
    }
}

/// One cursor session on table `t`: a few random cursor operations, each checked against the
/// model cursor.
fn cursor_session<T: RwTransaction>(
    txn: &mut T,
    db: T::Database,
    map: &mut Map,
    rng: &mut ChaCha8Rng,
    run: &mut ModelRun,
) {
    let mut cursor = txn.cursor(db).expect("cursor should open");
    let mut model = ModelCursor {
        map,
        pos: ModelPos::Fresh,
    };
    let steps = rng.gen_range(1..=12);
    run.trail.clear();
    for _ in 0..steps {
        run.op += 1;
        let choice = rng.gen_range(0..100);
        let name = match choice {
            0..=14 => "first_key",
            15..=24 => "last_key",
            25..=44 => "next_key",
            45..=59 => "get_current",
            60..=74 => "delete_current",
            75..=87 => "put",
            _ => "delete_while",
        };
        run.trail.push(format!("{name} from {:?}", model.pos));
        match choice {
            0..=14 => {
                let got = cursor.first_key().expect("first_key");
                let want = model.first_key();
                assert_eq!(got, want, "{}", run.ctx("first_key"));
            }
            15..=24 => {
                let got = cursor.last_key().expect("last_key");
                let want = model.last_key();
                assert_eq!(got, want, "{}", run.ctx("last_key"));
            }
            25..=44 => {
                let pos = model.pos.clone();
                let got = cursor.next_key();
                let want = model.next_key();
                assert!(
                    same_outcome(&got, &want),
                    "{}",
                    run.ctx(&format!(
                        "next_key from {pos:?}: got {got:?}, want {want:?}"
                    ))
                );
            }
            45..=59 => {
                let pos = model.pos.clone();
                let got = cursor.get_current().expect("get_current");
                let want = model.get_current();
                assert_eq!(
                    got,
                    want,
                    "{}",
                    run.ctx(&format!("get_current from {pos:?}"))
                );
            }
            60..=74 => {
                let pos = model.pos.clone();
                let got = cursor.delete_current();
                let want = model.delete_current();
                assert!(
                    same_outcome(&got, &want),
                    "{}",
                    run.ctx(&format!(
                        "delete_current from {pos:?}: got {got:?}, want {want:?}"
                    ))
                );
            }
            75..=87 => {
                let key = random_key(rng);
                let value = random_value(rng);
                cursor.put(&key, &value).expect("cursor put");
                model.put(&key, &value);
            }
            _ => {
                let pos = model.pos.clone();
                let predicate = random_predicate(rng);
                let mut asked_got = Vec::new();
                let got = cursor.delete_while(&mut |k| {
                    asked_got.push(k.to_vec());
                    predicate.decide(k)
                });
                let mut asked_want = Vec::new();
                let want = model.delete_while(&mut |k| {
                    asked_want.push(k.to_vec());
                    predicate.decide(k)
                });
                assert!(
                    same_outcome(&got, &want),
                    "{}",
                    run.ctx(&format!(
                        "delete_while({predicate:?}) from {pos:?}: got {got:?}, want {want:?}"
                    ))
                );
                assert_eq!(
                    asked_got,
                    asked_want,
                    "{}",
                    run.ctx(&format!(
                        "keys passed to the delete_while({predicate:?}) predicate"
                    ))
                );
            }
        }
    }
}

fn run_model<E: Environment>(fresh: FreshDir<'_>, seed: u64, ops: usize) {
    println!(
        "conformance model ({}): seed {seed}; replay with CONFORMANCE_SEED={seed}",
        E::NAME
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut run = ModelRun {
        seed,
        op: 0,
        trail: Vec::new(),
    };
    let mut store = Store::<E>::new(fresh);
    let mut committed: Vec<Map> = vec![Map::new(); MODEL_TABLES.len()];
    let (mut commits, mut aborts, mut reopens) = (0usize, 0usize, 0usize);
    while run.op < ops {
        let all = store.dbs().all();
        let dbs: Vec<E::Database> = MODEL_TABLES.iter().map(|&i| all[i]).collect();
        let mut working = committed.clone();
        let mut txn = store.txn();
        let end = loop {
            if run.op >= ops {
                break TxnEnd::Commit;
            }
            run.op += 1;
            run.trail.clear();
            let t = rng.gen_range(0..dbs.len());
            match rng.gen_range(0..1000) {
                0..=249 => {
                    let key = random_key(&mut rng);
                    let got = get(&txn, dbs[t], &key);
                    assert_eq!(
                        got.as_ref(),
                        working[t].get(&key),
                        "{}",
                        run.ctx(&format!("get {key:?} in table {t}"))
                    );
                }
                250..=479 => {
                    let key = random_key(&mut rng);
                    let value = random_value(&mut rng);
                    put(&mut txn, dbs[t], &key, &value);
                    working[t].insert(key, value);
                }
                480..=599 => {
                    let key = random_key(&mut rng);
                    txn.del(dbs[t], &key)
                        .unwrap_or_else(|e| panic!("{}", run.ctx(&format!("del: {e}"))));
                    working[t].remove(&key);
                }
                600..=899 => cursor_session(&mut txn, dbs[t], &mut working[t], &mut rng, &mut run),
                900..=929 => check_tables(&mut txn, &dbs, &working, &run, "full scan"),
                930..=969 => break TxnEnd::Commit,
                970..=989 => break TxnEnd::Abort,
                _ => {
                    break TxnEnd::Reopen {
                        commit_first: rng.gen_bool(0.5),
                    }
                }
            }
        };
        let reopen = match end {
            TxnEnd::Commit => {
                txn.commit()
                    .unwrap_or_else(|e| panic!("{}", run.ctx(&format!("commit: {e}"))));
                committed = working;
                commits += 1;
                false
            }
            TxnEnd::Abort => {
                drop(txn);
                aborts += 1;
                false
            }
            TxnEnd::Reopen { commit_first } => {
                if commit_first {
                    txn.commit()
                        .unwrap_or_else(|e| panic!("{}", run.ctx(&format!("commit: {e}"))));
                    committed = working;
                } else {
                    drop(txn);
                }
                true
            }
        };
        if reopen {
            store.reopen();
            reopens += 1;
        }
        // After every transaction boundary the store holds exactly the committed model.
        let all = store.dbs().all();
        let dbs: Vec<E::Database> = MODEL_TABLES.iter().map(|&i| all[i]).collect();
        let mut txn = store.txn();
        check_tables(&mut txn, &dbs, &committed, &run, "after transaction end");
        // Tables outside the model were never written.
        for (i, db) in all.into_iter().enumerate() {
            if !MODEL_TABLES.contains(&i) {
                assert!(
                    scan(&mut txn, db).is_empty(),
                    "{}",
                    run.ctx("untouched table")
                );
            }
        }
    }
    println!(
        "conformance model ({}): {} ops, {commits} commits, {aborts} aborts, {reopens} reopens",
        E::NAME,
        run.op
    );
    assert!(
        commits > 10 && aborts > 5 && reopens > 2,
        "the run should exercise every ending"
    );
}

/// Model-based check with a fresh random seed each run (printed; `CONFORMANCE_SEED` replays):
/// over 10,000 random gets, puts, deletes, cursor walks, cursor puts, `delete_current`s,
/// `delete_while`s, commits, aborts and reopens across four tables, each result compared with a
/// `BTreeMap` model.
pub fn model_random_seed<E: Environment>(fresh: FreshDir<'_>) {
    run_model::<E>(fresh, model_seed(None), MODEL_OPS);
}

/// The same model-based check with a fixed seed (unless `CONFORMANCE_SEED` is set), so every
/// run covers at least one known sequence.
pub fn model_fixed_seed<E: Environment>(fresh: FreshDir<'_>) {
    run_model::<E>(fresh, model_seed(Some(0x5EED_B077E2)), MODEL_OPS);
}
