//! `integration/lighthouse/devnet_metrics.py`, the side-by-side table of the devnet's two
//! `lighthouse bn` slashers, on scrapes and logs written here in the shapes the nodes produce:
//! the batch-time figures are the difference of two scrapes (a restart before the stretch does
//! not count), attestations per batch come from the log lines inside the stretch only, and a
//! node without a batch in the stretch fails the table.
//!
//! Needs python3; without it the tests skip outside CI and fail under `CI=true`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../integration/lighthouse/devnet_metrics.py")
}

/// One node's page: `count` batches that took `sum` seconds, all under 0.1 s but `slow` of
/// them, which took under 0.5 s.
fn page(at: f64, count: u32, sum: f64, slow: u32) -> String {
    format!(
        "# scraped-at {at}\n# HELP slasher_process_batch_time Time taken\n\
         slasher_process_batch_time_bucket{{le=\"0.1\"}} {}\n\
         slasher_process_batch_time_bucket{{le=\"0.5\"}} {count}\n\
         slasher_process_batch_time_bucket{{le=\"+Inf\"}} {count}\n\
         slasher_process_batch_time_sum {sum}\nslasher_process_batch_time_count {count}\n\
         slasher_database_size 1048576\n",
        count - slow
    )
}

fn batch_line(ts: &str, ms: u32, attestations: u32) -> String {
    format!(
        "{{\"msg\":\"Completed slasher update\",\"level\":\"DEBG\",\"ts\":\"{ts}\",\"service\":\"slasher\",\"epoch\":7,\"time_taken\":\"{ms}ms\",\"num_attestations\":{attestations},\"num_blocks\":1}}\n"
    )
}

/// 1,800,000,000 s is 2027-01-15T08:00:00Z: the stretch is [that, +600 s].
const START: f64 = 1_800_000_000.0;

fn write_run(test: &str, lmdb_batches_in_stretch: u32) -> Option<PathBuf> {
    if Command::new("python3").arg("--version").output().is_err() {
        butter_test_support::skip(test, "python3 not found");
        return None;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("devnet_metrics")
        .join(test);
    let _ = fs::remove_dir_all(&dir);
    for (node, before, after, slow) in [
        ("bin-butter", (2, 0.1), (6, 0.5), 1),
        ("bin-lmdb", (5, 1.0), (5 + lmdb_batches_in_stretch, 1.8), 0),
    ] {
        let d = dir.join(node);
        fs::create_dir_all(&d).unwrap();
        fs::write(
            d.join("metrics-start.txt"),
            page(START, before.0, before.1, 0),
        )
        .unwrap();
        fs::write(
            d.join("metrics-end.txt"),
            page(START + 600.0, after.0, after.1, slow),
        )
        .unwrap();
        // One batch before the stretch (a large one, which must not count), then two inside.
        let log = batch_line("2027-01-15T07:59:00Z", 900, 5000)
            + &batch_line("2027-01-15T08:01:00Z", 50, 100)
            + &batch_line("2027-01-15T08:02:00.5+00:00", 70, 300);
        fs::write(d.join("node.log"), log).unwrap();
    }
    let mut csv = String::from(
        "time,node,batches,batch_time_sum_s,attestations_valid,blocks,database_bytes,rss_kib\n",
    );
    for (t, rss) in [
        (START - 10.0, 999_999),
        (START + 100.0, 204_800),
        (START + 200.0, 102_400),
    ] {
        csv += &format!("{t},butter,3,0.2,10,1,2097152,{rss}\n{t},lmdb,3,0.2,10,1,3145728,{rss}\n");
    }
    fs::write(dir.join("metrics.csv"), csv).unwrap();
    Some(dir)
}

fn run(dir: &Path) -> (Output, String) {
    let out = Command::new("python3")
        .arg(script())
        .arg(dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, text)
}

#[test]
fn the_table_counts_only_the_stretch_between_the_scrapes() {
    let Some(dir) = write_run("the_table_counts_only_the_stretch_between_the_scrapes", 2) else {
        return;
    };
    let (out, text) = run(&dir);
    assert_eq!(out.status.code(), Some(0), "{text}");
    // butter: 4 batches, 0.4 s in all (100 ms each), 3 under 0.1 s, so the median bucket is
    // 100 ms and the 90th percentile's 500 ms; attestations (100 + 300) / 2, the 5,000 of the
    // batch before the stretch left out; 2 MiB; the largest RSS inside the stretch, 200 MiB.
    assert!(
        text.contains("| butter | 4 | 100.0 | 100 | 500 | 200 / 300 | 2.00 | 200 | 10.0 |"),
        "{text}"
    );
    assert!(
        text.contains("| lmdb | 2 | 400.0 | 100 | 100 | 200 / 300 | 3.00 | 200 | 10.0 |"),
        "{text}"
    );
}

#[test]
fn a_node_without_a_batch_in_the_stretch_fails() {
    let Some(dir) = write_run("a_node_without_a_batch_in_the_stretch_fails", 0) else {
        return;
    };
    let (out, text) = run(&dir);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("FAIL: bin-lmdb: no slasher batch between the two scrapes"),
        "{text}"
    );
}

#[test]
fn a_scrape_without_its_time_is_refused() {
    let Some(dir) = write_run("a_scrape_without_its_time_is_refused", 2) else {
        return;
    };
    fs::write(
        dir.join("bin-lmdb/metrics-end.txt"),
        "slasher_process_batch_time_count 3\n",
    )
    .unwrap();
    let (out, text) = run(&dir);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("scraped-at"), "{text}");
}
