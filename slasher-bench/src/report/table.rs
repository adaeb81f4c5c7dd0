//! What the report's tables share (render/ and scale.rs): the phases of a replay and a row's
//! times in each, the LMDB row a row is compared with, a row's batches in a phase, and the ratio
//! and MiB cells.

use super::model::{BackendResult, BatchRecord};
use crate::system::measure::Summary;

/// The LMDB row a row is compared with: LMDB replayed by the same slasher (the port, or the
/// same client) on the same filesystem if present in the group, else on any filesystem.
pub(super) fn baseline<'a>(
    row: &BackendResult,
    group: &[(usize, &'a BackendResult)],
) -> Option<&'a BackendResult> {
    let lmdb = || {
        group
            .iter()
            .map(|(_, r)| *r)
            .filter(|r| r.backend == "lmdb" && r.durable && r.client == row.client)
    };
    lmdb()
        .find(|r| r.filesystem == row.filesystem)
        .or_else(|| lmdb().next())
}

/// `base` if it ran as many batches as `row`, for ratios over a whole row: a row cut short
/// (OOM-killed, interrupted) is not compared over batches the other one did not run.
pub(super) fn same_batches<'a>(
    row: &BackendResult,
    base: Option<&'a BackendResult>,
) -> Option<&'a BackendResult> {
    base.filter(|b| b.batches.len() == row.batches.len())
}

/// `base` if it ran as many batches of `phase` as `row` did: the same rule within a phase (an
/// LMDB row killed in the steady epoch still compares in the epochs before).
pub(super) fn same_phase_batches<'a>(
    row: &BackendResult,
    base: Option<&'a BackendResult>,
    phase: Phase,
) -> Option<&'a BackendResult> {
    base.filter(|b| phase_batches(b, phase).len() == phase_batches(row, phase).len())
}

pub(super) fn ratio(value: f64, base: Option<f64>) -> String {
    match base {
        Some(b) if b > 0.0 => format!("{:.2}×", value / b),
        _ => "–".into(),
    }
}

pub(super) fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

pub(super) fn opt_mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(|| "n/m".into(), mib)
}

/// A row's batches in `phase`, in order.
pub(super) fn phase_batches(row: &BackendResult, phase: Phase) -> Vec<&BatchRecord> {
    let Some(first) = row.batches.first().map(|b| b.current_epoch) else {
        return Vec::new();
    };
    row.batches
        .iter()
        .filter(|b| Phase::of_offset(b.current_epoch.saturating_sub(first)) == phase)
        .collect()
}

/// The phases of a replay, by the epoch the slasher is told (`current_epoch`) relative to the
/// first batch's: the cold start fills the database from empty, the next epoch still writes
/// most tiles for the first time, and after that the database is in its steady state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Batches of the first batch's epoch.
    ColdEpoch,
    /// Batches of the epoch after it.
    NextEpoch,
    /// Every later batch.
    Steady,
}

impl Phase {
    /// The three phases in replay order.
    pub const ALL: [Phase; 3] = [Phase::ColdEpoch, Phase::NextEpoch, Phase::Steady];

    /// The phase of a batch `epochs_after` epochs after the first batch's.
    pub fn of_offset(epochs_after: u64) -> Phase {
        match epochs_after {
            0 => Phase::ColdEpoch,
            1 => Phase::NextEpoch,
            _ => Phase::Steady,
        }
    }

    /// Name as printed in reports.
    pub fn name(self) -> &'static str {
        match self {
            Phase::ColdEpoch => "cold epoch",
            Phase::NextEpoch => "next epoch",
            Phase::Steady => "steady",
        }
    }
}

/// Wall and storage time of one row in one phase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseTimes {
    /// Batches in the phase.
    pub batches: usize,
    /// Median batch wall time, ms.
    pub median_ms: f64,
    /// Sum of batch wall times, s.
    pub total_s: f64,
    /// Median time inside storage calls per batch, ms.
    pub storage_median_ms: f64,
    /// Sum of storage time, s.
    pub storage_total_s: f64,
}

/// A row's times in `phase`; `None` if the row has no batch in it.
pub fn phase_times(row: &BackendResult, phase: Phase) -> Option<PhaseTimes> {
    let in_phase = phase_batches(row, phase);
    if in_phase.is_empty() {
        return None;
    }
    let wall: Vec<f64> = in_phase.iter().map(|b| b.wall_ms).collect();
    let storage: Vec<f64> = in_phase.iter().map(|b| b.storage_ms).collect();
    let (wall, storage) = (Summary::of(&wall), Summary::of(&storage));
    Some(PhaseTimes {
        batches: in_phase.len(),
        median_ms: wall.median,
        total_s: wall.sum / 1000.0,
        storage_median_ms: storage.median,
        storage_total_s: storage.sum / 1000.0,
    })
}
