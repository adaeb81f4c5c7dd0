//! Renderings of a report: `report.json`, `batches.csv`, `report.md` and the terminal summary.

use super::charts;
use super::gate::{first_disagreement, gate, groups, missing_expected};
use super::model::{BackendResult, BatchMerges, BatchRecord, CommitParts, Report, Run};
use super::scale::render_scale;
use super::table::{baseline, mib, opt_mib, phase_batches, phase_times, ratio, Phase, PhaseTimes};
use crate::measure::Summary;
use anyhow::Context;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

// ---- rendering -------------------------------------------------------------------------------

/// Write `report.json`, `batches.csv`, `report.md` and the SVG charts into `out` (created if
/// missing). Each file is written new and renamed into place through a handle on `out`
/// ([`crate::outdir::OutDir`]), which must be the user's own and not writable by others
/// without the sticky bit. Returns the files written.
///
/// # Errors
/// `out` is refused; I/O and chart-drawing errors.
pub fn write_outputs(report: &Report, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let dir = crate::outdir::OutDir::open(out)?;
    let mut written = vec![
        dir.write("report.json", &serde_json::to_vec_pretty(report)?)?,
        dir.write("batches.csv", render_csv(report).as_bytes())?,
    ];
    let charts = crate::report::charts::write_charts_in(report, &dir)?;
    written.push(dir.write("report.md", render_markdown(report, &charts).as_bytes())?);
    written.extend(charts.into_iter().map(|c| c.path));
    Ok(written)
}

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

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `part` as a whole percentage of `whole`; "–" if `whole` is not positive.
fn percent(part: f64, whole: f64) -> String {
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

/// `report.md`.
pub fn render_markdown(report: &Report, charts: &[charts::Chart]) -> String {
    let mut s = String::from("# slasher-bench replay report\n\n");
    let _ = writeln!(
        s,
        "Each batch is replayed through the slasher as Lighthouse does it: the batch's headers and \
         attestations are queued, then `process_queued(current_epoch)` runs in one write \
         transaction and `prune_database(current_epoch)` in a second one. *Batch time* is the \
         wall time of both; *commit* is the time of the two commits alone. Each backend runs in \
         its own process, one after another, on a fresh database. Times in milliseconds; \
         ratios are row ÷ LMDB on the same filesystem (else any LMDB row of the table); below 1 \
         is faster than LMDB.\n"
    );
    if let Some((fixture, d)) = gate(report) {
        let _ = writeln!(s, "**CORRECTNESS GATE FAILED** (fixture {fixture}): {d}\n");
    }
    if let Some(missed) = missing_expected(report) {
        let _ = writeln!(s, "**EXPECTED SLASHINGS NOT FOUND**: {missed}\n");
    }
    for (i, run) in report.runs.iter().enumerate() {
        render_run_status(&mut s, i, run);
    }
    for ((sha, batches, settings), group) in groups(report) {
        let name = report
            .runs
            .iter()
            .find(|r| r.fixture.records_sha256 == sha)
            .map_or("?", |r| r.fixture.name.as_str());
        let _ = writeln!(s, "## Fixture `{name}`: {batches} batches; {settings}\n");
        let only: Vec<&BackendResult> = group.iter().map(|(_, r)| *r).collect();
        match first_disagreement(&only) {
            // Rows that replayed nothing agree on nothing: say so rather than pass.
            None if only.iter().all(|r| r.batches.is_empty()) => {
                let _ = writeln!(
                    s,
                    "Correctness gate: nothing compared: no row replayed a batch (a fill-only \
                     run, `--batches 0 --fill-epochs N --keep-db`).\n"
                );
            }
            None => {
                let total: usize = only
                    .first()
                    .map_or(0, |r| r.slashings.attester + r.slashings.proposer);
                let _ = writeln!(
                    s,
                    "Correctness gate: all {} rows found the same slashings in every batch \
                     ({total} in total).\n",
                    only.len()
                );
            }
            Some(d) => {
                let _ = writeln!(s, "Correctness gate: **FAILED**: {d}\n");
            }
        }
        s.push_str(
            "| run | backend | filesystem | durability | first batch | median | p99 | max | \
             total s | median ×LMDB | p99 ×LMDB | first ×LMDB | total ×LMDB | median commit | \
             DB MiB (apparent / allocated) | written MiB | device MiB | peak RSS MiB | slashings |\n",
        );
        s.push_str(
            "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\
             ---:|---:|\n",
        );
        for (run_index, r) in &group {
            let base = baseline(r, &group);
            let durability = if r.durable {
                "durable".to_string()
            } else {
                format!("**NON-DURABLE** ({})", r.durability)
            };
            let _ = writeln!(
                s,
                "| {run_index} | {}{} | {} | {durability} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | \
                 {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} |",
                r.name,
                if r.interrupted {
                    format!(" (**partial**: {} batches)", r.batches.len())
                } else {
                    String::new()
                },
                r.filesystem,
                r.first_batch_ms,
                r.median_batch_ms,
                r.p99_batch_ms,
                r.max_batch_ms,
                r.total_s,
                ratio(r.median_batch_ms, base.map(|b| b.median_batch_ms)),
                ratio(r.p99_batch_ms, base.map(|b| b.p99_batch_ms)),
                ratio(r.first_batch_ms, base.map(|b| b.first_batch_ms)),
                ratio(r.total_s, base.map(|b| b.total_s)),
                unless_client(r, format!("{:.2}", r.median_commit_ms)),
                mib(r.db_bytes_final),
                mib(r.db_allocated_bytes_final),
                unless_client(r, mib(r.bytes_written)),
                unless_client(r, opt_mib(r.device_bytes_written)),
                opt_mib(r.peak_rss_bytes),
                r.slashings.attester + r.slashings.proposer,
            );
        }
        s.push('\n');
        render_phases(&mut s, &group);
        render_clock(&mut s, &group);
        render_cpu(&mut s, &group);
        render_commit_parts(&mut s, &group);
        render_client_pairs(&mut s, &group);
        render_soak(&mut s, &group);
        let expected: Vec<String> = group
            .iter()
            .filter_map(|(_, r)| {
                let e = r.expected_slashings.as_ref()?;
                Some(format!(
                    "{}: {}/{} expected found, {} unexpected{}",
                    r.name,
                    e.found,
                    e.expected,
                    e.unexpected,
                    if e.missing.is_empty() {
                        String::new()
                    } else {
                        format!(" (missing: {})", e.missing.join("; "))
                    }
                ))
            })
            .collect();
        if !expected.is_empty() {
            let _ = writeln!(s, "Injected slashings (from the fixture manifest):\n");
            for line in expected {
                let _ = writeln!(s, "- {line}");
            }
            s.push('\n');
        }
        for chart in charts.iter().filter(|c| c.group == sha) {
            let file = chart
                .path
                .file_name()
                .and_then(|f| f.to_str())
                .unwrap_or_default();
            let _ = writeln!(s, "![{}]({file})\n", chart.title);
        }
    }
    render_scale(&mut s, report);
    for (i, run) in report.runs.iter().enumerate() {
        render_run_details(&mut s, i, run);
    }
    s
}

/// Whether the row timed its storage calls (client rows and older reports did not).
fn times_storage(row: &BackendResult) -> bool {
    row.batches.iter().any(|b| b.storage_ms > 0.0)
}

/// The per-phase table: end-to-end and storage time, medians and totals, with ratios to the
/// row's LMDB baseline in the same phase.
pub(super) fn render_phases(s: &mut String, group: &[(usize, &BackendResult)]) {
    if !group.iter().any(|(_, r)| times_storage(r)) {
        return;
    }
    s.push_str(
        "Where the time goes, by phase (*storage*: time inside the backend's calls — get, put, \
         del, cursors, commit; the rest of a batch is the slasher's own work, the same code for \
         every backend):\n\n",
    );
    s.push_str(
        "| run | backend | phase | batches | median | total s | storage median | storage total s | \
         storage share | median ×LMDB | total ×LMDB | storage median ×LMDB | storage total ×LMDB |\n",
    );
    s.push_str("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (run_index, r) in group {
        let base = baseline(r, group);
        for phase in Phase::ALL {
            let Some(t) = phase_times(r, phase) else {
                continue;
            };
            let b = base.and_then(|b| phase_times(b, phase));
            let share = percent(t.storage_total_s, t.total_s);
            let _ = writeln!(
                s,
                "| {run_index} | {} | {} | {} | {:.1} | {:.2} | {} | {} | {} | {} | {} | {} | \
                 {} |",
                r.name,
                phase.name(),
                t.batches,
                t.median_ms,
                t.total_s,
                unless_client(r, format!("{:.1}", t.storage_median_ms)),
                unless_client(r, format!("{:.2}", t.storage_total_s)),
                unless_client(r, share),
                ratio(t.median_ms, b.map(|b| b.median_ms)),
                ratio(t.total_s, b.map(|b| b.total_s)),
                unless_client(
                    r,
                    ratio(t.storage_median_ms, b.map(|b| b.storage_median_ms))
                ),
                unless_client(r, ratio(t.storage_total_s, b.map(|b| b.storage_total_s))),
            );
        }
    }
    s.push('\n');
}

/// A row's storage time in one phase without the clock's own cost (see
/// `slasher_adapters::timed`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseClock {
    /// Median storage calls per batch.
    pub calls_median: f64,
    /// The clock's cost summed over the phase (calls × the row's `clock_ns`), s.
    pub clock_total_s: f64,
    /// Median over the batches of `storage_ms` minus the clock's cost, ms.
    pub net_median_ms: f64,
    /// Sum of the same, s.
    pub net_total_s: f64,
}

/// See [`PhaseClock`]; `None` if the row has no batch in `phase` or no measured clock (client
/// rows, older reports).
pub fn phase_clock(row: &BackendResult, phase: Phase) -> Option<PhaseClock> {
    let clock_ns = row.clock_ns?;
    let in_phase = phase_batches(row, phase);
    if in_phase.is_empty() {
        return None;
    }
    let calls: Vec<f64> = in_phase.iter().map(|b| b.storage_calls as f64).collect();
    let clock_ms: Vec<f64> = calls.iter().map(|c| c * clock_ns / 1e6).collect();
    let net: Vec<f64> = in_phase
        .iter()
        .zip(&clock_ms)
        .map(|(b, c)| b.storage_ms - c)
        .collect();
    let (calls, net) = (Summary::of(&calls), Summary::of(&net));
    Some(PhaseClock {
        calls_median: calls.median,
        clock_total_s: clock_ms.iter().sum::<f64>() / 1000.0,
        net_median_ms: net.median,
        net_total_s: net.sum / 1000.0,
    })
}

/// The clock's own share of the storage time, and the storage ratios without it.
pub(super) fn render_clock(s: &mut String, group: &[(usize, &BackendResult)]) {
    let rows: Vec<_> = group.iter().filter(|(_, r)| r.clock_ns.is_some()).collect();
    if rows.is_empty() {
        return;
    }
    s.push_str(
        "The storage clock's own cost (each storage call reads the clock twice, and part of that \
         lands in the time it measures: *clock ns* per call, measured after the row's last \
         batch; *net*: storage time minus calls × clock ns):\n\n",
    );
    s.push_str(
        "| run | backend | phase | clock ns | calls per batch (median) | clock s | clock share of \
         storage | net median | net total s | net median ×LMDB | net total ×LMDB |\n",
    );
    s.push_str("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (run_index, r) in rows {
        let base = baseline(r, group);
        for phase in Phase::ALL {
            let (Some(c), Some(t)) = (phase_clock(r, phase), phase_times(r, phase)) else {
                continue;
            };
            let b = base.and_then(|b| phase_clock(b, phase));
            let share = percent(c.clock_total_s, t.storage_total_s);
            let _ = writeln!(
                s,
                "| {run_index} | {} | {} | {:.1} | {:.0} | {:.2} | {share} | {:.1} | {:.2} | {} | {} |",
                r.name,
                phase.name(),
                r.clock_ns.unwrap_or_default(),
                c.calls_median,
                c.clock_total_s,
                c.net_median_ms,
                c.net_total_s,
                ratio(c.net_median_ms, b.map(|b| b.net_median_ms)),
                ratio(c.net_total_s, b.map(|b| b.net_total_s)),
            );
        }
    }
    s.push('\n');
}

/// Where a row's batch time went by CPU, per phase: the replay's thread, the backend's other
/// threads (butter_db's background merges), and off the CPU (waiting for I/O, or the core
/// running something else: kernel threads such as btrfs's workers).
pub(super) fn render_cpu(s: &mut String, group: &[(usize, &BackendResult)]) {
    let measured = |r: &BackendResult| r.batches.iter().any(|b| b.cpu_ms > 0.0);
    if !group.iter().any(|(_, r)| measured(r)) {
        return;
    }
    s.push_str(
        "Batch time by CPU (seconds summed over the phase; *replay thread*: the slasher and the \
         storage calls it makes; *other threads*: the backend's own, such as butter_db's \
         background merges; *off CPU*: wall minus the process's CPU, that is waiting for I/O or \
         the core running something else, with each row pinned to one core):\n\n",
    );
    s.push_str(
        "| run | backend | phase | wall s | replay thread CPU s | other threads CPU s | off CPU s \
         |\n",
    );
    s.push_str("|---:|---|---|---:|---:|---:|---:|\n");
    for (run_index, r) in group.iter().filter(|(_, r)| measured(r)) {
        for phase in Phase::ALL {
            let in_phase = phase_batches(r, phase);
            if in_phase.is_empty() {
                continue;
            }
            let sum = |f: fn(&BatchRecord) -> f64| in_phase.iter().map(|b| f(b)).sum::<f64>() / 1e3;
            let wall = sum(|b| b.wall_ms);
            let thread = sum(|b| b.thread_cpu_ms);
            let others = sum(|b| b.cpu_ms - b.thread_cpu_ms);
            let off = sum(|b| (b.wall_ms - b.cpu_ms).max(0.0));
            let _ = writeln!(
                s,
                "| {run_index} | {} | {} | {wall:.2} | {thread:.2} | {others:.2} | {off:.2} |",
                r.name,
                phase.name(),
            );
        }
    }
    s.push('\n');
}

/// A row's commits in one phase: their total and, summed, the parts the backend reported.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseCommits {
    /// Batches in the phase.
    pub batches: usize,
    /// Both commits of every batch, seconds.
    pub commit_s: f64,
    /// The parts, summed over the phase (milliseconds, as in [`CommitParts`]).
    pub parts: CommitParts,
}

impl PhaseCommits {
    /// What the commits spent outside the reported parts, seconds.
    pub fn rest_s(&self) -> f64 {
        self.commit_s - self.parts.total_ms() / 1000.0
    }
}

/// A row's commits in `phase`, if every batch there has its commit split (butter_db rows).
pub fn phase_commits(row: &BackendResult, phase: Phase) -> Option<PhaseCommits> {
    let in_phase = phase_batches(row, phase);
    if in_phase.is_empty() {
        return None;
    }
    let mut parts = CommitParts::default();
    let mut commit_ms = 0.0;
    for b in &in_phase {
        for (name, ms) in b.commit_parts.as_ref()?.iter() {
            parts.add(name, ms);
        }
        commit_ms += b.commit_ms;
    }
    Some(PhaseCommits {
        batches: in_phase.len(),
        commit_s: commit_ms / 1000.0,
        parts,
    })
}

/// Where the commits of the rows that report it went, by phase, beside the commits of the
/// row's LMDB baseline.
pub(super) fn render_commit_parts(s: &mut String, group: &[(usize, &BackendResult)]) {
    let rows: Vec<(usize, &BackendResult)> = group
        .iter()
        .filter(|(_, r)| Phase::ALL.iter().any(|&p| phase_commits(r, p).is_some()))
        .copied()
        .collect();
    if rows.is_empty() {
        return;
    }
    let names = part_names(rows.iter().map(|(_, r)| *r));
    let notes: Vec<String> = names
        .iter()
        .map(|n| {
            let shown = n.replace('_', "-");
            match part_note(n) {
                Some(note) => format!("*{shown}*: {note}; "),
                None => format!("*{shown}*; "),
            }
        })
        .collect();
    let _ = write!(
        s,
        "Where the commits went, for the backends that report it (seconds summed over the \
         phase, share of the commits' total in brackets; {}*rest*: {}):\n\n",
        notes.concat(),
        REST_NOTE
    );
    s.push_str("| run | backend | phase | batches | commits s |");
    for name in &names {
        let _ = write!(s, " {} |", name.replace('_', "-"));
    }
    s.push_str(" rest | LMDB commits s |\n|---:|---|---|---:|---:|");
    s.push_str(&"---:|".repeat(names.len()));
    s.push_str("---:|---:|\n");
    for (run_index, r) in rows {
        let base = baseline(r, group);
        for phase in Phase::ALL {
            let Some(c) = phase_commits(r, phase) else {
                continue;
            };
            let part = |secs: f64| {
                if c.commit_s > 0.0 {
                    format!("{secs:.2} ({:.0} %)", 100.0 * secs / c.commit_s)
                } else {
                    format!("{secs:.2}")
                }
            };
            let lmdb = base
                .map(|b| phase_batches(b, phase))
                .filter(|b| !b.is_empty())
                .map_or("–".to_string(), |b| {
                    format!("{:.2}", b.iter().map(|b| b.commit_ms).sum::<f64>() / 1000.0)
                });
            let _ = write!(
                s,
                "| {run_index} | {} | {} | {} | {:.2} |",
                r.name,
                phase.name(),
                c.batches,
                c.commit_s,
            );
            for name in &names {
                let shown = c
                    .parts
                    .get(name)
                    .map_or("–".to_string(), |ms| part(ms / 1000.0));
                let _ = write!(s, " {shown} |");
            }
            let _ = writeln!(s, " {} | {lmdb} |", part(c.rest_s()));
        }
    }
    s.push('\n');
}

/// What a commit part of butter_db's measures, for the text above the table; a part without a
/// note is shown by its name alone.
fn part_note(name: &str) -> Option<&'static str> {
    Some(match name {
        "build" => "merging the writes into new segments",
        "file" => "copying them into their files and starting the write-back",
        "write_back" => "waiting for it",
        "manifest" => {
            "installing finished merges, writing the manifest and unlinking retired segments"
        }
        "snapshot" => "the read-only snapshot that commits",
        _ => return None,
    })
}

/// What a butter_db commit spends outside its named parts.
const REST_NOTE: &str =
    "what the commit does after the snapshot (publishing, deleting old generations, closing \
     retired files)";

/// One phase of a port row beside the same backend and filesystem replayed by a client.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientPair {
    /// The port's row.
    pub port: String,
    /// The client's row.
    pub client: String,
    /// The phase.
    pub phase: Phase,
    /// The port's times in the phase.
    pub port_times: PhaseTimes,
    /// The client's times in the phase.
    pub client_times: PhaseTimes,
}

/// Every port row of a group that has a client row of the same backend and filesystem, phase
/// by phase (the group's correctness gate has already compared their slashings).
pub fn client_pairs(group: &[(usize, &BackendResult)]) -> Vec<ClientPair> {
    let mut out = Vec::new();
    for (_, port) in group.iter().filter(|(_, r)| r.client.is_none()) {
        let clients = group.iter().filter(|(_, c)| {
            c.client.is_some() && c.backend == port.backend && c.filesystem == port.filesystem
        });
        for (_, client) in clients {
            for phase in Phase::ALL {
                if let (Some(p), Some(c)) = (phase_times(port, phase), phase_times(client, phase)) {
                    out.push(ClientPair {
                        port: port.name.clone(),
                        client: client.name.clone(),
                        phase,
                        port_times: p,
                        client_times: c,
                    });
                }
            }
        }
    }
    out
}

/// The port against the client, per phase: how far the port's cost is from what a node
/// running the client spends on the same batches.
pub(super) fn render_client_pairs(s: &mut String, group: &[(usize, &BackendResult)]) {
    let pairs = client_pairs(group);
    if pairs.is_empty() {
        return;
    }
    s.push_str(
        "The port against the client's own slasher on the same batches (port ÷ client: above 1 \
         the port costs more than the client):\n\n\
         | port row | client row | phase | batches | port median | client median | median ÷ client | \
         port total s | client total s | total ÷ client |\n\
         |---|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for p in &pairs {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.1} | {:.1} | {} | {:.2} | {:.2} | {} |",
            p.port,
            p.client,
            p.phase.name(),
            p.port_times.batches,
            p.port_times.median_ms,
            p.client_times.median_ms,
            ratio(p.port_times.median_ms, Some(p.client_times.median_ms)),
            p.port_times.total_s,
            p.client_times.total_s,
            ratio(p.port_times.total_s, Some(p.client_times.total_s)),
        );
    }
    s.push('\n');
}

/// How one per-batch time moved over a soak.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Aging {
    /// Median of the last 10 % of warm batches over that of the first 10 %: above 1 is a
    /// slowdown over the run.
    pub trend: f64,
    /// Median over the warm batches (after the cold and the next epoch), ms.
    pub warm_median_ms: f64,
    /// Largest after the first epoch (the epoch after the cold start included), ms.
    pub largest_ms: f64,
}

impl Aging {
    /// `time` of each batch of `row`; `None` without warm batches.
    fn of(row: &BackendResult, time: impl Fn(&BatchRecord) -> f64) -> Option<Aging> {
        let warm: Vec<f64> = phase_batches(row, Phase::Steady)
            .into_iter()
            .map(&time)
            .collect();
        if warm.is_empty() {
            return None;
        }
        let largest_ms = phase_batches(row, Phase::NextEpoch)
            .into_iter()
            .map(&time)
            .chain(warm.iter().copied())
            .fold(0.0, f64::max);
        let tenth = (warm.len() / 10).max(1);
        let head = Summary::of(&warm[..tenth]).median;
        let tail = Summary::of(&warm[warm.len() - tenth..]).median;
        Some(Aging {
            trend: if head > 0.0 { tail / head } else { f64::NAN },
            warm_median_ms: Summary::of(&warm).median,
            largest_ms,
        })
    }

    /// The largest over the warm median: the stall bound is 2.
    pub fn stall(&self) -> f64 {
        self.largest_ms / self.warm_median_ms
    }
}

/// How a long run aged: the figures the soak is judged by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoakTrend {
    /// Batches in the steady phase (after the cold and the next epoch).
    pub warm_batches: usize,
    /// The batches' wall time: the slasher's work and the storage engine's.
    pub wall: Aging,
    /// The time inside the backend's calls alone, the part the engine controls; `None` for
    /// rows that do not time them (client rows).
    pub storage: Option<Aging>,
    /// Apparent database size after the last sample.
    pub end_db_bytes: u64,
    /// Filesystem growth after the last sample, if measured.
    pub end_fs_growth_bytes: Option<i64>,
    /// Most live snapshots in any sample.
    pub max_snapshots: u64,
    /// Extents after the last sample, if measured.
    pub end_extents: Option<u64>,
}

/// The soak figures of a row; `None` without samples or without warm batches.
pub fn soak_trend(row: &BackendResult) -> Option<SoakTrend> {
    let last_sample = row.samples.last()?;
    let wall = Aging::of(row, |b| b.wall_ms)?;
    Some(SoakTrend {
        warm_batches: phase_batches(row, Phase::Steady).len(),
        wall,
        storage: times_storage(row)
            .then(|| Aging::of(row, |b| b.storage_ms))
            .flatten(),
        end_db_bytes: last_sample.db_bytes,
        end_fs_growth_bytes: last_sample.fs_growth_bytes,
        max_snapshots: row.samples.iter().map(|s| s.snapshots).max().unwrap_or(0),
        end_extents: last_sample.extents,
    })
}

/// The soak table (rows with samples only).
pub(super) fn render_soak(s: &mut String, group: &[(usize, &BackendResult)]) {
    let rows: Vec<(usize, &BackendResult, SoakTrend)> = group
        .iter()
        .filter_map(|(i, r)| soak_trend(r).map(|t| (*i, *r, t)))
        .collect();
    if rows.is_empty() {
        return;
    }
    s.push_str(
        "Soak (`--sample-every`): *trend* is the median batch of the last 10 % of warm batches \
         (after the first two epochs) over that of the first 10 %; *stall* is the slowest batch \
         after the first epoch (the epoch after the cold start included) over the warm median; \
         the *storage* columns are the same figures for the time inside the backend's calls \
         alone, without the slasher's own work; sizes and extents after the last batch; *fs \
         growth* is what the database's filesystem gained since the backend opened (snapshots \
         and not-yet-reclaimed space included; exact only if nothing else writes there).\n\n",
    );
    s.push_str(
        "| run | backend | warm batches | warm median | trend | largest stall | stall ÷ median | \
         storage warm median | storage trend | storage stall ÷ median | \
         DB MiB | fs growth MiB | fs growth ÷ DB | max snapshots | extents |\n",
    );
    s.push_str("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (i, r, t) in rows {
        let fs_ratio = t
            .end_fs_growth_bytes
            .filter(|_| t.end_db_bytes > 0)
            .map_or_else(
                || "–".into(),
                |g| format!("{:.2}", g as f64 / t.end_db_bytes as f64),
            );
        let growth = t
            .end_fs_growth_bytes
            .map_or_else(|| "n/m".into(), |g| format!("{:.1}", g as f64 / 1048576.0));
        let storage = t.storage.map_or_else(
            || "n/m | n/m | n/m".into(),
            |a| {
                format!(
                    "{:.1} | {:.2} | {:.2}",
                    a.warm_median_ms,
                    a.trend,
                    a.stall()
                )
            },
        );
        let _ = writeln!(
            s,
            "| {i} | {} | {} | {:.1} | {:.2} | {:.1} | {:.2} | {storage} | {} | {} | {fs_ratio} | \
             {} | {} |",
            r.name,
            t.warm_batches,
            t.wall.warm_median_ms,
            t.wall.trend,
            t.wall.largest_ms,
            t.wall.stall(),
            mib(t.end_db_bytes),
            growth,
            t.max_snapshots,
            t.end_extents
                .map_or_else(|| "n/m".into(), |e| e.to_string()),
        );
    }
    s.push('\n');
}

/// The warnings at the top of `report.md`: an interrupted run and failed rows, with the reason.
fn render_run_status(s: &mut String, index: usize, run: &Run) {
    if run.interrupted {
        let done: Vec<String> = run
            .backends
            .iter()
            .map(|r| {
                format!(
                    "`{}` {} batches{}",
                    r.name,
                    r.batches.len(),
                    if r.interrupted { " (partial)" } else { "" }
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "**INTERRUPTED**: run {index} was stopped by {} before it was complete; its rows hold \
             only the batches done, of {} asked for: {}{}. Partial rows are not comparable with \
             complete ones.\n",
            run.interrupted_by.as_deref().unwrap_or("a signal"),
            run.fixture.batches_replayed,
            if done.is_empty() {
                "no row".to_string()
            } else {
                done.join(", ")
            },
            if run.not_started.is_empty() {
                String::new()
            } else {
                format!("; not started: {}", run.not_started.join(", "))
            }
        );
    }
    for failure in &run.failures {
        let _ = writeln!(
            s,
            "**FAILED** (run {index}) `{}`: {}\n",
            failure.backend, failure.error
        );
    }
}

fn render_run_details(s: &mut String, index: usize, run: &Run) {
    let m = &run.machine;
    let b = &run.build;
    let c = &run.slasher_config;
    let _ = writeln!(s, "## Run {index}: environment\n");
    let _ = writeln!(s, "- command: `{}`", run.command.join(" "));
    let _ = writeln!(
        s,
        "- fixture: `{}` ({}), {} of {} batches replayed, records sha256 `{}`",
        run.fixture.name,
        run.fixture.path.display(),
        run.fixture.batches_replayed,
        run.fixture.batch_count,
        run.fixture.records_sha256
    );
    let _ = writeln!(
        s,
        "- slasher config: C = {}, K = {}, H = {}, LRU {}, max_db_size_mbs {}, durability \
         requested: {}",
        c.chunk_size,
        c.validator_chunk_size,
        c.history_length,
        c.attestation_root_cache_size,
        c.max_db_size_mbs,
        c.durability_requested
    );
    let _ = writeln!(
        s,
        "- machine: kernel {}, CPU {} ({} online, {} available to the process), RAM {} GiB",
        m.kernel.as_deref().unwrap_or("?"),
        m.cpu_model.as_deref().unwrap_or("?"),
        m.cpus_online.map_or("?".into(), |n| n.to_string()),
        m.cpus_available.map_or("?".into(), |n| n.to_string()),
        m.ram_bytes.map_or("?".into(), |r| format!(
            "{:.1}",
            r as f64 / (1u64 << 30) as f64
        )),
    );
    let _ = writeln!(
        s,
        "- build: {} profile, git {}{}",
        b.profile,
        b.git_revision.as_deref().unwrap_or("unknown"),
        if b.git_dirty == Some(true) {
            " (with uncommitted changes)"
        } else {
            ""
        }
    );
    if b.profile != "release" {
        let _ = writeln!(
            s,
            "- **WARNING: not a release build; these times are not benchmarks.**"
        );
    }
    let versions: Vec<String> = b
        .crate_versions
        .iter()
        .map(|v| format!("{} {}", v.name, v.version))
        .collect();
    let _ = writeln!(s, "- crates: {}", versions.join(", "));
    for r in &run.backends {
        let f = &r.fs;
        let _ = writeln!(
            s,
            "- `{}`: {} (statfs magic {}) at {}, mounted on {} from {}{} with `{}` / `{}`; \
             database in {}; durable: {}",
            r.name,
            f.fs_type,
            f.magic,
            f.path.display(),
            f.mount_point
                .as_ref()
                .map_or("?".into(), |p| p.display().to_string()),
            f.device.as_deref().unwrap_or("?"),
            f.loop_backing_file
                .as_ref()
                .map_or(String::new(), |b| format!(" (loop file {b})")),
            f.mount_options.as_deref().unwrap_or("?"),
            f.super_options.as_deref().unwrap_or("?"),
            r.db_dir.display(),
            r.durable
        );
        if let Some(fill) = &r.fill {
            let written: u64 = fill.report.entries.iter().sum();
            let _ = writeln!(
                s,
                "- `{}` was filled before its batches (`--fill-epochs`) with {} epochs of \
                 regular chain over {} validators, epochs {}..={}: {} entries, {:.0} MiB of keys \
                 and values, {} commits, in {:.1} s (passes {:.1} / {:.1} / {:.1} s), then a \
                 sync of {:.1} s; the row's figures (peak RSS included) start after it",
                r.name,
                fill.epochs,
                fill.validators,
                fill.first_epoch,
                fill.first_epoch + fill.epochs - 1,
                written,
                fill.report.bytes as f64 / 1048576.0,
                fill.report.commits,
                fill.seconds,
                fill.report.seconds[0],
                fill.report.seconds[1],
                fill.report.seconds[2],
                fill.sync_seconds
            );
        }
    }
    for r in &run.backends {
        render_merges(s, r);
    }
    for failure in &run.failures {
        let _ = writeln!(s, "- **FAILED** `{}`: {}", failure.backend, failure.error);
    }
    if !run.notes.is_empty() {
        let _ = writeln!(s, "\nWhat the numbers mean:\n");
        for note in &run.notes {
            let _ = writeln!(s, "- {note}");
        }
    }
    s.push('\n');
}

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
            let base = baseline(r, group);
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

/// One line on what a row's commits and merges wrote over its batches, for a backend that
/// reports it: how much, and the largest merge (its share of its table, and its batch).
pub(super) fn render_merges(s: &mut String, r: &BackendResult) {
    let with: Vec<(u64, BatchMerges)> = r
        .batches
        .iter()
        .filter_map(|b| b.merges.map(|m| (b.index, m)))
        .collect();
    if with.is_empty() {
        return;
    }
    let commit: u64 = with.iter().map(|(_, m)| m.commit_bytes).sum();
    let merged: u64 = with.iter().map(|(_, m)| m.merged_bytes).sum();
    let installed: u64 = with.iter().map(|(_, m)| m.installed).sum();
    let largest_commit = with
        .iter()
        .map(|(_, m)| m.largest_commit_bytes)
        .max()
        .unwrap_or(0);
    let _ = write!(
        s,
        "- `{}` over its {} batches: the commits wrote {} MiB of segments themselves (the \
         largest {} MiB) and installed {} background merges that wrote {} MiB",
        r.name,
        with.len(),
        mib(commit),
        mib(largest_commit),
        installed,
        mib(merged)
    );
    match with.iter().max_by_key(|(_, m)| m.largest_merge_bytes) {
        Some((batch, m)) if m.largest_merge_bytes > 0 => {
            let _ = writeln!(
                s,
                "; the largest merge wrote {} MiB, {:.1} % of its table's {} MiB, \
                 installed in batch {batch}",
                mib(m.largest_merge_bytes),
                100.0 * m.largest_merge_bytes as f64 / m.largest_merge_table_bytes.max(1) as f64,
                mib(m.largest_merge_table_bytes)
            );
        }
        _ => s.push('\n'),
    }
}
