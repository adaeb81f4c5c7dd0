//! The one forward merge of a table's sources: an optional memtable over segments (newest
//! first), newest source winning on equal keys, tombstones skipped or kept. Commits and
//! background merges use it to write segments, read transactions to scan, and write cursors
//! to step; each segment keeps its position between steps, so a step costs a comparison per
//! segment instead of a seek in each. (Backward steps, `Cursor::last_key` only, seek instead.)

use std::cmp::Ordering;
use std::iter::Peekable;
use std::ops::Bound;
use std::sync::Arc;

use crate::error::Result;
use crate::memtable::{self, Memtable};
use crate::segment::{key_cmp, key_prefix, CacheUse, Entry, Segment, SegmentIter};
use crate::version::partitions;

/// The memtable side of a merge: its first entry above a bound, which only grows.
pub(crate) trait MemSource<'a> {
    /// The first entry above `lower` (a deletion has `None` as value).
    fn first_above(&mut self, lower: Bound<&[u8]>) -> Option<Entry<'a>>;
}

/// A memtable that may change between steps (a write cursor's): looked up afresh each step.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MemLookup<'a>(pub(crate) Option<&'a Memtable>);

impl<'a> MemSource<'a> for MemLookup<'a> {
    fn first_above(&mut self, lower: Bound<&[u8]>) -> Option<Entry<'a>> {
        let mem = self.0?;
        let key = mem.first_from(lower)?;
        Some((key, mem.get(key).flatten()))
    }
}

/// A memtable that does not change during the merge (a commit's): walked once, in order.
pub(crate) struct MemWalk<'a>(Peekable<memtable::Iter<'a>>);

impl<'a> MemWalk<'a> {
    pub(crate) fn new(mem: &'a Memtable) -> Self {
        MemWalk(mem.iter().peekable())
    }
}

impl<'a> MemSource<'a> for MemWalk<'a> {
    fn first_above(&mut self, lower: Bound<&[u8]>) -> Option<Entry<'a>> {
        while let Some(&(k, _)) = self.0.peek() {
            let below = match lower {
                Bound::Unbounded => false,
                Bound::Included(b) => key_cmp(k, b).is_lt(),
                Bound::Excluded(b) => key_cmp(k, b).is_le(),
            };
            if !below {
                break;
            }
            self.0.next();
        }
        self.0.peek().copied()
    }
}

/// A forward merge over segments, positioned by a lower bound. The memtable comes with each
/// step ([`MemSource`]), not held: a write cursor's transaction changes it between steps.
#[derive(Debug)]
pub(crate) struct MergeIter {
    heads: Vec<SegmentIter>,
    /// Every entry still to come is above this bound (`None`: from the first key).
    lower: Option<(Vec<u8>, bool)>,
    /// The heads standing on the key the last step returned (the winner and the older
    /// versions it shadows): moved past it at the next step. Every other head is already above.
    at_last: Vec<usize>,
    /// Heads whose block under them may not be loaded yet (new, or moved by the last step).
    unloaded: Vec<usize>,
}

/// Where the winning entry of a step comes from.
#[derive(Debug, Clone, Copy)]
enum Source {
    Mem,
    Segment(usize),
}

impl MergeIter {
    /// A merge over `segments` (newest first), from the first key.
    pub(crate) fn new(segments: &[Arc<Segment>]) -> Self {
        Self::new_using(segments, CacheUse::Fill)
    }

    /// A merge over `segments` (newest first), from the first key, reading their blocks
    /// through the cache as `cache_use` says. A table's partitions are one head, read one after
    /// the other, so a step compares as many heads as the table has upper segments, plus one.
    pub(crate) fn new_using(segments: &[Arc<Segment>], cache_use: CacheUse) -> Self {
        let parts = partitions(segments);
        let (upper, run) = segments.split_at(segments.len() - parts);
        let mut heads: Vec<SegmentIter> = upper.iter().map(|s| s.iter_using(cache_use)).collect();
        match run {
            [one] => heads.push(one.iter_using(cache_use)),
            [] => {}
            _ => heads.push(SegmentIter::over_run(run.to_vec(), cache_use)),
        }
        let unloaded = (0..heads.len()).collect();
        MergeIter {
            heads,
            lower: None,
            at_last: Vec::new(),
            unloaded,
        }
    }

    /// Continue from the first key >= `key` (> if `!inclusive`): each segment seeks through
    /// its index.
    ///
    /// # Errors
    /// I/O or corruption while seeking.
    pub(crate) fn seek(&mut self, key: &[u8], inclusive: bool) -> Result<()> {
        self.at_last.clear();
        // Until every head has seeked, the merge is nowhere: `is_after` is false, so a cursor
        // seeks again after an error.
        let bound = self.lower.take();
        for head in &mut self.heads {
            head.seek(Some(key), inclusive)?;
        }
        self.unloaded.clear();
        self.lower = bound;
        set_bound(&mut self.lower, key, inclusive);
        Ok(())
    }

    /// Continue from the first key.
    ///
    /// # Errors
    /// I/O or corruption while reading a segment's first block.
    pub(crate) fn rewind(&mut self) -> Result<()> {
        self.at_last.clear();
        self.lower = None;
        for head in &mut self.heads {
            head.seek(None, true)?;
        }
        self.unloaded.clear();
        Ok(())
    }

    /// Whether the next step continues right after `key`, which the previous step returned.
    pub(crate) fn is_after(&self, key: &[u8]) -> bool {
        matches!(&self.lower, Some((k, false)) if k.as_slice() == key)
    }

    /// The next entry above the bound, merged with `mem` (newest of all), and move the bound
    /// past it. With `live_only`, tombstones are skipped; otherwise they are returned with
    /// `None` as value.
    ///
    /// # Errors
    /// I/O or corruption.
    pub(crate) fn next<'a, 'm: 'a>(
        &'a mut self,
        mem: &mut impl MemSource<'m>,
        live_only: bool,
    ) -> Result<Option<Entry<'a>>> {
        loop {
            // Only the heads on the last key move; each then loads its next block if it
            // crossed one. Every other head stays loaded where it is.
            for &i in &self.at_last {
                if let Some(head) = self.heads.get_mut(i) {
                    head.advance();
                }
            }
            self.unloaded.append(&mut self.at_last);
            // Popped only once loaded: after an error the next call loads it again.
            while let Some(&i) = self.unloaded.last() {
                if let Some(head) = self.heads.get_mut(i) {
                    head.load()?;
                }
                self.unloaded.pop();
            }
            let (source, live, mem_value) = {
                let lower = match &self.lower {
                    None => Bound::Unbounded,
                    Some((k, true)) => Bound::Included(k.as_slice()),
                    Some((k, false)) => Bound::Excluded(k.as_slice()),
                };
                let mem_entry = mem.first_above(lower);
                let mem_value = mem_entry.and_then(|(_, v)| v);
                // (key, whether it is live, where it comes from)
                let mut best: Option<(&[u8], bool, Source)> =
                    mem_entry.map(|(k, v)| (k, v.is_some(), Source::Mem));
                let mut best_prefix = best.map_or(0, |(k, _, _)| key_prefix(k));
                for (i, head) in self.heads.iter().enumerate() {
                    // A head's entry is read only if it wins: one that the best key so far
                    // shadows (a rewritten table's every entry, in a commit) is compared by
                    // its prefix and length alone.
                    let order = match best {
                        None => Ordering::Less,
                        Some((b, _, _)) => match head.cmp_current(b, best_prefix) {
                            Some(order) => order,
                            None => continue,
                        },
                    };
                    match order {
                        Ordering::Less => {
                            let Some((k, v)) = head.current() else {
                                continue;
                            };
                            best = Some((k, v.is_some(), Source::Segment(i)));
                            best_prefix = key_prefix(k);
                            self.at_last.clear();
                            self.at_last.push(i);
                        }
                        // An older version of the best key so far: shadowed, moved past too.
                        Ordering::Equal => self.at_last.push(i),
                        Ordering::Greater => {}
                    }
                }
                let Some((key, live, source)) = best else {
                    return Ok(None);
                };
                set_bound(&mut self.lower, key, false);
                (source, live, mem_value)
            };
            if live_only && !live {
                continue;
            }
            // Borrowed again for the caller's lifetime: the borrows above end with the loop.
            let this: &'a MergeIter = self;
            let key = this.lower.as_ref().map_or(&[][..], |(k, _)| k.as_slice());
            let value = match source {
                Source::Mem => mem_value,
                Source::Segment(i) => this
                    .heads
                    .get(i)
                    .and_then(SegmentIter::current)
                    .and_then(|(_, v)| v),
            };
            return Ok(Some((key, value)));
        }
    }
}

/// Set a merge's lower bound to `key`, in the bound's own buffer (no allocation per step).
fn set_bound(lower: &mut Option<(Vec<u8>, bool)>, key: &[u8], inclusive: bool) {
    match lower {
        Some((k, incl)) => {
            k.clear();
            k.extend_from_slice(key);
            *incl = inclusive;
        }
        None => *lower = Some((key.to_vec(), inclusive)),
    }
}
