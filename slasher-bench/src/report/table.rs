//! What the report's tables share (render.rs and scale.rs): the LMDB row a row is compared
//! with, a row's batches in a phase, and the ratio and MiB cells.

use super::{BackendResult, BatchRecord, Phase};

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
