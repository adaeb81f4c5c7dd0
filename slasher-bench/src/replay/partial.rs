//! What a child that dies outright leaves behind (killed by the kernel's OOM killer, by a
//! signal, or failing with an error): the batches it finished, which it streams to a file as
//! it goes, and whether the OOM killer was the cause.
//!
//! The stream is JSON lines beside the result file (`FILE.batches`): first the row's head (a
//! [`BackendResult`] with no batches: its name, filesystem and durability, written once the
//! database is open), then one [`BatchRecord`] per finished batch, each line in one `write`
//! so that a child killed mid-write leaves at most one torn last line, which the reader drops.
//! The parent turns it into a row marked interrupted, beside the failure, so that the report
//! and `batches.csv` keep the batches up to the child's death and the gate compares them.

use crate::report::{BackendResult, BatchRecord};
use crate::system::measure::Summary;
use crate::system::outdir::OutDir;
use anyhow::Context;
use butter_db::memory::MemoryCgroup;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Where a child streams its batches: the result file's name with `.batches` appended.
pub(super) fn batches_name(result_name: &str) -> String {
    format!("{result_name}.batches")
}

/// The child's end of the stream.
#[derive(Debug)]
pub(super) struct BatchStream {
    file: std::fs::File,
    path: PathBuf,
}

impl BatchStream {
    /// Start the stream as the new file `name` in `out` with the row's `head`: created with
    /// `O_CREAT | O_EXCL | O_NOFOLLOW` relative to the directory's handle, so that a file or
    /// symlink someone put by that name fails the run instead of being truncated or followed.
    pub(super) fn create(
        out: &OutDir,
        name: &str,
        head: &BackendResult,
    ) -> anyhow::Result<BatchStream> {
        let path = out.path().join(name);
        let file = out
            .create_new(name)
            .with_context(|| format!("creating {}", path.display()))?;
        let mut stream = BatchStream { file, path };
        stream.line(head)?;
        Ok(stream)
    }

    /// Start the stream in `file` (an unnamed file the parent handed down), `path` naming it
    /// in messages.
    pub(super) fn from_file(
        file: std::fs::File,
        path: PathBuf,
        head: &BackendResult,
    ) -> anyhow::Result<BatchStream> {
        let mut stream = BatchStream { file, path };
        stream.line(head)?;
        Ok(stream)
    }

    /// Append a finished batch.
    pub(super) fn batch(&mut self, batch: &BatchRecord) -> anyhow::Result<()> {
        self.line(batch)
    }

    fn line(&mut self, value: &impl serde::Serialize) -> anyhow::Result<()> {
        let mut line = serde_json::to_vec(value)?;
        line.push(b'\n');
        self.file
            .write_all(&line)
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

/// The row a dead child streamed to `path`, marked interrupted, its summaries computed from
/// the batches it finished; `None` if it finished none (or streamed nothing readable).
#[cfg(test)]
pub(super) fn partial_row(path: &Path) -> Option<BackendResult> {
    partial_row_of(&std::fs::read_to_string(path).ok()?)
}

/// [`partial_row`] of the stream's text.
pub(super) fn partial_row_of(text: &str) -> Option<BackendResult> {
    let mut lines = text.lines();
    let mut row: BackendResult = serde_json::from_str(lines.next()?).ok()?;
    // A torn last line (the child died while writing it) ends the batches.
    row.batches = lines
        .map_while(|l| serde_json::from_str::<BatchRecord>(l).ok())
        .collect();
    let last = row.batches.last()?;
    row.db_bytes_final = last.db_bytes;
    let walls: Vec<f64> = row.batches.iter().map(|b| b.wall_ms).collect();
    let commits: Vec<f64> = row.batches.iter().map(|b| b.commit_ms).collect();
    let (wall, commit) = (Summary::of(&walls), Summary::of(&commits));
    row.first_batch_ms = walls.first().copied().unwrap_or(0.0);
    row.median_batch_ms = wall.median;
    row.p99_batch_ms = wall.p99;
    row.max_batch_ms = wall.max;
    row.mean_batch_ms = wall.mean;
    row.total_s = wall.sum / 1000.0;
    row.median_commit_ms = commit.median;
    row.p99_commit_ms = commit.p99;
    row.commit_total_s = commit.sum / 1000.0;
    row.bytes_written = row.batches.iter().map(|b| b.bytes_written).sum();
    row.slashings.attester = row.batches.iter().map(|b| b.attester_slashings).sum();
    row.slashings.proposer = row.batches.iter().map(|b| b.proposer_slashings).sum();
    row.interrupted = true;
    Some(row)
}

/// The OOM-kill counter of this process's memory cgroup, read before a child starts (the
/// child starts in the same cgroup). The kernel counts a kill in the victim's own cgroup
/// whichever limit, the cgroup's, an ancestor's or the machine's, ran out.
#[derive(Debug)]
pub(super) struct OomWatch {
    cgroup: MemoryCgroup,
    before: u64,
}

impl OomWatch {
    /// `None` where the kernel shows no counter (no memory cgroup, or a kernel before 4.13).
    pub(super) fn start() -> Option<OomWatch> {
        let cgroup = MemoryCgroup::of_self()?;
        let before = cgroup.oom_kills()?;
        Some(OomWatch { cgroup, before })
    }

    /// If the OOM killer has killed in the cgroup since [`OomWatch::start`]: what to say
    /// about a child that died by SIGKILL.
    pub(super) fn killed(&self) -> Option<String> {
        let after = self.cgroup.oom_kills()?;
        (after > self.before).then(|| oom_reason(self.cgroup.limit_bytes(), &self.cgroup.dir))
    }
}

/// The failure text of a child the OOM killer ended.
pub(super) fn oom_reason(limit: Option<u64>, cgroup: &Path) -> String {
    let limit = limit.map_or_else(
        || "no memory cgroup limit: the machine's memory ran out".to_string(),
        |l| format!("memory limit {} MiB", l >> 20),
    );
    format!(
        "killed by the kernel's OOM killer ({limit}; oom_kill counted in {})",
        cgroup.display()
    )
}
