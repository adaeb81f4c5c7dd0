//! The replay report: its JSON schema ([`Report`]), the correctness gate
//! ([`first_disagreement`]), and its renderings: `report.md` (one table per fixture, with
//! ratios to LMDB), `batches.csv` and SVG charts (per-batch time series, CDF of batch times,
//! database size over batches).
//!
//! `slasher-bench report IN... [--out DIR]` ([`run`]) re-renders one report or merges several
//! (e.g. an ext4 run and a btrfs run) into one; rows keep their filesystem labels.

pub mod charts;
mod cli;
mod gate;
mod model;
mod render;
mod scale;
mod table;
#[cfg(test)]
mod tests;

pub use cli::{load, merge, run, ReportArgs};
pub use gate::{correctness, first_disagreement, gate, groups, missing_expected, Groups};
pub use model::{
    BackendResult, BatchMerges, BatchRecord, CommitParts, Correctness, Disagreement,
    DisagreementRow, ExpectedCheck, Failure, FillSummary, FixtureInfo, Report, Run, Sample,
    SlasherConfigInfo, SlashingRecord, SlashingsFound, VoteRecord, REPORT_SCHEMA,
};
pub use render::*;
pub use scale::{render_scale, scale_rows, ScaleBase, ScaleRow};
pub use table::{phase_times, Phase, PhaseTimes};
