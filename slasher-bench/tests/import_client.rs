//! `slasher-bench import-client` end to end, through the built binary, without Lighthouse: a
//! file of JSON lines in the runner's format (integration/lighthouse/replay.rs) describing the batches of a
//! port replay is imported beside that replay and merged with it, and every check the import
//! and the merged report make is made to fail once: a batch that is not the fixture's, an
//! empty database directory, and a client that found a slashing the port did not.
//!
//! The database the "client" left is the port's own, kept with `--keep-db`, on the btrfs
//! directory of `BUTTER_BTRFS_DIR` (a SKIP without it, a failure under `CI=true`).

mod common;
use common::{path, run};
use serde_json::{json, Value};
use slasher_adapters::slasher::{
    BeaconBlockHeader, Hash256, ProposerSlashing, SignedBeaconBlockHeader,
};
use slasher_adapters::DatabaseDirGuard;
use slasher_bench::fixtures::generate::{generate, GenerateOptions};
use ssz::Encode;
use std::path::{Path, PathBuf};

/// The runner's JSON lines for the port's batches of `report` (each wall time doubled), with
/// `extra` added to the slashings of batch 1; line 0 is the settings, line `i + 1` batch `i`.
fn runner_lines(report: &Value, extra: &str) -> Vec<Value> {
    let row = &report["runs"][0]["backends"][0];
    let batches = row["batches"].as_array().expect("batches");
    let mut lines = vec![json!({
        "kind": "settings", "lighthouse": "test", "backend": "lmdb", "history": 4096,
        "chunk": 16, "validator_chunk": 256, "batches": batches.len(),
    })];
    for b in batches {
        let index = b["index"].as_u64().expect("index");
        let wall = 2.0 * b["wall_ms"].as_f64().expect("wall");
        let found: Vec<&str> = if index == 1 && !extra.is_empty() {
            vec![extra]
        } else {
            vec![]
        };
        lines.push(json!({
            "kind": "batch", "index": index, "slot": b["slot"],
            "current_epoch": b["current_epoch"], "headers": b["headers"],
            "attestations": b["attestations"], "wall_ms": wall, "process_ms": wall,
            "prune_ms": 0.0, "attester_slashings": 0, "proposer_slashings": found.len(),
            "slashings": found,
        }));
    }
    lines.push(json!({
        "kind": "end", "batches": batches.len(), "elapsed_s": 1.0, "peak_rss_bytes": 1_048_576,
    }));
    lines
}

/// `lines` as the runner writes them: one JSON object a line.
fn text(lines: &[Value]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn import(fixture: &Path, rows: &Path, db: &Path, out: &Path) -> std::process::Output {
    run(&[
        "import-client",
        "--fixture",
        path(fixture),
        "--rows",
        path(rows),
        "--db-dir",
        path(db),
        "--out",
        path(out),
    ])
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_client_runs_rows_become_a_row_beside_the_port() {
    let Some(root) = butter_test_support::btrfs_base("import_client") else {
        return;
    };
    // Removed with its databases, snapshots included, also when the test fails.
    let work = DatabaseDirGuard::new(
        tempfile::Builder::new()
            .prefix("import-client-")
            .tempdir_in(&root)
            .expect("temp dir")
            .keep(),
    );
    let w = work.path();
    let fixture = w.join("small.fixture");
    // No injected slashing: the runner's lines below list none.
    let mut options = GenerateOptions::new(512, 3, 11);
    (
        options.double_votes,
        options.surround_votes,
        options.double_proposals,
    ) = (0, 0, 0);
    generate(&options, &fixture).expect("generate");

    let db_root = w.join("db");
    std::fs::create_dir(&db_root).expect("mkdir");
    let port = w.join("port");
    let out = run(&[
        "replay",
        "--fixture",
        path(&fixture),
        "--backends",
        "lmdb",
        "--db-dir",
        path(&db_root),
        "--history-length",
        "4096",
        "--chunk-size",
        "16",
        "--validator-chunk-size",
        "256",
        "--keep-db",
        "--no-progress",
        "--out",
        path(&port),
    ]);
    assert!(out.status.success());
    let kept: Vec<PathBuf> = std::fs::read_dir(&db_root)
        .expect("db root")
        .map(|e| e.expect("entry").path())
        .collect();
    let [db] = &kept[..] else {
        panic!("one kept database, found {kept:?}")
    };
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(port.join("report.json")).expect("report"))
            .expect("json");

    // The import: a row named after the backend and filesystem, with the client's times.
    let rows = w.join("lh.jsonl");
    std::fs::write(&rows, text(&runner_lines(&report, ""))).expect("rows");
    let client = w.join("client");
    assert!(import(&fixture, &rows, db, &client).status.success());
    let imported: Value =
        serde_json::from_str(&std::fs::read_to_string(client.join("report.json")).expect("report"))
            .expect("json");
    let row = &imported["runs"][0]["backends"][0];
    assert_eq!(row["name"], "lighthouse:lmdb@btrfs");
    assert_eq!(row["client"], "lighthouse test");
    assert_eq!(row["peak_rss_bytes"], 1_048_576);
    assert!(
        row["db_bytes_final"].as_u64().expect("size") > 0,
        "database measured"
    );
    let port_median = report["runs"][0]["backends"][0]["median_batch_ms"]
        .as_f64()
        .expect("m");
    let client_median = row["median_batch_ms"].as_f64().expect("median");
    assert!(
        (client_median / port_median - 2.0).abs() < 0.01,
        "{client_median} {port_median}"
    );

    // Merged: the gate compares both, and the port ÷ client table is there (0.50×).
    let merged = w.join("merged");
    let out = run(&["report", path(&port), path(&client), "--out", path(&merged)]);
    assert!(out.status.success());
    let md = std::fs::read_to_string(merged.join("report.md")).expect("md");
    assert!(
        md.contains("Correctness gate: all 2 rows found the same slashings"),
        "{md}"
    );
    let line = md
        .lines()
        .find(|l| l.starts_with("| lmdb@btrfs | lighthouse:lmdb@btrfs | cold epoch |"))
        .unwrap_or_else(|| panic!("no port ÷ client line in {md}"));
    assert!(line.contains("| 0.50× |"), "{line}");

    // A batch that is not the fixture's.
    let bad = w.join("bad.jsonl");
    let mut lines = runner_lines(&report, "");
    lines[3]["slot"] = json!(1);
    std::fs::write(&bad, text(&lines)).expect("rows");
    let out = import(&fixture, &bad, db, &w.join("bad"));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is not batch 2 of"),
        "{}",
        stderr(&out)
    );

    // An empty database directory is refused, and left empty.
    let empty = w.join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let out = import(&fixture, &rows, &empty, &w.join("e"));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("holds no database"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_dir(&empty).expect("dir").count(), 0);

    // A client that found a slashing the port did not fails the merged report's gate.
    let header = |root: u8| SignedBeaconBlockHeader {
        message: BeaconBlockHeader {
            slot: 1,
            proposer_index: 3,
            parent_root: Hash256::repeat_byte(root),
            state_root: Hash256::ZERO,
            body_root: Hash256::ZERO,
        },
        signature: [0; 96],
    };
    let slashing = ProposerSlashing {
        signed_header_1: header(1),
        signed_header_2: header(2),
    };
    let found = format!("P{}", hex::encode(slashing.as_ssz_bytes()));
    std::fs::write(&rows, text(&runner_lines(&report, &found))).expect("rows");
    let client2 = w.join("client2");
    assert!(import(&fixture, &rows, db, &client2).status.success());
    let out = run(&[
        "report",
        path(&port),
        path(&client2),
        "--out",
        path(&w.join("m2")),
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("correctness gate failed") && stderr(&out).contains("batch 1"),
        "{}",
        stderr(&out)
    );
}
