//! The scaled-down soak CI runs: a short history (16 epochs) wrapped three times by a small
//! generated chain, LMDB and butter_db on the btrfs test directory. It fails if either
//! backend's database keeps growing after the history is full (pruning does not reclaim), if
//! butter_db's live snapshots pile up, or if the warm batches slow down by more than a generous
//! factor over the run. The full soak is a documented command (docs/benchmarks.md).

use serde_json::Value;
use slasher_adapters::DatabaseDirGuard;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_slasher-bench");
const HISTORY: u64 = 16;
/// Generous: a debug build on a shared 2-core machine. A leak (snapshots, segments, pruning
/// that does not prune) slows every batch by far more.
const MAX_TREND: f64 = 2.5;

#[test]
fn soak_stays_bounded_across_wrap_arounds() {
    let Some(base) = butter_test_support::btrfs_base("soak_stays_bounded_across_wrap_arounds")
    else {
        return;
    };
    // Removed with its databases, snapshots included, also when the test fails.
    let work = DatabaseDirGuard::new(
        tempfile::Builder::new()
            .prefix("soak-")
            .tempdir_in(&base)
            .expect("temp dir on btrfs")
            .keep(),
    );
    let out = work.path().join("out");
    let dbs = work.path().join("dbs");
    std::fs::create_dir(&dbs).expect("mkdir");
    let status = Command::new(BIN)
        .args([
            "soak",
            "--validators",
            "512",
            "--wraps",
            "3",
            "--no-progress",
        ])
        .args(["--history-length", &HISTORY.to_string()])
        .args(["--backends", "lmdb,butter", "--db-dir"])
        .arg(&dbs)
        .arg("--out")
        .arg(&out)
        .status()
        .expect("run slasher-bench soak");
    assert!(status.success(), "soak failed: {status}");

    let report: Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).expect("report.json"))
            .expect("JSON");
    let rows = report["runs"][0]["backends"].as_array().expect("rows");
    assert_eq!(rows.len(), 2, "one row per backend");
    let md = std::fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(md.contains("Soak (`--sample-every`)"), "no soak table");
    for chart in ["soak_db_size.svg", "soak_snapshots.svg", "soak_extents.svg"] {
        assert!(out.join(chart).exists(), "{chart} missing");
    }
    for row in rows {
        let name = row["name"].as_str().expect("name");
        let samples = row["samples"].as_array().expect("samples");
        // (3 × 16 + 2) epochs of 32 batches, one sample per epoch.
        assert_eq!(samples.len() as u64, 3 * HISTORY + 2, "{name}: samples");
        let at = |s: &Value, field: &str| s[field].as_u64().expect(field);
        // The history is full after HISTORY + 2 epochs: from then on pruning must hold the
        // database's size (a new epoch's data replaces the oldest epoch's).
        let full = &samples[(HISTORY + 2) as usize];
        let last = samples.last().expect("a sample");
        let (size_full, size_end) = (at(full, "db_bytes"), at(last, "db_bytes"));
        assert!(
            size_end <= 2 * size_full,
            "{name}: database grew from {size_full} B after the first wrap to {size_end} B at \
             the end: pruning does not reclaim"
        );
        let snapshots = samples
            .iter()
            .map(|s| at(s, "snapshots"))
            .max()
            .unwrap_or(0);
        if name.starts_with("butter") {
            assert!(
                (1..=4).contains(&snapshots),
                "{name}: {snapshots} live snapshots"
            );
        }
        let walls: Vec<(u64, f64)> = row["batches"]
            .as_array()
            .expect("batches")
            .iter()
            .map(|b| (at(b, "current_epoch"), b["wall_ms"].as_f64().expect("wall")))
            .collect();
        let first_epoch = walls[0].0;
        let warm: Vec<f64> = walls
            .iter()
            .filter(|(e, _)| *e >= first_epoch + 2)
            .map(|(_, w)| *w)
            .collect();
        let tenth = warm.len() / 10;
        let (head, tail) = (median(&warm[..tenth]), median(&warm[warm.len() - tenth..]));
        let trend = tail / head;
        println!(
            "tier soak [{name}]: size after the first wrap {size_full} B, at the end {size_end} B, \
             at most {snapshots} snapshots, trend {trend:.2} (warm medians {head:.1} -> {tail:.1} ms)"
        );
        assert!(
            trend <= MAX_TREND,
            "{name}: warm batches slowed down {trend:.2}x over the run ({head:.1} -> {tail:.1} ms)"
        );
    }
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) / 2]
}
