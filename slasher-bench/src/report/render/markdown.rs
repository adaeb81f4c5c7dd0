//! `report.md`: the document, its runs' status and details, and the merges line; the
//! per-phase tables are [`super::phase_tables`]'s.

use super::cells::unless_client;
use super::phase_tables::{
    render_client_pairs, render_clock, render_commit_parts, render_cpu, render_phases, render_soak,
};
use crate::report::charts;
use crate::report::gate::{first_disagreement, gate, groups, missing_expected};
use crate::report::model::{BackendResult, BatchMerges, FillSummary, Report, Run};
use crate::report::scale::render_scale;
use crate::report::table::{baseline, mib, opt_mib, ratio, same_batches};
use crate::system::environment::Build;
use std::fmt::Write as _;

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
    for (key, group) in groups(report) {
        render_fixture_group(&mut s, report, charts, &key, &group);
    }
    render_scale(&mut s, report);
    for (i, run) in report.runs.iter().enumerate() {
        render_run_details(&mut s, i, run);
    }
    s
}

/// One fixture group's section: its heading, the correctness gate, the table of its rows, the
/// per-phase tables, the injected slashings found and the charts.
fn render_fixture_group(
    s: &mut String,
    report: &Report,
    charts: &[charts::Chart],
    (sha, batches, settings): &(String, u64, String),
    group: &[(usize, &BackendResult)],
) {
    let name = report
        .runs
        .iter()
        .find(|r| &r.fixture.records_sha256 == sha)
        .map_or("?", |r| r.fixture.name.as_str());
    let _ = writeln!(s, "## Fixture `{name}`: {batches} batches; {settings}\n");
    render_group_gate(s, group);
    render_rows_table(s, group);
    render_phases(s, group);
    render_clock(s, group);
    render_cpu(s, group);
    render_commit_parts(s, group);
    render_client_pairs(s, group);
    render_soak(s, group);
    render_expected_slashings(s, group);
    for chart in charts.iter().filter(|c| &c.group == sha) {
        let file = chart
            .path
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or_default();
        let _ = writeln!(s, "![{}]({file})\n", chart.title);
    }
}

/// The group's correctness gate: the rows agree on every batch's slashings, or where they
/// first differ (or that no row replayed a batch).
fn render_group_gate(s: &mut String, group: &[(usize, &BackendResult)]) {
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
}

/// The group's main table: a row per backend row with its batch times, their ratios to the
/// LMDB baseline, commit, sizes, bytes written, peak RSS and slashings.
fn render_rows_table(s: &mut String, group: &[(usize, &BackendResult)]) {
    s.push_str(
        "| run | backend | filesystem | durability | first batch | median | p99 | max | \
         total s | median ×LMDB | p99 ×LMDB | first ×LMDB | total ×LMDB | median commit | \
         DB MiB (apparent / allocated) | written MiB | device MiB | peak RSS MiB | slashings |\n",
    );
    s.push_str(
        "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\
         ---:|---:|\n",
    );
    for (run_index, r) in group {
        let base = same_batches(r, baseline(r, group));
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
}

/// The fixture's injected slashings each row found, missed and found besides, for rows whose
/// fixture names them.
fn render_expected_slashings(s: &mut String, group: &[(usize, &BackendResult)]) {
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

/// A run's environment: the command, the fixture, the slasher's settings, the machine, the
/// build, each row's filesystem (and fill), its merges and memory, its failures and notes.
fn render_run_details(s: &mut String, index: usize, run: &Run) {
    let m = &run.machine;
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
    render_build(s, &run.build);
    for r in &run.backends {
        render_row_filesystem(s, r);
    }
    for r in &run.backends {
        render_merges(s, r);
        render_engine_memory(s, r);
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

/// The build lines of a run's environment: profile and revision (with a warning for a build
/// that is not a release one) and the crates' versions.
fn render_build(s: &mut String, b: &Build) {
    let _ = writeln!(
        s,
        "- build: {} profile{}, git {}{}",
        b.profile,
        b.cargo_profile
            .as_deref()
            .map(|p| format!(" (cargo profile {p})"))
            .unwrap_or_default(),
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
}

/// A row's line in its run's environment: the filesystem, its mount and the database
/// directory, then how the database was filled before the batches, if it was.
fn render_row_filesystem(s: &mut String, r: &BackendResult) {
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
        render_fill(s, &r.name, fill);
    }
}

/// How a row's database was filled before its batches (`--fill-epochs`).
fn render_fill(s: &mut String, name: &str, fill: &FillSummary) {
    let written: u64 = fill.report.entries.iter().sum();
    let _ = writeln!(
        s,
        "- `{}` was filled before its batches (`--fill-epochs`) with {} epochs of \
         regular chain over {} validators, epochs {}..={}: {} entries, {:.0} MiB of keys \
         and values, {} commits, in {:.1} s (passes {:.1} / {:.1} / {:.1} s), then a \
         sync of {:.1} s; the row's figures (peak RSS included) start after it",
        name,
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

/// One line on a row's own memory accounting, for a backend that keeps one: each figure's
/// largest value after any batch, by the engine's names (bytes in MiB; levels and counts, the
/// names ending in `level` or `releases`, as they are).
pub(crate) fn render_engine_memory(s: &mut String, r: &BackendResult) {
    let mut largest: Vec<(&str, u64)> = Vec::new();
    for (name, v) in r.batches.iter().flat_map(|b| &b.engine_memory) {
        match largest.iter_mut().find(|(n, _)| n == name) {
            Some((_, most)) => *most = (*most).max(*v),
            None => largest.push((name, *v)),
        }
    }
    if largest.is_empty() {
        return;
    }
    let figures: Vec<String> = largest
        .iter()
        .map(
            |(name, v)| match name.ends_with("level") || name.ends_with("releases") {
                true => format!("{name} {v}"),
                false => format!("{name} {:.1} MiB", *v as f64 / 1_048_576.0),
            },
        )
        .collect();
    let _ = writeln!(
        s,
        "- `{}`'s own memory accounting, the largest after any batch: {}",
        r.name,
        figures.join(", ")
    );
}

/// One line on what a row's commits and merges wrote over its batches, for a backend that
/// reports it: how much, and the largest merge (its share of its table, and its batch).
pub(crate) fn render_merges(s: &mut String, r: &BackendResult) {
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
