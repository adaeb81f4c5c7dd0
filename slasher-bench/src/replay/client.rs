//! `import-client`: a replay through Lighthouse's own slasher (`integration/lighthouse/replay.rs`,
//! built by `scripts/lighthouse.sh ... bench`) as a report row, so that `slasher-bench report`
//! sets it beside the port's rows of the same fixture and settings.
//!
//! The runner writes JSON lines (see [`parse_client_rows`]); this module turns them into a one-row run
//! named `lighthouse:<backend>@<filesystem>` in the report's schema. Each batch's slashings are
//! decoded from their SSZ and summarised and digested by the same code as the port's, so the
//! correctness gate compares the client's slashings with the port's batch by batch, and the
//! fixture's injected slashings are checked on the client's row too. The report then gives, per
//! phase, the port's median beside the client's ([`crate::report::client_pairs`]).
//!
//! The client row measures what the runner can see from outside Lighthouse's slasher: batch wall
//! time (`process_queued` + `prune_database`), the slashings and peak RSS. The database size is
//! measured here afterwards, with the port's adapter for the backend (the same `filenames()` as
//! the port's rows). Commit, storage and write figures are not measured (shown as `n/m`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{ensure, Context};
use clap::Args;
use serde::Deserialize;
use slasher_adapters::config::{destroy_database_dir, DEFAULT_MAX_DB_SIZE_MBS};
use slasher_adapters::slasher::config::DEFAULT_ATTESTATION_ROOT_CACHE_SIZE;
use slasher_adapters::slasher::{AttesterSlashing, ProposerSlashing};
use slasher_adapters::{with_backend, BackendConfig, BackendVisitor, DatabaseBackend, Environment};
use ssz::Decode;

use crate::fixtures::file::{FixtureReader, Manifest};
use crate::replay::{check_expected, expected_within, summarise, BatchSlashings, SECONDS_PER_SLOT};
use crate::report::{
    self, BackendResult, BatchRecord, FixtureInfo, Report, Run, SlasherConfigInfo, SlashingsFound,
    REPORT_SCHEMA,
};
use crate::system::environment::{probe_fs, Build, FsInfo, Machine};
use crate::system::measure::{files_size, FilesSize, Summary};

/// Arguments of `slasher-bench import-client`.
#[derive(Debug, Args)]
pub struct ImportClientArgs {
    /// The fixture the runner replayed.
    #[arg(long)]
    pub fixture: PathBuf,
    /// The runner's rows (JSON lines; `--csv` is the older name of this option).
    #[arg(long, alias = "csv")]
    pub rows: PathBuf,
    /// The database directory the runner used: its filesystem names the row, and its size is
    /// measured with the port's adapter for the backend.
    #[arg(long)]
    pub db_dir: PathBuf,
    /// Remove the database directory afterwards (butter_db's read-only snapshots included).
    #[arg(long)]
    pub remove_db: bool,
    /// Report directory to write (report.json, report.md, batches.csv).
    #[arg(long)]
    pub out: PathBuf,
}

/// What the runner's first line says it ran.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSettings {
    /// Lighthouse commit the runner was built from (`unknown` if not given at build time).
    pub lighthouse: String,
    /// Backend name as Lighthouse's `--slasher-backend` takes it.
    pub backend: String,
    /// History length, epochs.
    pub history: usize,
    /// Chunk size C.
    pub chunk: usize,
    /// Validator chunk size K.
    pub validator_chunk: usize,
    /// Batches asked for.
    pub batches: u64,
}

/// One batch as the runner writes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientBatch {
    /// The fixture batch.
    pub index: u64,
    /// Its slot.
    pub slot: u64,
    /// The epoch `process_queued` was given.
    pub current_epoch: u64,
    /// Block headers queued.
    pub headers: usize,
    /// Attestations queued.
    pub attestations: usize,
    /// `process_queued` + `prune_database`, ms.
    pub wall_ms: f64,
    /// `process_queued`, ms.
    pub process_ms: f64,
    /// `prune_database`, ms.
    pub prune_ms: f64,
    /// Attester slashings Lighthouse returned after the batch.
    pub attester_slashings: usize,
    /// Proposer slashings.
    pub proposer_slashings: usize,
    /// Each slashing: `A` (attester) or `P` (proposer), then its SSZ bytes in hex.
    pub slashings: Vec<String>,
}

/// The runner's last line, once the run finished.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientEnd {
    /// Batches replayed.
    pub batches: u64,
    /// The replay loop, seconds.
    pub elapsed_s: f64,
    /// The runner's `VmHWM` (0: unknown).
    pub peak_rss_bytes: u64,
}

/// One line of the runner's output (`integration/lighthouse/replay.rs`), told apart by its
/// `kind`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClientLine {
    /// The first line.
    Settings(ClientSettings),
    /// One per batch.
    Batch(ClientBatch),
    /// The last line of a finished run.
    End(ClientEnd),
}

/// Why the runner's rows were refused; `line` counts from 1.
#[derive(Debug, thiserror::Error)]
pub enum ClientRowsError {
    /// A line that is not one of the runner's JSON objects.
    #[error("{path} line {line}: not a row of the Lighthouse replay runner: {source}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The line.
        line: usize,
        /// What serde_json said.
        source: serde_json::Error,
    },
    /// The first line is not the settings, or settings come again later.
    #[error("{path} line {line}: {what}")]
    OutOfOrder {
        /// The file.
        path: PathBuf,
        /// The line.
        line: usize,
        /// What is out of place.
        what: &'static str,
    },
    /// A slashing that is not `A`/`P` and hex SSZ of its kind, or counts that do not match
    /// the slashings listed.
    #[error("{path} line {line}: {what}")]
    Slashing {
        /// The file.
        path: PathBuf,
        /// The line.
        line: usize,
        /// What is wrong with it.
        what: String,
    },
}

/// The runner's rows, parsed.
#[derive(Debug, Clone)]
pub struct ClientRun {
    /// The settings line.
    pub settings: ClientSettings,
    /// One record per batch; commit, storage and write fields are 0 (not measured).
    pub batches: Vec<BatchRecord>,
    /// Each batch's slashings, decoded, in canonical form (as the port's are).
    pub slashings: Vec<BatchSlashings>,
    /// The runner's replay loop, seconds (`None` if the run did not finish).
    pub elapsed_s: Option<f64>,
    /// The runner's `VmHWM`.
    pub peak_rss_bytes: Option<u64>,
}

/// Parses the runner's JSON lines: the settings, one line per batch, and an end line once the
/// run finished.
///
/// # Errors
/// [`ClientRowsError`], naming the line: a line that is not the runner's (unknown fields
/// included), lines out of order, bad hex or SSZ in the slashings, counts that do not match.
pub fn parse_client_rows(text: &str, path: &Path) -> Result<ClientRun, ClientRowsError> {
    let out_of_order = |line: usize, what| ClientRowsError::OutOfOrder {
        path: path.to_path_buf(),
        line,
        what,
    };
    let mut run: Option<ClientRun> = None;
    for (i, text) in text.lines().enumerate() {
        let line = i + 1;
        let parsed: ClientLine =
            serde_json::from_str(text).map_err(|source| ClientRowsError::Malformed {
                path: path.to_path_buf(),
                line,
                source,
            })?;
        let settings = match (parsed, &mut run) {
            (ClientLine::Settings(settings), None) => settings,
            (_, None) => return Err(out_of_order(line, "the first line is not the settings")),
            (_, Some(r)) if r.elapsed_s.is_some() => {
                return Err(out_of_order(line, "a line after the end line"))
            }
            (ClientLine::Settings(_), Some(_)) => {
                return Err(out_of_order(line, "a second settings line"))
            }
            (ClientLine::End(end), Some(r)) => {
                r.elapsed_s = Some(end.elapsed_s);
                r.peak_rss_bytes = (end.peak_rss_bytes > 0).then_some(end.peak_rss_bytes);
                continue;
            }
            (ClientLine::Batch(b), Some(r)) => {
                let slashings = decode_slashings(&b).map_err(|what| ClientRowsError::Slashing {
                    path: path.to_path_buf(),
                    line,
                    what,
                })?;
                r.batches.push(batch_record(&b, &slashings));
                r.slashings.push(slashings);
                continue;
            }
        };
        run = Some(ClientRun {
            settings,
            batches: Vec::new(),
            slashings: Vec::new(),
            elapsed_s: None,
            peak_rss_bytes: None,
        });
    }
    run.ok_or_else(|| out_of_order(1, "no settings line (an empty file)"))
}

/// A batch's slashings, decoded and in canonical form, checked against its counts.
fn decode_slashings(b: &ClientBatch) -> Result<BatchSlashings, String> {
    let (mut attester, mut proposer) = (HashSet::new(), HashSet::new());
    for item in &b.slashings {
        let (tag, rest) = item.split_at(item.len().min(1));
        let bytes = hex::decode(rest).map_err(|e| format!("slashing hex: {e}"))?;
        let bad = |e: ssz::DecodeError| format!("slashing SSZ: {e:?}");
        match tag {
            "A" => attester.insert(AttesterSlashing::from_ssz_bytes(&bytes).map_err(bad)?),
            "P" => proposer.insert(ProposerSlashing::from_ssz_bytes(&bytes).map_err(bad)?),
            _ => return Err(format!("slashing tag {tag:?}")),
        };
    }
    if b.attester_slashings != attester.len() || b.proposer_slashings != proposer.len() {
        return Err("the slashing counts do not match the slashings listed".into());
    }
    // Counted, digested and listed in canonical form, as the port's rows are.
    Ok(BatchSlashings::canonical(&attester, &proposer))
}

/// A client batch as a report record: what the runner measures, the rest left at 0.
fn batch_record(b: &ClientBatch, slashings: &BatchSlashings) -> BatchRecord {
    BatchRecord {
        index: b.index,
        slot: b.slot,
        current_epoch: b.current_epoch,
        headers: b.headers,
        attestations: b.attestations,
        wall_ms: b.wall_ms,
        process_ms: b.process_ms,
        prune_ms: b.prune_ms,
        attester_slashings: slashings.attester_count(),
        proposer_slashings: slashings.proposer_count(),
        slashings_digest: slashings.digest(),
        ..BatchRecord::default()
    }
}

/// Opens a database with the port's adapter and returns its files (`filenames()`).
struct Files<'a>(&'a Path);

impl BackendVisitor for Files<'_> {
    type Output = Result<Vec<PathBuf>, slasher_adapters::Error>;
    fn visit<E: Environment>(self) -> Self::Output {
        Ok(E::open(&BackendConfig::new(self.0))?.filenames())
    }
}

/// `slasher-bench import-client`.
///
/// # Errors
/// Unreadable inputs, rows whose batches are not the fixture's, a database the port's adapter
/// cannot open, or an output directory that cannot be written.
pub fn run(args: ImportClientArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.rows)
        .with_context(|| format!("reading {}", args.rows.display()))?;
    let client = parse_client_rows(&text, &args.rows)?;
    let mut reader = FixtureReader::open(&args.fixture)
        .with_context(|| format!("opening {}", args.fixture.display()))?;
    let manifest = reader.manifest().clone();
    ensure!(
        !client.batches.is_empty(),
        "{}: the runner replayed no batch",
        args.rows.display()
    );
    check_fixture_batches(&args, &client, &mut reader)?;
    let backend: DatabaseBackend = client
        .settings
        .backend
        .parse()
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.rows.display()))?;
    let (fs, size) = measure_database(&args, backend)?;
    let settings = client.settings.clone();
    let row = client_row(&args, &manifest, client, backend, fs, size);
    let run = client_run(&args, &manifest, &settings, row)?;
    let report = Report {
        schema: REPORT_SCHEMA.into(),
        generated_by: format!("slasher-bench {}", env!("CARGO_PKG_VERSION")),
        runs: vec![run],
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    report::write_outputs(&report, &args.out)?;
    let row = &report.runs[0].backends[0];
    eprintln!(
        "{}: {} batches, median {:.1} ms, {} slashings; report in {}",
        row.name,
        row.batches.len(),
        row.median_batch_ms,
        row.slashings.attester + row.slashings.proposer,
        args.out.display()
    );
    Ok(())
}

/// Checks that the runner replayed this fixture's batches, in order, from the first.
fn check_fixture_batches(
    args: &ImportClientArgs,
    client: &ClientRun,
    reader: &mut FixtureReader,
) -> anyhow::Result<()> {
    for b in &client.batches {
        let f = reader.next().transpose()?.with_context(|| {
            format!(
                "{}: batch {} is past the end of {}",
                args.rows.display(),
                b.index,
                args.fixture.display()
            )
        })?;
        ensure!(
            (b.index, b.slot, b.current_epoch) == (f.index, f.slot, f.current_epoch),
            "{}: batch {} (slot {}, epoch {}) is not batch {} of {} (slot {}, epoch {})",
            args.rows.display(),
            b.index,
            b.slot,
            b.current_epoch,
            f.index,
            args.fixture.display(),
            f.slot,
            f.current_epoch
        );
    }
    Ok(())
}

/// The filesystem of the runner's database directory and the size of the database in it,
/// measured with the port's adapter for the backend; then removes it if asked to.
fn measure_database(
    args: &ImportClientArgs,
    backend: DatabaseBackend,
) -> anyhow::Result<(FsInfo, FilesSize)> {
    // Opening an empty directory would create a database rather than measure one.
    let entries = std::fs::read_dir(&args.db_dir)
        .with_context(|| format!("reading {}", args.db_dir.display()))?;
    ensure!(
        entries.count() > 0,
        "{} holds no database: give the directory the runner used",
        args.db_dir.display()
    );
    let fs = probe_fs(&args.db_dir)?;
    let files = with_backend(backend, Files(&args.db_dir))?.with_context(|| {
        format!(
            "opening {} with the port's {backend} adapter",
            args.db_dir.display()
        )
    })?;
    let size = files_size(&files);
    if args.remove_db {
        destroy_database_dir(&args.db_dir)
            .with_context(|| format!("removing {}", args.db_dir.display()))?;
    }
    Ok((fs, size))
}

/// The client's report row, `lighthouse:<backend>@<filesystem>`: its batch times, slashings
/// (checked against the fixture's injected ones), peak RSS and database size.
fn client_row(
    args: &ImportClientArgs,
    manifest: &Manifest,
    client: ClientRun,
    backend: DatabaseBackend,
    fs: FsInfo,
    size: FilesSize,
) -> BackendResult {
    let replayed = client.batches.len() as u64;
    let interrupted = client.elapsed_s.is_none();
    let mut found = SlashingsFound::default();
    for (b, slashings) in client.batches.iter().zip(&client.slashings) {
        found.attester += slashings.attester_count();
        found.proposer += slashings.proposer_count();
        found.list.extend(summarise(b.index, slashings));
    }
    let expected_slashings =
        expected_within(manifest, replayed).map(|e| check_expected(&e, &found.list));
    let walls: Vec<f64> = client.batches.iter().map(|b| b.wall_ms).collect();
    let wall = Summary::of(&walls);
    BackendResult {
        name: format!("lighthouse:{}@{}", backend.name(), fs.label()),
        backend: backend.name().into(),
        filesystem: fs.label(),
        // Lighthouse's LMDB commits are synced and butter_db's are snapshots.
        durable: true,
        durability: "immediate".into(),
        fs,
        db_dir: args.db_dir.clone(),
        first_batch_ms: client.batches.first().map_or(0.0, |b| b.wall_ms),
        median_batch_ms: wall.median,
        p99_batch_ms: wall.p99,
        max_batch_ms: wall.max,
        mean_batch_ms: wall.mean,
        total_s: wall.sum / 1000.0,
        elapsed_s: client.elapsed_s.unwrap_or(0.0),
        db_bytes_final: size.apparent,
        db_allocated_bytes_final: size.allocated,
        peak_rss_bytes: client.peak_rss_bytes,
        slashings: found,
        expected_slashings,
        batches: client.batches,
        interrupted,
        client: Some(format!("lighthouse {}", client.settings.lighthouse)),
        ..BackendResult::default()
    }
}

/// The one-row run of the report: the client's row, the fixture, the runner's settings (with
/// Lighthouse's defaults for the rest), this machine and a note on what was measured.
fn client_run(
    args: &ImportClientArgs,
    manifest: &Manifest,
    settings: &ClientSettings,
    row: BackendResult,
) -> anyhow::Result<Run> {
    let correctness = report::correctness(&[&row]);
    let interrupted = row.interrupted;
    Ok(Run {
        started_unix_s: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        command: std::env::args().collect(),
        fixture: FixtureInfo::new(
            &args.fixture,
            manifest,
            manifest.contents.batch_count,
            settings.batches.min(manifest.contents.batch_count),
        )?,
        slasher_config: SlasherConfigInfo {
            chunk_size: settings.chunk,
            validator_chunk_size: settings.validator_chunk,
            history_length: settings.history,
            // The runner keeps Lighthouse's defaults for what it is not given.
            attestation_root_cache_size: DEFAULT_ATTESTATION_ROOT_CACHE_SIZE.get(),
            max_db_size_mbs: DEFAULT_MAX_DB_SIZE_MBS,
            durability_requested: "immediate".into(),
            tile_codec: "lighthouse".into(),
            update_period_s: SECONDS_PER_SLOT,
        },
        machine: Machine::probe(),
        build: Build::probe(),
        notes: vec![format!(
            "row {name}: replayed by Lighthouse's own slasher (lighthouse {rev}, \
             integration/lighthouse/replay.rs) and imported by slasher-bench import-client; \
             measured: batch wall time (process_queued + prune_database), the slashings, the \
             runner's peak RSS, and the database size afterwards with the port's adapter \
             (filenames()); not measured (n/m): commit, storage, bytes written, device bytes; \
             `build` is slasher-bench's, not the runner's",
            name = row.name,
            rev = settings.lighthouse
        )],
        backends: vec![row],
        failures: Vec::new(),
        correctness,
        interrupted,
        interrupted_by: None,
        not_started: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What integration/lighthouse/replay.rs writes (serde_json's `json!` objects, printed
    /// with sorted keys unless serde_json's `preserve_order` is on; the order does not matter
    /// here), written out by hand.
    const ROWS: &str = concat!(
        r#"{"backend":"lmdb","batches":2,"chunk":16,"history":256,"kind":"settings","lighthouse":"2e0eb6d1b8","validator_chunk":256}"#,
        "\n",
        r#"{"attestations":10,"attester_slashings":0,"current_epoch":1,"headers":1,"index":0,"kind":"batch","process_ms":12.0,"proposer_slashings":0,"prune_ms":0.5,"slashings":[],"slot":32,"wall_ms":12.5}"#,
        "\n",
        r#"{"attestations":10,"attester_slashings":0,"current_epoch":1,"headers":1,"index":1,"kind":"batch","process_ms":2.0,"proposer_slashings":0,"prune_ms":0.5,"slashings":[],"slot":33,"wall_ms":2.5}"#,
        "\n",
        r#"{"batches":2,"elapsed_s":1.25,"kind":"end","peak_rss_bytes":4096}"#,
        "\n",
    );

    /// `ROWS` with the first batch's slashing fields replaced.
    fn with_slashings(list: &[String], attester: usize, proposer: usize) -> String {
        ROWS.replacen(
            r#""attester_slashings":0,"current_epoch":1,"headers":1,"index":0,"kind":"batch","process_ms":12.0,"proposer_slashings":0,"prune_ms":0.5,"slashings":[]"#,
            &format!(
                r#""attester_slashings":{attester},"current_epoch":1,"headers":1,"index":0,"kind":"batch","process_ms":12.0,"proposer_slashings":{proposer},"prune_ms":0.5,"slashings":{}"#,
                serde_json::to_string(list).unwrap()
            ),
            1,
        )
    }

    fn line_of(err: ClientRowsError) -> usize {
        match err {
            ClientRowsError::Malformed { line, .. }
            | ClientRowsError::OutOfOrder { line, .. }
            | ClientRowsError::Slashing { line, .. } => line,
        }
    }

    #[test]
    fn the_runner_rows_are_parsed_and_checked() {
        let path = Path::new("x.jsonl");
        let run = parse_client_rows(ROWS, path).expect("parses");
        assert_eq!(run.settings.backend, "lmdb");
        assert_eq!(run.settings.history, 256);
        assert_eq!(run.settings.lighthouse, "2e0eb6d1b8");
        assert_eq!(run.batches.len(), 2);
        assert_eq!(run.batches[1].wall_ms, 2.5);
        assert_eq!(run.batches[1].slot, 33);
        assert_eq!(run.batches[0].slashings_digest, None);
        assert_eq!(run.elapsed_s, Some(1.25));
        assert_eq!(run.peak_rss_bytes, Some(4096));

        // Without its end line the run counts as unfinished.
        let cut = ROWS.rsplit_once(r#"{"batches":2"#).expect("end line").0;
        assert_eq!(
            parse_client_rows(cut, path).expect("parses").elapsed_s,
            None
        );
    }

    #[test]
    fn a_malformed_line_is_refused_with_its_number() {
        let path = Path::new("x.jsonl");
        let lines: Vec<&str> = ROWS.lines().collect();
        // The old CSV's first line, a cut line, a renamed field, a string for a number.
        for (bad, at) in [
            ("# butter_replay lighthouse=x backend=lmdb".to_string(), 1),
            (ROWS.replacen(lines[2], &lines[2][..40], 1), 3),
            (ROWS.replacen("\"wall_ms\":2.5", "\"wall\":2.5", 1), 3),
            (ROWS.replacen("\"slot\":32", "\"slot\":\"32\"", 1), 2),
        ] {
            let err = parse_client_rows(&bad, path).unwrap_err();
            assert!(
                matches!(err, ClientRowsError::Malformed { line, .. } if line == at),
                "{bad}: {err}"
            );
            assert!(
                err.to_string().contains(&format!("x.jsonl line {at}:")),
                "{err}"
            );
        }
        // Lines out of order.
        let no_settings = lines[1..].join("\n");
        assert_eq!(
            line_of(parse_client_rows(&no_settings, path).unwrap_err()),
            1
        );
        let after_end = format!("{ROWS}{}\n", lines[1]);
        assert_eq!(line_of(parse_client_rows(&after_end, path).unwrap_err()), 5);
        assert!(parse_client_rows("", path).is_err());
        // Bad hex, bad SSZ, a count that does not match the list.
        for bad in [
            with_slashings(&["Pzz".into()], 0, 1),
            with_slashings(&["P0a0b".into()], 0, 1),
            with_slashings(&[], 1, 0),
            with_slashings(&["X00".into()], 0, 1),
        ] {
            let err = parse_client_rows(&bad, path).unwrap_err();
            assert!(
                matches!(err, ClientRowsError::Slashing { line: 2, .. }),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn a_slashing_from_the_runner_gets_the_ports_digest() {
        // A proposer slashing is two fixed-size signed headers: any 416 bytes decode.
        let bytes: Vec<u8> = (0..416u32).map(|i| (i % 251) as u8).collect();
        let slashing = ProposerSlashing::from_ssz_bytes(&bytes).expect("decodes");
        let text = with_slashings(&[format!("P{}", hex::encode(&bytes))], 0, 1);
        let run = parse_client_rows(&text, Path::new("x.jsonl")).expect("parses");
        let port = BatchSlashings::canonical(&HashSet::new(), &HashSet::from([slashing])).digest();
        assert!(port.is_some());
        assert_eq!(run.batches[0].slashings_digest, port);
        assert_eq!(run.batches[0].proposer_slashings, 1);

        // Lighthouse may store either header first: the runner's other order gets the same
        // digest, and listing both orders counts one slashing.
        let swapped = [&bytes[208..], &bytes[..208]].concat();
        let other = format!("P{}", hex::encode(&swapped));
        let run = parse_client_rows(
            &with_slashings(std::slice::from_ref(&other), 0, 1),
            Path::new("x.jsonl"),
        )
        .expect("parses");
        assert_eq!(run.batches[0].slashings_digest, port);
        let both = [format!("P{}", hex::encode(&bytes)), other];
        let run =
            parse_client_rows(&with_slashings(&both, 0, 2), Path::new("x.jsonl")).expect("parses");
        assert_eq!(run.batches[0].slashings_digest, port);
        assert_eq!(run.batches[0].proposer_slashings, 1);
    }
}
