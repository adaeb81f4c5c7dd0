//! `client-compare`: the port's replay beside the same batches replayed through Lighthouse's own
//! slasher (`integration/lighthouse/replay.rs`, built by `scripts/lighthouse.sh ... bench`).
//!
//! For every pair of a client CSV and a port row of a `report.json` it prints, per phase (cold
//! epoch, next epoch, steady; see [`Phase`]), the median batch time of each and the ratio
//! port/client, and it checks that both found the same slashings in every batch (the port's
//! `slashings_digest` against the digest of the client's slashings, computed the same way).
//! Any batch whose slashings differ, or that only one side replayed, is an error.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context};
use clap::Args;

use crate::measure::Summary;
use crate::replay::digest_of_slashings as digest;
use crate::report::{self, BackendResult, Phase};

/// Arguments of `slasher-bench client-compare`.
#[derive(Debug, Args)]
pub struct ClientCompareArgs {
    /// The port's `report.json` (from `slasher-bench replay` on the same fixture and settings).
    #[arg(long)]
    pub port: PathBuf,
    /// `ROW=CSV`: the client's CSV for the port row named ROW (e.g. `lmdb@ext4=lh-lmdb.csv`).
    /// Repeatable.
    #[arg(long = "client", required = true, value_parser = parse_pair)]
    pub clients: Vec<(String, PathBuf)>,
    /// Also write the table to this Markdown file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

fn parse_pair(s: &str) -> Result<(String, PathBuf), String> {
    let (row, csv) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected ROW=CSV, e.g. lmdb@ext4=lighthouse-lmdb.csv"))?;
    Ok((row.to_string(), PathBuf::from(csv)))
}

/// One batch of the client's CSV.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientBatch {
    /// Fixture batch index.
    pub index: u64,
    /// Epoch given to `process_queued`.
    pub current_epoch: u64,
    /// `process_queued` + `prune_database`, ms.
    pub wall_ms: f64,
    /// Digest of the slashings found (as the port computes it), `None` for none.
    pub digest: Option<String>,
}

/// Parses the runner's CSV (see `integration/lighthouse/replay.rs`).
///
/// # Errors
/// A header that is not the runner's, a malformed line, or bad hex in the slashings column.
pub fn parse_client_csv(text: &str, path: &Path) -> anyhow::Result<Vec<ClientBatch>> {
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    ensure!(
        header.starts_with("index,slot,current_epoch,") && header.ends_with(",slashings"),
        "{}: not a CSV of the Lighthouse replay runner (header {header:?})",
        path.display()
    );
    let mut out = Vec::new();
    for (n, line) in lines.enumerate() {
        let at = || format!("{} line {}", path.display(), n + 2);
        let f: Vec<&str> = line.split(',').collect();
        ensure!(
            f.len() == 11,
            "{}: expected 11 fields, found {}",
            at(),
            f.len()
        );
        let mut entries = Vec::new();
        for item in f[10].split('|').filter(|s| !s.is_empty()) {
            let (tag, rest) = item.split_at(1);
            ensure!(tag == "A" || tag == "P", "{}: slashing tag {tag:?}", at());
            let mut bytes = tag.as_bytes().to_vec();
            bytes.extend(hex::decode(rest).with_context(at)?);
            entries.push(bytes);
        }
        out.push(ClientBatch {
            index: f[0].parse().with_context(at)?,
            current_epoch: f[2].parse().with_context(at)?,
            wall_ms: f[5].parse().with_context(at)?,
            digest: digest(entries),
        });
    }
    Ok(out)
}

/// One line of the comparison: a phase of one row.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseComparison {
    /// The port's row name.
    pub row: String,
    /// The phase.
    pub phase: Phase,
    /// Batches in the phase.
    pub batches: usize,
    /// Median batch time of the port, ms.
    pub port_ms: f64,
    /// Median batch time of the client, ms.
    pub client_ms: f64,
}

/// Compares a client run with the port's row: per-phase medians, and the same slashings in
/// every batch.
///
/// # Errors
/// A batch only one side replayed, or whose slashings differ.
pub fn compare(
    row: &BackendResult,
    client: &[ClientBatch],
) -> anyhow::Result<Vec<PhaseComparison>> {
    let port: BTreeMap<u64, _> = row.batches.iter().map(|b| (b.index, b)).collect();
    ensure!(
        !client.is_empty(),
        "the client CSV for {} has no batches",
        row.name
    );
    ensure!(
        client.len() == port.len(),
        "{}: the port replayed {} batches, the client {}",
        row.name,
        port.len(),
        client.len()
    );
    let mut differ = Vec::new();
    for c in client {
        let Some(p) = port.get(&c.index) else {
            bail!(
                "{}: batch {} is in the client CSV, not in the port's run",
                row.name,
                c.index
            );
        };
        ensure!(
            p.current_epoch == c.current_epoch,
            "{}: batch {} has epoch {} in the port's run and {} in the client's",
            row.name,
            c.index,
            p.current_epoch,
            c.current_epoch
        );
        if p.slashings_digest != c.digest {
            differ.push(c.index);
        }
    }
    ensure!(
        differ.is_empty(),
        "{}: the client and the port found different slashings in {} batch(es), first {:?}",
        row.name,
        differ.len(),
        &differ[..differ.len().min(10)]
    );
    let first = client[0].current_epoch;
    let mut out = Vec::new();
    for phase in Phase::ALL {
        let of = |epoch: u64| Phase::of_offset(epoch.saturating_sub(first)) == phase;
        let c: Vec<f64> = client
            .iter()
            .filter(|b| of(b.current_epoch))
            .map(|b| b.wall_ms)
            .collect();
        let p: Vec<f64> = row
            .batches
            .iter()
            .filter(|b| of(b.current_epoch))
            .map(|b| b.wall_ms)
            .collect();
        if c.is_empty() {
            continue;
        }
        out.push(PhaseComparison {
            row: row.name.clone(),
            phase,
            batches: c.len(),
            port_ms: Summary::of(&p).median,
            client_ms: Summary::of(&c).median,
        });
    }
    Ok(out)
}

/// The Markdown table of comparisons.
pub fn render(lines: &[PhaseComparison]) -> String {
    let mut s = String::from(
        "| row | phase | batches | port median ms | Lighthouse median ms | port / Lighthouse |\n\
         |---|---|---:|---:|---:|---:|\n",
    );
    for l in lines {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {:.1} | {:.2} |",
            l.row,
            l.phase.name(),
            l.batches,
            l.port_ms,
            l.client_ms,
            l.port_ms / l.client_ms
        );
    }
    s
}

/// `slasher-bench client-compare`.
///
/// # Errors
/// Unreadable inputs, a row missing from the report, or any difference in slashings.
pub fn run(args: ClientCompareArgs) -> anyhow::Result<()> {
    let report = report::load(&args.port)?;
    let rows: Vec<&BackendResult> = report.runs.iter().flat_map(|r| &r.backends).collect();
    let mut lines = Vec::new();
    for (name, csv) in &args.clients {
        let Some(row) = rows.iter().find(|r| &r.name == name) else {
            bail!("{}: no row named {name}", args.port.display());
        };
        let text =
            std::fs::read_to_string(csv).with_context(|| format!("reading {}", csv.display()))?;
        let client = parse_client_csv(&text, csv)?;
        lines.extend(compare(row, &client)?);
        println!("{name}: same slashings in all {} batches", client.len());
    }
    let table = render(&lines);
    print!("{table}");
    if let Some(out) = &args.out {
        std::fs::write(out, &table).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_digest_is_the_ports() {
        // Same entries in any order give the same digest; none gives None.
        let a = digest(vec![b"Px".to_vec(), b"Aab".to_vec()]);
        let b = digest(vec![b"Aab".to_vec(), b"Px".to_vec()]);
        assert_eq!(a, b);
        assert!(a.is_some());
        assert_eq!(digest(vec![]), None);
        assert_ne!(a, digest(vec![b"Aab".to_vec()]));
    }

    #[test]
    fn the_runner_csv_is_parsed_and_checked() {
        let path = Path::new("x.csv");
        let text = "index,slot,current_epoch,headers,attestations,wall_ms,process_ms,prune_ms,\
                    attester_slashings,proposer_slashings,slashings\n\
                    0,32,1,1,10,12.5,12.0,0.5,0,1,P0a0b\n\
                    1,33,1,1,10,2.5,2.0,0.5,0,0,\n";
        let batches = parse_client_csv(text, path).expect("parses");
        assert_eq!(batches.len(), 2);
        assert_eq!(batches[0].digest, digest(vec![vec![b'P', 0x0a, 0x0b]]));
        assert_eq!(batches[1].digest, None);
        assert_eq!(batches[1].wall_ms, 2.5);
        assert!(parse_client_csv("a,b\n", path).is_err());
        let bad_hex = text.replace("P0a0b", "Pzz");
        assert!(parse_client_csv(&bad_hex, path).is_err());
    }
}
