//! Unit tests of the report: gate, phases, soak trend, rendering.

use super::render::{
    phase_clock, phase_commits, render_client_pairs, render_clock, render_commit_parts, render_cpu,
    render_csv, render_engine_memory, render_markdown, render_merges, render_phases, render_soak,
};
use super::table::{baseline, ratio};
use super::*;
use std::path::PathBuf;

fn row(name: &str, backend: &str, fs: &str, digests: &[Option<&str>]) -> BackendResult {
    BackendResult {
        name: name.into(),
        backend: backend.into(),
        filesystem: fs.into(),
        durable: true,
        median_batch_ms: 2.0,
        batches: digests
            .iter()
            .enumerate()
            .map(|(i, d)| BatchRecord {
                index: i as u64,
                slashings_digest: d.map(str::to_string),
                attester_slashings: usize::from(d.is_some()),
                ..BatchRecord::default()
            })
            .collect(),
        ..BackendResult::default()
    }
}

/// A row whose batches have the given (epoch, wall ms, storage ms).
fn timed_row(name: &str, backend: &str, batches: &[(u64, f64, f64)]) -> BackendResult {
    BackendResult {
        name: name.into(),
        backend: backend.into(),
        filesystem: "ext4".into(),
        durable: true,
        batches: batches
            .iter()
            .enumerate()
            .map(|(i, &(current_epoch, wall_ms, storage_ms))| BatchRecord {
                index: i as u64,
                current_epoch,
                wall_ms,
                storage_ms,
                ..BatchRecord::default()
            })
            .collect(),
        ..BackendResult::default()
    }
}

#[test]
fn phases_split_by_epoch_after_the_first_batch() {
    let r = timed_row(
        "butter@btrfs",
        "butter",
        &[
            (10, 100.0, 40.0),
            (10, 300.0, 60.0),
            (10, 200.0, 50.0),
            (11, 50.0, 10.0),
            (12, 20.0, 5.0),
            (14, 40.0, 7.0),
        ],
    );
    let cold = phase_times(&r, Phase::ColdEpoch).expect("cold");
    assert_eq!(cold.batches, 3);
    assert_eq!(cold.median_ms, 200.0);
    assert!((cold.total_s - 0.6).abs() < 1e-9);
    assert_eq!(cold.storage_median_ms, 50.0);
    assert!((cold.storage_total_s - 0.15).abs() < 1e-9);
    let next = phase_times(&r, Phase::NextEpoch).expect("next");
    assert_eq!((next.batches, next.median_ms), (1, 50.0));
    let steady = phase_times(&r, Phase::Steady).expect("steady");
    assert_eq!((steady.batches, steady.median_ms), (2, 20.0));
    assert!((steady.storage_total_s - 0.012).abs() < 1e-9);
    let short = timed_row("lmdb@ext4", "lmdb", &[(3, 1.0, 0.5)]);
    assert!(phase_times(&short, Phase::NextEpoch).is_none());
}

#[test]
fn soak_trend_compares_the_last_warm_tenth_with_the_first() {
    // Epochs 0 and 1 are not warm; 20 warm batches: the first two at 10 ms, the last two
    // at 25 ms and 35 ms. The stall counts epoch 1 (300 ms), not the cold epoch 0 (500 ms).
    // Storage is a tenth of each batch, except in epoch 1 (a third) and the last batch
    // (unchanged at 2 ms): its own trend and stall differ from the wall's.
    let mut batches = vec![(0, 500.0, 50.0), (1, 300.0, 100.0)];
    batches.extend((0..20).map(|i| {
        let wall = match i {
            0 | 1 => 10.0,
            18 => 25.0,
            19 => 35.0,
            _ => 20.0,
        };
        let storage = if i == 19 { 2.0 } else { wall / 10.0 };
        (2 + i / 4, wall, storage)
    }));
    let mut r = timed_row("butter@btrfs", "butter", &batches);
    assert!(soak_trend(&r).is_none(), "no samples, no soak figures");
    r.samples = vec![
        Sample {
            index: 10,
            snapshots: 3,
            ..Sample::default()
        },
        Sample {
            index: 21,
            db_bytes: 4096,
            snapshots: 1,
            extents: Some(7),
            ..Sample::default()
        },
    ];
    let t = soak_trend(&r).expect("figures");
    assert_eq!(t.warm_batches, 20);
    assert!((t.wall.trend - 2.5).abs() < 1e-9, "trend {}", t.wall.trend);
    assert_eq!(t.wall.largest_ms, 300.0);
    assert_eq!(t.wall.warm_median_ms, 20.0);
    assert_eq!(t.wall.stall(), 15.0);
    let storage = t.storage.expect("storage is timed");
    // Last tenth: 2.5 and 2.0 ms, median 2.0 (the lower middle); first tenth 1.0 ms.
    assert!(
        (storage.trend - 2.0).abs() < 1e-9,
        "trend {}",
        storage.trend
    );
    assert_eq!((storage.warm_median_ms, storage.largest_ms), (2.0, 100.0));
    assert_eq!(
        (t.end_db_bytes, t.max_snapshots, t.end_extents),
        (4096, 3, Some(7))
    );
    // A row without timed calls (a client row) has no storage figures, and says so.
    for b in &mut r.batches {
        b.storage_ms = 0.0;
    }
    let t = soak_trend(&r).expect("figures");
    assert_eq!(t.storage, None);
    let mut s = String::new();
    render_soak(&mut s, &[(0, &r)]);
    let line = s.lines().find(|l| l.contains("butter@btrfs")).expect("row");
    assert!(line.contains("| 15.00 | n/m | n/m | n/m |"), "{line}");
}

#[test]
fn phase_table_compares_storage_with_lmdb_in_the_same_phase() {
    let lmdb = timed_row("lmdb@ext4", "lmdb", &[(1, 100.0, 80.0), (2, 50.0, 40.0)]);
    let butter = timed_row("butter@ext4", "butter", &[(1, 90.0, 40.0), (2, 30.0, 10.0)]);
    let mut s = String::new();
    render_phases(&mut s, &[(0, &lmdb), (1, &butter)]);
    let line = s
        .lines()
        .find(|l| l.contains("butter@ext4") && l.contains("next epoch"))
        .expect("butter's next-epoch line");
    // storage median 10 / 40 and storage total 0.010 s / 0.040 s.
    assert!(line.ends_with("| 0.25× | 0.25× |"), "{line}");
    assert!(line.contains("| 33 % |"), "{line}");
    // Reports written before storage time was measured get no phase table.
    let old = timed_row("lmdb@ext4", "lmdb", &[(1, 100.0, 0.0)]);
    let mut s = String::new();
    render_phases(&mut s, &[(0, &old)]);
    assert!(s.is_empty());
}

#[test]
fn a_row_cut_short_is_compared_only_where_it_ran_the_same_batches() {
    // LMDB killed in the steady epoch (one of butter's two steady batches); both ran the cold
    // and next epochs whole.
    let mut lmdb = timed_row(
        "lmdb@ext4",
        "lmdb",
        &[(1, 100.0, 80.0), (2, 50.0, 40.0), (3, 10.0, 5.0)],
    );
    lmdb.interrupted = true;
    (lmdb.median_batch_ms, lmdb.total_s) = (50.0, 0.16);
    let mut butter = timed_row(
        "butter@ext4",
        "butter",
        &[
            (1, 90.0, 40.0),
            (2, 30.0, 10.0),
            (3, 20.0, 4.0),
            (4, 20.0, 4.0),
        ],
    );
    (butter.median_batch_ms, butter.total_s) = (25.0, 0.16);
    let group = [(0, &lmdb), (1, &butter)];
    let mut s = String::new();
    render_phases(&mut s, &group);
    let line = |phase: &str| {
        s.lines()
            .find(|l| l.contains("butter@ext4") && l.contains(phase))
            .unwrap_or_else(|| panic!("butter's {phase} line"))
            .to_string()
    };
    assert!(
        line("next epoch").ends_with("| 0.60× | 0.60× | 0.25× | 0.25× |"),
        "{s}"
    );
    // 2 steady batches against 1: no ratio, rather than one over other batches.
    assert!(line("steady").ends_with("| – | – | – | – |"), "{s}");
    // Nor over the whole row.
    let butter_row = |backends: Vec<BackendResult>| {
        let report = Report {
            schema: REPORT_SCHEMA.into(),
            generated_by: String::new(),
            runs: vec![run_with(0, backends)],
        };
        render_markdown(&report, &[])
            .lines()
            .find(|l| l.starts_with("| 0 | butter@ext4 | "))
            .expect("butter's row")
            .to_string()
    };
    let row = butter_row(vec![lmdb.clone(), butter.clone()]);
    assert!(row.contains("| 0.2 | – | – | – | – |"), "{row}");
    // The same row, whole: compared.
    lmdb.interrupted = false;
    lmdb.batches.push(butter.batches[3].clone());
    let row = butter_row(vec![lmdb, butter]);
    assert!(row.contains("| 0.2 | 0.50× |"), "{row}");
}

#[test]
fn commit_parts_are_summed_per_phase_beside_lmdb_commits() {
    let mut lmdb = timed_row("lmdb@ext4", "lmdb", &[(1, 100.0, 80.0), (2, 50.0, 40.0)]);
    lmdb.batches[0].commit_ms = 30.0;
    lmdb.batches[1].commit_ms = 20.0;
    let mut butter = timed_row(
        "butter@btrfs",
        "butter",
        &[(1, 90.0, 40.0), (1, 80.0, 30.0), (2, 30.0, 10.0)],
    );
    let parts = |build_ms, snapshot_ms| -> CommitParts {
        [
            ("build", build_ms),
            ("file", 1.0),
            ("write_back", 0.5),
            ("snapshot", snapshot_ms),
        ]
        .into_iter()
        .collect()
    };
    for (b, (commit, p)) in butter.batches.iter_mut().zip([
        (20.0, parts(10.0, 4.0)),
        (30.0, parts(15.0, 6.0)),
        (8.0, parts(2.0, 3.0)),
    ]) {
        b.commit_ms = commit;
        b.commit_parts = Some(p);
    }
    let cold = phase_commits(&butter, Phase::ColdEpoch).expect("cold commits");
    assert_eq!(cold.batches, 2);
    assert!((cold.commit_s - 0.050).abs() < 1e-12, "{cold:?}");
    let want: CommitParts = [
        ("build", 25.0),
        ("file", 2.0),
        ("write_back", 1.0),
        ("snapshot", 10.0),
    ]
    .into_iter()
    .collect();
    assert_eq!(cold.parts, want);
    // 50 ms of commits, 25 + 2 + 1 + 10 = 38 of them in the parts.
    assert!((cold.rest_s() - 0.012).abs() < 1e-12, "{cold:?}");
    // LMDB reports no parts, and a phase without batches has nothing.
    assert!(phase_commits(&lmdb, Phase::ColdEpoch).is_none());
    assert!(phase_commits(&butter, Phase::Steady).is_none());

    let mut s = String::new();
    render_commit_parts(&mut s, &[(0, &lmdb), (1, &butter)]);
    let line = s
        .lines()
        .find(|l| l.contains("butter@btrfs") && l.contains("cold"))
        .expect("butter's cold line");
    assert!(line.contains("| 0.05 | 0.03 (50 %) |"), "{line}");
    assert!(line.ends_with("| 0.01 (24 %) | 0.03 |"), "{line}");
    assert!(!s.contains("| lmdb@ext4 |"), "{s}");

    // The CSV carries the parts, and leaves them empty where there are none.
    let report = Report {
        schema: REPORT_SCHEMA.into(),
        generated_by: String::new(),
        runs: vec![run_with(1_000, vec![lmdb, butter])],
    };
    let csv = render_csv(&report);
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].ends_with(
        ",commit_write_back_ms,commit_snapshot_ms,storage_calls,cpu_ms,thread_cpu_ms,\
         commit_bytes,merges,merged_bytes,largest_merge_bytes,largest_merge_table_bytes"
    ));
    assert!(
        lines[1].ends_with(",,,,,0,0.000,0.000,,,,,"),
        "{}",
        lines[1]
    );
    assert!(
        lines[3].ends_with(",10.000,1.000,0.500,4.000,0,0.000,0.000,,,,,"),
        "{}",
        lines[3]
    );
}

#[test]
fn a_commit_part_the_report_has_never_seen_gets_its_columns_by_name() {
    let mut butter = timed_row(
        "butter@btrfs",
        "butter",
        &[(1, 90.0, 40.0), (1, 80.0, 30.0)],
    );
    for (i, b) in butter.batches.iter_mut().enumerate() {
        b.commit_ms = 20.0;
        let mut parts: CommitParts = [("build", 5.0), ("snapshot", 4.0)].into_iter().collect();
        if i == 1 {
            parts.add("manifest_sync", 2.5);
        }
        b.commit_parts = Some(parts);
    }
    let mut s = String::new();
    render_commit_parts(&mut s, &[(0, &butter)]);
    assert!(
        s.contains("| commits s | build | snapshot | manifest-sync | rest |"),
        "{s}"
    );
    assert!(s.contains("*manifest-sync*; *rest*"), "{s}");
    // 40 ms of commits: 10 + 8 + 2.5 in the parts.
    assert!(
        s.contains("| 0.01 (25 %) | 0.01 (20 %) | 0.00 (6 %) | 0.02 (49 %) |"),
        "{s}"
    );
    let csv = render_csv(&Report {
        schema: REPORT_SCHEMA.into(),
        generated_by: String::new(),
        runs: vec![run_with(1_000, vec![butter])],
    });
    let lines: Vec<&str> = csv.lines().collect();
    assert!(
        lines[0].contains(
            ",storage_ms,commit_build_ms,commit_snapshot_ms,commit_manifest_sync_ms,storage_calls,"
        ),
        "{}",
        lines[0]
    );
    // The first batch lacks the new part: its field is empty.
    assert!(lines[1].contains(",5.000,4.000,,"), "{}", lines[1]);
    assert!(lines[2].contains(",5.000,4.000,2.500,"), "{}", lines[2]);
}

#[test]
fn commit_parts_keep_the_json_of_older_reports_and_refuse_a_bad_key() {
    let old = r#"{"build_ms":1.5,"file_ms":0.25,"write_back_ms":0.0,"snapshot_ms":3.0}"#;
    let parts: CommitParts = serde_json::from_str(old).unwrap();
    let names: Vec<&str> = parts.iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["build", "file", "write_back", "snapshot"]);
    assert_eq!(parts.get("snapshot"), Some(3.0));
    assert!((parts.total_ms() - 4.75).abs() < 1e-12);
    assert_eq!(serde_json::to_string(&parts).unwrap(), old);
    for bad in [
        r#"{"build":1.0}"#,
        r#"{"build_ms":1.0,"build_ms":2.0}"#,
        r#"[1.0]"#,
    ] {
        let err = serde_json::from_str::<CommitParts>(bad).unwrap_err();
        assert!(err.is_data(), "{bad}: {err}");
    }
}

#[test]
fn merges_are_summed_over_a_rows_batches_with_the_largest_named() {
    let mut butter = timed_row(
        "butter@btrfs",
        "butter",
        &[(1, 90.0, 40.0), (1, 80.0, 30.0)],
    );
    let m = |commit, merged, largest, table| BatchMerges {
        commit_bytes: commit,
        largest_commit_bytes: commit / 2,
        installed: u64::from(merged > 0),
        merged_bytes: merged,
        largest_merge_bytes: largest,
        largest_merge_table_bytes: table,
    };
    butter.batches[0].merges = Some(m(3 << 20, 0, 0, 0));
    butter.batches[1].merges = Some(m(1 << 20, 64 << 20, 64 << 20, 512 << 20));
    let mut s = String::new();
    render_merges(&mut s, &butter);
    assert!(
        s.contains("the commits wrote 4.0 MiB of segments themselves (the largest 1.5 MiB)"),
        "{s}"
    );
    assert!(
        s.contains("installed 1 background merges that wrote 64.0 MiB"),
        "{s}"
    );
    assert!(
        s.contains("the largest merge wrote 64.0 MiB, 12.5 % of its table's 512.0 MiB, installed in batch 1"),
        "{s}"
    );
    let csv = render_csv(&Report {
        schema: REPORT_SCHEMA.into(),
        generated_by: String::new(),
        runs: vec![run_with(1_000, vec![butter.clone()])],
    });
    assert!(
        csv.lines()
            .nth(2)
            .unwrap()
            .ends_with(",1048576,1,67108864,67108864,536870912"),
        "{csv}"
    );
    // A row without the figures (LMDB, client rows, older reports) gets no line.
    for b in &mut butter.batches {
        b.merges = None;
    }
    let mut s = String::new();
    render_merges(&mut s, &butter);
    assert!(s.is_empty(), "{s}");
}

#[test]
fn the_clock_is_taken_out_of_storage_time_per_phase() {
    // (epoch, wall, storage) and calls per batch; LMDB's calls cost the same clock.
    let mut lmdb = timed_row(
        "lmdb@ext4",
        "lmdb",
        &[(1, 100.0, 80.0), (1, 100.0, 60.0), (1, 100.0, 100.0)],
    );
    let mut butter = timed_row(
        "butter@btrfs",
        "butter",
        &[(1, 90.0, 40.0), (1, 90.0, 30.0), (1, 90.0, 50.0)],
    );
    for row in [&mut lmdb, &mut butter] {
        row.clock_ns = Some(20.0);
        for (b, c) in row.batches.iter_mut().zip([1_000_000, 500_000, 1_000_000]) {
            b.storage_calls = c;
        }
    }
    // 1M calls × 20 ns = 20 ms, 0.5M = 10 ms: butter's net 20, 20, 30 ms.
    let c = phase_clock(&butter, Phase::ColdEpoch).expect("cold");
    assert_eq!(c.calls_median, 1_000_000.0);
    assert!((c.clock_total_s - 0.050).abs() < 1e-12, "{c:?}");
    assert!((c.net_median_ms - 20.0).abs() < 1e-9, "{c:?}");
    assert!((c.net_total_s - 0.070).abs() < 1e-12, "{c:?}");
    assert!(phase_clock(&butter, Phase::Steady).is_none());
    let mut client = butter.clone();
    client.clock_ns = None;
    assert!(phase_clock(&client, Phase::ColdEpoch).is_none());

    let mut s = String::new();
    render_clock(&mut s, &[(0, &lmdb), (0, &butter)]);
    let line = s
        .lines()
        .find(|l| l.contains("butter@btrfs"))
        .expect("butter's line");
    // Net medians 20 against LMDB's 60 (0.33×), totals 0.07 against 0.19 s (0.37×); the
    // clock is 50 of butter's 120 ms (42 %).
    assert!(
        line.ends_with("| 20.0 | 1000000 | 0.05 | 42 % | 20.0 | 0.07 | 0.33× | 0.37× |"),
        "{line}"
    );
    // Nothing to say without a measured clock.
    let mut s = String::new();
    render_clock(&mut s, &[(0, &client)]);
    assert!(s.is_empty(), "{s}");
}

#[test]
fn batch_time_is_split_by_cpu_per_phase() {
    let mut butter = timed_row(
        "butter@btrfs",
        "butter",
        &[(1, 100.0, 40.0), (1, 300.0, 60.0), (2, 50.0, 10.0)],
    );
    // (process CPU, replay thread CPU): the second batch ran a 30 ms background merge and
    // waited 20 ms; the first used more CPU than it took (rounding), which is not off CPU.
    for (b, (cpu, thread)) in
        butter
            .batches
            .iter_mut()
            .zip([(100.5, 100.5), (280.0, 250.0), (50.0, 50.0)])
    {
        (b.cpu_ms, b.thread_cpu_ms) = (cpu, thread);
    }
    let lmdb = timed_row("lmdb@ext4", "lmdb", &[(1, 100.0, 40.0)]);
    let mut s = String::new();
    render_cpu(&mut s, &[(0, &lmdb), (0, &butter)]);
    let cold = s
        .lines()
        .find(|l| l.contains("butter@btrfs") && l.contains("cold"))
        .expect("cold line");
    assert!(cold.ends_with("| 0.40 | 0.35 | 0.03 | 0.02 |"), "{cold}");
    assert!(
        s.contains("| butter@btrfs | next epoch | 0.05 | 0.05 | 0.00 | 0.00 |"),
        "{s}"
    );
    // A row without CPU figures (LMDB here, a client row, an older report) gets no line.
    assert!(!s.contains("lmdb@ext4"), "{s}");
    let mut s = String::new();
    render_cpu(&mut s, &[(0, &lmdb)]);
    assert!(s.is_empty(), "{s}");
}

#[test]
fn gate_names_the_first_differing_batch_and_rows() {
    let a = row(
        "lmdb@ext4",
        "lmdb",
        "ext4",
        &[None, Some("aa"), None, Some("bb")],
    );
    let b = row(
        "redb@ext4",
        "redb",
        "ext4",
        &[None, Some("aa"), None, Some("cc")],
    );
    assert!(first_disagreement(&[&a, &a.clone()]).is_none());
    let d = first_disagreement(&[&a, &b]).expect("they differ");
    assert_eq!(d.batch_index, 3);
    let text = d.to_string();
    assert!(text.contains("batch 3") && text.contains("lmdb@ext4") && text.contains("redb@ext4"));
    let short = row("mdbx@ext4", "mdbx", "ext4", &[None, Some("aa")]);
    let d = first_disagreement(&[&a, &short]).expect("a missing batch differs");
    assert_eq!(
        d.batch_index, 2,
        "batch 2 has no slashings in `a` and is missing in `short`"
    );
}

#[test]
fn ratios_prefer_lmdb_on_the_same_filesystem() {
    let mut ext4 = row("lmdb@ext4", "lmdb", "ext4", &[]);
    ext4.median_batch_ms = 4.0;
    let btrfs = row("lmdb@btrfs", "lmdb", "btrfs", &[]);
    let butter = row("butter@btrfs", "butter", "btrfs", &[]);
    let xfs = row("redb@xfs", "redb", "xfs", &[]);
    let group = vec![(0, &ext4), (1, &btrfs), (1, &butter), (2, &xfs)];
    assert_eq!(
        baseline(&butter, &group).map(|b| b.name.as_str()),
        Some("lmdb@btrfs")
    );
    assert_eq!(
        baseline(&xfs, &group).map(|b| b.name.as_str()),
        Some("lmdb@ext4")
    );
    assert_eq!(ratio(3.0, Some(2.0)), "1.50×");
    assert_eq!(ratio(3.0, None), "–");
}

fn run_with(validators: u64, backends: Vec<BackendResult>) -> Run {
    Run {
        started_unix_s: 0,
        command: Vec::new(),
        fixture: FixtureInfo {
            path: PathBuf::from("f"),
            name: format!("v{validators}"),
            records_sha256: format!("sha{validators}"),
            batch_count: 4,
            batches_replayed: 4,
            manifest: serde_json::json!({"description": {"validator_count": validators}}),
        },
        slasher_config: SlasherConfigInfo {
            chunk_size: 16,
            validator_chunk_size: 256,
            history_length: 256,
            attestation_root_cache_size: 100_000,
            max_db_size_mbs: 512,
            durability_requested: "immediate".into(),
            tile_codec: "lighthouse".into(),
            update_period_s: 12,
        },
        machine: Default::default(),
        build: Default::default(),
        notes: Vec::new(),
        backends,
        failures: Vec::new(),
        correctness: Correctness::default(),
        interrupted: false,
        interrupted_by: None,
        not_started: Vec::new(),
    }
}

#[test]
fn scale_rows_compare_with_lmdb_at_the_same_validator_count() {
    // (epoch, wall ms): one cold, one next, two steady batches.
    let row = |name: &str, backend: &str, scale: f64, db: u64| {
        let mut r = timed_row(
            name,
            backend,
            &[
                (10, 100.0 * scale, 0.0),
                (11, 20.0 * scale, 0.0),
                (12, 10.0 * scale, 0.0),
                (12, 30.0 * scale, 0.0),
            ],
        );
        r.first_batch_ms = 1.0;
        r.batches[0].attestations = 3;
        r.db_bytes_final = db;
        r.peak_rss_bytes = Some(db * 2);
        r
    };
    let one = Report {
        schema: REPORT_SCHEMA.into(),
        generated_by: String::new(),
        runs: vec![run_with(
            1_000,
            vec![
                row("lmdb@ext4", "lmdb", 1.0, 100),
                row("butter@ext4", "butter", 0.5, 50),
            ],
        )],
    };
    assert!(
        scale_rows(&one).is_empty(),
        "one validator count: no scale table"
    );

    let mut two = one.clone();
    two.runs.push(run_with(
        2_000,
        vec![
            row("lmdb@ext4", "lmdb", 4.0, 400),
            row("butter@ext4", "butter", 1.0, 800),
        ],
    ));
    let rows = scale_rows(&two);
    assert_eq!(rows.len(), 4);
    let (butter, base) = rows
        .iter()
        .find(|(r, _)| r.validators == 2_000 && r.name == "butter@ext4")
        .expect("butter at 2,000");
    let base = base.as_ref().expect("an LMDB baseline");
    assert_eq!(base.row.validators, 2_000);
    assert_eq!(base.row.name, "lmdb@ext4");
    assert_eq!(butter.cold_epoch_total_s, 0.1);
    assert_eq!(butter.steady, Some((10.0, 30.0)));
    assert_eq!(base.cold_epoch_total_s, Some(0.4));
    let butter_line = |report: &Report| {
        let mut md = String::new();
        render_scale(&mut md, report);
        assert!(md.contains("## Scale"), "{md}");
        md.lines()
            .find(|l| l.contains("| 2000 | butter@ext4 |"))
            .expect("butter's line")
            .to_string()
    };
    // butter at 2,000, cells from "cold start ×LMDB" on: first batch 100 vs LMDB's 400,
    // cold epoch 0.1 vs 0.4 s, steady median 20 vs 80 ms, DB 800 vs 400, RSS 1,600 vs 800.
    let line = butter_line(&two);
    assert!(
        line.ends_with("| 0.25× | 0.25× | 0.25× | 2.00× | 2.00× |"),
        "{line}"
    );

    // LMDB at 2,000 killed in its second steady batch: the cold start and the cold epoch,
    // which both rows ran whole, still compare; the steady median, the database and the
    // RSS do not, rather than over batches butter ran alone.
    let mut cut = two.clone();
    let lmdb = &mut cut.runs[1].backends[0];
    lmdb.batches.pop();
    lmdb.interrupted = true;
    let (_, base) = scale_rows(&cut)
        .into_iter()
        .find(|(r, _)| r.validators == 2_000 && r.name == "butter@ext4")
        .expect("butter at 2,000");
    let base = base.expect("an LMDB baseline");
    assert_eq!(base.cold_epoch_total_s, Some(0.4));
    assert_eq!(
        (base.steady_median_ms, base.db_bytes, base.peak_rss_bytes),
        (None, None, None)
    );
    let line = butter_line(&cut);
    assert!(line.ends_with("| 0.25× | 0.25× | – | – | – |"), "{line}");
    // LMDB's own line still shows what it ran.
    assert_eq!(base.row.steady, Some((40.0, 40.0)));
}

#[test]
fn client_rows_are_compared_with_their_own_lmdb_and_paired_with_the_port() {
    let client = |mut r: BackendResult| {
        r.name = format!("lighthouse:{}", r.name);
        r.client = Some("lighthouse 2e0eb6d1b8".into());
        r
    };
    let port_lmdb = timed_row("lmdb@ext4", "lmdb", &[(1, 100.0, 50.0), (2, 10.0, 5.0)]);
    let port_butter = timed_row("butter@ext4", "butter", &[(1, 80.0, 20.0), (2, 8.0, 2.0)]);
    let lh_lmdb = client(timed_row(
        "lmdb@ext4",
        "lmdb",
        &[(1, 200.0, 0.0), (2, 20.0, 0.0)],
    ));
    let lh_butter = client(timed_row(
        "butter@ext4",
        "butter",
        &[(1, 150.0, 0.0), (2, 16.0, 0.0)],
    ));
    let group: Vec<(usize, &BackendResult)> = vec![
        (0, &port_lmdb),
        (1, &port_butter),
        (2, &lh_lmdb),
        (3, &lh_butter),
    ];

    // Each slasher's rows are compared with that slasher's LMDB row.
    assert_eq!(
        baseline(&lh_butter, &group).map(|b| b.name.as_str()),
        Some("lighthouse:lmdb@ext4")
    );
    assert_eq!(
        baseline(&port_butter, &group).map(|b| b.name.as_str()),
        Some("lmdb@ext4")
    );

    // Port ÷ client per phase, for each port row with a client row of the same backend and fs.
    let pairs = client_pairs(&group);
    let got: Vec<(&str, &str, Phase, f64, f64)> = pairs
        .iter()
        .map(|p| {
            let (port, client) = (p.port.as_str(), p.client.as_str());
            (
                port,
                client,
                p.phase,
                p.port_times.median_ms,
                p.client_times.median_ms,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "lmdb@ext4",
                "lighthouse:lmdb@ext4",
                Phase::ColdEpoch,
                100.0,
                200.0
            ),
            (
                "lmdb@ext4",
                "lighthouse:lmdb@ext4",
                Phase::NextEpoch,
                10.0,
                20.0
            ),
            (
                "butter@ext4",
                "lighthouse:butter@ext4",
                Phase::ColdEpoch,
                80.0,
                150.0
            ),
            (
                "butter@ext4",
                "lighthouse:butter@ext4",
                Phase::NextEpoch,
                8.0,
                16.0
            ),
        ]
    );

    let mut s = String::new();
    render_client_pairs(&mut s, &group);
    assert!(
        s.contains(
            "| butter@ext4 | lighthouse:butter@ext4 | cold epoch | 1 | 80.0 | 150.0 | 0.53× |"
        ),
        "{s}"
    );

    // The phase table shows n/m where the client measures nothing.
    let mut s = String::new();
    render_phases(&mut s, &group);
    let lh_line = s
        .lines()
        .find(|l| l.contains("| lighthouse:butter@ext4 | cold epoch |"))
        .expect("client row in the phase table");
    assert!(lh_line.contains("n/m"), "{lh_line}");
    assert!(
        lh_line.contains("| 0.75× |"),
        "butter ÷ the client's LMDB: {lh_line}"
    );
}

#[test]
fn rows_without_batches_pass_no_gate() {
    let mut a = timed_row("lmdb@ext4", "lmdb", &[]);
    let mut b = timed_row("butter@btrfs", "butter", &[]);
    a.batches.clear();
    b.batches.clear();
    let md = render_markdown(
        &Report {
            schema: REPORT_SCHEMA.into(),
            generated_by: String::new(),
            runs: vec![run_with(0, vec![a, b])],
        },
        &[],
    );
    assert!(
        md.contains("Correctness gate: nothing compared: no row replayed a batch"),
        "{md}"
    );
    assert!(!md.contains("found the same slashings"), "{md}");
}

#[test]
fn engine_memory_shows_each_figures_largest_over_the_batches() {
    let mut butter = timed_row(
        "butter@btrfs",
        "butter",
        &[(1, 90.0, 40.0), (1, 80.0, 30.0)],
    );
    let figures = |cache: u64, level: u64, releases: u64| {
        vec![
            ("cache".to_string(), cache),
            ("pressure_level".to_string(), level),
            ("releases".to_string(), releases),
        ]
    };
    butter.batches[0].engine_memory = figures(6 << 20, 2, 1);
    butter.batches[1].engine_memory = figures(3 << 19, 0, 3);
    let mut s = String::new();
    render_engine_memory(&mut s, &butter);
    assert!(
        s.contains("`butter@btrfs`'s own memory accounting, the largest after any batch: cache 6.0 MiB, pressure_level 2, releases 3"),
        "{s}"
    );
    // The figures travel in the report's JSON.
    let json = serde_json::to_string(&butter.batches[0]).unwrap();
    let back: BatchRecord = serde_json::from_str(&json).unwrap();
    assert_eq!(back.engine_memory, butter.batches[0].engine_memory);
    // A row without them gets no line.
    for b in &mut butter.batches {
        b.engine_memory.clear();
    }
    let mut s = String::new();
    render_engine_memory(&mut s, &butter);
    assert!(s.is_empty(), "{s}");
}
