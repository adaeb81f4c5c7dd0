//! The cursor of a write transaction: a position in one table, stepped through the merge of
//! its segments with the transaction's memtable, which it may write through.

use crate::error::{Error, Result};
use crate::iter::{MemLookup, MergeIter};
use crate::txn::{TableHandle, WriteTxn};
use crate::view::TableView;

impl<'env> WriteTxn<'env> {
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
