//! `record` against a small HTTP server started on 127.0.0.1 inside the test (no external
//! network). The server serves slots 4,700,032..=4,700,095 of the real mainnet sample (404 for the
//! missed slot 4,700,065) and committees computed with the synthetic shuffle. The recorded
//! directory imported with its committees must give a fixture byte-identical to importing the
//! sample directly with the same committees, and the same batches as the synthetic import.

use slasher_bench::fixtures::file::{Batch, FixtureReader};
use slasher_bench::fixtures::import::{import_beacon_api, ImportOptions};
use slasher_bench::fixtures::record::{record, RecordOptions};
use slasher_bench::fixtures::shuffle::EpochCommittees;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const FROM: u64 = 4_700_032;
const TO: u64 = 4_700_095;
const ACTIVE: u64 = 427_192;

/// The sample committed in the repository (`data/` beside this crate).
fn sample_dir() -> PathBuf {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../data/mainnet-merge-2022"
    ));
    assert!(
        dir.join("attestations").is_dir(),
        "mainnet sample missing at {}",
        dir.display()
    );
    dir
}

fn gunzip(path: &Path) -> Vec<u8> {
    let raw = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(raw.as_slice())
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn committees_body(epoch: u64) -> Vec<u8> {
    let committees = EpochCommittees::synthetic(epoch, ACTIVE);
    let mut data = Vec::new();
    for slot in epoch * 32..epoch * 32 + 32 {
        for index in 0..committees.committees_per_slot {
            let members: Vec<String> = committees
                .committee(slot, index)
                .unwrap()
                .iter()
                .map(u64::to_string)
                .collect();
            data.push(serde_json::json!({
                "index": index.to_string(),
                "slot": slot.to_string(),
                "validators": members,
            }));
        }
    }
    serde_json::json!({"execution_optimistic": false, "finalized": true, "data": data})
        .to_string()
        .into_bytes()
}

/// A fake beacon node: path -> (status, body).
struct Node {
    sample: PathBuf,
    committees: Mutex<HashMap<u64, Vec<u8>>>,
    requests: AtomicUsize,
    fail_once: Mutex<Vec<String>>,
    /// Serve `/eth/v2/.../attestations` (with a `version` field) and refuse v1's; without it,
    /// v2 is an unknown route (400), as on a node that predates it.
    v2: bool,
}

impl Node {
    fn respond(&self, path: &str) -> (u16, Vec<u8>) {
        self.requests.fetch_add(1, Ordering::SeqCst);
        {
            let mut fail = self.fail_once.lock().unwrap();
            if let Some(pos) = fail.iter().position(|p| p == path) {
                fail.remove(pos);
                return (503, b"{\"code\":503,\"message\":\"busy\"}".to_vec());
            }
        }
        let not_found = (
            404,
            b"{\"code\":404,\"message\":\"NOT_FOUND: beacon block\"}".to_vec(),
        );
        let parts: Vec<&str> = path.split(['/', '?', '=']).collect();
        let from_sample = |kind: &str, slot: &str| {
            let body = gunzip(&self.sample.join(format!("{kind}/{slot}.json.gz")));
            if body.starts_with(b"null") {
                not_found.clone()
            } else {
                (200, body)
            }
        };
        match parts.as_slice() {
            ["", "eth", "v2", "beacon", "blocks", "head", "attestations"] if self.v2 => {
                (200, br#"{"version":"bellatrix","data":[]}"#.to_vec())
            }
            ["", "eth", "v2", "beacon", "blocks", slot, "attestations"] if self.v2 => {
                let (status, body) = from_sample("attestations", slot);
                if status != 200 {
                    return (status, body);
                }
                let mut doc: serde_json::Value = serde_json::from_slice(&body).unwrap();
                doc["version"] = "bellatrix".into();
                (200, doc.to_string().into_bytes())
            }
            ["", "eth", "v1", "beacon", "blocks", slot, "attestations"] if !self.v2 => {
                from_sample("attestations", slot)
            }
            ["", "eth", "v1", "beacon", "headers", slot] => from_sample("headers", slot),
            ["", "eth", "v1", "beacon", "states", state, "committees", "epoch", epoch] => {
                let epoch: u64 = epoch.parse().unwrap();
                assert_eq!(state.parse::<u64>().unwrap(), epoch * 32);
                let mut cache = self.committees.lock().unwrap();
                (
                    200,
                    cache
                        .entry(epoch)
                        .or_insert_with(|| committees_body(epoch))
                        .clone(),
                )
            }
            _ => (400, b"{}".to_vec()),
        }
    }
}

fn handle(node: &Node, stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or("/")
        .to_string();
    let (status, body) = node.respond(&path);
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        503 => "Service Unavailable",
        _ => "Bad Request",
    };
    let mut stream = stream;
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&body).unwrap();
}

fn start_node(node: Arc<Node>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            handle(&node, stream);
        }
    });
    format!("http://{addr}")
}

fn batches(path: &Path) -> Vec<Batch> {
    FixtureReader::open(path)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

#[test]
fn recorder_and_importer_reproduce_the_direct_import() {
    recorder_and_importer_reproduce_the_direct_import_over(true);
}

#[test]
fn a_node_without_the_v2_endpoint_is_recorded_over_v1() {
    recorder_and_importer_reproduce_the_direct_import_over(false);
}

fn recorder_and_importer_reproduce_the_direct_import_over(v2: bool) {
    let sample = sample_dir();
    let node = Arc::new(Node {
        sample: sample.clone(),
        committees: Mutex::new(HashMap::new()),
        requests: AtomicUsize::new(0),
        fail_once: Mutex::new(vec![format!("/eth/v1/beacon/headers/{}", FROM + 2)]),
        v2,
    });
    let url = start_node(node.clone());
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("recorded");
    let mut opts = RecordOptions::new(url, FROM, TO, out.clone());
    opts.progress = false;
    opts.retry_delay = Duration::from_millis(10);
    opts.timeout = Duration::from_secs(30);

    let first = record(&opts).unwrap();
    let files = 64 * 2 + 3; // attestations and headers per slot; committees of epochs 146875..=146877
    assert_eq!(first.fetched, files);
    assert_eq!(first.skipped, 0);
    assert_eq!(
        first.missed, 2,
        "slot 4,700,065 is missed: its block and its header"
    );
    assert_eq!(first.retries, 1, "one injected 503");
    assert_eq!(first.attestations_api, if v2 { "v2" } else { "v1" });
    // The files, the retry and the probe of the v2 endpoint.
    assert_eq!(node.requests.load(Ordering::SeqCst), files as usize + 2);
    assert!(out.join("committees/146875.json.gz").is_file());
    assert_eq!(gunzip(&out.join("attestations/4700065.json.gz")), b"null");

    // Resumable: complete files are skipped, a removed one is fetched again.
    std::fs::remove_file(out.join(format!("attestations/{}.json.gz", FROM + 10))).unwrap();
    let second = record(&opts).unwrap();
    assert_eq!((second.fetched, second.skipped), (1, files - 1));
    assert_eq!(node.requests.load(Ordering::SeqCst), files as usize + 4);
    let leftovers: Vec<_> = walk(&out)
        .into_iter()
        .filter(|p| p.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Import the recorded directory with its exact committees...
    let recorded_fixture = tmp.path().join("recorded.fixture");
    let mut recorded = ImportOptions::new(out.join("attestations"), out.join("headers"));
    recorded.committees_dir = Some(out.join("committees"));
    import_beacon_api(&recorded, &recorded_fixture).unwrap();

    // ...and the sample directly with the same committees: byte-identical fixtures.
    let direct_fixture = tmp.path().join("direct.fixture");
    let mut direct = ImportOptions::new(sample.join("attestations"), sample.join("headers"));
    direct.committees_dir = Some(out.join("committees"));
    direct.from_slot = Some(FROM);
    direct.to_slot = Some(TO);
    let summary = import_beacon_api(&direct, &direct_fixture).unwrap();
    assert_eq!(summary.manifest.contents.batch_count, 63);
    assert_eq!(summary.missed_slots, vec![4_700_065]);
    assert_eq!(
        std::fs::read(&recorded_fixture).unwrap(),
        std::fs::read(&direct_fixture).unwrap()
    );

    // The synthetic import of the same slots gives the same batches (only the manifest's
    // committee assignment differs).
    let synthetic_fixture = tmp.path().join("synthetic.fixture");
    let mut synthetic = ImportOptions::new(sample.join("attestations"), sample.join("headers"));
    synthetic.from_slot = Some(FROM);
    synthetic.to_slot = Some(TO);
    import_beacon_api(&synthetic, &synthetic_fixture).unwrap();
    assert_eq!(batches(&recorded_fixture), batches(&synthetic_fixture));
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path.display().to_string());
        }
    }
    out
}
