//! The correctness gate: rows that replayed the same fixture must find the same slashings in
//! every batch, and the slashings a manifest lists must be found.

use super::model::{BackendResult, Correctness, Disagreement, DisagreementRow, Report};
use std::collections::BTreeMap;

/// Compare the per-batch slashing digests of rows that replayed the same batches. Returns the
/// first batch where any two differ (a row lacking the batch counts as different, unless the
/// row was interrupted: an interrupted row is compared on the batches it did).
pub fn first_disagreement(rows: &[&BackendResult]) -> Option<Disagreement> {
    let longest = rows.iter().map(|r| r.batches.len()).max().unwrap_or(0);
    for i in 0..longest {
        let views: Vec<DisagreementRow> = rows
            .iter()
            .filter(|r| !r.interrupted || i < r.batches.len())
            .map(|r| match r.batches.get(i) {
                Some(b) => DisagreementRow {
                    name: r.name.clone(),
                    digest: b.slashings_digest.clone().unwrap_or_else(|| "none".into()),
                    attester: b.attester_slashings,
                    proposer: b.proposer_slashings,
                },
                None => DisagreementRow {
                    name: r.name.clone(),
                    digest: "missing".into(),
                    attester: 0,
                    proposer: 0,
                },
            })
            .collect();
        let first = views.first().map(|v| v.digest.clone());
        if views.iter().any(|v| Some(&v.digest) != first.as_ref()) {
            let batch_index = rows
                .iter()
                .find_map(|r| r.batches.get(i).map(|b| b.index))
                .unwrap_or(i as u64);
            return Some(Disagreement {
                batch_index,
                rows: views,
            });
        }
    }
    None
}

/// Run the gate over `rows`.
pub fn correctness(rows: &[&BackendResult]) -> Correctness {
    let first_difference = first_disagreement(rows);
    Correctness {
        agree: first_difference.is_none(),
        compared: rows.iter().map(|r| r.name.clone()).collect(),
        first_difference,
    }
}

/// Rows of a report that replayed the same batches (same `records_sha256` and batch count),
/// keyed by fixture, with the run index of each row.
/// Rows by (fixture records, batches replayed, settings label): only rows of one group are
/// compared with each other.
pub type Groups<'a> = BTreeMap<(String, u64, String), Vec<(usize, &'a BackendResult)>>;

/// Group a report's rows by fixture.
pub fn groups(report: &Report) -> Groups<'_> {
    let mut out: Groups<'_> = BTreeMap::new();
    for (run_index, run) in report.runs.iter().enumerate() {
        let key = (
            run.fixture.records_sha256.clone(),
            run.fixture.batches_replayed,
            run.slasher_config.label(),
        );
        for row in &run.backends {
            out.entry(key.clone()).or_default().push((run_index, row));
        }
    }
    out
}

/// The correctness gate over every fixture group of a (possibly merged) report: the first
/// disagreement found, with its fixture name.
pub fn gate(report: &Report) -> Option<(String, Disagreement)> {
    for ((sha, _, _), rows) in groups(report) {
        let only: Vec<&BackendResult> = rows.iter().map(|(_, r)| *r).collect();
        if let Some(d) = first_disagreement(&only) {
            let name = report
                .runs
                .iter()
                .find(|r| r.fixture.records_sha256 == sha)
                .map_or(sha.clone(), |r| r.fixture.name.clone());
            return Some((name, d));
        }
    }
    None
}

/// The second half of the gate: rows that missed slashings the fixture lists as expected
/// (`inject`ed or generated), described in one line; `None` when every row found them all.
pub fn missing_expected(report: &Report) -> Option<String> {
    let missed: Vec<String> = report
        .runs
        .iter()
        .flat_map(|run| &run.backends)
        .filter_map(|r| {
            let e = r.expected_slashings.as_ref()?;
            (!e.missing.is_empty()).then(|| {
                format!(
                    "{} found {} of {} ({})",
                    r.name,
                    e.found,
                    e.expected,
                    e.missing.join("; ")
                )
            })
        })
        .collect();
    (!missed.is_empty()).then(|| missed.join("; "))
}
