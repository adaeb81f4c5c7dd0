//! The per-phase tables of `report.md` (times, the storage clock, CPU, where the commits went,
//! client pairs, the soak) and the figures behind them.

use super::cells::{part_names, percent, unless_client};
use crate::report::model::{BackendResult, BatchRecord, CommitParts};
use crate::report::table::{
    baseline, mib, phase_batches, phase_times, ratio, same_phase_batches, Phase, PhaseTimes,
};
use crate::system::measure::Summary;
use std::fmt::Write as _;

/// Whether the row timed its storage calls (client rows and older reports did not).
fn times_storage(row: &BackendResult) -> bool {
    row.batches.iter().any(|b| b.storage_ms > 0.0)
}

/// The per-phase table: end-to-end and storage time, medians and totals, with ratios to the
/// row's LMDB baseline in the same phase.
pub(crate) fn render_phases(s: &mut String, group: &[(usize, &BackendResult)]) {
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
            let b = same_phase_batches(r, base, phase).and_then(|b| phase_times(b, phase));
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
pub(crate) fn render_clock(s: &mut String, group: &[(usize, &BackendResult)]) {
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
            let b = same_phase_batches(r, base, phase).and_then(|b| phase_clock(b, phase));
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
pub(crate) fn render_cpu(s: &mut String, group: &[(usize, &BackendResult)]) {
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
pub(crate) fn render_commit_parts(s: &mut String, group: &[(usize, &BackendResult)]) {
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
pub(crate) fn render_client_pairs(s: &mut String, group: &[(usize, &BackendResult)]) {
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
pub(crate) fn render_soak(s: &mut String, group: &[(usize, &BackendResult)]) {
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
