//! What a transaction reads of one table: a [`TableView`], its memtable (a write
//! transaction's) over its segments, with the transaction's lookup hints. Both transactions
//! (`txn.rs`) and the cursor (`cursor.rs`) read through it.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use crate::error::Result;
use crate::memtable::Memtable;
use crate::segment::{key_cmp, BlockHint, Load, Probe, Segment};
use crate::version::Version;

/// A transaction's lookup hints: per table, one per segment of the table in the transaction's
/// version, in the same order ([`BlockHint`]).
pub(crate) type Hints = Vec<RefCell<Vec<Option<BlockHint>>>>;

/// No hints yet for every table of `version`.
pub(crate) fn new_hints(version: &Version) -> Hints {
    version
        .tables
        .iter()
        .map(|t| RefCell::new(t.segments.iter().map(|_| None).collect()))
        .collect()
}

/// A read-only view of one table: an optional memtable over segments (newest first).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TableView<'a> {
    pub(crate) mem: Option<&'a Memtable>,
    pub(crate) segments: &'a [Arc<Segment>],
    /// How many of `segments`' oldest are partitions: a lookup searches them by key.
    pub(crate) parts: usize,
    /// The segments' lookup hints (none for a table created in the transaction).
    pub(crate) hints: Option<&'a RefCell<Vec<Option<BlockHint>>>>,
}

impl<'a> TableView<'a> {
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Cow<'a, [u8]>>> {
        if let Some(v) = self.mem_get(key) {
            return Ok(v.map(Cow::Borrowed));
        }
        Ok(self
            .segment_get(key, |v| v.map(|v| Cow::Owned(v.to_vec())))?
            .flatten())
    }

    /// `f` of the entry (a value, or `None` for a deletion) of the newest segment that has
    /// `key`; `None` if none has it.
    pub(crate) fn segment_get<R>(
        &self,
        key: &[u8],
        f: impl Fn(Option<&[u8]>) -> R,
    ) -> Result<Option<R>> {
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
    pub(crate) fn holds(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        match self.mem_get(key) {
            Some(v) => Ok(v == Some(value)),
            None => Ok(matches!(
                self.segment_probe(key, Load::CachedOnly, |v| v == Some(value))?,
                Probe::Found(true)
            )),
        }
    }

    /// The memtable's entry for `key`: `Some(None)` is a deletion.
    pub(crate) fn mem_get(&self, key: &[u8]) -> Option<Option<&'a [u8]>> {
        self.mem?.get(key)
    }

    /// Whether the transaction sees a value under `key`: the memtable's entry if it has one,
    /// as in [`TableView::get`], else the newest segment's.
    pub(crate) fn contains(&self, key: &[u8]) -> Result<bool> {
        match self.mem_get(key) {
            Some(v) => Ok(v.is_some()),
            None => Ok(self.segment_get(key, |v| v.is_some())?.unwrap_or(false)),
        }
    }

    /// The largest live key before `before`, or the last key if `before` is `None`.
    pub(crate) fn prev_live(&self, before: Option<&[u8]>) -> Result<Option<Vec<u8>>> {
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
