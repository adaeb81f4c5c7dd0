//! SVG charts of a report, one set per fixture group.

use super::gate::groups;
use super::model::{BackendResult, Report, Sample};
use crate::system::outdir::OutDir;
use anyhow::anyhow;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// A chart written to disk.
#[derive(Debug, Clone)]
pub struct Chart {
    /// The fixture group (`records_sha256`).
    pub group: String,
    /// Title.
    pub title: String,
    /// File.
    pub path: PathBuf,
}

const SIZE: (u32, u32) = (1100, 600);

/// Draw the per-batch time series, the CDF of batch times and the database size for every
/// fixture group of `report` into `out`.
///
/// # Errors
/// Drawing or I/O errors.
pub fn write_charts(report: &Report, out: &Path) -> anyhow::Result<Vec<Chart>> {
    write_charts_in(report, &OutDir::open(out)?)
}

/// [`write_charts`] into the open output directory `out`: each chart is drawn in memory and
/// written with [`OutDir::write`].
///
/// # Errors
/// Drawing or I/O errors.
pub fn write_charts_in(report: &Report, out: &OutDir) -> anyhow::Result<Vec<Chart>> {
    let all = groups(report);
    let several = all.len() > 1;
    let mut charts = Vec::new();
    for (n, ((sha, _, _), group)) in all.iter().enumerate() {
        let rows: Vec<&BackendResult> = group.iter().map(|(_, r)| *r).collect();
        if rows.iter().all(|r| r.batches.is_empty()) {
            continue;
        }
        let suffix = if several {
            format!("-{n}")
        } else {
            String::new()
        };
        let mut add = |stem: &str, title: &str, draw: &dyn Fn(&mut String) -> DrawResult| {
            let name = format!("{stem}{suffix}.svg");
            let mut svg = String::new();
            draw(&mut svg).map_err(|e| anyhow!("drawing {name}: {e}"))?;
            charts.push(Chart {
                group: sha.clone(),
                title: title.into(),
                path: out.write(&name, svg.as_bytes())?,
            });
            anyhow::Ok(())
        };
        add(
            "batch_times",
            "Per-batch wall time (process_queued + prune), ms, log scale",
            &|svg| time_series(svg, &rows),
        )?;
        add(
            "batch_cdf",
            "CDF of batch wall times, ms, log scale",
            &|svg| cdf(svg, &rows),
        )?;
        add(
            "db_size",
            "Database size (sum of filenames() sizes) after each batch",
            &|svg| db_size(svg, &rows),
        )?;
        if rows.iter().any(|r| !r.samples.is_empty()) {
            for (stem, title, metric) in SAMPLE_CHARTS {
                add(stem, title, &|svg| samples(svg, &rows, title, *metric))?;
            }
        }
    }
    Ok(charts)
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

type Metric = fn(&Sample) -> Option<f64>;

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The soak's charts: one per sampled quantity, every row on each.
const SAMPLE_CHARTS: &[(&str, &str, Metric)] = &[
    (
        "soak_fs_growth",
        "Filesystem growth since the backend opened, MiB",
        |s| s.fs_growth_bytes.map(|g| g as f64 / (1024.0 * 1024.0)),
    ),
    (
        "soak_db_size",
        "Database size (filenames(), apparent), MiB",
        |s| Some(mib(s.db_bytes)),
    ),
    (
        "soak_extents",
        "Extents of the database files (filefrag)",
        |s| s.extents.map(|e| e as f64),
    ),
    ("soak_snapshots", "Live gen-N snapshots", |s| {
        Some(s.snapshots as f64)
    }),
    ("soak_metadata", "btrfs metadata in use, MiB", |s| {
        s.btrfs_metadata_used_bytes.map(mib)
    }),
    (
        "soak_rss",
        "Resident set of the replaying process, MiB",
        |s| s.rss_bytes.map(mib),
    ),
];

fn samples(svg: &mut String, rows: &[&BackendResult], title: &str, metric: Metric) -> DrawResult {
    let root = SVGBackend::with_string(svg, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let values = || {
        rows.iter()
            .flat_map(|r| r.samples.iter().filter_map(metric))
    };
    let hi = values().fold(0.0f64, f64::max).max(1.0) * 1.15;
    let batches = rows
        .iter()
        .filter_map(|r| r.samples.last().map(|s| s.index + 1))
        .max()
        .unwrap_or(1)
        .max(2);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0u64..batches, 0.0..hi)?;
    chart.configure_mesh().x_desc("batch").draw()?;
    for (i, r) in rows.iter().enumerate() {
        let c = color(i);
        let points: Vec<(u64, f64)> = r
            .samples
            .iter()
            .filter_map(|s| metric(s).map(|v| (s.index, v)))
            .collect();
        chart
            .draw_series(LineSeries::new(points, c.stroke_width(2)))?
            .label(label(r))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
    }
    legend(&mut chart)?;
    root.present()?;
    Ok(())
}

fn color(i: usize) -> RGBColor {
    const COLORS: [RGBColor; 8] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
    ];
    COLORS.get(i % COLORS.len()).copied().unwrap_or(BLACK)
}

fn label(r: &BackendResult) -> String {
    if r.durable {
        r.name.clone()
    } else {
        format!("{} (non-durable)", r.name)
    }
}

fn time_range(rows: &[&BackendResult]) -> (f64, f64) {
    let times = rows
        .iter()
        .flat_map(|r| r.batches.iter().map(|b| b.wall_ms));
    let (lo, hi) = times.fold((f64::MAX, 0.0f64), |(lo, hi), t| (lo.min(t), hi.max(t)));
    let lo = lo.clamp(0.001, f64::MAX) * 0.8;
    (lo, (hi * 1.25).max(lo * 10.0))
}

fn time_series(svg: &mut String, rows: &[&BackendResult]) -> DrawResult {
    let root = SVGBackend::with_string(svg, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (lo, hi) = time_range(rows);
    let batches = rows
        .iter()
        .map(|r| r.batches.len())
        .max()
        .unwrap_or(1)
        .max(2) as u64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Per-batch wall time (process_queued + prune_database)",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0u64..batches, (lo..hi).log_scale())?;
    chart.configure_mesh().x_desc("batch").y_desc("ms").draw()?;
    for (i, r) in rows.iter().enumerate() {
        let c = color(i);
        let points = r.batches.iter().map(|b| (b.index, b.wall_ms.max(lo)));
        chart
            .draw_series(LineSeries::new(points, c.stroke_width(1)))?
            .label(label(r))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
    }
    legend(&mut chart)?;
    root.present()?;
    Ok(())
}

fn cdf(svg: &mut String, rows: &[&BackendResult]) -> DrawResult {
    let root = SVGBackend::with_string(svg, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (lo, hi) = time_range(rows);
    let mut chart = ChartBuilder::on(&root)
        .caption("CDF of batch wall times", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0f64..1.0)?;
    chart
        .configure_mesh()
        .x_desc("batch wall time, ms")
        .y_desc("fraction of batches ≤ x")
        .draw()?;
    for (i, r) in rows.iter().enumerate() {
        let c = color(i);
        let mut times: Vec<f64> = r.batches.iter().map(|b| b.wall_ms.max(lo)).collect();
        times.sort_by(f64::total_cmp);
        let n = times.len() as f64;
        // A step function: each sample raises the curve by 1/n at its value.
        let mut points = Vec::with_capacity(times.len() * 2);
        for (k, t) in times.iter().enumerate() {
            points.push((*t, k as f64 / n));
            points.push((*t, (k + 1) as f64 / n));
        }
        chart
            .draw_series(LineSeries::new(points, c.stroke_width(2)))?
            .label(label(r))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
    }
    legend(&mut chart)?;
    root.present()?;
    Ok(())
}

fn db_size(svg: &mut String, rows: &[&BackendResult]) -> DrawResult {
    let root = SVGBackend::with_string(svg, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let sizes = || {
        rows.iter()
            .flat_map(|r| r.batches.iter().map(|b| mib(b.db_bytes)))
    };
    // Log scale: preallocating engines (MDBX geometry) are orders of magnitude above the
    // others on small fixtures.
    let lo = sizes()
        .filter(|s| *s > 0.0)
        .fold(f64::MAX, f64::min)
        .min(1.0)
        * 0.8;
    let hi = sizes().fold(0.0f64, f64::max).max(lo * 10.0) * 1.25;
    let batches = rows
        .iter()
        .map(|r| r.batches.len())
        .max()
        .unwrap_or(1)
        .max(2) as u64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Database size after each batch (sum of filenames() sizes)",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0u64..batches, (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("batch")
        .y_desc("MiB, log scale")
        .draw()?;
    for (i, r) in rows.iter().enumerate() {
        let c = color(i);
        let points = r.batches.iter().map(|b| (b.index, mib(b.db_bytes).max(lo)));
        chart
            .draw_series(LineSeries::new(points, c.stroke_width(2)))?
            .label(label(r))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
    }
    legend(&mut chart)?;
    root.present()?;
    Ok(())
}

fn legend<'a, DB, CT>(chart: &mut ChartContext<'a, DB, CT>) -> DrawResult
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: CoordTranslate,
{
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    Ok(())
}
