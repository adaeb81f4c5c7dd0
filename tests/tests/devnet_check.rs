//! `integration/lighthouse/devnet_check.py`, the judge of the Lighthouse slashing scenario
//! (`scripts/lighthouse.sh LH devnet`), on recorded answers written here in the shapes the
//! scenario records (the beacon API's JSON, the nodes' JSON log lines): a run where every
//! doubled validator is caught passes, and each way a run can go wrong fails, naming it.
//!
//! Needs python3; without it the tests skip outside CI and fail under `CI=true`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const DOUBLED: [u64; 2] = [3, 77];
const VALIDATORS: u64 = 128;

fn checker() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../integration/lighthouse/devnet_check.py")
}

/// A recorded run in a fresh directory: the answers of a run in which everything went right.
struct Run {
    dir: PathBuf,
    slashed: [Vec<u64>; 2],
    /// (node, validator) double-vote lines of the log.
    found: Vec<(&'static str, u64)>,
    /// (slot, kind, validator) slashings in blocks.
    blocks: Vec<(u64, &'static str, u64)>,
}

impl Run {
    fn new(test: &str) -> Option<Run> {
        if Command::new("python3").arg("--version").output().is_err() {
            butter_test_support::skip(test, "python3 not found");
            return None;
        }
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("devnet_check")
            .join(test);
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Some(Run {
            dir,
            slashed: [DOUBLED.to_vec(), DOUBLED.to_vec()],
            found: DOUBLED
                .iter()
                .flat_map(|&v| [("node_1", v), ("node_2", v)])
                .collect(),
            blocks: vec![
                (41, "attester", 3),
                (43, "proposer", 77),
                (44, "attester", 77),
            ],
        })
    }

    fn write(&self) {
        let scenario = format!(
            r#"{{"validators":{VALIDATORS},"doubled":[3,77],"end_epoch":20,"history_length":16,"nodes":{{"butter":"node_1","lmdb":"node_2"}}}}"#
        );
        fs::write(self.dir.join("scenario.json"), scenario).unwrap();
        for (name, slashed) in ["butter", "lmdb"].iter().zip(&self.slashed) {
            let list: Vec<String> = (0..VALIDATORS)
                .map(|i| {
                    format!(
                        r#"{{"index":"{i}","balance":"32000000000","status":"active_ongoing","validator":{{"pubkey":"0x00","slashed":{}}}}}"#,
                        slashed.contains(&i)
                    )
                })
                .collect();
            fs::write(
                self.dir.join(format!("validators-{name}.json")),
                format!("[{}]", list.join(",")),
            )
            .unwrap();
        }
        let mut blocks = String::new();
        for slot in 1..=160u64 {
            let mut attester = Vec::new();
            let mut proposer = Vec::new();
            for &(s, kind, v) in &self.blocks {
                if s != slot {
                    continue;
                }
                if kind == "attester" {
                    // The two attestations share only the doubled validator.
                    attester.push(format!(
                        r#"{{"attestation_1":{{"attesting_indices":["{v}","5"]}},"attestation_2":{{"attesting_indices":["6","{v}"]}}}}"#
                    ));
                } else {
                    proposer.push(format!(
                        r#"{{"signed_header_1":{{"message":{{"proposer_index":"{v}","slot":"{slot}"}}}},"signed_header_2":{{"message":{{"proposer_index":"{v}","slot":"{slot}"}}}}}}"#
                    ));
                }
            }
            blocks += &format!(
                "{{\"slot\":{slot},\"proposer_index\":\"{}\",\"graffiti\":\"0x00\",\"attester_slashings\":[{}],\"proposer_slashings\":[{}]}}\n",
                slot % VALIDATORS,
                attester.join(","),
                proposer.join(",")
            );
        }
        fs::write(self.dir.join("blocks.jsonl"), blocks).unwrap();
        let mut log = String::from("not a JSON line from env_logger\n");
        for &(node, v) in &self.found {
            // slog's JSON keeps both `service` keys: the node's, then the slasher's.
            log += &format!(
                "{{\"msg\":\"Found double-vote slashing\",\"level\":\"DEBG\",\"ts\":\"2026-11-28T14:00:00Z\",\"service\":\"{node}\",\"service\":\"slasher\",\"validator_index\":{v},\"epoch\":3}}\n"
            );
        }
        log += "{\"msg\":\"Found 2 new double-vote slashings!\",\"service\":\"node_1\",\"service\":\"slasher\"}\n";
        fs::write(self.dir.join("sim.log"), log).unwrap();
    }

    fn check(&self) -> Output {
        self.write();
        Command::new("python3")
            .arg(checker())
            .arg(&self.dir)
            .arg(self.dir.join("sim.log"))
            .output()
            .unwrap()
    }
}

fn failed(out: &Output, code: i32) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(code), "{text}");
    text
}

#[test]
fn a_run_that_caught_every_doubled_validator_passes() {
    let Some(run) = Run::new("a_run_that_caught_every_doubled_validator_passes") else {
        return;
    };
    let out = run.check();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("77: slashings in blocks at slots [(43, 'proposer'), (44, 'attester')]"),
        "{text}"
    );
    assert!(
        text.contains("3: butter slasher double-vote lines: 1"),
        "{text}"
    );
}

#[test]
fn a_doubled_validator_the_butter_slasher_missed_fails() {
    let Some(mut run) = Run::new("a_doubled_validator_the_butter_slasher_missed_fails") else {
        return;
    };
    // Only the LMDB node's slasher logged validator 77.
    run.found
        .retain(|&(node, v)| !(node == "node_1" && v == 77));
    let text = failed(&run.check(), 1);
    assert!(
        text.contains("validator 77 signed twice, but the butter node's slasher did not find it"),
        "{text}"
    );
    assert!(text.contains("the slashers disagree"), "{text}");
}

#[test]
fn a_doubled_validator_no_block_slashed_fails() {
    let Some(mut run) = Run::new("a_doubled_validator_no_block_slashed_fails") else {
        return;
    };
    run.blocks.retain(|&(_, _, v)| v != 3);
    let text = failed(&run.check(), 1);
    assert!(
        text.contains("validator 3 signed twice, but no block includes a slashing of it"),
        "{text}"
    );
}

#[test]
fn an_honest_validator_slashed_fails() {
    let Some(mut run) = Run::new("an_honest_validator_slashed_fails") else {
        return;
    };
    run.slashed[1].push(5);
    run.blocks.push((50, "proposer", 5));
    let text = failed(&run.check(), 1);
    assert!(
        text.contains("honest validators slashed on the lmdb node: [5]"),
        "{text}"
    );
    assert!(
        text.contains("blocks slash validators that did not sign twice: [5]"),
        "{text}"
    );
}

#[test]
fn a_doubled_validator_left_unslashed_on_one_node_fails() {
    let Some(mut run) = Run::new("a_doubled_validator_left_unslashed_on_one_node_fails") else {
        return;
    };
    run.slashed[0].retain(|&v| v != 3);
    let text = failed(&run.check(), 1);
    assert!(
        text.contains("validator 3 signed twice, but the butter node does not call it slashed"),
        "{text}"
    );
}

#[test]
fn the_lmdb_slasher_finding_another_set_fails() {
    let Some(mut run) = Run::new("the_lmdb_slasher_finding_another_set_fails") else {
        return;
    };
    run.found.push(("node_2", 9));
    let text = failed(&run.check(), 1);
    assert!(
        text.contains("the lmdb slasher found validators that did not sign twice: [9]"),
        "{text}"
    );
    assert!(
        text.contains("the slashers disagree: butter found [3, 77], LMDB [3, 9, 77]"),
        "{text}"
    );
}

#[test]
fn missing_answers_are_refused_not_judged() {
    let Some(run) = Run::new("missing_answers_are_refused_not_judged") else {
        return;
    };
    run.write();
    fs::remove_file(run.dir.join("validators-lmdb.json")).unwrap();
    let out = Command::new("python3")
        .arg(checker())
        .arg(&run.dir)
        .arg(run.dir.join("sim.log"))
        .output()
        .unwrap();
    let text = failed(&out, 2);
    assert!(text.contains("validators-lmdb.json"), "{text}");
}
