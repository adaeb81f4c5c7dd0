//! The one oracle every reliability tier shares (`docs/reliability.md` §1).
//!
//! A seeded workload of numbered transactions over a few tables. Transaction `j` writes the
//! marker `meta/__txn = j` besides its other puts and deletes, so a recovered database names
//! the transaction it claims to hold; the model is the state after exactly `j` transactions.
//! After a fault the recovered state must equal `model(j)` with
//! `last acknowledged <= j <= last started`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use butter_db::{CommitInfo, Env, TableHandle};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Table holding the marker key.
pub const META: &str = "meta";
/// The marker key: the number of the last transaction applied, u64 little-endian.
pub const MARKER: &[u8] = b"__txn";
/// Every table the workload may create, and the transaction that creates it.
pub const TABLES: [(&str, u64); 4] = [(META, 1), ("alpha", 1), ("beta", 4), ("gamma", 8)];

/// Partition and drain-job sizes (`EnvBuilder::merge_sizes`) small enough that the
/// workload's background merges include drains that write several partitions and take
/// several jobs, so that the fault tiers sweep those paths too.
pub const SMALL_MERGES: (u64, u64) = (2 << 10, 8 << 10);

/// A write transaction's memory budget (`EnvBuilder::memtable_bytes`) small enough that the
/// workload's transactions holding a 40 KiB value spill it to a sorted run in `live/` before
/// they commit (design.md §2, "Spilling"), so the tiers sweep spilling transactions too.
pub const SMALL_MEMTABLE: u64 = 16 << 10;

/// Table name → key → value.
pub type Model = BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>;

/// One write: a put (`Some`) or a delete (`None`).
#[derive(Debug, Clone)]
pub struct Op {
    /// The table.
    pub table: &'static str,
    /// The key.
    pub key: Vec<u8>,
    /// The new value, or `None` to delete.
    pub value: Option<Vec<u8>>,
}

/// One numbered transaction.
#[derive(Debug, Clone)]
pub struct Txn {
    /// Its number, from 1.
    pub number: u64,
    /// Tables it creates (before its writes).
    pub creates: Vec<&'static str>,
    /// Its writes, in order.
    pub ops: Vec<Op>,
}

/// A seeded sequence of transactions and the model state after each prefix.
///
/// The models are computed on first use and kept: a copy of the state per prefix costs about
/// half a MiB each once the tables have filled, too much for the kill tiers' hundreds of
/// transactions, which only ever ask for a few dozen of them.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The seed it was generated from.
    pub seed: u64,
    txns: Vec<Txn>,
    /// `models[j]`: the state after exactly `j` transactions, once someone asked for it.
    models: Vec<OnceLock<Model>>,
}

fn marker_value(j: u64) -> Vec<u8> {
    j.to_le_bytes().to_vec()
}

impl Workload {
    /// `count` transactions generated from `seed`. Sizes vary (empty values, ~100 B, a 40 KiB
    /// value every few transactions so segments span several blocks), and deletes hit keys
    /// written earlier, so commits merge segments and write tombstones.
    pub fn new(seed: u64, count: u64) -> Workload {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut txns = Vec::new();
        for number in 1..=count {
            let creates: Vec<&'static str> = TABLES
                .iter()
                .filter(|(_, at)| *at == number)
                .map(|(name, _)| *name)
                .collect();
            let live: Vec<&'static str> = TABLES
                .iter()
                .filter(|(name, at)| *at <= number && *name != META)
                .map(|(name, _)| *name)
                .collect();
            let mut ops = vec![Op {
                table: META,
                key: MARKER.to_vec(),
                value: Some(marker_value(number)),
            }];
            let writes = rng.gen_range(3..30);
            for _ in 0..writes {
                let table = live[rng.gen_range(0..live.len())];
                let key = format!("k{:04}", rng.gen_range(0..300)).into_bytes();
                let value = if rng.gen_bool(0.2) {
                    None
                } else {
                    let len = match rng.gen_range(0..20) {
                        0 => 0,
                        1 if number % 3 == 0 => 40 << 10,
                        _ => rng.gen_range(1..400),
                    };
                    let fill = rng.gen::<u8>();
                    Some((0..len).map(|i| fill.wrapping_add(i as u8)).collect())
                };
                ops.push(Op { table, key, value });
            }
            txns.push(Txn {
                number,
                creates,
                ops,
            });
        }
        let models = (0..=txns.len()).map(|_| OnceLock::new()).collect();
        Workload { seed, txns, models }
    }

    /// How many transactions it has.
    pub fn len(&self) -> u64 {
        self.txns.len() as u64
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.txns.is_empty()
    }

    /// Transaction `number` (from 1).
    ///
    /// # Panics
    /// If there is no such transaction.
    pub fn txn(&self, number: u64) -> &Txn {
        let i = usize::try_from(number - 1).expect("small");
        self.txns.get(i).expect("transaction number in range")
    }

    /// The state after exactly `j` transactions.
    ///
    /// # Panics
    /// If `j` is past the end.
    pub fn model(&self, j: u64) -> &Model {
        let j = usize::try_from(j).expect("small");
        self.models
            .get(j)
            .expect("j in range")
            .get_or_init(|| self.replay_to(j))
    }

    /// The state after `j` transactions, replayed from the nearest smaller model already
    /// computed (or from the empty state).
    fn replay_to(&self, j: usize) -> Model {
        let (from, mut state) = (0..j)
            .rev()
            .find_map(|i| self.models[i].get().map(|m| (i, m.clone())))
            .unwrap_or_default();
        for t in &self.txns[from..j] {
            apply_to_model(&mut state, t);
        }
        state
    }

    /// The oracle: `state` must be `model(j)` for the `j` its marker names, with
    /// `acked <= j <= started`. Returns `j`, or what is wrong.
    pub fn check(&self, state: &Model, acked: u64, started: u64) -> Result<u64, String> {
        let j = marker_of(state)?;
        if j < acked {
            return Err(format!(
                "LOST acknowledged transactions: recovered {j}, acknowledged {acked}"
            ));
        }
        if j > started || j > self.len() {
            return Err(format!(
                "recovered transaction {j} that never started (last started {started})"
            ));
        }
        let want = self.model(j);
        if state != want {
            return Err(format!(
                "state is not the state after transaction {j}: {}",
                describe_difference(want, state)
            ));
        }
        Ok(j)
    }
}

/// Applies transaction `t` to a model state: creates its tables, then its writes in order.
pub fn apply_to_model(state: &mut Model, t: &Txn) {
    for c in &t.creates {
        state.entry((*c).to_string()).or_default();
    }
    for op in &t.ops {
        let table = state.entry(op.table.to_string()).or_default();
        match &op.value {
            Some(v) => table.insert(op.key.clone(), v.clone()),
            None => table.remove(&op.key),
        };
    }
}

/// The transaction number the state's marker names (0 when absent).
pub fn marker_of(state: &Model) -> Result<u64, String> {
    match state.get(META).and_then(|t| t.get(MARKER)) {
        None => Ok(0),
        Some(v) => v
            .as_slice()
            .try_into()
            .map(u64::from_le_bytes)
            .map_err(|_| format!("marker has {} bytes", v.len())),
    }
}

/// The first difference between two states, for failure messages.
pub fn describe_difference(want: &Model, got: &Model) -> String {
    for (name, wt) in want {
        let Some(gt) = got.get(name) else {
            return format!("table {name} missing");
        };
        for (k, v) in wt {
            match gt.get(k) {
                None => return format!("{name}/{} missing", String::from_utf8_lossy(k)),
                Some(g) if g != v => {
                    return format!(
                        "{name}/{}: {} bytes, want {}",
                        String::from_utf8_lossy(k),
                        g.len(),
                        v.len()
                    )
                }
                _ => {}
            }
        }
        if let Some(k) = gt.keys().find(|k| !wt.contains_key(*k)) {
            return format!("{name}/{} should not exist", String::from_utf8_lossy(k));
        }
    }
    match got.keys().find(|n| !want.contains_key(*n)) {
        Some(n) => format!("table {n} should not exist"),
        None => "equal".to_string(),
    }
}

/// Runs transaction `txn` on a butter_db environment and commits it.
///
/// # Errors
/// Whatever `begin_write`, the writes or `commit` return.
pub fn butter_apply(env: &Env, txn: &Txn) -> butter_db::Result<CommitInfo> {
    let mut w = env.begin_write()?;
    let mut handles: BTreeMap<&str, TableHandle> = BTreeMap::new();
    for name in &txn.creates {
        handles.insert(name, w.create_table(name)?);
    }
    for op in &txn.ops {
        let h = match handles.get(op.table) {
            Some(h) => *h,
            None => {
                let h = env
                    .table(op.table)
                    .ok_or_else(|| butter_db::Error::TableNotFound(op.table.to_string()))?;
                handles.insert(op.table, h);
                h
            }
        };
        match &op.value {
            Some(v) => w.put(h, &op.key, v)?,
            None => w.delete(h, &op.key)?,
        }
    }
    w.commit()
}

/// Everything a butter_db environment holds in the workload's tables, read in one
/// transaction.
///
/// # Errors
/// Read errors.
pub fn butter_state(env: &Env) -> butter_db::Result<Model> {
    let r = env.begin_read();
    let mut state = Model::new();
    for (name, _) in TABLES {
        if let Some(h) = env.table(name) {
            state.insert(name.to_string(), r.scan(h, b"")?.into_iter().collect());
        }
    }
    Ok(state)
}
