//! The consensus spec's committee shuffle and the synthetic committees built with it.
//!
//! [`compute_shuffled_index`] is the spec function (swap-or-not, [`SHUFFLE_ROUND_COUNT`] rounds,
//! SHA-256) for one position. [`shuffled_positions`] computes it for every position of a list at
//! once by running the same rounds over all positions together, which needs one hash per 256
//! positions per round instead of two per position per round. [`EpochCommittees`] slices the
//! result the way the spec's `compute_committee` does.

use sha2::{Digest, Sha256};

/// `SHUFFLE_ROUND_COUNT` of the mainnet preset.
pub const SHUFFLE_ROUND_COUNT: u8 = 90;
/// `SLOTS_PER_EPOCH` of the mainnet preset.
pub const SLOTS_PER_EPOCH: u64 = 32;
/// `MAX_COMMITTEES_PER_SLOT` of the mainnet preset.
pub const MAX_COMMITTEES_PER_SLOT: u64 = 64;
/// `TARGET_COMMITTEE_SIZE` of the mainnet preset.
pub const TARGET_COMMITTEE_SIZE: u64 = 128;

/// Prefix of the substitute seed used for synthetic committees.
pub const SYNTHETIC_SEED_PREFIX: &[u8] = b"butter_db synthetic committee seed";

/// How [`synthetic_seed`] derives a seed, as recorded in manifests.
pub const SYNTHETIC_SEED_RULE: &str =
    "sha256(\"butter_db synthetic committee seed\" || epoch as u64 little-endian)";

/// The shuffle, as recorded in manifests.
pub const SHUFFLE_DESCRIPTION: &str = "consensus-spec compute_committee over active set 0..N: \
    committee k of the epoch = [compute_shuffled_index(i, N, seed) for i in N*k/C..N*(k+1)/C], \
    C = 32 * committees_per_slot(N), swap-or-not with SHA-256 and 90 rounds";

/// The substitute seed of `epoch` (the real one needs the state's RANDAO mix).
pub fn synthetic_seed(epoch: u64) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(SYNTHETIC_SEED_PREFIX);
    hasher.update(epoch.to_le_bytes());
    hasher.finalize().into()
}

/// The spec's `get_committee_count_per_slot` for `active` validators.
pub fn committees_per_slot(active: u64) -> u64 {
    (active / SLOTS_PER_EPOCH / TARGET_COMMITTEE_SIZE).clamp(1, MAX_COMMITTEES_PER_SLOT)
}

/// Bounds `[start, end)` of committee `k` of `count` over `n` shuffled positions
/// (`compute_committee`).
pub fn committee_bounds(n: u64, k: u64, count: u64) -> (u64, u64) {
    let bound = |j: u64| (u128::from(n) * u128::from(j) / u128::from(count.max(1))) as u64;
    (bound(k), bound(k + 1))
}

fn pivot(seed: &[u8; 32], round: u8, count: u64) -> u64 {
    let digest = Sha256::new()
        .chain_update(seed)
        .chain_update([round])
        .finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first) % count
}

fn source_block(seed: &[u8; 32], round: u8, block: u32) -> [u8; 32] {
    Sha256::new()
        .chain_update(seed)
        .chain_update([round])
        .chain_update(block.to_le_bytes())
        .finalize()
        .into()
}

/// The spec's `compute_shuffled_index(index, index_count, seed)`; `None` if
/// `index >= index_count` or the count does not fit the spec's 2^40 bound.
pub fn compute_shuffled_index(index: u64, index_count: u64, seed: &[u8; 32]) -> Option<u64> {
    if index >= index_count || index_count > 1 << 40 {
        return None;
    }
    let mut index = index;
    for round in 0..SHUFFLE_ROUND_COUNT {
        let pivot = pivot(seed, round, index_count);
        let flip = (pivot + index_count - index) % index_count;
        let position = index.max(flip);
        let source = source_block(seed, round, u32::try_from(position / 256).ok()?);
        let byte = source[usize::try_from((position % 256) / 8).ok()?];
        if (byte >> (position % 8)) & 1 == 1 {
            index = flip;
        }
    }
    Some(index)
}

/// `[compute_shuffled_index(i, count, seed) for i in 0..count]`, computed round by round for all
/// positions together. Empty if `count` is 0 or above 2^32.
///
/// Each round of the spec function is an involution on `0..count`: it swaps `x` with
/// `flip = (pivot - x) mod count` when the bit at `max(x, flip)` is set. Applying round `r` to
/// every tracked value is the same as swapping the entries `x` and `flip` of the inverse mapping,
/// so each round visits each pair once, in order. The result is the inverse of that mapping.
pub fn shuffled_positions(count: u64, seed: &[u8; 32]) -> Vec<u64> {
    let Ok(n) = usize::try_from(count) else {
        return Vec::new();
    };
    if count == 0 || count > u64::from(u32::MAX) {
        return Vec::new();
    }
    // inverse[v] = the position whose current value is v.
    let mut inverse: Vec<u32> = (0..count as u32).collect();
    let blocks = count.div_ceil(256);
    let mut bits = Vec::with_capacity(n.div_ceil(8) + 32);
    for round in 0..SHUFFLE_ROUND_COUNT {
        let pivot = pivot(seed, round, count) as usize;
        bits.clear();
        for block in 0..blocks {
            // `count` <= u32::MAX, so `block` fits.
            bits.extend_from_slice(&source_block(seed, round, block as u32));
        }
        let bit = |position: usize| {
            bits.get(position / 8)
                .is_some_and(|b| (b >> (position % 8)) & 1 == 1)
        };
        // Pairs (x, pivot - x) with x < pivot - x, then (x, pivot + n - x) above the pivot; the
        // bit is read at the larger member of the pair.
        let mut swap_pairs = |mut low: usize, mut high: usize| {
            while low < high {
                if bit(high) {
                    inverse.swap(low, high);
                }
                low += 1;
                high -= 1;
            }
        };
        swap_pairs(0, pivot);
        swap_pairs(pivot + 1, n - 1);
    }
    let mut positions = vec![0u64; n];
    for (value, position) in inverse.iter().enumerate() {
        if let Some(slot) = positions.get_mut(*position as usize) {
            *slot = value as u64;
        }
    }
    positions
}

/// The committees of one epoch over the active set `0..active`, for a given seed.
#[derive(Debug, Clone)]
pub struct EpochCommittees {
    /// The epoch.
    pub epoch: u64,
    /// N, the active-set size.
    pub active: u64,
    /// `committees_per_slot(N)`.
    pub committees_per_slot: u64,
    shuffled: Vec<u64>,
}

impl EpochCommittees {
    /// Committees of `epoch` with `active` validators and [`synthetic_seed`]`(epoch)`.
    pub fn synthetic(epoch: u64, active: u64) -> Self {
        Self::with_seed(epoch, active, &synthetic_seed(epoch))
    }

    /// Committees of `epoch` with `active` validators and the given seed.
    pub fn with_seed(epoch: u64, active: u64, seed: &[u8; 32]) -> Self {
        Self {
            epoch,
            active,
            committees_per_slot: committees_per_slot(active),
            shuffled: shuffled_positions(active, seed),
        }
    }

    /// Committees in the epoch (C).
    pub fn committee_count(&self) -> u64 {
        self.committees_per_slot * SLOTS_PER_EPOCH
    }

    /// The members (validator indices, in committee order) of committee `index` at `slot`;
    /// `None` if the slot is outside the epoch or the index out of range.
    pub fn committee(&self, slot: u64, index: u64) -> Option<&[u64]> {
        if slot / SLOTS_PER_EPOCH != self.epoch || index >= self.committees_per_slot {
            return None;
        }
        let k = (slot % SLOTS_PER_EPOCH) * self.committees_per_slot + index;
        let (start, end) = committee_bounds(self.active, k, self.committee_count());
        self.shuffled
            .get(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
    }
}

/// Size of committee `k` of an epoch with `active` validators (no shuffle needed).
pub fn committee_size(active: u64, k: u64) -> u64 {
    let (start, end) = committee_bounds(active, k, committees_per_slot(active) * SLOTS_PER_EPOCH);
    end - start
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_list_shuffle_matches_per_index_function() {
        for count in [1u64, 2, 3, 100, 255, 256, 257, 1000] {
            let seed = synthetic_seed(count);
            let all = shuffled_positions(count, &seed);
            for (i, value) in all.iter().enumerate() {
                assert_eq!(Some(*value), compute_shuffled_index(i as u64, count, &seed));
            }
            let mut sorted = all.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..count).collect::<Vec<_>>(), "a permutation");
        }
    }

    #[test]
    fn committee_sizes_partition_the_active_set() {
        let active = 427_192;
        let c = committees_per_slot(active) * SLOTS_PER_EPOCH;
        assert_eq!(c, 2048);
        let total: u64 = (0..c).map(|k| committee_size(active, k)).sum();
        assert_eq!(total, active);
    }
}
