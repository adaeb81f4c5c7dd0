//! The scale table: one workload at several validator counts (`scripts/scale.sh` merges one
//! report per count). Rows are grouped by settings (codec, history, chunks) and only compared
//! with an LMDB row of the same validator count and settings.

use super::model::{BackendResult, Report};
use super::table::{baseline, mib, opt_mib, phase_batches, ratio};
use super::table::{phase_times, same_batches, same_phase_batches, Phase};
use crate::system::measure::Summary;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One row of the scale table.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleRow {
    /// Active validators of the fixture (its manifest's `validator_count`).
    pub validators: u64,
    /// Row label, e.g. `butter@btrfs`.
    pub name: String,
    /// The run's settings ([`super::SlasherConfigInfo::label`]).
    pub settings: String,
    /// Wall time of the first batch that carried attestations (the cold start: a generated
    /// fixture's batch 0 has none, its attestations are included from the next slot on), ms.
    pub first_batch_ms: f64,
    /// Sum of the cold epoch's batch times, s.
    pub cold_epoch_total_s: f64,
    /// Median and p99 of the steady phase's batch times, ms (`None`: the run did not reach it).
    pub steady: Option<(f64, f64)>,
    /// Median commit time over all batches, ms.
    pub median_commit_ms: f64,
    /// Apparent database size after the last batch.
    pub db_bytes: u64,
    /// Peak resident set of the row's process.
    pub peak_rss_bytes: Option<u64>,
}

impl ScaleRow {
    fn of(validators: u64, settings: String, row: &BackendResult) -> ScaleRow {
        let cold_epoch_total_s = phase_times(row, Phase::ColdEpoch).map_or(0.0, |t| t.total_s);
        let steady: Vec<f64> = phase_batches(row, Phase::Steady)
            .iter()
            .map(|b| b.wall_ms)
            .collect();
        let steady = (!steady.is_empty()).then(|| {
            let s = Summary::of(&steady);
            (s.median, s.p99)
        });
        ScaleRow {
            validators,
            name: row.name.clone(),
            settings,
            first_batch_ms: row
                .batches
                .iter()
                .find(|b| b.attestations > 0)
                .map_or(row.first_batch_ms, |b| b.wall_ms),
            cold_epoch_total_s,
            steady,
            median_commit_ms: row.median_commit_ms,
            db_bytes: row.db_bytes_final,
            peak_rss_bytes: row.peak_rss_bytes,
        }
    }
}

/// What a [`ScaleRow`]'s ratios divide by: the LMDB row of the same validator count and
/// settings, each figure `None` where that row did not run the batches the figure covers as
/// the compared row did (a row cut short, e.g. OOM-killed, is compared only over what both
/// ran): the phase columns within their phase, the database and RSS over the whole row.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleBase {
    /// The LMDB row's figures, as its own line shows them.
    pub row: ScaleRow,
    /// `row.cold_epoch_total_s` if both rows ran the same cold-epoch batches.
    pub cold_epoch_total_s: Option<f64>,
    /// `row.steady`'s median if both rows ran the same steady batches.
    pub steady_median_ms: Option<f64>,
    /// `row.db_bytes` if both rows ran the same batches.
    pub db_bytes: Option<u64>,
    /// `row.peak_rss_bytes` if both rows ran the same batches.
    pub peak_rss_bytes: Option<u64>,
}

impl ScaleBase {
    fn of(row: &BackendResult, base: &BackendResult, base_row: ScaleRow) -> ScaleBase {
        let in_phase = |phase| same_phase_batches(row, Some(base), phase).is_some();
        let whole = same_batches(row, Some(base)).is_some();
        ScaleBase {
            cold_epoch_total_s: in_phase(Phase::ColdEpoch).then_some(base_row.cold_epoch_total_s),
            steady_median_ms: base_row
                .steady
                .filter(|_| in_phase(Phase::Steady))
                .map(|(m, _)| m),
            db_bytes: whole.then_some(base_row.db_bytes),
            peak_rss_bytes: base_row.peak_rss_bytes.filter(|_| whole),
            row: base_row,
        }
    }
}

/// Every row of `report` with its validator count, in (settings, validators, run) order; empty
/// unless the report holds at least two validator counts.
pub fn scale_rows(report: &Report) -> Vec<(ScaleRow, Option<ScaleBase>)> {
    let mut by_key: BTreeMap<(String, u64), Vec<&BackendResult>> = BTreeMap::new();
    for run in &report.runs {
        let Some(validators) = run
            .fixture
            .manifest
            .pointer("/description/validator_count")
            .and_then(serde_json::Value::as_u64)
        else {
            continue;
        };
        by_key
            .entry((run.slasher_config.label(), validators))
            .or_default()
            .extend(run.backends.iter());
    }
    let counts: std::collections::BTreeSet<u64> = by_key.keys().map(|(_, v)| *v).collect();
    if counts.len() < 2 {
        return Vec::new();
    }
    let mut rows = Vec::new();
    for ((settings, validators), members) in by_key {
        let group: Vec<(usize, &BackendResult)> = members.iter().map(|r| (0, *r)).collect();
        for r in &members {
            let base = baseline(r, &group)
                .map(|b| ScaleBase::of(r, b, ScaleRow::of(validators, settings.clone(), b)));
            rows.push((ScaleRow::of(validators, settings.clone(), r), base));
        }
    }
    rows
}

/// The scale section of `report.md` (nothing unless the report holds several validator counts).
pub fn render_scale(s: &mut String, report: &Report) {
    let rows = scale_rows(report);
    if rows.is_empty() {
        return;
    }
    s.push_str(
        "## Scale\n\nThe same kind of fixture at several validator counts. *Cold epoch*: the \
         first 32 batches (a slasher cold start); *steady*: every batch from the third epoch on. \
         Ratios are row ÷ the LMDB row of the same validator count and settings, each over \
         the batches both rows ran (– where one was cut short).\n\n",
    );
    s.push_str(
        "| settings | validators | row | cold start ms | cold epoch s | steady median ms | \
         steady p99 ms | median commit ms | DB MiB | peak RSS MiB | cold start ×LMDB | cold ×LMDB | \
         steady median ×LMDB | DB ×LMDB | RSS ×LMDB |\n",
    );
    s.push_str("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (r, base) in &rows {
        let base = base.as_ref();
        let (median, p99) = r.steady.map_or(("–".into(), "–".into()), |(m, p)| {
            (format!("{m:.1}"), format!("{p:.1}"))
        });
        let as_f64 = |b: u64| b as f64;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {:.2} | {median} | {p99} | {:.2} | {} | {} | {} | {} | {} | {} | {} |",
            r.settings,
            r.validators,
            r.name,
            r.first_batch_ms,
            r.cold_epoch_total_s,
            r.median_commit_ms,
            mib(r.db_bytes),
            opt_mib(r.peak_rss_bytes),
            ratio(r.first_batch_ms, base.map(|b| b.row.first_batch_ms)),
            ratio(r.cold_epoch_total_s, base.and_then(|b| b.cold_epoch_total_s)),
            r.steady.map_or("–".into(), |(m, _)| ratio(
                m,
                base.and_then(|b| b.steady_median_ms)
            )),
            ratio(as_f64(r.db_bytes), base.and_then(|b| b.db_bytes).map(as_f64)),
            r.peak_rss_bytes.map_or("–".into(), |rss| ratio(
                as_f64(rss),
                base.and_then(|b| b.peak_rss_bytes).map(as_f64)
            )),
        );
    }
    s.push('\n');
}
