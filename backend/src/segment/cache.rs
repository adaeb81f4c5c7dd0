//! The block cache shared by every segment of an environment: decoded blocks of the segment
//! files, which the readers (`reader.rs`) and a commit's writer (`builder.rs`) fill. It also
//! counts the memory of the open segments' indexes, which the environment's memory budget
//! (`budget.rs`) sets the cache's room against.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use lru::LruCache;
use parking_lot::Mutex;

use super::block::Block;

/// An LRU of decoded blocks keyed by (segment sequence number, block index), bounded by the
/// bytes the blocks hold. Fields guarded by `inner`'s mutex.
#[derive(Debug)]
pub(crate) struct BlockCache {
    inner: Mutex<Inner>,
    /// Bytes of the block indexes of the open segments that share this cache.
    index_bytes: AtomicU64,
}

#[derive(Debug)]
struct Inner {
    map: LruCache<(u64, usize), Arc<Block>>,
    bytes: usize,
    capacity_bytes: usize,
}

impl BlockCache {
    pub(crate) fn new(capacity_bytes: usize) -> Self {
        BlockCache {
            inner: Mutex::new(Inner {
                map: LruCache::unbounded(),
                bytes: 0,
                capacity_bytes,
            }),
            index_bytes: AtomicU64::new(0),
        }
    }

    pub(crate) fn capacity_bytes(&self) -> usize {
        self.inner.lock().capacity_bytes
    }

    /// The bytes of the blocks it holds.
    pub(crate) fn held_bytes(&self) -> usize {
        self.inner.lock().bytes
    }

    /// Set how many bytes of blocks it may hold, evicting the least recently used blocks
    /// down to that at once.
    pub(crate) fn set_capacity(&self, capacity_bytes: usize) {
        let mut inner = self.inner.lock();
        inner.capacity_bytes = capacity_bytes;
        inner.evict_to_capacity();
    }

    /// The bytes of the open segments' indexes.
    pub(crate) fn index_bytes(&self) -> u64 {
        self.index_bytes.load(Ordering::Relaxed)
    }

    /// A segment with an index of `bytes` bytes was opened, or closed.
    pub(crate) fn count_index(&self, bytes: u64, opened: bool) {
        if opened {
            self.index_bytes.fetch_add(bytes, Ordering::Relaxed);
        } else {
            self.index_bytes.fetch_sub(bytes, Ordering::Relaxed);
        }
    }

    pub(crate) fn get(&self, seq: u64, block: usize) -> Option<Arc<Block>> {
        self.inner.lock().map.get(&(seq, block)).cloned()
    }

    /// Remove a block and return it, if it is cached.
    pub(crate) fn take(&self, seq: u64, block: usize) -> Option<Arc<Block>> {
        let mut inner = self.inner.lock();
        let b = inner.map.pop(&(seq, block))?;
        inner.bytes -= b.weight();
        Some(b)
    }

    pub(crate) fn insert(&self, seq: u64, block: usize, value: Arc<Block>) {
        let mut inner = self.inner.lock();
        inner.bytes += value.weight();
        if let Some(old) = inner.map.put((seq, block), value) {
            inner.bytes -= old.weight();
        }
        inner.evict_to_capacity();
    }

    /// Forget every block of a segment that no version references any more.
    pub(crate) fn evict_segment(&self, seq: u64, blocks: usize) {
        let mut inner = self.inner.lock();
        for b in 0..blocks {
            if let Some(old) = inner.map.pop(&(seq, b)) {
                inner.bytes -= old.weight();
            }
        }
    }
}

impl Inner {
    fn evict_to_capacity(&mut self) {
        while self.bytes > self.capacity_bytes {
            match self.map.pop_lru() {
                Some((_, old)) => self.bytes -= old.weight(),
                None => break,
            }
        }
    }
}
