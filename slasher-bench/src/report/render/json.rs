//! `report.json`: the report as its schema ([`crate::report::model`]) stores it.

use crate::report::model::Report;

/// `report.json`'s bytes: the report, pretty-printed.
///
/// # Errors
/// What serde_json reports (nothing for a report built by this crate).
pub fn render_json(report: &Report) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec_pretty(report)
}
