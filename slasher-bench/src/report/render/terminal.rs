//! The terminal summary: a short plain-text table of every row.

use crate::report::gate::groups;
use crate::report::model::Report;
use crate::report::table::{baseline, ratio, same_batches};
use std::fmt::Write as _;

/// A short plain-text table of every row: for the terminal.
pub fn summary_table(report: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<26} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9}",
        "row", "first ms", "median ms", "p99 ms", "max ms", "total s", "med×LMDB", "p99×LMDB"
    );
    for group in groups(report).values() {
        for (_, r) in group {
            let base = same_batches(r, baseline(r, group));
            let _ = writeln!(
                s,
                "{:<26} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>9.2} {:>9} {:>9}",
                format!(
                    "{}{}{}",
                    r.name,
                    if r.durable { "" } else { " (non-durable)" },
                    if r.interrupted { " (partial)" } else { "" }
                ),
                r.first_batch_ms,
                r.median_batch_ms,
                r.p99_batch_ms,
                r.max_batch_ms,
                r.total_s,
                ratio(r.median_batch_ms, base.map(|b| b.median_batch_ms)),
                ratio(r.p99_batch_ms, base.map(|b| b.p99_batch_ms)),
            );
        }
    }
    s
}
