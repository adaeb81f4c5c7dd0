//! `butter backup --compact DIR DEST`: a copy holding only what a reader sees, like
//! `mdb_copy -c`.
//!
//! A snapshot copy (`butter backup`) shares the source's segment files, overwritten versions
//! and deletions included, until the background merges drop them. The compacting copy writes
//! new segments instead: every live entry of the newest committed generation (read beside a
//! live writer) once, table by table in key order, through the engine's own writer, in
//! transactions of bounded size. As each key is written once, no stored entry of the copy is
//! dead. The database is built in `DEST/butter.scratch/` while DEST carries the tool's marker
//! (the engine refuses to open it), its newest generation becomes DEST's as any copy's does
//! (with an identity of its own), it is read whole and compared entry for entry with the
//! source's generation, and only then does DEST get its identity. A failure leaves DEST as it
//! was. The copy's generation number is the new database's, not the source's.

use std::path::Path;
use std::time::{Duration, Instant};

use butter_db::admin::{CopyInfo, NewCopy, Snapshot, Verified};
use butter_db::EnvBuilder;

use crate::dumpload::{LOAD_COMMIT_BYTES, LOAD_COMMIT_ENTRIES};
use crate::{Result, ToolError};

/// Entries compared at a time, from each side.
const COMPARE_BATCH: usize = 16_384;

/// What a compacting copy made.
#[derive(Debug, Clone)]
pub struct Compacted {
    /// The copy (its `bytes`: the new segment files').
    pub copy: CopyInfo,
    /// The source's generation.
    pub source_generation: u64,
    /// The source's identity (`copy.source_identity` is the scratch database's, which the
    /// copy was made from).
    pub source_identity: String,
    /// Bytes of the source generation's segment files.
    pub source_bytes: u64,
    /// Tables copied.
    pub tables: usize,
    /// Entries copied (and compared).
    pub entries: u64,
    /// Bytes of their keys and values.
    pub entry_bytes: u64,
    /// Transactions the copy was written in.
    pub commits: u64,
    /// What reading the copy whole found.
    pub verified: Verified,
    /// Writing the copy.
    pub copy_time: Duration,
    /// Reading it whole and comparing it with the source.
    pub verify_time: Duration,
}

fn segment_bytes(s: &Snapshot) -> u64 {
    s.tables()
        .iter()
        .flat_map(|t| t.segments.iter().map(|s| s.file_len))
        .sum()
}

/// `butter backup --compact DIR DEST`; see the module's comment. DEST must not exist or be an
/// empty directory, on btrfs (any btrfs filesystem: the data is written, not shared).
///
/// # Errors
/// [`ToolError::Engine`] (DIR not a database or damaged, DEST refused, I/O),
/// [`ToolError::BadCopy`] (the copy read back differs); DEST is left as it was.
pub fn compact(dir: &Path, dest: &Path) -> Result<Compacted> {
    compact_committing_every(dir, dest, LOAD_COMMIT_BYTES, LOAD_COMMIT_ENTRIES)
}

/// [`compact`], committing every `bytes` bytes of keys and values or `entries` entries,
/// whichever comes first (tests use small ones, to write in many transactions).
///
/// # Errors
/// As [`compact`].
pub fn compact_committing_every(
    dir: &Path,
    dest: &Path,
    bytes: u64,
    entries: u64,
) -> Result<Compacted> {
    // DIR is looked up once (`handle`) and read through its handle.
    crate::handle::through_handle(dir, |held| {
        let source = Snapshot::open(&held.via)?;
        compact_from(&source, held, dest, (bytes.max(1), entries.max(1)))
    })
}

/// [`compact_committing_every`] of the open `source` (whose directory is `held`), committing
/// every `every` (bytes, entries).
fn compact_from(
    source: &Snapshot,
    held: &crate::handle::Held,
    dest: &Path,
    every: (u64, u64),
) -> Result<Compacted> {
    let t = Instant::now();
    let mut copy = NewCopy::create_outside(dest, held.fd())?;
    let scratch = copy.scratch_dir();
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&scratch)
            .map_err(|source| ToolError::StreamFile {
                op: "create directory",
                path: scratch.clone(),
                source,
            })?;
    }
    let (entries, entry_bytes, commits) = {
        let env = EnvBuilder::new(&scratch).open()?;
        write_all(source, &env, every)?
    };
    let built = Snapshot::open(&scratch)?;
    copy.install(&built)?;
    drop(built);
    let copy_time = t.elapsed();
    let t = Instant::now();
    // Read back through DEST's handle.
    let made = copy.open_copied()?;
    let verified = made.verify()?;
    let compared = compare(source, &made)?;
    if compared != entries {
        return Err(ToolError::BadCopy(format!(
            "{entries} entries were written, {compared} compared"
        )));
    }
    drop(made);
    let verify_time = t.elapsed();
    let info = copy.finish()?;
    Ok(Compacted {
        copy: info,
        source_generation: source.generation(),
        source_identity: source.identity(),
        source_bytes: segment_bytes(source),
        tables: source.tables().len(),
        entries,
        entry_bytes,
        commits,
        verified,
        copy_time,
        verify_time,
    })
}

/// Writes every live entry of `source` into `env`, table by table, committing every
/// `limits.0` bytes of keys and values or `limits.1` entries; returns entries, their bytes,
/// commits.
fn write_all(
    source: &Snapshot,
    env: &butter_db::Env,
    limits: (u64, u64),
) -> Result<(u64, u64, u64)> {
    let (mut entries, mut bytes, mut commits) = (0u64, 0u64, 0u64);
    // One writer at a time: a transaction is committed before the next one begins.
    let mut txn = Some(env.begin_write()?);
    let (mut pending, mut pending_entries) = (0u64, 0u64);
    for t in source.tables() {
        let handle = match txn.as_mut() {
            Some(w) => w.create_table(&t.name)?,
            None => return Err(ToolError::BadCopy("no write transaction".into())),
        };
        let mut failed: Option<butter_db::Error> = None;
        source.scan(&t.name, None, None, |k, v| {
            if txn.is_none() {
                match env.begin_write() {
                    Ok(w) => txn = Some(w),
                    Err(e) => {
                        failed = Some(e);
                        return false;
                    }
                }
            }
            let Some(w) = txn.as_mut() else {
                return false;
            };
            if let Err(e) = w.put(handle, k, v) {
                failed = Some(e);
                return false;
            }
            let b = (k.len() + v.len()) as u64;
            entries += 1;
            bytes += b;
            pending += b;
            pending_entries += 1;
            if pending >= limits.0 || pending_entries >= limits.1 {
                if let Some(full) = txn.take() {
                    if let Err(e) = full.commit() {
                        failed = Some(e);
                        return false;
                    }
                    commits += 1;
                }
                pending = 0;
                pending_entries = 0;
            }
            true
        })?;
        if let Some(e) = failed {
            return Err(e.into());
        }
        if txn.is_none() {
            txn = Some(env.begin_write()?);
        }
    }
    if let Some(last) = txn.take() {
        last.commit()?;
        commits += 1;
    }
    Ok((entries, bytes, commits))
}

/// One batch of table `name` from key `from` on.
fn batch(s: &Snapshot, name: &str, from: Option<&[u8]>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    s.scan(name, from, None, |k, v| {
        out.push((k.to_vec(), v.to_vec()));
        out.len() < COMPARE_BATCH
    })?;
    Ok(out)
}

/// Compares what a reader sees of `a` and `b`, table by table and entry by entry, in bounded
/// memory; returns the entries compared.
///
/// # Errors
/// [`ToolError::BadCopy`] naming the table and the first key that differs.
pub fn compare(a: &Snapshot, b: &Snapshot) -> Result<u64> {
    let names = |s: &Snapshot| s.tables().into_iter().map(|t| t.name).collect::<Vec<_>>();
    let (na, nb) = (names(a), names(b));
    if na != nb {
        return Err(ToolError::BadCopy(format!(
            "the copy's tables ({}) are not the source's ({})",
            nb.join(", "),
            na.join(", ")
        )));
    }
    let mut n = 0u64;
    for name in &na {
        let mut from: Option<Vec<u8>> = None;
        loop {
            let (ba, bb) = (
                batch(a, name, from.as_deref())?,
                batch(b, name, from.as_deref())?,
            );
            if ba != bb {
                let at = ba
                    .iter()
                    .zip(&bb)
                    .position(|(x, y)| x != y)
                    .unwrap_or(ba.len().min(bb.len()));
                let key = ba
                    .get(at)
                    .or(bb.get(at))
                    .map_or(String::new(), |e| hex::encode(&e.0));
                return Err(ToolError::BadCopy(format!(
                    "table {name}: the copy differs from the source at key {key:?}"
                )));
            }
            n += ba.len() as u64;
            if ba.len() < COMPARE_BATCH {
                break;
            }
            // The smallest key after the last one.
            from = ba.last().map(|(k, _)| {
                let mut next = k.clone();
                next.push(0);
                next
            });
        }
    }
    Ok(n)
}
