//! `slasher-bench replay` end to end, through the built binary: a small generated fixture is
//! replayed on real btrfs (the directory in `BUTTER_BTRFS_DIR`) by every compiled backend, and
//! the report is checked field by field; then `slasher-bench report` merges it with itself. A
//! second test checks that a database directory on tmpfs is refused with a clear message.
//!
//! Without `BUTTER_BTRFS_DIR` the btrfs test prints a loud SKIP, except under `CI=true`, where it
//! fails: CI never skips.

mod common;
use common::{path, run};
use serde_json::Value;
use slasher_adapters::DatabaseBackend;
use slasher_adapters::DatabaseDirGuard;
use slasher_bench::fixtures::file::FixtureReader;
use std::path::{Path, PathBuf};

fn btrfs_dir() -> Option<PathBuf> {
    butter_test_support::btrfs_base("replay_end_to_end")
}

/// A deterministic synthetic fixture: 3 epochs (96 batches) over 512 validators with two
/// injected slashings of each kind (the generator needs 3 epochs to inject them).
fn generate(dir: &Path) -> PathBuf {
    let fixture = dir.join("small.fixture");
    let out = run(&[
        "generate",
        "--validators",
        "512",
        "--epochs",
        "3",
        "--seed",
        "11",
        "--out",
        path(&fixture),
    ]);
    assert!(out.status.success(), "generate failed");
    fixture
}

fn field<'a>(v: &'a Value, name: &str) -> &'a Value {
    v.get(name)
        .unwrap_or_else(|| panic!("report lacks field {name:?} in {v:#}"))
}

#[test]
fn replay_end_to_end() {
    let Some(root) = btrfs_dir() else { return };
    // Removed with its databases, snapshots included, also when the test fails.
    let work = DatabaseDirGuard::new(
        tempfile::Builder::new()
            .prefix("replay-e2e-")
            .tempdir_in(&root)
            .expect("temp dir on btrfs")
            .keep(),
    );
    let fixture = generate(work.path());
    let batch_count = FixtureReader::open(&fixture)
        .expect("fixture")
        .manifest()
        .contents
        .batch_count;
    let db = work.path().join("db");
    let out_dir = work.path().join("out");
    let out = run(&[
        "replay",
        "--fixture",
        path(&fixture),
        "--db-dir",
        path(&db),
        "--out",
        path(&out_dir),
        "--no-progress",
    ]);
    assert!(out.status.success(), "replay failed");

    for file in [
        "report.json",
        "batches.csv",
        "report.md",
        "batch_times.svg",
        "batch_cdf.svg",
    ] {
        let p = out_dir.join(file);
        assert!(
            p.metadata().is_ok_and(|m| m.len() > 0),
            "{} missing or empty",
            p.display()
        );
    }
    assert!(out_dir.join("db_size.svg").exists());
    // Databases are deleted after their runs (butter's read-only snapshots included).
    let left: Vec<_> = std::fs::read_dir(&db).expect("db dir").collect();
    assert!(
        left.is_empty(),
        "database directories left behind: {left:?}"
    );

    let report: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("report.json")).expect("read"))
            .expect("report.json is JSON");
    assert_eq!(field(&report, "schema"), "slasher-bench-report/1");
    let runs = field(&report, "runs").as_array().expect("runs");
    assert_eq!(runs.len(), 1);
    let run0 = &runs[0];
    for f in [
        "machine",
        "build",
        "fixture",
        "slasher_config",
        "notes",
        "correctness",
    ] {
        field(run0, f);
    }
    assert!(field(field(run0, "machine"), "kernel").is_string());
    assert_eq!(
        field(field(run0, "fixture"), "batches_replayed"),
        batch_count
    );
    assert_eq!(field(field(run0, "correctness"), "agree"), true);
    assert!(field(run0, "failures")
        .as_array()
        .expect("failures")
        .is_empty());

    let rows = field(run0, "backends").as_array().expect("backends");
    let compiled = DatabaseBackend::compiled();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| field(r, "backend").as_str().expect("str"))
        .collect();
    let expected: Vec<&str> = compiled.iter().map(|b| b.name()).collect();
    assert_eq!(names, expected, "one row per compiled backend, in order");

    let mut per_row = Vec::new();
    for row in rows {
        for f in [
            "name",
            "filesystem",
            "durable",
            "first_batch_ms",
            "median_batch_ms",
            "p99_batch_ms",
            "max_batch_ms",
            "total_s",
            "db_bytes_final",
            "bytes_written",
            "peak_rss_bytes",
            "slashings",
            "batches",
        ] {
            field(row, f);
        }
        let name = field(row, "name").as_str().expect("name");
        assert!(name.ends_with("@btrfs"), "{name}");
        assert_eq!(field(row, "filesystem"), "btrfs");
        assert_eq!(
            field(row, "durable"),
            true,
            "{name}: default runs are durable"
        );
        assert!(
            field(row, "peak_rss_bytes").as_u64().is_some_and(|b| b > 0),
            "{name}"
        );
        assert!(
            field(row, "db_bytes_final").as_u64().is_some_and(|b| b > 0),
            "{name}"
        );
        let median = field(row, "median_batch_ms").as_f64().expect("median");
        let p99 = field(row, "p99_batch_ms").as_f64().expect("p99");
        let max = field(row, "max_batch_ms").as_f64().expect("max");
        assert!(
            0.0 < median && median <= p99 && p99 <= max,
            "{name}: {median} {p99} {max}"
        );

        let batches = field(row, "batches").as_array().expect("batches");
        assert_eq!(
            batches.len() as u64,
            batch_count,
            "{name}: one record per fixture batch"
        );
        for (i, b) in batches.iter().enumerate() {
            for f in ["index", "slot", "wall_ms", "commit_ms", "db_bytes"] {
                field(b, f);
            }
            assert_eq!(field(b, "index"), i as u64);
            let wall = field(b, "wall_ms").as_f64().expect("wall");
            let commit = field(b, "commit_ms").as_f64().expect("commit");
            assert!(
                commit <= wall,
                "{name} batch {i}: commit {commit} > wall {wall}"
            );
            // butter_db reports where its commits went; the others do not.
            let parts = b.get("commit_parts");
            if name.starts_with("butter") {
                let parts = parts.unwrap_or_else(|| panic!("{name} batch {i}: no commit_parts"));
                let sum: f64 = ["build_ms", "file_ms", "write_back_ms", "snapshot_ms"]
                    .iter()
                    .map(|f| field(parts, f).as_f64().expect("ms"))
                    .sum();
                assert!(
                    field(parts, "snapshot_ms").as_f64() > Some(0.0) && sum <= commit + 0.01,
                    "{name} batch {i}: {parts} against commit {commit}"
                );
            } else {
                assert!(parts.is_none(), "{name} batch {i}: {parts:?}");
            }
            // Every batch begins and commits at least one transaction, on the CPU of the
            // replay's thread, which is part of the process's.
            assert!(
                field(b, "storage_calls").as_u64() >= Some(2),
                "{name} batch {i}: {b}"
            );
            let cpu = field(b, "cpu_ms").as_f64().expect("cpu");
            let thread = field(b, "thread_cpu_ms").as_f64().expect("thread cpu");
            assert!(thread > 0.0 && cpu >= thread, "{name} batch {i}: {b}");
        }
        let clock_ns = field(row, "clock_ns").as_f64().expect("clock_ns");
        assert!(clock_ns > 0.0 && clock_ns < 1_000.0, "{name}: {clock_ns}");
        let calls: Vec<u64> = batches
            .iter()
            .map(|b| field(b, "storage_calls").as_u64().expect("calls"))
            .collect();
        let digests: Vec<&Value> = batches
            .iter()
            .map(|b| field(b, "slashings_digest"))
            .collect();
        let found = field(row, "slashings");
        let check = field(row, "expected_slashings");
        assert_eq!(
            field(check, "found"),
            field(check, "expected"),
            "{name}: {check}"
        );
        assert_eq!(
            field(check, "expected"),
            6,
            "{name}: the fixture injects 6 slashings"
        );
        per_row.push((name.to_string(), digests, found.clone(), calls));
    }
    let (first_name, first_digests, first_found, first_calls) = &per_row[0];
    for (name, digests, found, calls) in &per_row[1..] {
        assert_eq!(
            digests, first_digests,
            "{name} and {first_name} differ per batch"
        );
        assert_eq!(
            found, first_found,
            "{name} and {first_name} found different slashings"
        );
        // The port makes the same storage calls whatever the backend.
        assert_eq!(
            calls, first_calls,
            "{name} and {first_name}: storage calls per batch"
        );
    }

    let csv = std::fs::read_to_string(out_dir.join("batches.csv")).expect("csv");
    assert_eq!(
        csv.lines().count() as u64,
        1 + batch_count * rows.len() as u64
    );
    let md = std::fs::read_to_string(out_dir.join("report.md")).expect("md");
    assert!(
        md.contains("| lmdb@btrfs |") || !expected.contains(&"lmdb"),
        "{md}"
    );
    assert_eq!(
        md.contains("Where the commits went"),
        expected.contains(&"butter"),
        "the commit split table is there exactly when butter_db ran: {md}"
    );

    // `report` merges two reports into one, keeping every row.
    let merged = work.path().join("merged");
    let out = run(&[
        "report",
        path(&out_dir),
        path(&out_dir),
        "--out",
        path(&merged),
    ]);
    assert!(out.status.success(), "report failed");
    let merged: Value =
        serde_json::from_slice(&std::fs::read(merged.join("report.json")).expect("read"))
            .expect("JSON");
    assert_eq!(field(&merged, "runs").as_array().map(Vec::len), Some(2));
}

#[test]
fn replay_refuses_tmpfs() {
    let shm = Path::new("/dev/shm");
    let fs = slasher_bench::system::environment::probe_fs(shm).expect("probe /dev/shm");
    if fs.fs_type != "tmpfs" {
        butter_test_support::skip(
            "replay_refuses_tmpfs",
            &format!("/dev/shm is {} here, not tmpfs", fs.fs_type),
        );
        return;
    }
    let work = tempfile::tempdir().expect("temp dir");
    let fixture = generate(work.path());
    let db = shm.join(format!("slasher-bench-refused-{}", std::process::id()));
    let out = run(&[
        "replay",
        "--fixture",
        path(&fixture),
        "--db-dir",
        path(&db),
        "--out",
        path(&work.path().join("out")),
    ]);
    assert!(!out.status.success(), "replay on tmpfs must fail");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{} is on tmpfs; benchmarks must run on a real disk",
            db.display()
        )),
        "unclear message: {stderr}"
    );
    assert!(!db.exists(), "nothing may be created on tmpfs");
    // Per-backend directories are checked too.
    let first = DatabaseBackend::compiled()
        .first()
        .map_or("lmdb", |b| b.name());
    let out = run(&[
        "replay",
        "--fixture",
        path(&fixture),
        "--backends",
        first,
        "--db-dir",
        &format!("{first}={}", db.display()),
        "--out",
        path(&work.path().join("out")),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is on tmpfs"));
}

fn read_report(out: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(out.join("report.json")).expect("report.json"))
        .expect("JSON")
}

/// Lighthouse's settings on the command line: an invalid combination is one error before any
/// backend starts; what ran is recorded; `--update-period 24` makes one slasher batch of two
/// slots; reports of different codecs are never put in one comparison.
#[test]
fn slasher_settings_are_checked_recorded_and_kept_apart() {
    let work = tempfile::tempdir().expect("temp dir");
    let fixture = generate(work.path());
    let dbs = work.path().join("dbs");
    std::fs::create_dir(&dbs).expect("mkdir");
    let replay = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "replay",
            "--fixture",
            path(&fixture),
            "--backends",
            "lmdb",
            "--db-dir",
            path(&dbs),
            "--out",
            path(out),
            "--no-progress",
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    for (bad, says) in [
        (
            &["--history-length", "40"][..],
            "must be a multiple of chunk_size",
        ),
        (
            &["--update-period", "18"][..],
            "--update-period 18 must be a positive multiple",
        ),
        (
            &["--att-cache-size", "0"][..],
            "--att-cache-size must be at least 1",
        ),
        (&["--tile-codec", "zstd"][..], "unknown tile codec"),
    ] {
        let out = replay(&work.path().join("bad"), bad);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad:?} accepted");
        assert!(stderr.contains(says), "{bad:?}: {stderr}");
        assert!(!stderr.contains("== lmdb"), "{bad:?}: a backend started");
        assert_eq!(
            std::fs::read_dir(&dbs).expect("read").count(),
            0,
            "{bad:?}: a database directory was made"
        );
    }

    // Issue 57: a setting refused creates neither --out nor --db-dir (both were created
    // before the settings were checked).
    let (new_out, new_dbs) = (work.path().join("new-out"), work.path().join("new-dbs"));
    for bad in [
        &["--batches", "0"][..],
        &["--history-length", "0"][..],
        &["--validator-chunk-size", "0"][..],
        &["--update-period", "5"][..],
    ] {
        let mut args = vec![
            "replay",
            "--fixture",
            path(&fixture),
            "--backends",
            "lmdb",
            "--db-dir",
            path(&new_dbs),
            "--out",
            path(&new_out),
            "--no-progress",
        ];
        args.extend_from_slice(bad);
        let out = run(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad:?} accepted");
        assert!(
            !new_out.exists() && !new_dbs.exists(),
            "{bad:?}: --out or --db-dir was created before the refusal: {stderr}"
        );
    }

    let lighthouse = work.path().join("lighthouse");
    assert!(replay(&lighthouse, &["--history-length", "64"])
        .status
        .success());
    let report = read_report(&lighthouse);
    let config = &report["runs"][0]["slasher_config"];
    assert_eq!(config["tile_codec"], "lighthouse", "default codec");
    assert_eq!(config["history_length"], 64);
    assert_eq!(config["update_period_s"], 12);
    let rows = report["runs"][0]["backends"].as_array().expect("rows");
    assert_eq!(rows[0]["batches"].as_array().map(Vec::len), Some(96));

    let fast = work.path().join("fast");
    assert!(
        replay(&fast, &["--tile-codec", "fast", "--update-period", "24"])
            .status
            .success()
    );
    let report = read_report(&fast);
    assert_eq!(report["runs"][0]["slasher_config"]["tile_codec"], "fast");
    let rows = report["runs"][0]["backends"].as_array().expect("rows");
    assert_eq!(
        rows[0]["batches"].as_array().map(Vec::len),
        Some(48),
        "two slots per batch"
    );

    let merged = work.path().join("merged");
    let out = run(&[
        "report",
        path(&lighthouse),
        path(&fast),
        "--out",
        path(&merged),
    ]);
    assert!(out.status.success(), "report failed");
    let md = std::fs::read_to_string(merged.join("report.md")).expect("report.md");
    let headers: Vec<&str> = md.lines().filter(|l| l.starts_with("## Fixture")).collect();
    assert_eq!(headers.len(), 2, "one comparison per codec: {headers:?}");
    assert!(headers.iter().any(|h| h.contains("tile codec lighthouse")));
    assert!(headers.iter().any(|h| h.contains("tile codec fast")));
}

/// `--fill-epochs`: every row's database starts from a filled window (20 epochs of regular
/// chain, a 16-epoch history, so it has wrapped) that ends where the fixture starts; the rows
/// then find the fixture's injected slashings and nothing else (the run fails otherwise), agree
/// with each other, and record what the fill wrote.
#[test]
fn replay_on_a_filled_window() {
    let Some(root) = btrfs_dir() else { return };
    let work = DatabaseDirGuard::new(
        tempfile::Builder::new()
            .prefix("replay-fill-")
            .tempdir_in(&root)
            .expect("temp dir on btrfs")
            .keep(),
    );
    let fixture = generate(work.path());
    let out_dir = work.path().join("out");
    let out = run(&[
        "replay",
        "--fixture",
        path(&fixture),
        "--backends",
        "lmdb,butter",
        "--db-dir",
        path(&work.path().join("db")),
        "--out",
        path(&out_dir),
        "--history-length",
        "16",
        "--fill-epochs",
        "20",
        "--no-progress",
    ]);
    assert!(out.status.success(), "replay on a filled window failed");
    let report = read_report(&out_dir);
    let run0 = &field(&report, "runs")[0];
    assert_eq!(field(field(run0, "correctness"), "agree"), true);
    let rows = field(run0, "backends").as_array().expect("backends");
    assert_eq!(rows.len(), 2);
    for row in rows {
        let fill = field(row, "fill");
        assert_eq!(field(fill, "epochs"), 20);
        assert_eq!(field(fill, "validators"), 512);
        let entries = field(field(fill, "report"), "entries");
        // attesters: every validator in each of the 16 slots of the wrapped window.
        assert_eq!(entries[2], 512 * 16, "{fill:#}");
        // Exactly the 6 injected (2 double votes, 2 surrounds, 2 double proposals).
        let found = field(row, "slashings");
        assert_eq!(
            field(found, "list").as_array().expect("list").len(),
            6,
            "{found:#}"
        );
    }
    let md = std::fs::read_to_string(out_dir.join("report.md")).expect("report.md");
    assert!(md.contains("was filled before its batches"), "{md}");
}
