//! `import-client`: a replay through Lighthouse's own slasher (`integration/lighthouse/replay.rs`,
//! built by `scripts/lighthouse.sh ... bench`) as a report row, so that `slasher-bench report`
//! sets it beside the port's rows of the same fixture and settings.
//!
//! The runner writes a CSV (see [`parse_client_csv`]); this module turns it into a one-row run
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

use anyhow::{bail, ensure, Context};
use clap::Args;
use slasher_adapters::config::{destroy_database_dir, DEFAULT_MAX_DB_SIZE_MBS};
use slasher_adapters::slasher::config::DEFAULT_ATTESTATION_ROOT_CACHE_SIZE;
use slasher_adapters::slasher::{AttesterSlashing, ProposerSlashing};
use slasher_adapters::{with_backend, BackendConfig, BackendVisitor, DatabaseBackend, Environment};
use ssz::Decode;

use crate::environment::{probe_fs, Build, Machine};
use crate::fixture::FixtureReader;
use crate::measure::{files_size, Summary};
use crate::replay::{check_expected, expected_within, summarise, BatchSlashings, SECONDS_PER_SLOT};
use crate::report::{
    self, BackendResult, BatchRecord, FixtureInfo, Report, Run, SlasherConfigInfo, SlashingsFound,
    REPORT_SCHEMA,
};

/// Arguments of `slasher-bench import-client`.
#[derive(Debug, Args)]
pub struct ImportClientArgs {
    /// The fixture the runner replayed.
    #[arg(long)]
    pub fixture: PathBuf,
    /// The runner's CSV.
    #[arg(long)]
    pub csv: PathBuf,
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
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// The runner's CSV, parsed.
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

fn key_values(line: &str, prefix: &str) -> Option<Vec<(String, String)>> {
    let rest = line.strip_prefix(prefix)?;
    Some(
        rest.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn value<'a>(kv: &'a [(String, String)], key: &str, what: &str) -> anyhow::Result<&'a str> {
    kv.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .with_context(|| format!("{what}: no {key}="))
}

/// Parses the runner's CSV: a `# butter_replay` settings line, the header, one line per batch,
/// and a closing `# end` line once the run finished.
///
/// # Errors
/// A file that is not the runner's, a malformed line, bad hex or SSZ in the slashings column.
pub fn parse_client_csv(text: &str, path: &Path) -> anyhow::Result<ClientRun> {
    let at_line = |n: usize| format!("{} line {}", path.display(), n + 1);
    let mut lines = text.lines().enumerate();
    let (_, first) = lines.next().unwrap_or_default();
    let Some(kv) = key_values(first, "# butter_replay ") else {
        bail!(
            "{}: not a CSV of the Lighthouse replay runner (first line {first:?})",
            path.display()
        );
    };
    let number = |key: &str| -> anyhow::Result<usize> {
        let v = value(&kv, key, &at_line(0))?;
        v.parse()
            .with_context(|| format!("{}: {key}={v}", at_line(0)))
    };
    let settings = ClientSettings {
        lighthouse: value(&kv, "lighthouse", &at_line(0))?.to_string(),
        backend: value(&kv, "backend", &at_line(0))?.to_string(),
        history: number("history")?,
        chunk: number("chunk")?,
        validator_chunk: number("validator_chunk")?,
        batches: number("batches")? as u64,
    };
    let (_, header) = lines.next().unwrap_or_default();
    ensure!(
        header.starts_with("index,slot,current_epoch,") && header.ends_with(",slashings"),
        "{}: not the runner's header",
        at_line(1)
    );
    let mut run = ClientRun {
        settings,
        batches: Vec::new(),
        slashings: Vec::new(),
        elapsed_s: None,
        peak_rss_bytes: None,
    };
    for (n, line) in lines {
        if let Some(kv) = key_values(line, "# end ") {
            let elapsed = value(&kv, "elapsed_s", &at_line(n))?;
            run.elapsed_s = Some(elapsed.parse().with_context(|| at_line(n))?);
            let rss: u64 = value(&kv, "peak_rss_bytes", &at_line(n))?
                .parse()
                .with_context(|| at_line(n))?;
            run.peak_rss_bytes = (rss > 0).then_some(rss);
            continue;
        }
        ensure!(
            run.elapsed_s.is_none(),
            "{}: a line after the end line",
            at_line(n)
        );
        let f: Vec<&str> = line.split(',').collect();
        let [index, slot, epoch, headers, atts, wall, process, prune, a_count, p_count, found] =
            f[..]
        else {
            bail!("{}: expected 11 fields, found {}", at_line(n), f.len());
        };
        let (mut attester, mut proposer) = (HashSet::new(), HashSet::new());
        for item in found.split('|').filter(|s| !s.is_empty()) {
            let (tag, rest) = item.split_at(1);
            let bytes = hex::decode(rest).with_context(|| at_line(n))?;
            let bad = |e: ssz::DecodeError| anyhow::anyhow!("{}: slashing SSZ: {e:?}", at_line(n));
            match tag {
                "A" => attester.insert(AttesterSlashing::from_ssz_bytes(&bytes).map_err(bad)?),
                "P" => proposer.insert(ProposerSlashing::from_ssz_bytes(&bytes).map_err(bad)?),
                _ => bail!("{}: slashing tag {tag:?}", at_line(n)),
            };
        }
        let parse_u64 = |s: &str| s.parse::<u64>().with_context(|| at_line(n));
        let parse_f64 = |s: &str| s.parse::<f64>().with_context(|| at_line(n));
        ensure!(
            parse_u64(a_count)? as usize == attester.len()
                && parse_u64(p_count)? as usize == proposer.len(),
            "{}: the slashing counts do not match the slashings listed",
            at_line(n)
        );
        // Counted, digested and listed in canonical form, as the port's rows are.
        let slashings = BatchSlashings::canonical(&attester, &proposer);
        run.batches.push(BatchRecord {
            index: parse_u64(index)?,
            slot: parse_u64(slot)?,
            current_epoch: parse_u64(epoch)?,
            headers: parse_u64(headers)? as usize,
            attestations: parse_u64(atts)? as usize,
            wall_ms: parse_f64(wall)?,
            process_ms: parse_f64(process)?,
            prune_ms: parse_f64(prune)?,
            attester_slashings: slashings.attester_count(),
            proposer_slashings: slashings.proposer_count(),
            slashings_digest: slashings.digest(),
            ..BatchRecord::default()
        });
        run.slashings.push(slashings);
    }
    Ok(run)
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
/// Unreadable inputs, a CSV whose batches are not the fixture's, a database the port's adapter
/// cannot open, or an output directory that cannot be written.
pub fn run(args: ImportClientArgs) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&args.csv)
        .with_context(|| format!("reading {}", args.csv.display()))?;
    let client = parse_client_csv(&text, &args.csv)?;
    let mut reader = FixtureReader::open(&args.fixture)
        .with_context(|| format!("opening {}", args.fixture.display()))?;
    let manifest = reader.manifest().clone();
    ensure!(
        !client.batches.is_empty(),
        "{}: the runner replayed no batch",
        args.csv.display()
    );
    // The runner must have replayed this fixture's batches, in order, from the first.
    for b in &client.batches {
        let f = reader.next().transpose()?.with_context(|| {
            format!(
                "{}: batch {} is past the end of {}",
                args.csv.display(),
                b.index,
                args.fixture.display()
            )
        })?;
        ensure!(
            (b.index, b.slot, b.current_epoch) == (f.index, f.slot, f.current_epoch),
            "{}: batch {} (slot {}, epoch {}) is not batch {} of {} (slot {}, epoch {})",
            args.csv.display(),
            b.index,
            b.slot,
            b.current_epoch,
            f.index,
            args.fixture.display(),
            f.slot,
            f.current_epoch
        );
    }
    let backend: DatabaseBackend = client
        .settings
        .backend
        .parse()
        .map_err(|e| anyhow::anyhow!("{}: {e}", args.csv.display()))?;
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

    let replayed = client.batches.len() as u64;
    let interrupted = client.elapsed_s.is_none();
    let mut found = SlashingsFound::default();
    for (b, slashings) in client.batches.iter().zip(&client.slashings) {
        found.attester += slashings.attester_count();
        found.proposer += slashings.proposer_count();
        found.list.extend(summarise(b.index, slashings));
    }
    let expected_slashings =
        expected_within(&manifest, replayed).map(|e| check_expected(&e, &found.list));
    let walls: Vec<f64> = client.batches.iter().map(|b| b.wall_ms).collect();
    let wall = Summary::of(&walls);
    let row = BackendResult {
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
    };
    let correctness = report::correctness(&[&row]);
    let run = Run {
        started_unix_s: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        command: std::env::args().collect(),
        fixture: FixtureInfo::new(
            &args.fixture,
            &manifest,
            manifest.contents.batch_count,
            client.settings.batches.min(manifest.contents.batch_count),
        )?,
        slasher_config: SlasherConfigInfo {
            chunk_size: client.settings.chunk,
            validator_chunk_size: client.settings.validator_chunk,
            history_length: client.settings.history,
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
            rev = client.settings.lighthouse
        )],
        backends: vec![row],
        failures: Vec::new(),
        correctness,
        interrupted,
        interrupted_by: None,
        not_started: Vec::new(),
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "# butter_replay lighthouse=2e0eb6d1b8 backend=lmdb history=256 chunk=16 \
                       validator_chunk=256 batches=2\n\
                       index,slot,current_epoch,headers,attestations,wall_ms,process_ms,prune_ms,\
                       attester_slashings,proposer_slashings,slashings\n\
                       0,32,1,1,10,12.5,12.0,0.5,0,0,\n\
                       1,33,1,1,10,2.5,2.0,0.5,0,0,\n\
                       # end batches=2 elapsed_s=1.250 peak_rss_bytes=4096\n";

    #[test]
    fn the_runner_csv_is_parsed_and_checked() {
        let path = Path::new("x.csv");
        let run = parse_client_csv(CSV, path).expect("parses");
        assert_eq!(run.settings.backend, "lmdb");
        assert_eq!(run.settings.history, 256);
        assert_eq!(run.settings.lighthouse, "2e0eb6d1b8");
        assert_eq!(run.batches.len(), 2);
        assert_eq!(run.batches[1].wall_ms, 2.5);
        assert_eq!(run.batches[0].slashings_digest, None);
        assert_eq!(run.elapsed_s, Some(1.25));
        assert_eq!(run.peak_rss_bytes, Some(4096));

        // Without its end line the run counts as unfinished.
        let cut = CSV.rsplit_once("# end").expect("end line").0;
        assert_eq!(parse_client_csv(cut, path).expect("parses").elapsed_s, None);
        // A CSV of something else, bad hex, bad SSZ, a count that does not match the list.
        assert!(parse_client_csv("index,slot\n", path).is_err());
        let with = |s: &str| CSV.replace("0,0,\n1,33", &format!("0,1,{s}\n1,33"));
        assert!(parse_client_csv(&with("Pzz"), path).is_err());
        assert!(parse_client_csv(&with("P0a0b"), path).is_err());
        assert!(parse_client_csv(&CSV.replace("0.5,0,0,\n1", "0.5,0,1,\n1"), path).is_err());
    }

    #[test]
    fn a_slashing_from_the_runner_gets_the_ports_digest() {
        // A proposer slashing is two fixed-size signed headers: any 416 bytes decode.
        let bytes: Vec<u8> = (0..416u32).map(|i| (i % 251) as u8).collect();
        let slashing = ProposerSlashing::from_ssz_bytes(&bytes).expect("decodes");
        let text = CSV.replace("0,0,\n1,33", &format!("0,1,P{}\n1,33", hex::encode(&bytes)));
        let run = parse_client_csv(&text, Path::new("x.csv")).expect("parses");
        let port = BatchSlashings::canonical(&HashSet::new(), &HashSet::from([slashing])).digest();
        assert!(port.is_some());
        assert_eq!(run.batches[0].slashings_digest, port);
        assert_eq!(run.batches[0].proposer_slashings, 1);

        // Lighthouse may store either header first: the runner's other order gets the same
        // digest, and listing both orders counts one slashing.
        let swapped = [&bytes[208..], &bytes[..208]].concat();
        let line =
            |found: &str, n: usize| CSV.replace("0,0,\n1,33", &format!("0,{n},{found}\n1,33"));
        let other = format!("P{}", hex::encode(&swapped));
        let run = parse_client_csv(&line(&other, 1), Path::new("x.csv")).expect("parses");
        assert_eq!(run.batches[0].slashings_digest, port);
        let both = format!("P{}|{other}", hex::encode(&bytes));
        let run = parse_client_csv(&line(&both, 2), Path::new("x.csv")).expect("parses");
        assert_eq!(run.batches[0].slashings_digest, port);
        assert_eq!(run.batches[0].proposer_slashings, 1);
    }
}
