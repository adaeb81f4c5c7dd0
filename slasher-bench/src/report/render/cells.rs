//! Table cells more than one rendering writes.

use crate::report::model::BackendResult;

/// The names of the commit parts `rows` have, in the order they first appear.
pub(super) fn part_names<'a>(rows: impl IntoIterator<Item = &'a BackendResult>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for b in rows.into_iter().flat_map(|r| &r.batches) {
        for (name, _) in b.commit_parts.iter().flat_map(|p| p.iter()) {
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
    }
    names
}

/// `part` as a whole percentage of `whole`; "–" if `whole` is not positive.
pub(super) fn percent(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.0} %", 100.0 * part / whole)
    } else {
        "–".into()
    }
}

/// `value`, or `n/m` for a client's row, which does not measure it.
pub(super) fn unless_client(row: &BackendResult, value: String) -> String {
    if row.client.is_some() {
        "n/m".into()
    } else {
        value
    }
}
