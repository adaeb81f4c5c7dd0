//! The process-kill tiers' workload (`tests/tests/crash_sigkill.rs`): one table, transaction
//! i sets `counter` to i, writes a few keys and deletes one; the child commits forever.

use std::path::PathBuf;
use std::time::Duration;

use butter_db::{Env, TableHandle};

/// Keys of the crash workload's one table.
pub const KEYS: u64 = 64;

/// The child's write-transaction memory budget (`EnvBuilder::memtable_bytes`): small enough
/// that a transaction writing a few values of a few KiB spills a sorted run to `live/` before
/// its commit (design.md §2, "Spilling"), so kills also land in and after spills.
pub const CHILD_MEMTABLE_BYTES: u64 = 16 << 10;

/// The model: the table's contents after `n` transactions.
pub fn model(n: u64) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
    let mut m = std::collections::BTreeMap::new();
    for i in 1..=n {
        apply(i, |k, v| {
            match v {
                Some(v) => m.insert(k, v),
                None => m.remove(&k),
            };
        });
    }
    m
}

/// Transaction `i`'s writes: the counter, a few puts with sizes that vary, one deletion.
pub fn apply(i: u64, mut f: impl FnMut(Vec<u8>, Option<Vec<u8>>)) {
    f(b"counter".to_vec(), Some(i.to_le_bytes().to_vec()));
    for j in 0..(i % 5 + 1) {
        let k = (i * 31 + j * 17) % KEYS;
        let len = ((i * 131 + j) % 3000) as usize;
        f(
            format!("k{k:03}").into_bytes(),
            Some(vec![(i % 251) as u8; len]),
        );
    }
    f(format!("k{:03}", (i * 7) % KEYS).into_bytes(), None);
}

pub fn table(env: &Env) -> TableHandle {
    env.table("t")
        .unwrap_or_else(|| env.create_table("t").expect("create table"))
}

pub fn committed(env: &Env, t: TableHandle) -> u64 {
    let r = env.begin_read();
    r.get(t, b"counter").expect("read counter").map_or(0, |v| {
        u64::from_le_bytes(v.as_ref().try_into().expect("8 bytes"))
    })
}

/// The child (`tier-child crash`): commit transactions forever in `CRASH_CHILD_DIR`, printing
/// `START i` before and `ACK i` after each commit returns.
///
/// # Panics
/// If `CRASH_CHILD_DIR` is unset or a step fails (the parent sees the child die).
pub fn child_main() {
    let dir = std::env::var_os("CRASH_CHILD_DIR").expect("CRASH_CHILD_DIR");
    let env = Env::builder(PathBuf::from(dir))
        .memtable_bytes(CHILD_MEMTABLE_BYTES)
        .open()
        .expect("child open");
    let t = table(&env);
    let mut i = committed(&env, t);
    let mut out = std::io::stdout();
    // CRASH_CHILD_STOP_AFTER=n: commit n transactions, then wait to be killed.
    let stop_after: Option<u64> = std::env::var("CRASH_CHILD_STOP_AFTER")
        .ok()
        .and_then(|v| v.parse().ok());
    loop {
        if stop_after.is_some_and(|n| i >= n) {
            std::thread::sleep(Duration::from_secs(3600));
        }
        i += 1;
        println!("START {i}");
        let mut w = env.begin_write().expect("begin");
        apply(i, |k, v| match v {
            Some(v) => w.put(t, &k, &v).expect("put"),
            None => w.delete(t, &k).expect("delete"),
        });
        w.commit().expect("commit");
        println!("ACK {i}");
        std::io::Write::flush(&mut out).expect("flush");
    }
}
