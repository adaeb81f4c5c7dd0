//! `slasher-bench report`: re-render one report or merge several.

use super::gate::{gate, missing_expected};
use super::model::{Report, REPORT_SCHEMA};
use super::render::{summary_table, write_outputs};
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};

// ---- `slasher-bench report` ------------------------------------------------------------------

/// `slasher-bench report`: re-render or merge reports.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Report directories (holding `report.json`) or `report.json` files.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// Output directory; defaults to the input directory when there is exactly one input.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Read a report from a directory or a `report.json` path.
///
/// # Errors
/// I/O or JSON errors; an unknown schema.
pub fn load(path: &Path) -> anyhow::Result<Report> {
    let file = if path.is_dir() {
        path.join("report.json")
    } else {
        path.to_path_buf()
    };
    let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
    let report: Report =
        serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", file.display()))?;
    if report.schema != REPORT_SCHEMA {
        bail!(
            "{}: schema {:?}, this build reads {REPORT_SCHEMA:?}",
            file.display(),
            report.schema
        );
    }
    Ok(report)
}

/// Concatenate the runs of several reports.
pub fn merge(reports: Vec<Report>) -> Report {
    Report {
        schema: REPORT_SCHEMA.into(),
        generated_by: crate::TOOL.into(),
        runs: reports.into_iter().flat_map(|r| r.runs).collect(),
    }
}

/// Run `slasher-bench report`.
///
/// # Errors
/// Unreadable inputs, write errors, or rows of one fixture that disagree on the slashings
/// (after writing the merged report).
pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    let out = match (&args.out, args.inputs.as_slice()) {
        (Some(out), _) => out.clone(),
        (None, [one]) if one.is_dir() => one.clone(),
        (None, [one]) => one
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
        (None, _) => bail!("several inputs: say where the merged report goes with --out DIR"),
    };
    let reports = args
        .inputs
        .iter()
        .map(|p| load(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let report = merge(reports);
    let written = write_outputs(&report, &out)?;
    print!("{}", summary_table(&report));
    for f in &written {
        println!("wrote {}", f.display());
    }
    if let Some((fixture, d)) = gate(&report) {
        bail!("correctness gate failed on fixture {fixture}: {d}");
    }
    if let Some(missed) = missing_expected(&report) {
        bail!("expected slashings not found: {missed}");
    }
    Ok(())
}
