//! A write transaction's uncommitted writes to one table.
//!
//! Most of the slasher's writes arrive in ascending key order within a transaction (validator
//! chunks are processed in order, and each chunk's tiles and `current_epochs` entries in key
//! order). A B-tree pays a search from the root for every one of them. Here a key greater than
//! every key written so far is appended to a sorted vector instead, and only keys that arrive
//! out of order go to a B-tree beside it. The two hold disjoint keys; lookups try both, and
//! ordered walks merge them. Values are copied into large shared chunks rather than one
//! allocation each; an overwritten value's bytes stay there until the transaction ends.

use std::collections::btree_map;
use std::collections::BTreeMap;
use std::iter::Peekable;
use std::ops::Bound;

use crate::memkey::{MemKey, INLINE};
use crate::segment::key_cmp;

/// Where a value's bytes are in the memtable's chunks, or a deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Value {
    chunk: u32,
    offset: u32,
    /// `u32::MAX` for a deletion.
    len: u32,
}

const DELETED: u32 = u32::MAX;

/// Size of a value chunk (a larger value gets a chunk of its own), unless a small memory
/// budget asks for less ([`chunk_bytes_for`]).
pub(crate) const CHUNK: usize = 1 << 20;

/// The value chunk size for a write transaction's memory budget of `budget` bytes: a
/// sixteenth of it, at least 4 KiB and at most [`CHUNK`], so that a chunk is a small part of
/// what the budget holds.
pub(crate) fn chunk_bytes_for(budget: u64) -> usize {
    usize::try_from(budget / 16)
        .unwrap_or(CHUNK)
        .clamp(4 << 10, CHUNK)
}

/// What one entry of the run takes in memory.
const RUN_ENTRY_BYTES: u64 = std::mem::size_of::<(MemKey, Value)>() as u64;

/// What one entry of the tree takes in memory, give or take: the key and value, a B-tree
/// node's share of them being about two thirds full, and the node's own fields.
const TREE_ENTRY_BYTES: u64 = RUN_ENTRY_BYTES * 3 / 2 + 8;

/// Key → value or deletion, ordered by key.
#[derive(Debug)]
pub(crate) struct Memtable {
    /// Strictly ascending: the keys that were, when first written, above every key written
    /// before them.
    run: Vec<(MemKey, Value)>,
    /// Every other key; none of them is in `run`, and all are below its last key.
    tree: BTreeMap<MemKey, Value>,
    /// The values' bytes, appended.
    chunks: Vec<Vec<u8>>,
    /// [`Memtable::bytes`], kept up to date by every insert and removal.
    bytes: u64,
    /// The capacity of `chunks`, in bytes.
    chunk_bytes: u64,
    /// Bytes of the boxed keys (longer than [`INLINE`]) in `run` and `tree`.
    boxed_key_bytes: u64,
    /// The size of a value chunk.
    chunk: usize,
}

/// What a key of `len` bytes adds to [`Memtable::heap_bytes`] besides its entry: a key longer
/// than [`INLINE`] is boxed, its bytes memory of their own.
fn boxed_len(len: usize) -> u64 {
    if len > INLINE {
        len as u64
    } else {
        0
    }
}

/// What an entry adds to [`Memtable::bytes`].
fn entry_bytes(key_len: usize, v: Value) -> u64 {
    let value_len = if v.len == DELETED { 0 } else { v.len };
    key_len as u64 + u64::from(value_len) + 6
}

/// The bytes of `v` in `chunks`, or `None` for a deletion.
fn resolve(chunks: &[Vec<u8>], v: Value) -> Option<&[u8]> {
    if v.len == DELETED {
        return None;
    }
    let start = v.offset as usize;
    chunks
        .get(v.chunk as usize)
        .and_then(|c| c.get(start..start + v.len as usize))
}

impl Memtable {
    pub(crate) fn new() -> Memtable {
        Memtable::with_chunk(CHUNK)
    }

    /// A memtable whose value chunks are `chunk` bytes (see [`chunk_bytes_for`]).
    pub(crate) fn with_chunk(chunk: usize) -> Memtable {
        Memtable {
            run: Vec::new(),
            tree: BTreeMap::new(),
            chunks: Vec::new(),
            bytes: 0,
            chunk_bytes: 0,
            boxed_key_bytes: 0,
            chunk: chunk.max(1),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.run.is_empty() && self.tree.is_empty()
    }

    /// The bytes its entries would take in a segment, give or take: each key and live value
    /// plus 6. The merge policy sizes a commit's merge by it (`env/policy.rs`); counted
    /// as entries come and go, because walking a cold batch's 1.1M entries at every commit
    /// had been 1.6 % of `backend/examples/rewrite.rs`'s samples.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The memory it holds, in bytes: its value chunks, the run's capacity, the tree's
    /// entries and nodes (estimated) and the boxed keys. What a write transaction's memory
    /// budget counts (design.md §2, "Spilling"); kept up to date as entries come, so reading
    /// it costs a few additions.
    pub(crate) fn heap_bytes(&self) -> u64 {
        self.chunk_bytes
            + self.run.capacity() as u64 * RUN_ENTRY_BYTES
            + self.tree.len() as u64 * TREE_ENTRY_BYTES
            + self.boxed_key_bytes
    }

    /// Copy `value` into the chunks (`None`: a deletion), taking a new chunk from `spare`
    /// when there is one.
    fn store(&mut self, value: Option<&[u8]>, spare: &mut Vec<Vec<u8>>) -> Value {
        let Some(bytes) = value else {
            return Value {
                chunk: 0,
                offset: 0,
                len: DELETED,
            };
        };
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.capacity() - c.len() >= bytes.len());
        if !fits {
            let chunk = if bytes.len() <= self.chunk {
                spare.pop()
            } else {
                None
            }
            .unwrap_or_else(|| Vec::with_capacity(self.chunk.max(bytes.len())));
            self.chunk_bytes += chunk.capacity() as u64;
            self.chunks.push(chunk);
        }
        let chunk = self.chunks.len().saturating_sub(1);
        let offset = self.chunks.last_mut().map_or(0, |c| {
            let offset = c.len();
            c.extend_from_slice(bytes);
            offset
        });
        // `WriteTxn::put` refuses values of u32::MAX bytes or more, and a chunk is as large
        // as its largest value or 1 MiB, so these fit.
        Value {
            chunk: chunk as u32,
            offset: offset as u32,
            len: bytes.len() as u32,
        }
    }

    /// The position of `key` in the run, or `None`. Keys outside the run's range cost one or
    /// two comparisons. Inside it, the search gallops back from the end (the last entry, then
    /// 2, 4, 8 … back) and then bisects the last step: the slasher looks up keys near the ones
    /// it has just written (the validators of the chunk it is on), which costs a few
    /// comparisons among the run's newest, cache-warm entries instead of a bisection of all of
    /// it; a key far back costs at most twice a bisection's comparisons.
    fn run_position(&self, key: &[u8]) -> Option<usize> {
        let (first, _) = self.run.first()?;
        let (last, _) = self.run.last()?;
        if key_cmp(key, last).is_gt() || key_cmp(key, first).is_lt() {
            return None;
        }
        // Every entry from `hi` on is above `key`; the one at `lo` is not.
        let mut hi = self.run.len();
        let mut step = 1;
        let lo = loop {
            let probe = self.run.len().saturating_sub(step);
            let (k, _) = self.run.get(probe)?;
            if probe == 0 || key_cmp(k, key).is_le() {
                break probe;
            }
            hi = probe;
            step *= 2;
        };
        let i = self
            .run
            .get(lo..hi)?
            .binary_search_by(|(k, _)| key_cmp(k, key))
            .ok()?;
        Some(lo + i)
    }

    /// The entry for `key`: `Some(None)` is a deletion.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        if let Some(i) = self.run_position(key) {
            return self.run.get(i).map(|(_, v)| resolve(&self.chunks, *v));
        }
        // Rejecting keys outside the tree's range walks its edges (no comparisons) and
        // compares twice; most of the slasher's reads fall past the last key.
        let (last, _) = self.tree.last_key_value()?;
        if key_cmp(key, last).is_gt() {
            return None;
        }
        let (first, _) = self.tree.first_key_value()?;
        if key_cmp(key, first).is_lt() {
            return None;
        }
        self.tree.get(key).map(|v| resolve(&self.chunks, *v))
    }

    /// Insert or overwrite (`None` records a deletion). A new value chunk comes from `spare`
    /// while it has one (see [`Memtable::recycle_chunks`]).
    pub(crate) fn insert(&mut self, key: &[u8], value: Option<&[u8]>, spare: &mut Vec<Vec<u8>>) {
        let value = self.store(value, spare);
        let key_len = key.len();
        self.bytes += entry_bytes(key_len, value);
        let key = MemKey::from(key);
        let above_run = self.run.last().is_none_or(|(last, _)| key > *last);
        if above_run {
            // A key goes to the tree only while it is below the run's last key, which never
            // falls: a key above that is in neither, and there is no tree to search.
            debug_assert!(self.tree.last_key_value().is_none_or(|(k, _)| *k < key));
            self.run.push((key, value));
            self.boxed_key_bytes += boxed_len(key_len);
            return;
        }
        match self.run_position(&key) {
            Some(i) => {
                if let Some(slot) = self.run.get_mut(i) {
                    self.bytes -= entry_bytes(key_len, slot.1);
                    slot.1 = value;
                }
            }
            None => match self.tree.insert(key, value) {
                Some(old) => self.bytes -= entry_bytes(key_len, old),
                None => self.boxed_key_bytes += boxed_len(key_len),
            },
        }
    }

    /// Forget `key`. Only for tables with nothing below the memtable: a key in the run becomes
    /// a deletion instead (a vector does not give up a middle element cheaply), which reads,
    /// walks and commits treat exactly like an absent key when nothing is below it.
    pub(crate) fn remove(&mut self, key: &[u8]) {
        match self.run_position(key) {
            Some(i) => {
                if let Some(slot) = self.run.get_mut(i) {
                    let deleted = Value {
                        len: DELETED,
                        ..slot.1
                    };
                    self.bytes -= entry_bytes(key.len(), slot.1) - entry_bytes(key.len(), deleted);
                    slot.1 = deleted;
                }
            }
            None => {
                if let Some(old) = self.tree.remove(key) {
                    self.bytes -= entry_bytes(key.len(), old);
                    self.boxed_key_bytes -= boxed_len(key.len());
                }
            }
        }
    }

    /// The smallest key above `lower`.
    pub(crate) fn first_from(&self, lower: Bound<&[u8]>) -> Option<&[u8]> {
        let i = match lower {
            Bound::Unbounded => 0,
            Bound::Included(k) => self.run.partition_point(|(x, _)| key_cmp(x, k).is_lt()),
            Bound::Excluded(k) => self.run.partition_point(|(x, _)| key_cmp(x, k).is_le()),
        };
        let a = self.run.get(i).map(|(k, _)| &**k);
        let b = self
            .tree
            .range::<[u8], _>((lower, Bound::Unbounded))
            .next()
            .map(|(k, _)| &**k);
        match (a, b) {
            (Some(a), Some(b)) => Some(if key_cmp(a, b).is_le() { a } else { b }),
            (a, b) => a.or(b),
        }
    }

    /// The largest key below `upper` (the last key if `None`).
    pub(crate) fn last_before(&self, upper: Option<&[u8]>) -> Option<&[u8]> {
        let i = match upper {
            None => self.run.len(),
            Some(k) => self.run.partition_point(|(x, _)| key_cmp(x, k).is_lt()),
        };
        let a = i
            .checked_sub(1)
            .and_then(|i| self.run.get(i))
            .map(|(k, _)| &**k);
        let upper = upper.map_or(Bound::Unbounded, Bound::Excluded);
        let b = self
            .tree
            .range::<[u8], _>((Bound::Unbounded, upper))
            .next_back()
            .map(|(k, _)| &**k);
        match (a, b) {
            (Some(a), Some(b)) => Some(if key_cmp(a, b).is_ge() { a } else { b }),
            (a, b) => a.or(b),
        }
    }

    /// Empty the memtable and move its value chunks, emptied, to `out` for another memtable's
    /// [`Memtable::insert`] (a chunk made for one large value is freed instead). Reusing them
    /// spares the next transaction the page faults of fresh memory: at 1.1M values (a cold
    /// batch's shape, `backend/examples/rewrite.rs`) they were 40 % of the time in `put`.
    pub(crate) fn recycle_chunks(&mut self, out: &mut Vec<Vec<u8>>) {
        self.run.clear();
        self.tree.clear();
        self.bytes = 0;
        self.chunk_bytes = 0;
        self.boxed_key_bytes = 0;
        for mut c in self.chunks.drain(..) {
            if c.capacity() == self.chunk {
                c.clear();
                out.push(c);
            }
        }
    }

    /// After its entries were written to a spill file: empty it as
    /// [`Memtable::recycle_chunks`] does, and free the run's and the tree's memory too, so that
    /// [`Memtable::heap_bytes`] drops to 0.
    pub(crate) fn clear_spilled(&mut self, out: &mut Vec<Vec<u8>>) {
        self.recycle_chunks(out);
        self.run = Vec::new();
    }

    /// Every entry in key order.
    pub(crate) fn iter(&self) -> Iter<'_> {
        Iter {
            run: self.run.iter().peekable(),
            tree: self.tree.iter().peekable(),
            chunks: &self.chunks,
        }
    }
}

/// The entries of a [`Memtable`] in key order: its run and its tree merged.
pub(crate) struct Iter<'a> {
    run: Peekable<std::slice::Iter<'a, (MemKey, Value)>>,
    tree: Peekable<btree_map::Iter<'a, MemKey, Value>>,
    chunks: &'a [Vec<u8>],
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], Option<&'a [u8]>);

    fn next(&mut self) -> Option<Self::Item> {
        let from_run = match (self.run.peek(), self.tree.peek()) {
            (Some((a, _)), Some((b, _))) => a < *b,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let (k, v) = if from_run {
            self.run.next().map(|(k, v)| (k, *v))
        } else {
            self.tree.next().map(|(k, v)| (k, *v))
        }?;
        Some((&**k, resolve(self.chunks, v)))
    }
}

impl<'a> IntoIterator for &'a Memtable {
    type Item = (&'a [u8], Option<&'a [u8]>);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

    fn check(mem: &Memtable, model: &Model, probes: &[Vec<u8>]) {
        let got: Vec<(Vec<u8>, Option<Vec<u8>>)> = mem
            .iter()
            .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
            .collect();
        let want: Vec<(Vec<u8>, Option<Vec<u8>>)> =
            model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(got, want);
        assert_eq!(mem.is_empty(), model.is_empty());
        let bytes: usize = model
            .iter()
            .map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len) + 6)
            .sum();
        assert_eq!(mem.bytes(), bytes as u64, "bytes");
        let boxed: u64 = mem.iter().map(|(k, _)| boxed_len(k.len())).sum();
        assert_eq!(mem.boxed_key_bytes, boxed, "boxed key bytes");
        let chunks: usize = mem.chunks.iter().map(Vec::capacity).sum();
        assert_eq!(mem.chunk_bytes, chunks as u64, "chunk bytes");
        for p in probes {
            assert_eq!(
                mem.get(p).map(|v| v.map(<[u8]>::to_vec)),
                model.get(p).cloned(),
                "get {p:?}"
            );
            let ge = model.range(p.clone()..).next().map(|(k, _)| k.as_slice());
            assert_eq!(mem.first_from(Bound::Included(p)), ge, "ge {p:?}");
            let gt = model
                .range::<Vec<u8>, _>((Bound::Excluded(p), Bound::Unbounded))
                .next()
                .map(|(k, _)| k.as_slice());
            assert_eq!(mem.first_from(Bound::Excluded(p)), gt, "gt {p:?}");
            let lt = model
                .range(..p.clone())
                .next_back()
                .map(|(k, _)| k.as_slice());
            assert_eq!(mem.last_before(Some(p)), lt, "lt {p:?}");
        }
        assert_eq!(
            mem.first_from(Bound::Unbounded),
            model.keys().next().map(Vec::as_slice)
        );
        assert_eq!(
            mem.last_before(None),
            model.keys().next_back().map(Vec::as_slice)
        );
    }

    /// Random inserts, overwrites, deletions and removals, mostly ascending with jumps back
    /// (the slasher's pattern) or uniformly random, against a `BTreeMap` model.
    #[test]
    fn behaves_like_an_ordered_map() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        for round in 0..60 {
            let ascending = round % 2 == 0;
            let mut mem = Memtable::new();
            let mut model = Model::new();
            let mut next: u64 = rng.gen_range(0..50);
            let mut probes = Vec::new();
            for step in 0..400 {
                let key: Vec<u8> = if ascending && rng.gen_bool(0.9) {
                    next += rng.gen_range(0..3);
                    next.to_be_bytes().to_vec()
                } else if rng.gen_bool(0.1) {
                    // Lengths around the inline limit and the empty key.
                    let len = rng.gen_range(0..30);
                    (0..len).map(|_| rng.gen_range(0..3u8)).collect()
                } else {
                    rng.gen_range(0..next + 60).to_be_bytes().to_vec()
                };
                match rng.gen_range(0..10) {
                    0 => {
                        mem.remove(&key);
                        // A removed run key turns into a deletion; the model says the same
                        // when the key was in the run, otherwise it is gone.
                        if model.contains_key(&key) {
                            let in_run =
                                mem.iter().any(|(k, v)| k == key.as_slice() && v.is_none());
                            if in_run {
                                model.insert(key.clone(), None);
                            } else {
                                model.remove(&key);
                            }
                        }
                    }
                    1 => {
                        mem.insert(&key, None, &mut Vec::new());
                        model.insert(key.clone(), None);
                    }
                    _ => {
                        let v = vec![step as u8; rng.gen_range(0..4)];
                        mem.insert(&key, Some(&v), &mut Vec::new());
                        model.insert(key.clone(), Some(v));
                    }
                }
                probes.push(key);
                if step % 50 == 0 {
                    probes.push(rng.gen_range(0..next + 100).to_be_bytes().to_vec());
                    check(&mem, &model, &probes);
                }
            }
            probes.push(Vec::new());
            probes.push(vec![0xff; 9]);
            check(&mem, &model, &probes);
        }
    }

    /// The search gallops back from the run's end: every distance from it, present keys and
    /// keys between two run keys, must get the right answer.
    #[test]
    fn run_lookups_at_every_distance_from_the_end() {
        let mut mem = Memtable::new();
        for i in 0u64..1000 {
            mem.insert(
                &(2 * i).to_be_bytes(),
                Some(&i.to_le_bytes()),
                &mut Vec::new(),
            );
        }
        assert!(mem.tree.is_empty());
        for k in 0u64..2000 {
            let want = (k % 2 == 0).then(|| (k / 2).to_le_bytes());
            assert_eq!(
                mem.get(&k.to_be_bytes()),
                want.as_ref().map(|v| Some(&v[..])),
                "key {k}"
            );
        }
    }

    #[test]
    fn ascending_writes_stay_in_the_run() {
        let mut mem = Memtable::new();
        for i in 0u64..1000 {
            mem.insert(&i.to_be_bytes(), Some(&[1]), &mut Vec::new());
        }
        // Overwrites of run keys stay there too.
        mem.insert(&5u64.to_be_bytes(), Some(&[2]), &mut Vec::new());
        assert_eq!(mem.run.len(), 1000);
        assert!(mem.tree.is_empty());
        assert_eq!(mem.get(&5u64.to_be_bytes()), Some(Some(&[2u8][..])));
        // A key between two run keys goes to the tree.
        mem.insert(&[0, 0, 0, 0, 0, 0, 0, 5, 1], Some(&[3]), &mut Vec::new());
        assert_eq!(mem.tree.len(), 1);
        let keys: Vec<&[u8]> = mem.iter().map(|(k, _)| k).take(8).collect();
        assert_eq!(keys[6], &[0, 0, 0, 0, 0, 0, 0, 5, 1][..]);
    }

    /// Chunks go back emptied and come out again for the next memtable's values; a chunk
    /// made for one value larger than a chunk is not kept.
    #[test]
    fn value_chunks_are_recycled() {
        let mut spare = Vec::new();
        let mut mem = Memtable::new();
        let value = vec![7u8; 1000];
        // 2,100 values of 1,000 bytes fill two chunks and start a third.
        for i in 0u64..2100 {
            mem.insert(&i.to_be_bytes(), Some(&value), &mut spare);
        }
        mem.insert(b"large", Some(&vec![1u8; CHUNK + 1]), &mut spare);
        assert_eq!(mem.chunks.len(), 4);
        mem.recycle_chunks(&mut spare);
        assert!(mem.is_empty() && mem.bytes() == 0 && mem.chunks.is_empty());
        assert_eq!(spare.len(), 3, "the large value's chunk is freed");
        assert!(spare.iter().all(|c| c.is_empty() && c.capacity() == CHUNK));
        let addresses: Vec<*const u8> = spare.iter().map(|c| c.as_ptr()).collect();

        let mut next = Memtable::new();
        next.insert(b"big", Some(&vec![2u8; CHUNK + 5]), &mut spare);
        assert_eq!(spare.len(), 3, "a large value does not take a spare chunk");
        for i in 0u64..1100 {
            next.insert(&i.to_be_bytes(), Some(&value), &mut spare);
        }
        assert_eq!(spare.len(), 1, "two chunks taken from the spares");
        assert!(next.chunks[1..]
            .iter()
            .all(|c| addresses.contains(&c.as_ptr())));
        assert_eq!(next.get(&1099u64.to_be_bytes()), Some(Some(&value[..])));
        assert_eq!(
            next.get(b"big").map(|v| v.map(<[u8]>::len)),
            Some(Some(CHUNK + 5))
        );
    }

    /// The memory accounting: chunks of the budget's size, run and tree entries, boxed keys;
    /// after a spill's clear nothing is left counted, and the chunks wait in the spares.
    #[test]
    fn heap_bytes_counts_what_the_memtable_holds_and_a_spill_clears_it() {
        assert_eq!(chunk_bytes_for(256 << 10), 16 << 10);
        assert_eq!(chunk_bytes_for(16 << 10), 4 << 10);
        assert_eq!(chunk_bytes_for(1 << 40), CHUNK);
        let chunk = 16 << 10;
        let mut spare = Vec::new();
        let mut mem = Memtable::with_chunk(chunk);
        assert_eq!(mem.heap_bytes(), 0);
        mem.insert(&5u64.to_be_bytes(), Some(&[1; 100]), &mut spare);
        assert_eq!(
            mem.heap_bytes(),
            chunk as u64 + mem.run.capacity() as u64 * RUN_ENTRY_BYTES
        );
        // Out of order: to the tree; a long key is boxed.
        mem.insert(&[0u8; 30], Some(&[2; 100]), &mut spare);
        assert_eq!(
            mem.heap_bytes(),
            chunk as u64 + mem.run.capacity() as u64 * RUN_ENTRY_BYTES + TREE_ENTRY_BYTES + 30
        );
        // 200 values of 100 bytes fill two chunks of 16 KiB.
        for i in 6u64..206 {
            mem.insert(&i.to_be_bytes(), Some(&[3; 100]), &mut spare);
        }
        assert_eq!(mem.chunks.len(), 2);
        assert!(mem.heap_bytes() > 2 * chunk as u64 + 200 * RUN_ENTRY_BYTES);
        mem.clear_spilled(&mut spare);
        assert_eq!(mem.heap_bytes(), 0);
        assert_eq!(mem.run.capacity(), 0);
        assert_eq!(spare.len(), 2);
        assert!(spare.iter().all(|c| c.capacity() == chunk));
    }
}
