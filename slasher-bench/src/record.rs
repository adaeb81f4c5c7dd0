//! `record`: fetch attestations, headers and committees from a live beacon node into the
//! directory layout that `import-beacon-api` reads (see [`crate::beacon_api`]):
//!
//! ```text
//! <out>/attestations/<slot>.json.gz   GET /eth/v2/beacon/blocks/<slot>/attestations (v1 if the
//!                                      node has no v2)
//! <out>/headers/<slot>.json.gz        GET /eth/v1/beacon/headers/<slot>
//! <out>/committees/<epoch>.json.gz    GET /eth/v1/beacon/states/<epoch*32>/committees?epoch=<epoch>
//! ```
//!
//! The v2 attestations endpoint serves every fork, Electra's `committee_bits` included, with a
//! `version` field; a node that answers the first v2 request (for `head`) with 400, 404 or 405
//! predates it, can serve no Electra block, and is asked on v1 instead.
//! Bodies are stored exactly as served, gzipped; a 404 for a block or header (missed slot) is
//! stored as `null`. Committees are fetched for every epoch from the one before `from_slot`
//! (blocks include attestations from up to 32 slots back) to the one of `to_slot`, so that
//! indices are exact; the node must still have those states. Each file is written to
//! `<name>.tmp`, synced and renamed, so an existing final file is complete and a rerun skips it.
//! Failed requests (transport errors, 429, 5xx) are retried with a doubling delay.

use indicatif::{ProgressBar, ProgressStyle};
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why recording failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// Local I/O.
    #[error("{op} {}", path.display())]
    Io {
        /// Operation.
        op: &'static str,
        /// Path.
        path: PathBuf,
        /// Error.
        #[source]
        source: std::io::Error,
    },
    /// The node answered with an error status that is not retried (or 404 where data is
    /// required).
    #[error("GET {url}: HTTP {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
    },
    /// Retries exhausted.
    #[error("GET {url}: giving up after {attempts} attempts: {last_error}")]
    GaveUp {
        /// The URL.
        url: String,
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last_error: String,
    },
    /// Bad arguments.
    #[error("invalid slot range {from_slot}..={to_slot}")]
    BadRange {
        /// First slot.
        from_slot: u64,
        /// Last slot.
        to_slot: u64,
    },
}

/// Recorder settings.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// Base URL of the node, e.g. `http://127.0.0.1:5052`.
    pub beacon_node: String,
    /// First slot (inclusive).
    pub from_slot: u64,
    /// Last slot (inclusive).
    pub to_slot: u64,
    /// Output directory.
    pub out: PathBuf,
    /// Attempts per request (at least 1).
    pub attempts: u32,
    /// Delay before the first retry; doubled for each further one.
    pub retry_delay: Duration,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Show a progress bar on stderr.
    pub progress: bool,
}

impl RecordOptions {
    /// Defaults: 5 attempts, 500 ms first retry delay, 60 s timeout, progress bar on.
    pub fn new(beacon_node: impl Into<String>, from_slot: u64, to_slot: u64, out: PathBuf) -> Self {
        Self {
            beacon_node: beacon_node.into(),
            from_slot,
            to_slot,
            out,
            attempts: 5,
            retry_delay: Duration::from_millis(500),
            timeout: Duration::from_secs(60),
            progress: true,
        }
    }
}

/// What a recording did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordSummary {
    /// Files downloaded in this run.
    pub fetched: u64,
    /// Files already present (complete) and skipped.
    pub skipped: u64,
    /// Slots the node answered 404 for (missed slots).
    pub missed: u64,
    /// Requests retried.
    pub retries: u64,
    /// The attestations endpoint used: `v2`, or `v1` for a node without v2.
    pub attestations_api: &'static str,
}

struct Job {
    path: PathBuf,
    url_path: String,
    missing_ok: bool,
}

/// Record `opts.from_slot..=opts.to_slot`.
///
/// # Errors
/// See [`RecordError`].
pub fn record(opts: &RecordOptions) -> Result<RecordSummary, RecordError> {
    if opts.from_slot > opts.to_slot {
        return Err(RecordError::BadRange {
            from_slot: opts.from_slot,
            to_slot: opts.to_slot,
        });
    }
    let dirs = ["attestations", "headers", "committees"].map(|d| opts.out.join(d));
    for dir in &dirs {
        fs::create_dir_all(dir).map_err(|source| RecordError::Io {
            op: "create directory",
            path: dir.clone(),
            source,
        })?;
    }
    let [att_dir, header_dir, committee_dir] = dirs;
    let mut jobs = Vec::new();
    let first_epoch = (opts.from_slot / 32).saturating_sub(1);
    for epoch in first_epoch..=opts.to_slot / 32 {
        jobs.push(Job {
            path: committee_dir.join(format!("{epoch}.json.gz")),
            url_path: format!(
                "/eth/v1/beacon/states/{}/committees?epoch={epoch}",
                epoch * 32
            ),
            missing_ok: false,
        });
    }
    for slot in opts.from_slot..=opts.to_slot {
        jobs.push(Job {
            path: att_dir.join(format!("{slot}.json.gz")),
            url_path: format!("/eth/{{api}}/beacon/blocks/{slot}/attestations"),
            missing_ok: true,
        });
        jobs.push(Job {
            path: header_dir.join(format!("{slot}.json.gz")),
            url_path: format!("/eth/v1/beacon/headers/{slot}"),
            missing_ok: true,
        });
    }

    let bar = if opts.progress {
        let bar = ProgressBar::new(jobs.len() as u64);
        if let Ok(style) =
            ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
        {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    let agent = ureq::AgentBuilder::new().timeout(opts.timeout).build();
    let base = opts.beacon_node.trim_end_matches('/');
    let mut summary = RecordSummary::default();
    summary.attestations_api = attestations_api(&agent, base, opts, &mut summary)?;
    for job in &mut jobs {
        job.url_path = job.url_path.replace("{api}", summary.attestations_api);
    }
    for job in &jobs {
        bar.set_message(job.url_path.clone());
        if job.path.is_file() {
            summary.skipped += 1;
            bar.inc(1);
            continue;
        }
        let url = format!("{base}{}", job.url_path);
        let body = match fetch(&agent, &url, opts, &mut summary)? {
            Some(body) => body,
            None if job.missing_ok => {
                summary.missed += 1;
                b"null".to_vec()
            }
            None => return Err(RecordError::Status { url, status: 404 }),
        };
        write_gz_atomic(&job.path, &body)?;
        summary.fetched += 1;
        bar.inc(1);
    }
    bar.finish_with_message("done");
    Ok(summary)
}

/// `v2` if the node serves `GET /eth/v2/beacon/blocks/head/attestations`, `v1` if it answers
/// that it does not know the route.
fn attestations_api(
    agent: &ureq::Agent,
    base: &str,
    opts: &RecordOptions,
    summary: &mut RecordSummary,
) -> Result<&'static str, RecordError> {
    match fetch(
        agent,
        &format!("{base}/eth/v2/beacon/blocks/head/attestations"),
        opts,
        summary,
    ) {
        Ok(Some(_)) => Ok("v2"),
        Ok(None)
        | Err(RecordError::Status {
            status: 400 | 405, ..
        }) => Ok("v1"),
        Err(e) => Err(e),
    }
}

/// GET with retries: `Ok(None)` for 404.
fn fetch(
    agent: &ureq::Agent,
    url: &str,
    opts: &RecordOptions,
    summary: &mut RecordSummary,
) -> Result<Option<Vec<u8>>, RecordError> {
    let attempts = opts.attempts.max(1);
    let mut delay = opts.retry_delay;
    let mut last_error = String::new();
    for attempt in 1..=attempts {
        if attempt > 1 {
            summary.retries += 1;
            std::thread::sleep(delay);
            delay = delay.saturating_mul(2);
        }
        match agent.get(url).set("Accept", "application/json").call() {
            Ok(response) => {
                let mut body = Vec::new();
                match response.into_reader().read_to_end(&mut body) {
                    Ok(_) => return Ok(Some(body)),
                    Err(e) => last_error = format!("reading the body: {e}"),
                }
            }
            Err(ureq::Error::Status(404, _)) => return Ok(None),
            Err(ureq::Error::Status(status, _)) if status == 429 || status >= 500 => {
                last_error = format!("HTTP {status}");
            }
            Err(ureq::Error::Status(status, _)) => {
                return Err(RecordError::Status {
                    url: url.to_string(),
                    status,
                })
            }
            Err(ureq::Error::Transport(t)) => last_error = t.to_string(),
        }
    }
    Err(RecordError::GaveUp {
        url: url.to_string(),
        attempts,
        last_error,
    })
}

/// Write `body` gzipped to `path` via `<path>.tmp`, fsync and rename.
fn write_gz_atomic(path: &Path, body: &[u8]) -> Result<(), RecordError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!("{name}.tmp"));
    let io = |op, source| RecordError::Io {
        op,
        path: tmp.clone(),
        source,
    };
    let file = File::create(&tmp).map_err(|e| io("create", e))?;
    let mut encoder = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    encoder.write_all(body).map_err(|e| io("write", e))?;
    let file = encoder.finish().map_err(|e| io("write", e))?;
    file.sync_all().map_err(|e| io("fsync", e))?;
    fs::rename(&tmp, path).map_err(|e| io("rename", e))?;
    Ok(())
}
