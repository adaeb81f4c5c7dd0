//! Transactions and cursors.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use parking_lot::MutexGuard;

use crate::env::{CommitInfo, Env, WriterState};
use crate::error::{Error, Result};
use crate::iter::{MemLookup, MergeIter};
use crate::memtable::{chunk_bytes_for, Memtable};
use crate::segment::{key_cmp, BlockHint, Load, Probe, Segment};
use crate::version::Version;

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

/// A transaction's lookup hints: per table, one per segment of the table in the transaction's
/// version, in the same order ([`BlockHint`]).
type Hints = Vec<RefCell<Vec<Option<BlockHint>>>>;

/// No hints yet for every table of `version`.
fn new_hints(version: &Version) -> Hints {
    version
        .tables
        .iter()
        .map(|t| RefCell::new(t.segments.iter().map(|_| None).collect()))
        .collect()
}

/// A read-only view of one table: an optional memtable over segments (newest first).
#[derive(Debug, Clone, Copy)]
struct TableView<'a> {
    mem: Option<&'a Memtable>,
    segments: &'a [Arc<Segment>],
    /// How many of `segments`' oldest are partitions: a lookup searches them by key.
    parts: usize,
    /// The segments' lookup hints (none for a table created in the transaction).
    hints: Option<&'a RefCell<Vec<Option<BlockHint>>>>,
}

impl<'a> TableView<'a> {
    fn get(&self, key: &[u8]) -> Result<Option<Cow<'a, [u8]>>> {
        if let Some(v) = self.mem_get(key) {
            return Ok(v.map(Cow::Borrowed));
        }
        Ok(self
            .segment_get(key, |v| v.map(|v| Cow::Owned(v.to_vec())))?
            .flatten())
    }

    /// `f` of the entry (a value, or `None` for a deletion) of the newest segment that has
    /// `key`; `None` if none has it.
    fn segment_get<R>(&self, key: &[u8], f: impl Fn(Option<&[u8]>) -> R) -> Result<Option<R>> {
        Ok(self.segment_probe(key, Load::Read, f)?.found())
    }

    /// As [`TableView::segment_get`], reading blocks only as `load` allows: [`Probe::NotRead`]
    /// if a segment the answer depends on would have had to read its block from disk.
    fn segment_probe<R>(
        &self,
        key: &[u8],
        load: Load,
        f: impl Fn(Option<&[u8]>) -> R,
    ) -> Result<Probe<R>> {
        let mut hints = self.hints.map(RefCell::borrow_mut);
        let upper = self.segments.len().saturating_sub(self.parts);
        // Every upper segment, newest first; then the one partition whose range may hold it.
        let (above, parts) = self.segments.split_at(upper);
        let part = parts.partition_point(|s| key_cmp(&s.max_key, key).is_lt());
        let candidates = above
            .iter()
            .enumerate()
            .chain(parts.get(part).map(|s| (upper + part, s)));
        for (i, seg) in candidates {
            let mut unhinted = None;
            let hint = hints
                .as_mut()
                .and_then(|h| h.get_mut(i))
                .unwrap_or(&mut unhinted);
            match seg.probe(key, hint, load, &f)? {
                Probe::Absent => {}
                found_or_not_read => return Ok(found_or_not_read),
            }
        }
        Ok(Probe::Absent)
    }

    /// Whether the transaction already sees `value` under `key`: then a put of it changes
    /// nothing (design.md §2). Only blocks already in memory are searched: where finding out
    /// would read a block from disk, the answer is no and the put is recorded (a put the
    /// slasher did not read first, such as a new `attesters` entry, would otherwise read a
    /// cold block only to learn that its value changed).
    fn holds(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        match self.mem_get(key) {
            Some(v) => Ok(v == Some(value)),
            None => Ok(matches!(
                self.segment_probe(key, Load::CachedOnly, |v| v == Some(value))?,
                Probe::Found(true)
            )),
        }
    }

    /// The memtable's entry for `key`: `Some(None)` is a deletion.
    fn mem_get(&self, key: &[u8]) -> Option<Option<&'a [u8]>> {
        self.mem?.get(key)
    }

    /// Whether the transaction sees a value under `key`: the memtable's entry if it has one,
    /// as in [`TableView::get`], else the newest segment's.
    fn contains(&self, key: &[u8]) -> Result<bool> {
        match self.mem_get(key) {
            Some(v) => Ok(v.is_some()),
            None => Ok(self.segment_get(key, |v| v.is_some())?.unwrap_or(false)),
        }
    }

    /// The largest live key before `before`, or the last key if `before` is `None`.
    fn prev_live(&self, before: Option<&[u8]>) -> Result<Option<Vec<u8>>> {
        let mut cur: Option<Vec<u8>> = before.map(<[u8]>::to_vec);
        loop {
            let mut best: Option<Vec<u8>> = None;
            let mut consider = |k: &[u8]| {
                if best.as_deref().is_none_or(|b| k > b) {
                    best = Some(k.to_vec());
                }
            };
            if let Some(mem) = self.mem {
                if let Some(k) = mem.last_before(cur.as_deref()) {
                    consider(k);
                }
            }
            for seg in self.segments {
                if let Some(p) = seg.seek_lt(cur.as_deref())? {
                    consider(seg.block(p.block)?.key(p.entry));
                }
            }
            let Some(candidate) = best else {
                return Ok(None);
            };
            if self.contains(&candidate)? {
                return Ok(Some(candidate));
            }
            cur = Some(candidate);
        }
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
    env: &'env Env,
    writer: MutexGuard<'env, WriterState>,
    base: Arc<Version>,
    new_tables: Vec<String>,
    memtables: Vec<Memtable>,
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
    spills: u64,
}

impl<'env> WriteTxn<'env> {
    pub(crate) fn new(
        env: &'env Env,
        writer: MutexGuard<'env, WriterState>,
        base: Arc<Version>,
    ) -> Self {
        let tables = base.tables.len();
        let chunk = chunk_bytes_for(env.memtable_budget());
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
        let chunk = chunk_bytes_for(self.env.memtable_budget());
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
                let chunk = chunk_bytes_for(self.env.memtable_budget());
                self.memtables.push(Memtable::with_chunk(chunk));
                self.runs.push(Vec::new());
                self.stacked.push(None);
                self.memtables.len() - 1
            }
        };
        Ok(TableHandle::new(self.env.id, index))
    }

    fn view(&self, index: usize) -> TableView<'_> {
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

    fn index(&self, t: TableHandle) -> Result<usize> {
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

    /// An unpositioned cursor over one table.
    ///
    /// # Errors
    /// Unknown table.
    pub fn cursor(&mut self, t: TableHandle) -> Result<Cursor<'_, 'env>> {
        let index = self.index(t)?;
        let iter = MergeIter::new(self.view(index).segments);
        let spills = self.spills;
        Ok(Cursor {
            txn: self,
            index,
            state: State::Unpositioned,
            iter,
            value: None,
            spills,
        })
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
        let info = self.env.commit(
            &mut self.writer,
            &self.base,
            &self.new_tables,
            &self.memtables,
            &self.runs,
            &self.dead,
        )?;
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
        self.writer.spare_chunks = kept;
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Unpositioned,
    At(Vec<u8>),
    /// Just after `delete_current`: on the deleted key's successor, which the next `next`
    /// returns instead of skipping (LMDB's `MDB_NEXT` after `mdb_cursor_del`).
    Deleted(Vec<u8>),
    End,
}

/// A cursor inside a [`WriteTxn`]. Starts unpositioned.
#[derive(Debug)]
pub struct Cursor<'txn, 'env> {
    txn: &'txn mut WriteTxn<'env>,
    index: usize,
    state: State,
    /// The merge over the table's segments; the memtable is read at each step.
    iter: MergeIter,
    /// The value of the key in `state` when the step that reached it read it, until a write.
    value: Option<Vec<u8>>,
    /// The transaction's spill count `iter` was made at: a spill since moved entries from the
    /// memtable to a run `iter` does not read, so it is made again.
    spills: u64,
}

impl Cursor<'_, '_> {
    fn view(&self) -> TableView<'_> {
        self.txn.view(self.index)
    }

    /// After a spill: a merge over the table's segments as they are now, unpositioned (the
    /// callers seek it).
    fn renew_iter(&mut self) {
        if self.spills != self.txn.spills {
            self.iter = MergeIter::new(self.txn.view(self.index).segments);
            self.spills = self.txn.spills;
        }
    }

    fn set(&mut self, key: Option<Vec<u8>>) -> Option<Vec<u8>> {
        self.state = match &key {
            Some(k) => State::At(k.clone()),
            None => State::End,
        };
        key
    }

    /// The next live entry of the merge: its key, with its value kept for `current` (in the
    /// same buffer from step to step).
    fn step(&mut self) -> Result<Option<Vec<u8>>> {
        let mut key = Vec::new();
        Ok(self.step_into(&mut key)?.then_some(key))
    }

    /// [`Cursor::step`] into `key`'s buffer; false at the end.
    fn step_into(&mut self, key: &mut Vec<u8>) -> Result<bool> {
        // A table this transaction has not written has nothing to look up at each step.
        let mut mem = MemLookup(self.txn.memtables.get(self.index).filter(|m| !m.is_empty()));
        let Some((k, v)) = self.iter.next(&mut mem, true)? else {
            self.value = None;
            return Ok(false);
        };
        key.clear();
        key.extend_from_slice(k);
        match (&mut self.value, v) {
            (Some(buf), Some(v)) => {
                buf.clear();
                buf.extend_from_slice(v);
            }
            (slot, v) => *slot = v.map(<[u8]>::to_vec),
        }
        Ok(true)
    }

    /// Replace `key` with the first live key after it (the next step if the merge stands right
    /// after it, else a seek); false at the end. On an error `key` is unchanged.
    fn advance_past(&mut self, key: &mut Vec<u8>) -> Result<bool> {
        self.renew_iter();
        if !self.iter.is_after(key) {
            self.iter.seek(key, false)?;
        }
        self.step_into(key)
    }

    /// Move to the smallest key.
    ///
    /// # Errors
    /// I/O or corruption.
    pub fn first_key(&mut self) -> Result<Option<Vec<u8>>> {
        self.renew_iter();
        self.iter.rewind()?;
        let k = self.step()?;
        Ok(self.set(k))
    }

    /// Move to the largest key (including this transaction's writes).
    ///
    /// # Errors
    /// I/O or corruption.
    pub fn last_key(&mut self) -> Result<Option<Vec<u8>>> {
        let k = self.view().prev_live(None)?;
        self.value = None;
        Ok(self.set(k))
    }

    /// Move to the next key; `None` at the end.
    ///
    /// # Errors
    /// [`Error::CursorUnpositioned`] if never positioned; I/O or corruption.
    pub fn next_key(&mut self) -> Result<Option<Vec<u8>>> {
        let k = match &self.state {
            State::Unpositioned => return Err(Error::CursorUnpositioned),
            State::End => return Ok(None),
            State::Deleted(k) => Some(k.clone()),
            State::At(_) => {
                // The key is taken out and its buffer reused for the successor's.
                let State::At(mut k) = std::mem::replace(&mut self.state, State::End) else {
                    return Ok(None);
                };
                return match self.advance_past(&mut k) {
                    Ok(true) => {
                        let out = k.clone();
                        self.state = State::At(k);
                        Ok(Some(out))
                    }
                    Ok(false) => Ok(None),
                    Err(e) => {
                        self.state = State::At(k);
                        Err(e)
                    }
                };
            }
        };
        Ok(self.set(k))
    }

    /// Move to the smallest key >= `key`.
    ///
    /// # Errors
    /// I/O or corruption.
    pub fn seek(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.renew_iter();
        self.iter.seek(key, true)?;
        let k = self.step()?;
        Ok(self.set(k))
    }

    /// The entry under the cursor.
    ///
    /// # Errors
    /// I/O or corruption.
    pub fn current(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let (State::At(k) | State::Deleted(k)) = &self.state else {
            return Ok(None);
        };
        let k = k.clone();
        let v = match &self.value {
            Some(v) => Some(v.clone()),
            None => self.view().get(&k)?.map(|v| v.into_owned()),
        };
        if let State::Deleted(at) = &mut self.state {
            self.state = State::At(std::mem::take(at));
        }
        Ok(v.map(|v| (k, v)))
    }

    /// Delete the entry under the cursor and move to its successor.
    ///
    /// # Errors
    /// [`Error::CursorUnpositioned`] without a current entry.
    pub fn delete_current(&mut self) -> Result<()> {
        let (State::At(k) | State::Deleted(k)) = &self.state else {
            return Err(Error::CursorUnpositioned);
        };
        let mut k = k.clone();
        let t = TableHandle::new(self.txn.env.id, self.index);
        self.txn.delete(t, &k)?;
        self.value = None;
        self.state = if self.advance_past(&mut k)? {
            State::Deleted(k)
        } else {
            State::End
        };
        Ok(())
    }

    /// Insert or overwrite, and move the cursor to `key` (as [`WriteTxn::put`]).
    ///
    /// # Errors
    /// As [`WriteTxn::put`].
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let t = TableHandle::new(self.txn.env.id, self.index);
        self.txn.put(t, key, value)?;
        self.state = State::At(key.to_vec());
        self.value = Some(value.to_vec());
        Ok(())
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
