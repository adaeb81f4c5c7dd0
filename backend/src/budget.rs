//! The environment's one memory budget (design.md §7.1): the block cache, the open segments'
//! indexes and the write transaction's memtables draw on one sum, and the sum shrinks while
//! the process's memory cgroup is near its limit.
//!
//! - **One sum.** The budget is the block cache's share plus the write transaction's share
//!   ([`crate::EnvBuilder::block_cache_bytes`], [`crate::EnvBuilder::memtable_bytes`]). What
//!   the indexes and the transaction hold is taken from the cache's room: the cache may hold
//!   `budget - indexes - memtables` bytes of blocks, so between transactions it uses the
//!   memtables' share too, and a growing transaction pushes blocks out instead of adding to
//!   the process's memory. A cache share of 0 (no cache) stays 0.
//! - **Pressure.** At every commit and every spill the budget reads the cgroup's anonymous
//!   memory (page cache is not counted: the kernel takes it back). At three quarters of the
//!   limit or more the pressure level rises by one; at half or less it falls by one. Each
//!   level halves the room of what can be given back soonest: levels 1 to [`MAX_LEVEL`] halve
//!   the cache's room, and from level 3 the transaction's share halves as well, so it spills
//!   sooner. Without a cgroup limit (or where it cannot be read) the level stays 0.
//! - **Giving memory back.** What the engine frees stays in the process until its allocator
//!   returns it to the kernel (jemalloc keeps freed pages for ten seconds by default), and the
//!   cgroup counts it all the while. So at every look that finds the cgroup's anonymous memory
//!   above half its limit, after the cache's room is set, the budget calls the pressure
//!   function the process gave ([`crate::EnvBuilder::on_memory_pressure`]) with `true`: give
//!   freed memory back now, and from now on as it is freed. At the first look at half or less
//!   it calls it once with `false`: the allocator may keep freed memory again. This starts
//!   below the level's three quarters because memory can climb from half the limit to all of
//!   it inside one transaction, between two looks. The engine knows nothing of allocators: the
//!   program that chose one supplies the function.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::memory::MemoryCgroup;
use crate::segment::BlockCache;

/// The highest pressure level: the cache's room is then a sixteenth of what it would be.
pub const MAX_LEVEL: u32 = 4;
/// The level at and above which the transaction's share halves too.
const MEMTABLE_LEVEL: u32 = 3;
/// The least room the cache keeps whatever the pressure: a few blocks for the reads of one
/// lookup and the commit's writer.
const MIN_CACHE_ROOM: u64 = 1 << 20;
/// The least a transaction may hold before it spills, whatever the pressure.
const MIN_MEMTABLE_BYTES: u64 = 16 << 10;
/// A transaction's memory is passed on to the cache's room when it has moved by this much
/// since it last was, so that a write does not take the cache's lock.
const MEMTABLE_STEP: u64 = 1 << 20;

/// The environment's memory accounting, as [`crate::Env::memory_use`] reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryUse {
    /// The budget without pressure: the cache's and the write transaction's shares.
    pub budget_bytes: u64,
    /// Bytes of decoded blocks the cache holds.
    pub cache_bytes: u64,
    /// Bytes of blocks the cache may hold now.
    pub cache_room_bytes: u64,
    /// Bytes of the open segments' indexes.
    pub index_bytes: u64,
    /// Bytes the open write transaction holds, as last passed on (0 without one).
    pub memtable_bytes: u64,
    /// What a write transaction may hold now before it spills.
    pub memtable_budget_bytes: u64,
    /// 0 (none) to [`MAX_LEVEL`].
    pub pressure_level: u32,
    /// The highest level reached since the environment was opened.
    pub peak_pressure_level: u32,
    /// The cgroup's anonymous memory and its limit at the last look, if there is a limit.
    pub cgroup_anon_bytes: Option<u64>,
    /// See `cgroup_anon_bytes`.
    pub cgroup_limit_bytes: Option<u64>,
    /// How many times the pressure function was called with `true` (give memory back) since
    /// the environment was opened.
    pub releases: u64,
    /// Whether the allocator was last told to give memory back (`true` was the last call).
    pub releasing: bool,
}

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct Budget {
    cache: Arc<BlockCache>,
    /// The cache's share as set or chosen at open.
    cache_share: u64,
    /// The write transaction's share as set or chosen at open.
    memtable_share: u64,
    /// The cgroup whose anonymous memory is watched (`None`: no pressure is ever seen).
    cgroup: Option<MemoryCgroup>,
    /// Tells the process's allocator to give freed memory back, or that it may keep it again
    /// (see the module documentation).
    pressure_hook: Option<fn(bool)>,
    releases: AtomicU64,
    releasing: AtomicBool,
    level: AtomicU32,
    peak_level: AtomicU32,
    memtable_bytes: AtomicU64,
    seen_anon: AtomicU64,
    seen_limit: AtomicU64,
}

impl Budget {
    pub(crate) fn new(
        cache: Arc<BlockCache>,
        cache_share: u64,
        memtable_share: u64,
        cgroup: Option<MemoryCgroup>,
        pressure_hook: Option<fn(bool)>,
    ) -> Budget {
        let budget = Budget {
            cache,
            cache_share,
            memtable_share,
            cgroup,
            pressure_hook,
            releases: AtomicU64::new(0),
            releasing: AtomicBool::new(false),
            level: AtomicU32::new(0),
            peak_level: AtomicU32::new(0),
            memtable_bytes: AtomicU64::new(0),
            seen_anon: AtomicU64::new(0),
            seen_limit: AtomicU64::new(0),
        };
        budget.set_cache_room();
        budget
    }

    /// The block cache's share as set or chosen at open.
    pub(crate) fn cache_share(&self) -> u64 {
        self.cache_share
    }

    /// The write transaction's share as set or chosen at open (its memtables' chunk size
    /// follows it, not the pressure).
    pub(crate) fn memtable_share(&self) -> u64 {
        self.memtable_share
    }

    /// What a write transaction may hold now before it spills.
    pub(crate) fn memtable_budget(&self) -> u64 {
        let over = self.level().saturating_sub(MEMTABLE_LEVEL - 1);
        (self.memtable_share >> over).max(MIN_MEMTABLE_BYTES.min(self.memtable_share))
    }

    fn level(&self) -> u32 {
        self.level.load(Ordering::Relaxed)
    }

    /// The write transaction now holds `bytes`: give the cache the rest, if that moved by
    /// [`MEMTABLE_STEP`] or more (or to or from 0) since it was last done.
    pub(crate) fn note_memtable(&self, bytes: u64) {
        let last = self.memtable_bytes.load(Ordering::Relaxed);
        if last.abs_diff(bytes) >= MEMTABLE_STEP || (bytes == 0) != (last == 0) {
            self.memtable_bytes.store(bytes, Ordering::Relaxed);
            self.set_cache_room();
        }
    }

    /// Look at the cgroup's anonymous memory, move the pressure level, set the cache's room,
    /// and call the pressure function (called at every commit and every spill).
    pub(crate) fn observe(&self) {
        let mut release = false;
        if let Some((anon, limit)) = self.cgroup.as_ref().and_then(MemoryCgroup::anon_and_limit) {
            self.seen_anon.store(anon, Ordering::Relaxed);
            self.seen_limit.store(limit, Ordering::Relaxed);
            let level = next_level(self.level(), anon, limit);
            self.level.store(level, Ordering::Relaxed);
            self.peak_level.fetch_max(level, Ordering::Relaxed);
            release = anon > limit / 2;
        }
        self.set_cache_room();
        if let Some(hook) = self.pressure_hook {
            let was = self.releasing.swap(release, Ordering::Relaxed);
            if release {
                hook(true);
                self.releases.fetch_add(1, Ordering::Relaxed);
            } else if was {
                hook(false);
            }
        }
    }

    fn cache_room(&self) -> u64 {
        if self.cache_share == 0 {
            return 0; // no cache was asked for: none is lent one
        }
        let taken = self.cache.index_bytes() + self.memtable_bytes.load(Ordering::Relaxed);
        let room = (self.cache_share + self.memtable_share).saturating_sub(taken) >> self.level();
        room.max(MIN_CACHE_ROOM.min(self.cache_share))
    }

    fn set_cache_room(&self) {
        let room = usize::try_from(self.cache_room()).unwrap_or(usize::MAX);
        self.cache.set_capacity(room);
    }

    pub(crate) fn usage(&self) -> MemoryUse {
        let seen = |a: &AtomicU64| Some(a.load(Ordering::Relaxed)).filter(|&v| v > 0);
        MemoryUse {
            budget_bytes: self.cache_share + self.memtable_share,
            cache_bytes: self.cache.held_bytes() as u64,
            cache_room_bytes: self.cache.capacity_bytes() as u64,
            index_bytes: self.cache.index_bytes(),
            memtable_bytes: self.memtable_bytes.load(Ordering::Relaxed),
            memtable_budget_bytes: self.memtable_budget(),
            pressure_level: self.level(),
            peak_pressure_level: self.peak_level.load(Ordering::Relaxed),
            cgroup_anon_bytes: seen(&self.seen_limit).and(seen(&self.seen_anon)),
            cgroup_limit_bytes: seen(&self.seen_limit),
            releases: self.releases.load(Ordering::Relaxed),
            releasing: self.releasing.load(Ordering::Relaxed),
        }
    }
}

/// The pressure level after one look at a cgroup holding `anon` bytes of anonymous memory
/// under a limit of `limit` bytes: up by one at three quarters of the limit or more, down by
/// one at half or less, else unchanged.
pub(crate) fn next_level(level: u32, anon: u64, limit: u64) -> u32 {
    if anon >= limit / 4 * 3 {
        (level + 1).min(MAX_LEVEL)
    } else if anon <= limit / 2 {
        level.saturating_sub(1)
    } else {
        level
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_level_rises_near_the_limit_falls_well_below_it_and_holds_between() {
        let limit = 100 << 20;
        assert_eq!(next_level(0, 75 << 20, limit), 1);
        assert_eq!(next_level(MAX_LEVEL, 99 << 20, limit), MAX_LEVEL);
        assert_eq!(next_level(2, 60 << 20, limit), 2);
        assert_eq!(next_level(2, 50 << 20, limit), 1);
        assert_eq!(next_level(0, 10 << 20, limit), 0);
    }

    #[test]
    fn indexes_and_the_transaction_take_the_caches_room_and_pressure_halves_it() {
        let cache = Arc::new(BlockCache::new(0));
        let b = Budget::new(cache.clone(), 8 << 20, 8 << 20, None, None);
        // Between transactions the cache has the whole budget.
        assert_eq!(cache.capacity_bytes(), 16 << 20);
        cache.count_index(2 << 20, true);
        b.note_memtable(6 << 20);
        assert_eq!(cache.capacity_bytes(), 8 << 20);
        // A move under a step is not passed on; to 0 it is.
        b.note_memtable((6 << 20) + 1000);
        assert_eq!(b.usage().memtable_bytes, 6 << 20);
        b.note_memtable(0);
        assert_eq!(cache.capacity_bytes(), 14 << 20);
        cache.count_index(2 << 20, false);
        for level in 1..=MAX_LEVEL {
            b.level.store(level, Ordering::Relaxed);
            b.observe();
            assert_eq!(
                cache.capacity_bytes() as u64,
                ((16 << 20) >> level).max(1 << 20)
            );
            let share = if level >= MEMTABLE_LEVEL {
                (8 << 20) >> (level - 2)
            } else {
                8 << 20
            };
            assert_eq!(b.memtable_budget(), share, "level {level}");
        }
    }
}
