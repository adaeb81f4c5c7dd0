//! `slasher-bench inject` through the built binary: slashable events added to a fixture
//! without any are found by a replay, a replay of a prefix checks the ones within it, the
//! output is deterministic, a fixture that lists a slashing its batches do not hold fails
//! `replay`, and impossible requests are refused; with `--same-batch` both halves of each double
//! vote and double proposal share a batch, and a replay with the two headers in the other order
//! gets the same slashings digest. LMDB only: no btrfs needed.

mod common;
use common::{path, run};
use serde_json::Value;
use slasher_adapters::slasher::types::SignedBeaconBlockHeader;
use slasher_bench::fixtures::file::{ExpectedSlashing, FixtureReader, FixtureWriter};
use std::path::{Path, PathBuf};
use std::process::Output;
use tree_hash::TreeHash;

fn work_dir() -> tempfile::TempDir {
    // On the target directory's disk: replay refuses tmpfs, which /tmp may be.
    tempfile::Builder::new()
        .prefix("inject-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir")
}

/// A generated fixture with no slashings: 4 epochs (128 batches) over 512 validators.
fn clean_fixture(dir: &Path) -> PathBuf {
    let fixture = dir.join("clean.fixture");
    let out = run(&[
        "generate",
        "--validators",
        "512",
        "--epochs",
        "4",
        "--seed",
        "5",
        "--double-votes",
        "0",
        "--surround-votes",
        "0",
        "--double-proposals",
        "0",
        "--history-length",
        "64",
        "--out",
        path(&fixture),
    ]);
    assert!(out.status.success());
    fixture
}

fn inject(input: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["inject", "--fixture", path(input), "--out", path(out)];
    args.extend_from_slice(extra);
    run(&args)
}

fn replay(fixture: &Path, dir: &Path, batches: u64) -> (Output, Value) {
    let out_dir = dir.join(format!("out-{batches}"));
    let db = dir.join(format!("db-{batches}"));
    let n = batches.to_string();
    let out = run(&[
        "replay",
        "--fixture",
        path(fixture),
        "--backends",
        "lmdb",
        "--db-dir",
        path(&db),
        "--batches",
        &n,
        "--tile-codec",
        "fast",
        "--no-progress",
        "--out",
        path(&out_dir),
    ]);
    let text = std::fs::read_to_string(out_dir.join("report.json")).expect("report.json");
    (out, serde_json::from_str(&text).expect("report JSON"))
}

/// The row's expected-slashings check: (expected, found, missing).
fn check(report: &Value) -> Option<(u64, u64, usize)> {
    let row = &report["runs"][0]["backends"][0];
    let e = row.get("expected_slashings")?;
    if e.is_null() {
        return None;
    }
    Some((
        e["expected"].as_u64().expect("expected"),
        e["found"].as_u64().expect("found"),
        e["missing"].as_array().expect("missing").len(),
    ))
}

#[test]
fn injected_slashings_are_found_and_a_missing_one_fails_replay() {
    let work = work_dir();
    let clean = clean_fixture(work.path());
    let injected = work.path().join("injected.fixture");
    let args = [
        "--double-votes",
        "2",
        "--surround-votes",
        "2",
        "--double-proposals",
        "2",
        "--last-batch",
        "95",
    ];
    assert!(inject(&clean, &injected, &args).status.success());

    let before = FixtureReader::open(&clean)
        .expect("clean")
        .manifest()
        .clone();
    let after = FixtureReader::open(&injected)
        .expect("injected")
        .manifest()
        .clone();
    let expected = after
        .description
        .expected_slashings
        .clone()
        .expect("listed");
    let from = after
        .description
        .expected_from_batch
        .clone()
        .expect("batches");
    assert_eq!(expected.len(), 6);
    assert_eq!(from.len(), 6);
    assert!(from.windows(2).all(|w| w[0] <= w[1]), "sorted: {from:?}");
    assert!(from.iter().all(|&b| (1..=95).contains(&b)), "{from:?}");
    assert_eq!(after.contents.batch_count, before.contents.batch_count);
    assert_eq!(
        after.contents.attestation_count,
        before.contents.attestation_count + 4
    );
    assert_eq!(
        after.contents.header_count,
        before.contents.header_count + 2
    );
    assert!(after.description.name.ends_with("+slashings"));

    // The same input and options give the same bytes.
    let again = work.path().join("again.fixture");
    assert!(inject(&clean, &again, &args).status.success());
    assert_eq!(
        std::fs::read(&injected).expect("read"),
        std::fs::read(&again).expect("read")
    );

    // The clean fixture has nothing to find: the check is empty, not vacuously passed.
    let (out, report) = replay(&clean, work.path(), 128);
    assert!(out.status.success());
    assert_eq!(check(&report), Some((0, 0, 0)));

    // All six found in a full replay; a prefix checks those completed within it.
    let (out, report) = replay(&injected, work.path(), 128);
    assert!(out.status.success());
    assert_eq!(check(&report), Some((6, 6, 0)));
    let prefix = from[2] + 1;
    let within = from.iter().filter(|&&b| b < prefix).count() as u64;
    let (out, report) = replay(&injected, work.path(), prefix);
    assert!(out.status.success());
    assert_eq!(check(&report), Some((within, within, 0)));

    // A fixture that lists a double vote its batches do not hold: replay must fail.
    let (i, (validator, root)) = expected
        .iter()
        .enumerate()
        .find_map(|(i, e)| match e {
            ExpectedSlashing::DoubleVote {
                validator_index,
                attestation_2,
                ..
            } => Some((i, (*validator_index, attestation_2.data_root.clone()))),
            _ => None,
        })
        .expect("a double vote");
    let broken = work.path().join("broken.fixture");
    let mut writer = FixtureWriter::create(&broken).expect("create");
    let mut dropped = 0;
    for batch in FixtureReader::open(&injected).expect("open") {
        let mut batch = batch.expect("batch");
        batch.attestations.retain(|a| {
            let conflicting = a.attesting_indices.len() == 1
                && a.attesting_indices.first() == Some(&validator)
                && format!("0x{}", hex::encode(a.data.tree_hash_root())) == root;
            dropped += usize::from(conflicting);
            !conflicting
        });
        writer.write_batch(&batch).expect("write");
    }
    assert_eq!(dropped, 1, "the injected vote of expected slashing {i}");
    writer.finish(after.description.clone()).expect("finish");
    let (out, report) = replay(&broken, work.path(), 128);
    assert!(
        !out.status.success(),
        "replay passed with a slashing missing"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("expected slashings not found") && stderr.contains(&validator.to_string()),
        "{stderr}"
    );
    assert_eq!(check(&report), Some((6, 5, 1)));
}

/// Each replayed batch's slashings digest.
fn digests(report: &Value) -> Vec<Value> {
    report["runs"][0]["backends"][0]["batches"]
        .as_array()
        .expect("batches")
        .iter()
        .map(|b| b["slashings_digest"].clone())
        .collect()
}

/// A copy of `input` whose batch `at` has its headers changed by `edit`.
fn with_headers(
    input: &Path,
    out: &Path,
    at: u64,
    edit: impl Fn(&mut Vec<SignedBeaconBlockHeader>),
) -> PathBuf {
    let reader = FixtureReader::open(input).expect("open");
    let description = reader.manifest().description.clone();
    let mut writer = FixtureWriter::create(out).expect("create");
    for batch in reader {
        let mut batch = batch.expect("batch");
        if batch.index == at {
            edit(&mut batch.headers);
        }
        writer.write_batch(&batch).expect("write");
    }
    writer.finish(description).expect("finish");
    out.to_path_buf()
}

#[test]
fn same_batch_conflicts_give_one_digest_in_either_order() {
    let work = work_dir();
    let clean = clean_fixture(work.path());
    let injected = work.path().join("same.fixture");
    let args = [
        "--double-votes",
        "2",
        "--surround-votes",
        "0",
        "--double-proposals",
        "1",
        "--last-batch",
        "40",
        "--same-batch",
    ];
    assert!(inject(&clean, &injected, &args).status.success());
    let manifest = FixtureReader::open(&injected)
        .expect("open")
        .manifest()
        .clone();
    let expected = manifest.description.expected_slashings.expect("listed");
    let from = manifest.description.expected_from_batch.expect("batches");
    assert!(manifest
        .description
        .provenance
        .command
        .ends_with("--same-batch"));

    // Each double vote's two attestations are in the batch that completes it.
    let batches: Vec<_> = FixtureReader::open(&injected)
        .expect("open")
        .map(|b| b.expect("batch"))
        .collect();
    let mut proposal_at = None;
    for (e, &at) in expected.iter().zip(&from) {
        let batch = &batches[at as usize];
        match e {
            ExpectedSlashing::DoubleVote {
                validator_index,
                attestation_1,
                attestation_2,
            } => {
                let roots: Vec<String> = batch
                    .attestations
                    .iter()
                    .filter(|a| a.attesting_indices.contains(validator_index))
                    .map(|a| format!("0x{}", hex::encode(a.data.tree_hash_root())))
                    .collect();
                for want in [&attestation_1.data_root, &attestation_2.data_root] {
                    assert!(roots.contains(want), "batch {at}: {want} not in {roots:?}");
                }
            }
            ExpectedSlashing::DoubleProposal { slot, .. } => {
                assert_eq!(batch.headers.len(), 2, "batch {at}");
                assert!(batch.headers.iter().all(|h| h.message.slot == *slot));
                proposal_at = Some(at);
            }
            ExpectedSlashing::SurroundVote { .. } => panic!("none asked for"),
        }
    }
    let at = proposal_at.expect("a double proposal");
    for dir in ["one", "two", "three"] {
        std::fs::create_dir(work.path().join(dir)).expect("mkdir");
    }

    let (out, report) = replay(&injected, &work.path().join("one"), 48);
    assert!(out.status.success());
    assert_eq!(check(&report), Some((3, 3, 0)));
    let found = &report["runs"][0]["backends"][0]["slashings"];
    let one = digests(&report);
    assert!(one[at as usize].is_string(), "batch {at} has its slashing");

    // The port processes a batch's headers in arrival order, so with the two headers swapped
    // it stores the other one first: the same slashings, digest and list.
    let swapped = with_headers(&injected, &work.path().join("swapped.fixture"), at, |h| {
        h.reverse()
    });
    let (out, report) = replay(&swapped, &work.path().join("two"), 48);
    assert!(out.status.success());
    assert_eq!(digests(&report), one);
    assert_eq!(&report["runs"][0]["backends"][0]["slashings"], found);

    // A third header for the slot is another slashing: that batch's digest differs.
    let third = with_headers(&injected, &work.path().join("third.fixture"), at, |h| {
        let mut other = h[1];
        other.message.state_root = other.message.body_root;
        h.push(other);
    });
    let (out, report) = replay(&third, &work.path().join("three"), 48);
    assert!(out.status.success());
    let three = digests(&report);
    assert_ne!(three[at as usize], one[at as usize]);
    assert_eq!(three[..at as usize], one[..at as usize]);
}

#[test]
fn impossible_injections_are_refused() {
    let work = work_dir();
    let clean = clean_fixture(work.path());
    let out_file = work.path().join("never.fixture");
    for (args, message) in [
        (
            vec!["--first-batch", "100", "--last-batch", "50"],
            "not a window",
        ),
        (vec!["--last-batch", "128"], "not a window"),
        (
            vec![
                "--double-votes",
                "0",
                "--surround-votes",
                "0",
                "--double-proposals",
                "0",
            ],
            "nothing requested",
        ),
        // More double proposals than the window has batches.
        (
            vec![
                "--double-votes",
                "0",
                "--surround-votes",
                "0",
                "--double-proposals",
                "20",
                "--first-batch",
                "1",
                "--last-batch",
                "5",
            ],
            "double proposals",
        ),
    ] {
        let out = inject(&clean, &out_file, &args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(!out_file.exists(), "{args:?} left an output file");
    }
    // A generated fixture that already lists slashings without their batches.
    let listed = work.path().join("listed.fixture");
    assert!(run(&[
        "generate",
        "--validators",
        "512",
        "--epochs",
        "3",
        "--seed",
        "5",
        "--out",
        path(&listed),
    ])
    .status
    .success());
    let out = inject(&listed, &out_file, &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("generate it with the slashings"));
}
