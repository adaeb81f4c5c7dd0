//! Transactions: the write transaction and read transactions, and the table handles they
//! take. A write transaction's cursor is in `cursor.rs`; what both read of a table, in
//! `view.rs`.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use parking_lot::MutexGuard;

use crate::env::{CommitInfo, Env, WriterState};
use crate::error::{Error, Result};
use crate::iter::{MemLookup, MergeIter};
use crate::memtable::{chunk_bytes_for, Memtable};
use crate::segment::Segment;
use crate::version::Version;
use crate::view::{new_hints, Hints, TableView};

/// A table of one environment. Cheap to copy; checked against the environment at every use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TableHandle {
    env_id: u64,
    index: usize,
}

impl TableHandle {
    pub(crate) fn new(env_id: u64, index: usize) -> Self {
        TableHandle { env_id, index }
    }
}

/// The transactions and table handles of an environment: `env/mod.rs` knows nothing of them
/// (it hands out its writer lock and pinned versions), so the two files do not import each
/// other.
impl Env {
    /// The handle of an existing table, or `None`.
    pub fn table(&self, name: &str) -> Option<TableHandle> {
        self.table_index(name).map(|i| TableHandle::new(self.id, i))
    }

    /// Open a table, creating it (in its own commit) if it does not exist.
    ///
    /// # Errors
    /// Commit errors.
    pub fn create_table(&self, name: &str) -> Result<TableHandle> {
        let mut txn = self.begin_write()?;
        let t = txn.create_table(name)?;
        txn.commit()?;
        Ok(t)
    }

    /// Begin the write transaction; blocks while another one is open.
    ///
    /// # Errors
    /// [`Error::Poisoned`] after a failed commit.
    pub fn begin_write(&self) -> Result<WriteTxn<'_>> {
        let guard = self.lock_writer()?;
        Ok(WriteTxn::new(self, guard, self.current_version()))
    }

    /// Begin a read transaction pinned to the newest committed generation.
    pub fn begin_read(&self) -> ReadTxn<'_> {
        ReadTxn::new(self, self.pin_current_version())
    }
}

fn table_index(env: &Env, t: TableHandle, count: usize) -> Result<usize> {
    if t.env_id != env.id || t.index >= count {
        return Err(Error::TableNotFound(format!("{t:?}")));
    }
    Ok(t.index)
}

/// The write transaction. Dropping it without [`WriteTxn::commit`] aborts it: nothing it wrote
/// becomes visible. Only one exists at a time per environment.
#[derive(Debug)]
pub struct WriteTxn<'env> {
    pub(crate) env: &'env Env,
    writer: MutexGuard<'env, WriterState>,
    base: Arc<Version>,
    new_tables: Vec<String>,
    pub(crate) memtables: Vec<Memtable>,
    hints: Hints,
    /// Per table: the sorted runs its memtable spilled to `live/`, newest first (design.md
    /// §2, "Spilling"); empty unless the transaction outgrew its memory budget.
    runs: Vec<Vec<Arc<Segment>>>,
    /// Per table with runs: the runs followed by the base version's segments, which is what
    /// the transaction reads below its memtable.
    stacked: Vec<Option<Vec<Arc<Segment>>>>,
    /// Runs merged into newer ones whose files could not be deleted: the commit tries again
    /// (and fails if it cannot), an abort too.
    dead: Vec<Arc<Segment>>,
    /// The memtables' [`Memtable::heap_bytes`], summed.
    mem_heap: u64,
    /// The most this transaction's memory accounting ([`WriteTxn::memory_bytes`]) has been
    /// after a write was accounted for and any spill it made was done.
    peak_memory: u64,
    /// Spills so far: a cursor that has seen fewer rebuilds its merge.
    pub(crate) spills: u64,
}

impl<'env> WriteTxn<'env> {
    pub(crate) fn new(
        env: &'env Env,
        writer: MutexGuard<'env, WriterState>,
        base: Arc<Version>,
    ) -> Self {
        let tables = base.tables.len();
        let chunk = chunk_bytes_for(env.budget.memtable_share());
        let memtables = (0..tables).map(|_| Memtable::with_chunk(chunk)).collect();
        let hints = new_hints(&base);
        WriteTxn {
            env,
            writer,
            base,
            new_tables: Vec::new(),
            memtables,
            hints,
            runs: vec![Vec::new(); tables],
            stacked: vec![None; tables],
            dead: Vec::new(),
            mem_heap: 0,
            peak_memory: 0,
            spills: 0,
        }
    }

    /// The memory this transaction's uncommitted writes hold, as its budget
    /// ([`Env::memtable_budget`]) counts it: its memtables' chunks, entries and nodes, and
    /// the value chunks kept from the last transaction for reuse.
    pub fn memory_bytes(&self) -> u64 {
        // Every spare chunk is of the environment's chunk size (`Memtable::recycle_chunks`).
        let chunk = chunk_bytes_for(self.env.budget.memtable_share());
        self.mem_heap + (self.writer.spare_chunks.len() * chunk) as u64
    }

    /// The largest [`WriteTxn::memory_bytes`] seen after any write of this transaction
    /// (including the spill the write caused).
    pub fn peak_memory_bytes(&self) -> u64 {
        self.peak_memory
    }

    /// How many sorted runs this transaction has spilled to `live/` and still holds.
    pub fn spilled_runs(&self) -> usize {
        self.runs.iter().map(Vec::len).sum()
    }

    /// Account for a write to table `i` that took its memtable from `before` bytes of memory
    /// to its current size, and spill while the transaction is over its budget: first the
    /// value chunks kept for reuse are freed, then the largest memtables are written to runs.
    fn account(&mut self, i: usize, before: u64) -> Result<()> {
        let after = self.memtables.get(i).map_or(0, Memtable::heap_bytes);
        self.mem_heap = self.mem_heap - before + after;
        let budget = self.env.memtable_budget();
        while self.memory_bytes() > budget && self.writer.spare_chunks.pop().is_some() {}
        while self.memory_bytes() > budget {
            let largest = (0..self.memtables.len())
                .filter(|&t| self.memtables.get(t).is_some_and(|m| !m.is_empty()))
                .max_by_key(|&t| self.memtables.get(t).map_or(0, Memtable::heap_bytes));
            let Some(t) = largest else { break };
            self.spill_table(t)?;
            while self.memory_bytes() > budget && self.writer.spare_chunks.pop().is_some() {}
        }
        self.peak_memory = self.peak_memory.max(self.memory_bytes());
        self.env.budget.note_memtable(self.memory_bytes());
        Ok(())
    }

    /// Write table `t`'s memtable (merged with some of its newest runs) as a run in `live/`,
    /// and empty it. On an error the transaction is as it was before.
    fn spill_table(&mut self, t: usize) -> Result<()> {
        let (Some(mem), Some(runs)) = (self.memtables.get(t), self.runs.get(t)) else {
            return Ok(());
        };
        let (new, merged) = self.env.spill(&mut self.writer, mem, runs)?;
        let mut old = Vec::new();
        if let Some(runs) = self.runs.get_mut(t) {
            old.extend(runs.drain(..merged));
            if let Some(new) = new {
                runs.insert(0, new);
            }
        }
        if let Some(m) = self.memtables.get_mut(t) {
            self.mem_heap -= m.heap_bytes();
            m.clear_spilled(&mut self.writer.spare_chunks);
        }
        let runs = self.runs.get(t).cloned().unwrap_or_default();
        let stacked = (!runs.is_empty()).then(|| {
            let base = self.base.tables.get(t).map_or(&[][..], |b| &b.segments[..]);
            runs.into_iter()
                .chain(base.iter().cloned())
                .collect::<Vec<_>>()
        });
        // The lookup hints are per segment position, which the new run shifted.
        if let (Some(h), Some(segs)) = (self.hints.get_mut(t), &stacked) {
            *h = RefCell::new(segs.iter().map(|_| None).collect());
        }
        if let Some(slot) = self.stacked.get_mut(t) {
            *slot = stacked;
        }
        self.spills += 1;
        if let Err(e) = self.env.discard_runs(&old) {
            self.dead.extend(old);
            return Err(e);
        }
        Ok(())
    }

    /// The generation this transaction reads from.
    pub fn base_generation(&self) -> u64 {
        self.base.generation
    }

    /// Open a table, creating it in this transaction if it does not exist.
    ///
    /// # Errors
    /// [`Error::NameTooLong`] for a name of more than 65,535 bytes (the manifest stores the
    /// length in 16 bits).
    pub fn create_table(&mut self, name: &str) -> Result<TableHandle> {
        if name.len() > usize::from(u16::MAX) {
            return Err(Error::NameTooLong(name.len()));
        }
        let existing = self
            .base
            .tables
            .iter()
            .map(|t| t.name.as_str())
            .chain(self.new_tables.iter().map(String::as_str))
            .position(|n| n == name);
        let index = match existing {
            Some(i) => i,
            None => {
                self.new_tables.push(name.to_string());
                let chunk = chunk_bytes_for(self.env.budget.memtable_share());
                self.memtables.push(Memtable::with_chunk(chunk));
                self.runs.push(Vec::new());
                self.stacked.push(None);
                self.memtables.len() - 1
            }
        };
        Ok(TableHandle::new(self.env.id, index))
    }

    pub(crate) fn view(&self, index: usize) -> TableView<'_> {
        let base = self
            .base
            .tables
            .get(index)
            .map_or(&[][..], |t| t.segments.as_slice());
        TableView {
            mem: self.memtables.get(index),
            segments: match self.stacked.get(index) {
                Some(Some(stacked)) => stacked.as_slice(),
                _ => base,
            },
            parts: self.base.tables.get(index).map_or(0, |t| t.parts),
            hints: self.hints.get(index),
        }
    }

    pub(crate) fn index(&self, t: TableHandle) -> Result<usize> {
        table_index(self.env, t, self.memtables.len())
    }

    /// Look up a key, seeing this transaction's own writes.
    ///
    /// # Errors
    /// Unknown table, I/O or corruption while reading a segment.
    pub fn get(&self, t: TableHandle, key: &[u8]) -> Result<Option<Cow<'_, [u8]>>> {
        let i = self.index(t)?;
        self.view(i).get(key)
    }

    /// Insert or overwrite. A put of the value the transaction already sees under `key` is
    /// not recorded: it changes nothing, and the commit does not write it again.
    ///
    /// # Errors
    /// Unknown table; a key longer than 65,535 bytes; a value of 4 GiB − 1 bytes or more
    /// (`u32::MAX` is the deletion marker's length); I/O or corruption while reading a segment
    /// for the key's current value.
    pub fn put(&mut self, t: TableHandle, key: &[u8], value: &[u8]) -> Result<()> {
        let i = self.index(t)?;
        if key.len() > usize::from(u16::MAX) {
            return Err(Error::KeyTooLong(key.len()));
        }
        if value.len() >= u32::MAX as usize {
            return Err(Error::ValueTooLong(value.len()));
        }
        if self.view(i).holds(key, value)? {
            return Ok(());
        }
        let Some(m) = self.memtables.get_mut(i) else {
            return Ok(());
        };
        let before = m.heap_bytes();
        m.insert(key, Some(value), &mut self.writer.spare_chunks);
        self.account(i, before)
    }

    /// Delete a key (a missing key is fine).
    ///
    /// # Errors
    /// Unknown table.
    pub fn delete(&mut self, t: TableHandle, key: &[u8]) -> Result<()> {
        let i = self.index(t)?;
        let needs_tombstone = !self.view(i).segments.is_empty();
        let Some(m) = self.memtables.get_mut(i) else {
            return Ok(());
        };
        let before = m.heap_bytes();
        if needs_tombstone {
            m.insert(key, None, &mut self.writer.spare_chunks);
        } else {
            m.remove(key);
        }
        self.account(i, before)
    }

    /// Make every write of this transaction durable and visible, atomically.
    ///
    /// # Errors
    /// - [`Error::CommitOutcomeUnknown`]: the commit point itself (the snapshot ioctl that
    ///   makes the generation durable) reported an error. The kernel can report one after the
    ///   snapshot exists, so this transaction may be durable. Reopen the environment: it opens
    ///   the newest generation, which holds this transaction or the previous commit, never a
    ///   part of it.
    /// - Any other error: nothing of this transaction is committed; the database holds the
    ///   previous commit. (Steps after the commit point only log their failures.)
    ///
    /// After any error the environment is poisoned: reads still see the previous commit, and
    /// writes are refused with [`Error::Poisoned`] until it is reopened.
    pub fn commit(mut self) -> Result<CommitInfo> {
        let mut info = self.env.commit(
            &mut self.writer,
            &self.base,
            &self.new_tables,
            &self.memtables,
            &self.runs,
            &self.dead,
        )?;
        info.txn_peak_memory_bytes = self.peak_memory;
        // The runs are the new generation's segments now (or merged away by the commit).
        self.runs.clear();
        self.dead.clear();
        // The base version may hold the last references to the segments just merged away:
        // their files are closed on the environment's retiring thread, not here.
        let base = std::mem::replace(&mut self.base, self.env.current_version());
        self.env.retire(base);
        Ok(info)
    }

    /// Discard every write (the same as dropping the transaction).
    pub fn abort(self) {}
}

impl Drop for WriteTxn<'_> {
    /// Committed or not, the transaction's value chunks stay with the writer for the next one
    /// (`WriterState::spare_chunks`); spares it did not use are freed, so what is kept is what
    /// the latest transaction needed.
    fn drop(&mut self) {
        // Runs of a transaction that did not commit: uncommitted state, deleted from live/.
        // (After a failed commit the environment is poisoned and the next open discards
        // live/ anyway; a run the commit had already unlinked is not found, which is fine.)
        let unused: Vec<Arc<Segment>> = self
            .runs
            .drain(..)
            .flatten()
            .chain(self.dead.drain(..))
            .collect();
        if let Err(e) = self.env.discard_runs(&unused) {
            log::warn!(
                "an aborted transaction's spilled runs stay in live/ until the next open: {e}"
            );
        }
        let mut kept = Vec::new();
        for m in &mut self.memtables {
            m.recycle_chunks(&mut kept);
        }
        let chunk = chunk_bytes_for(self.env.budget.memtable_share());
        self.env.budget.note_memtable((kept.len() * chunk) as u64);
        self.writer.spare_chunks = kept;
    }
}

/// A read transaction: a consistent view of one committed generation. It never blocks the
/// writer, and the generation's files are not deleted while it lives.
#[derive(Debug)]
pub struct ReadTxn<'env> {
    env: &'env Env,
    version: Arc<Version>,
    hints: Hints,
}

impl<'env> ReadTxn<'env> {
    pub(crate) fn new(env: &'env Env, version: Arc<Version>) -> Self {
        let hints = new_hints(&version);
        ReadTxn {
            env,
            version,
            hints,
        }
    }

    /// The generation this transaction sees.
    pub fn generation(&self) -> u64 {
        self.version.generation
    }

    fn view(&self, t: TableHandle) -> Result<TableView<'_>> {
        let i = table_index(self.env, t, usize::MAX)?;
        let table = self.version.tables.get(i);
        Ok(TableView {
            mem: None,
            segments: table.map_or(&[][..], |t| t.segments.as_slice()),
            parts: table.map_or(0, |t| t.parts),
            hints: self.hints.get(i),
        })
    }

    /// Look up a key.
    ///
    /// # Errors
    /// Unknown table, I/O or corruption.
    pub fn get(&self, t: TableHandle, key: &[u8]) -> Result<Option<Cow<'_, [u8]>>> {
        self.view(t)?.get(key)
    }

    /// Every entry of a table with key >= `from`, in key order (for scans and tests).
    ///
    /// # Errors
    /// Unknown table, I/O or corruption.
    pub fn scan(&self, t: TableHandle, from: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut it = MergeIter::new(self.view(t)?.segments);
        it.seek(from, true)?;
        let mut out = Vec::new();
        while let Some((k, v)) = it.next(&mut MemLookup(None), true)? {
            if let Some(v) = v {
                out.push((k.to_vec(), v.to_vec()));
            }
        }
        Ok(out)
    }
}

impl Drop for ReadTxn<'_> {
    fn drop(&mut self) {
        self.env.unpin(self.version.generation);
    }
}
