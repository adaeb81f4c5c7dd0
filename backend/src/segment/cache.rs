//! The block cache shared by every segment of an environment: decoded blocks of the segment
//! files, which the readers (`reader.rs`) and a commit's writer (`builder.rs`) fill.

use std::sync::Arc;

use lru::LruCache;
use parking_lot::Mutex;

use super::block::Block;

/// An LRU of decoded blocks keyed by (segment sequence number, block index), bounded by the
/// bytes the blocks hold. Fields guarded by `inner`'s mutex.
#[derive(Debug)]
pub(crate) struct BlockCache {
    inner: Mutex<Inner>,
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
        }
    }

    pub(crate) fn capacity_bytes(&self) -> usize {
        self.inner.lock().capacity_bytes
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
        while inner.bytes > inner.capacity_bytes {
            match inner.map.pop_lru() {
                Some((_, old)) => inner.bytes -= old.weight(),
                None => break,
            }
        }
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
