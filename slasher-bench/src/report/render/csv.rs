//! `batches.csv`: one line per (row, batch).

use super::*;
use crate::report::model::Report;
use std::fmt::Write as _;

/// `batches.csv`: one line per (row, batch). The commit parts' columns
/// (`commit_NAME_ms`) are those the report's rows have, in the order they first appear.
pub fn render_csv(report: &Report) -> String {
    let parts = part_names(report.runs.iter().flat_map(|run| &run.backends));
    let mut s = String::from(
        "run,name,backend,filesystem,durable,index,slot,current_epoch,headers,attestations,\
         wall_ms,process_ms,prune_ms,commit_ms,enqueue_ms,db_bytes,bytes_written,tiles_written,\
         attester_slashings,proposer_slashings,storage_ms,",
    );
    for name in &parts {
        let _ = write!(s, "commit_{name}_ms,");
    }
    s.push_str(
        "storage_calls,cpu_ms,thread_cpu_ms,\
         commit_bytes,merges,merged_bytes,largest_merge_bytes,largest_merge_table_bytes\n",
    );
    for (run_index, run) in report.runs.iter().enumerate() {
        for r in &run.backends {
            for b in &r.batches {
                let _ = write!(
                    s,
                    "{run_index},{},{},{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{},{},{},{},{},{:.3},",
                    csv_field(&r.name),
                    csv_field(&r.backend),
                    csv_field(&r.filesystem),
                    r.durable,
                    b.index,
                    b.slot,
                    b.current_epoch,
                    b.headers,
                    b.attestations,
                    b.wall_ms,
                    b.process_ms,
                    b.prune_ms,
                    b.commit_ms,
                    b.enqueue_ms,
                    b.db_bytes,
                    b.bytes_written,
                    b.tiles_written,
                    b.attester_slashings,
                    b.proposer_slashings,
                    b.storage_ms,
                );
                for name in &parts {
                    if let Some(ms) = b.commit_parts.as_ref().and_then(|p| p.get(name)) {
                        let _ = write!(s, "{ms:.3}");
                    }
                    s.push(',');
                }
                let _ = writeln!(
                    s,
                    "{},{:.3},{:.3},{}",
                    b.storage_calls,
                    b.cpu_ms,
                    b.thread_cpu_ms,
                    b.merges.map_or_else(
                        || ",,,,".to_string(),
                        |m| format!(
                            "{},{},{},{},{}",
                            m.commit_bytes,
                            m.installed,
                            m.merged_bytes,
                            m.largest_merge_bytes,
                            m.largest_merge_table_bytes
                        )
                    ),
                );
            }
        }
    }
    s
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
