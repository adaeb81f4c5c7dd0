//! Renderings of a report, one file each: `report.json` ([`json`]), `batches.csv` ([`csv`]),
//! `report.md` ([`markdown`], with its per-phase tables in [`phase_tables`]) and the terminal
//! summary ([`terminal`]). What more than one of them uses is in [`cells`].

mod cells;
mod csv;
mod json;
mod markdown;
mod phase_tables;
mod terminal;

pub use csv::render_csv;
pub use json::render_json;
pub use markdown::render_markdown;
#[cfg(test)]
pub(crate) use markdown::{render_engine_memory, render_merges};
pub use phase_tables::{
    client_pairs, phase_clock, phase_commits, soak_trend, Aging, ClientPair, PhaseClock,
    PhaseCommits, SoakTrend,
};
#[cfg(test)]
pub(crate) use phase_tables::{
    render_client_pairs, render_clock, render_commit_parts, render_cpu, render_phases, render_soak,
};
pub use terminal::summary_table;

use super::model::Report;
use anyhow::Context;
use std::path::{Path, PathBuf};

/// Write `report.json`, `batches.csv`, `report.md` and the SVG charts into `out` (created if
/// missing). Each file is written new and renamed into place through a handle on `out`
/// ([`crate::system::outdir::OutDir`]), which must be the user's own and not writable by others
/// without the sticky bit. Returns the files written.
///
/// # Errors
/// `out` is refused; I/O and chart-drawing errors.
pub fn write_outputs(report: &Report, out: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let fd = crate::system::outdir::open_dir_creating(out, &mut |_| Ok(()))
        .with_context(|| format!("creating {}", out.display()))?;
    let dir = crate::system::outdir::OutDir::from_handle(out, fd)?;
    write_outputs_in(report, &dir)
}

/// [`write_outputs`] into the output directory `dir`, already open (`replay` resolved `--out`
/// once, before the run).
///
/// # Errors
/// I/O and chart-drawing errors.
pub fn write_outputs_in(
    report: &Report,
    dir: &crate::system::outdir::OutDir,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = vec![
        dir.write("report.json", &render_json(report)?)?,
        dir.write("batches.csv", render_csv(report).as_bytes())?,
    ];
    let charts = crate::report::charts::write_charts_in(report, dir)?;
    written.push(dir.write("report.md", render_markdown(report, &charts).as_bytes())?);
    written.extend(charts.into_iter().map(|c| c.path));
    Ok(written)
}
