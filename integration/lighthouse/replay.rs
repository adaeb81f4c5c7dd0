// Replays a butter_db project fixture through Lighthouse's own slasher.
//
// This file belongs to the butter_db project (integration/lighthouse/replay.rs); it is not
// part of Lighthouse. `scripts/lighthouse.sh LIGHTHOUSE_DIR bench` copies it into the checkout
// as the example `slasher/examples/butter_replay.rs` and builds it there, so that it runs
// Lighthouse's `Slasher` with Lighthouse's backends (and butter through the glue).
//
//   butter_replay FIXTURE DB_DIR OUT_JSONL BACKEND BATCHES HISTORY CHUNK VALIDATOR_CHUNK
//
// Per fixture batch it does what `slasher-bench replay` does with an update period of one slot:
// queue the batch's block headers and indexed attestations, then time `process_queued(epoch)`
// and `prune_database(epoch)`, and harvest the slashings found. It writes JSON lines (serde_json,
// a dev-dependency patch.py gives the slasher crate) that `slasher-bench import-client` turns
// into a report row (`lighthouse:<backend>@<fs>`); slasher-bench/src/replay/client.rs parses them
// with one serde struct per kind of line, and refuses unknown fields:
//   {"kind":"settings","lighthouse":REV,"backend":B,"history":H,"chunk":C,
//    "validator_chunk":K,"batches":N}
//   {"kind":"batch","index":..,"slot":..,"current_epoch":..,"headers":..,"attestations":..,
//    "wall_ms":..,"process_ms":..,"prune_ms":..,"attester_slashings":..,
//    "proposer_slashings":..,"slashings":[..]}        ... one line per batch ...
//   {"kind":"end","batches":N,"elapsed_s":S,"peak_rss_bytes":R}
// where `slashings` lists every slashing found as `A` (attester) or `P` (proposer) followed by
// its SSZ bytes in hex, sorted; REV is the Lighthouse commit the script built
// (BUTTER_LIGHTHOUSE_REV at build time) and R the process's VmHWM.
//
// The fixture format is the project's (slasher-bench/src/fixtures/file/format.rs): a 32-byte header,
// a JSON manifest (skipped here), then per batch a 16-byte record header and a zlib payload
// holding SSZ `SignedBeaconBlockHeader`s and `IndexedAttestation`s. Record CRCs are
// checked; the manifest's whole-file digest is left to `slasher-bench inspect`.

use flate2::read::ZlibDecoder;
use slasher::{Config, DatabaseBackend, Slasher};
use ssz::{Decode, Encode};
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use types::{
    ChainSpec, Epoch, IndexedAttestation, IndexedAttestationBase, IndexedAttestationElectra,
    MainnetEthSpec,
    SignedBeaconBlockHeader,
};

type E = MainnetEthSpec;
type Res<T> = Result<T, String>;

struct Batch {
    index: u64,
    slot: u64,
    current_epoch: u64,
    headers: Vec<SignedBeaconBlockHeader>,
    attestations: Vec<IndexedAttestation<E>>,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

struct FixtureReader {
    file: BufReader<File>,
}

impl FixtureReader {
    fn open(path: &str) -> Res<Self> {
        let mut file = BufReader::new(File::open(path).map_err(|e| format!("{path}: {e}"))?);
        let mut header = [0u8; 32];
        file.read_exact(&mut header)
            .map_err(|e| format!("{path}: header: {e}"))?;
        if &header[0..8] != b"SLSHFIX\0" || u32_at(&header, 8) != 1 {
            return Err(format!("{path}: not a version-1 slasher-bench fixture"));
        }
        let manifest_len = u64_at(&header, 16);
        std::io::copy(&mut (&mut file).take(manifest_len), &mut std::io::sink())
            .map_err(|e| format!("{path}: manifest: {e}"))?;
        Ok(Self { file })
    }

    fn next(&mut self) -> Res<Option<Batch>> {
        let mut rec = [0u8; 16];
        match self.file.read_exact(&mut rec) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(format!("record header: {e}")),
        }
        if &rec[0..4] != b"BTCH" {
            return Err("bad record magic".into());
        }
        let (len, raw_len) = (u32_at(&rec, 4) as usize, u32_at(&rec, 8) as usize);
        let mut compressed = vec![0u8; len];
        self.file
            .read_exact(&mut compressed)
            .map_err(|e| format!("record: {e}"))?;
        let mut crc = flate2::Crc::new();
        crc.update(&rec[0..12]);
        crc.update(&compressed);
        if crc.sum() != u32_at(&rec, 12) {
            return Err("record CRC mismatch".into());
        }
        let mut p = Vec::with_capacity(raw_len);
        ZlibDecoder::new(&compressed[..])
            .read_to_end(&mut p)
            .map_err(|e| format!("record payload: {e}"))?;
        if p.len() != raw_len || p.len() < 32 {
            return Err("record payload has the wrong length".into());
        }
        let (n_headers, n_atts) = (u32_at(&p, 24) as usize, u32_at(&p, 28) as usize);
        let mut at = 32;
        let mut headers = Vec::with_capacity(n_headers);
        for _ in 0..n_headers {
            let bytes = p.get(at..at + 208).ok_or("truncated header")?;
            headers.push(
                SignedBeaconBlockHeader::from_ssz_bytes(bytes).map_err(|e| format!("{e:?}"))?,
            );
            at += 208;
        }
        let mut attestations = Vec::with_capacity(n_atts);
        for _ in 0..n_atts {
            let n = u32_at(p.get(at..at + 4).ok_or("truncated length")?, 0) as usize;
            let bytes = p.get(at + 4..at + 4 + n).ok_or("truncated attestation")?;
            // The fixture's bytes are the same in both forms (SSZ does not encode a list's
            // limit): phase0's form while the indices fit its limit (2,048), else Electra's
            // (131,072), as an Electra aggregate over a whole slot needs. Lighthouse's slasher
            // hashes both in Electra form, so the choice changes no stored byte.
            let att = match IndexedAttestationBase::<E>::from_ssz_bytes(bytes) {
                Ok(base) => IndexedAttestation::Base(base),
                Err(_) => IndexedAttestation::Electra(
                    IndexedAttestationElectra::<E>::from_ssz_bytes(bytes)
                        .map_err(|e| format!("{e:?}"))?,
                ),
            };
            attestations.push(att);
            at += 4 + n;
        }
        Ok(Some(Batch {
            index: u64_at(&p, 0),
            slot: u64_at(&p, 8),
            current_epoch: u64_at(&p, 16),
            headers,
            attestations,
        }))
    }
}

fn run(args: &[String]) -> Res<()> {
    let [fixture, db_dir, out, backend, batches, history, chunk, validator_chunk] = args else {
        return Err(
            "usage: butter_replay FIXTURE DB_DIR OUT_JSONL BACKEND BATCHES HISTORY \
                    CHUNK VALIDATOR_CHUNK"
                .into(),
        );
    };
    let number = |s: &String| s.parse::<usize>().map_err(|e| format!("{s}: {e}"));
    let mut config = Config::new(PathBuf::from(db_dir));
    config.backend = backend
        .parse::<DatabaseBackend>()
        .map_err(|_| format!("backend {backend:?} is not compiled in"))?;
    let (history, chunk, validator_chunk) =
        (number(history)?, number(chunk)?, number(validator_chunk)?);
    config.history_length = history;
    config.chunk_size = chunk;
    config.validator_chunk_size = validator_chunk;
    let limit = number(batches)?;

    // Mainnet's Electra fork epoch (May 2025). Lighthouse releases before Electra was
    // scheduled (stable 5.3) leave it unset, and their slasher then reads every stored
    // attestation back in phase0's form, whose 2,048-index limit an Electra aggregate exceeds.
    let mut spec = ChainSpec::mainnet();
    spec.electra_fork_epoch = spec.electra_fork_epoch.or(Some(Epoch::new(364_032)));
    let spec = Arc::new(spec);
    let slasher = Slasher::<E>::open(config, spec, logging::test_logger())
        .map_err(|e| format!("opening the slasher: {e:?}"))?;
    let mut reader = FixtureReader::open(fixture)?;
    let mut rows = BufWriter::new(File::create(out).map_err(|e| format!("{out}: {e}"))?);
    let mut write_row = |row: serde_json::Value| {
        writeln!(rows, "{row}").map_err(|e| format!("{out}: {e}"))
    };
    write_row(serde_json::json!({
        "kind": "settings",
        "lighthouse": option_env!("BUTTER_LIGHTHOUSE_REV").unwrap_or("unknown"),
        "backend": backend,
        "history": history,
        "chunk": chunk,
        "validator_chunk": validator_chunk,
        "batches": limit,
    }))?;
    let loop_start = Instant::now();
    let mut done = 0;
    while done < limit {
        let Some(batch) = reader.next()? else { break };
        let (headers, attestations) = (batch.headers.len(), batch.attestations.len());
        for header in batch.headers {
            slasher.accept_block_header(header);
        }
        for attestation in batch.attestations {
            slasher.accept_attestation(attestation);
        }
        let epoch = Epoch::new(batch.current_epoch);
        let t = Instant::now();
        slasher
            .process_queued(epoch)
            .map_err(|e| format!("process_queued of batch {}: {e:?}", batch.index))?;
        let process_ms = t.elapsed().as_secs_f64() * 1000.0;
        let t_prune = Instant::now();
        slasher
            .prune_database(epoch)
            .map_err(|e| format!("prune_database of batch {}: {e:?}", batch.index))?;
        let prune_ms = t_prune.elapsed().as_secs_f64() * 1000.0;
        let wall_ms = t.elapsed().as_secs_f64() * 1000.0;
        let attester = slasher.get_attester_slashings();
        let proposer = slasher.get_proposer_slashings();
        let hex = |tag: char, bytes: Vec<u8>| {
            let mut s = String::with_capacity(1 + 2 * bytes.len());
            s.push(tag);
            for b in bytes {
                s.push_str(&format!("{b:02x}"));
            }
            s
        };
        let mut found: Vec<String> = attester
            .iter()
            .map(|s| hex('A', s.as_ssz_bytes()))
            .chain(proposer.iter().map(|s| hex('P', s.as_ssz_bytes())))
            .collect();
        found.sort();
        write_row(serde_json::json!({
            "kind": "batch",
            "index": batch.index,
            "slot": batch.slot,
            "current_epoch": batch.current_epoch,
            "headers": headers,
            "attestations": attestations,
            "wall_ms": wall_ms,
            "process_ms": process_ms,
            "prune_ms": prune_ms,
            "attester_slashings": attester.len(),
            "proposer_slashings": proposer.len(),
            "slashings": found,
        }))?;
        done += 1;
        eprintln!(
            "batch {} (epoch {}): {wall_ms:.1} ms",
            batch.index, batch.current_epoch
        );
    }
    write_row(serde_json::json!({
        "kind": "end",
        "batches": done,
        "elapsed_s": loop_start.elapsed().as_secs_f64(),
        "peak_rss_bytes": peak_rss_bytes().unwrap_or(0),
    }))?;
    drop(write_row);
    rows.flush().map_err(|e| e.to_string())?;
    eprintln!("{done} batches replayed through Lighthouse's slasher ({backend}); rows: {out}");
    Ok(())
}

/// `VmHWM` of this process, bytes.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = run(&args) {
        eprintln!("butter_replay: {e}");
        std::process::exit(1);
    }
}
