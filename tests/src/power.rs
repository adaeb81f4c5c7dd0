//! One power-loss cycle (`docs/reliability.md` §3): a fresh btrfs image behind the lazy disk,
//! a workload child committing numbered transactions, power cut at the K-th flush, then the
//! durable image is mounted on its own and checked: the oracle, one more transaction, and
//! `btrfs check --readonly`. The store is butter_db, or an adapter backend (LMDB, MDBX, redb)
//! when the child's environment names one in `CHILD_BACKEND`; the filesystem below is btrfs
//! either way.

use std::path::{Path, PathBuf};
use std::time::Duration;

use butter_db::{Env, Merges};
use slasher_adapters::DatabaseBackend;

use crate::adapter_workload::{self, CHILD_BACKEND};
use crate::blockdev::{btrfs_check, make_btrfs_image, LoopDev, Mount};
use crate::harness::{image_parent, Progress, WorkloadChild};
use crate::lazy_disk::{CutMode, IoKind, LazyDisk};
use crate::workload::{butter_apply, butter_state, Workload, SMALL_MEMTABLE, SMALL_MERGES};

/// Size of each cycle's btrfs image for butter_db.
pub const IMAGE_BYTES: u64 = 256 << 20;
/// Size of each cycle's btrfs image for the adapter backends: MDBX grows its file in steps of
/// 256 MiB (the adapter's growth step, as in Lighthouse) and `fallocate`s each step, which a
/// 256 MiB filesystem cannot hold (`ENOSPC` at the third commit). The space is reserved, not
/// written, so the lazy disk sees only metadata for it.
pub const ADAPTER_IMAGE_BYTES: u64 = 1 << 30;
/// The database directory inside the filesystem under test.
pub const DB_DIR: &str = "db";
const CHILD_LIMIT: Duration = Duration::from_secs(120);

/// What happens to the disk during the workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Nothing: a baseline run that counts the flushes.
    None,
    /// Cut power at the K-th flush after the filesystem is mounted.
    CutAtFsync(u64, CutMode),
    /// Fail the K-th read, write or flush after mounting with EIO (every one from then on if
    /// sticky); at the end the disk stays powered and everything it accepted is kept.
    Eio(IoKind, u64, bool),
}

/// How a workload child is started: the test entry point to re-execute and the extra
/// environment variables it needs besides the database path.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    /// The `#[test]` function the child runs.
    pub entry: &'static str,
    /// Environment for it; `CHILD_DB` (the database path) is added.
    pub envs: Vec<(&'static str, String)>,
}

/// Which store a cycle's child writes and the verifier reopens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// butter_db, opened with `Env::open_path`.
    Butter,
    /// A slasher adapter backend (see [`adapter_workload`]).
    Adapter(DatabaseBackend),
}

impl ChildSpec {
    /// The store its child writes: the backend its `CHILD_BACKEND` names, else butter_db.
    ///
    /// # Panics
    /// If `CHILD_BACKEND` names no backend.
    pub fn store(&self) -> Store {
        match self.envs.iter().find(|(k, _)| *k == CHILD_BACKEND) {
            None => Store::Butter,
            Some((_, name)) => Store::Adapter(
                name.parse()
                    .unwrap_or_else(|e| panic!("CHILD_BACKEND={name}: {e}")),
            ),
        }
    }
}

/// What one cycle saw.
#[derive(Debug)]
pub struct CycleReport {
    /// Flushes from the mount to the end of the unmount.
    pub fsyncs: u64,
    /// Writes from the mount to the end of the unmount.
    pub writes: u64,
    /// The child's reports.
    pub progress: Progress,
    /// Whether power was cut during the workload or its unmount.
    pub cut: bool,
    /// The recovered j, or the violation found.
    pub verdict: Result<u64, String>,
}

/// Runs one cycle in `scratch` (which gets `fuse/` and `mnt/` mount points).
///
/// # Panics
/// When the harness itself fails (cannot make an image, attach a loop device, mount).
pub fn cycle(scratch: &Path, wl: &Workload, child: &ChildSpec, fault: Fault) -> CycleReport {
    let img = image_parent().join(format!(
        "butter-pl-{}-{:08x}.img",
        std::process::id(),
        rand::random::<u32>()
    ));
    let bytes = match child.store() {
        Store::Butter => IMAGE_BYTES,
        Store::Adapter(_) => ADAPTER_IMAGE_BYTES,
    };
    make_btrfs_image(&img, bytes);
    let report = cycle_on(scratch, &img, wl, child, fault);
    let _ = std::fs::remove_file(&img);
    report
}

fn cycle_on(
    scratch: &Path,
    img: &Path,
    wl: &Workload,
    child: &ChildSpec,
    fault: Fault,
) -> CycleReport {
    let fuse_dir = scratch.join("fuse");
    let mnt = scratch.join("mnt");
    let (fsyncs, writes, progress, cut) = {
        let disk = LazyDisk::mount(img, &fuse_dir).expect("mount the lazy disk");
        let lo = LoopDev::attach(&disk.disk_path());
        let m = Mount::btrfs(&lo.dev, &mnt).expect("mount btrfs on the lazy disk");
        let c0 = disk.counters();
        match fault {
            Fault::None => {}
            Fault::CutAtFsync(k, mode) => disk.cut_at_fsync(c0.fsyncs + k, mode),
            Fault::Eio(kind, k, sticky) => {
                let base = match kind {
                    IoKind::Read => c0.reads,
                    IoKind::Write => c0.writes,
                    IoKind::Fsync => c0.fsyncs,
                };
                disk.inject_eio(kind, base + k, sticky);
            }
        }
        let mut envs: Vec<(&str, String)> = child.envs.clone();
        envs.push(("CHILD_DB", mnt.join(DB_DIR).display().to_string()));
        let proc = WorkloadChild::spawn(child.entry, &envs);
        let (progress, _exited_ok) = proc.finish(CHILD_LIMIT);
        if let Err(e) = m.unmount() {
            eprintln!("warning: {e}");
        }
        let c = disk.counters();
        match fault {
            // The cut point lies past the end: cut now (nothing is pending after unmount).
            Fault::CutAtFsync(_, mode) => disk.cut_now(mode).expect("cut power"),
            Fault::None | Fault::Eio(..) => {
                disk.clear_injection();
                disk.flush_pending().expect("flush the lazy disk");
            }
        }
        if let Err(e) = lo.detach() {
            eprintln!("warning: {e}");
        }
        if let Err(e) = disk.unmount() {
            eprintln!("warning: unmounting the lazy disk: {e}");
        }
        (c.fsyncs - c0.fsyncs, c.writes - c0.writes, progress, c.dead)
    };
    let verdict = verify_image(img, &mnt, wl, &progress, child.store());
    CycleReport {
        fsyncs,
        writes,
        progress,
        cut,
        verdict,
    }
}

/// Mounts the durable image alone, reopens `store` in it and applies the oracle; then one
/// more transaction, unmount and `btrfs check --readonly`.
pub fn verify_image(
    img: &Path,
    mnt: &Path,
    wl: &Workload,
    progress: &Progress,
    store: Store,
) -> Result<u64, String> {
    let lo = LoopDev::attach(img);
    let m = Mount::btrfs(&lo.dev, mnt).map_err(|e| format!("durable image does not mount: {e}"))?;
    let db: PathBuf = mnt.join(DB_DIR);
    let verdict = match store {
        Store::Butter => verify_butter(&db, wl, progress),
        Store::Adapter(backend) => {
            adapter_workload::verify_recovered(backend, &db, wl, progress.acked, progress.started)
        }
    };
    m.unmount()?;
    let checked = btrfs_check(&lo.dev);
    lo.detach()?;
    match (verdict, checked) {
        (Ok(j), Ok(())) => Ok(j),
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(e),
    }
}

/// The oracle on a reopened butter_db environment, then one more transaction.
fn verify_butter(db: &Path, wl: &Workload, progress: &Progress) -> Result<u64, String> {
    let env = Env::open_path(db).map_err(|e| format!("reopen: {e}"))?;
    let state = butter_state(&env).map_err(|e| format!("read after reopen: {e}"))?;
    let j = wl.check(&state, progress.acked, progress.started)?;
    if j < wl.len() {
        butter_apply(&env, wl.txn(j + 1))
            .map_err(|e| format!("commit {} after recovery: {e}", j + 1))?;
        let state = butter_state(&env).map_err(|e| format!("read: {e}"))?;
        if &state != wl.model(j + 1) {
            return Err(format!("state after the extra commit {} is wrong", j + 1));
        }
    }
    Ok(j)
}

/// The body of a workload child: opens `CHILD_DB` and commits transactions 1..=`CHILD_TXNS`
/// of the workload seeded by `CHILD_SEED`, printing `START i` before and `ACK i` after each
/// commit (with `CHILD_ACK_EARLY=1`, a deliberately broken acknowledgement before the
/// commit). After a commit it prints `DEFERRED i` if its generation's snapshot does not
/// exist yet, and `MERGED i n` if it swapped in n background merges (the child runs them in
/// the waited mode, so a baseline run and the faulty runs issue the same operations). On an error it prints `ERR i <error>` and checks the environment refuses writes
/// (`POISONED`) and still reads the last commit (`READS_OK`), then exits.
pub fn child_main() {
    let db = std::env::var_os("CHILD_DB").expect("CHILD_DB");
    let var = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let seed = var("CHILD_SEED").expect("CHILD_SEED");
    let txns = var("CHILD_TXNS").expect("CHILD_TXNS");
    let early = std::env::var("CHILD_ACK_EARLY").is_ok_and(|v| v == "1");
    let wl = Workload::new(seed, txns);
    let say = |s: String| {
        println!("{s}");
        std::io::Write::flush(&mut std::io::stdout()).expect("stdout");
    };
    let opened = Env::builder(PathBuf::from(&db))
        .merges(Merges::BackgroundWaited)
        .merge_sizes(SMALL_MERGES.0, SMALL_MERGES.1)
        .memtable_bytes(SMALL_MEMTABLE)
        .open();
    let env = match opened {
        Ok(env) => env,
        Err(e) => {
            say(format!("ERR 0 {e:?}"));
            std::process::exit(1);
        }
    };
    let mut acked = 0;
    for i in 1..=txns {
        say(format!("START {i}"));
        if early {
            say(format!("ACK {i}"));
        }
        match butter_apply(&env, wl.txn(i)) {
            Ok(info) => {
                acked = i;
                if !early {
                    say(format!("ACK {i}"));
                }
                let gen = Path::new(&db).join(format!("gen-{:020}", info.generation));
                if !gen.exists() {
                    say(format!("DEFERRED {i}"));
                }
                if info.merges_installed > 0 {
                    say(format!("MERGED {i} {}", info.merges_installed));
                }
            }
            Err(e) => {
                say(format!("ERR {i} {e:?}"));
                if matches!(env.begin_write(), Err(butter_db::Error::Poisoned)) {
                    say("POISONED".to_string());
                }
                if butter_state(&env).is_ok_and(|s| &s == wl.model(acked)) {
                    say("READS_OK".to_string());
                }
                std::process::exit(1);
            }
        }
    }
    std::process::exit(0);
}
