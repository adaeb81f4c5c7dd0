//! The standard beacon-node REST API responses the importer reads, as served (decimal-string
//! integers, `0x` hex bytes), and the on-disk layout of a recorded directory.
//!
//! Layout read by `import-beacon-api` and written by `record`:
//!
//! ```text
//! <attestations dir>/<slot>.json[.gz]   GET /eth/v1/beacon/blocks/<slot>/attestations
//! <headers dir>/<slot>.json[.gz]        GET /eth/v1/beacon/headers/<slot>
//! <committees dir>/<epoch>.json[.gz]    GET /eth/v1/beacon/states/<epoch*32>/committees?epoch=<epoch>
//! ```
//!
//! A missed slot's file holds `null` or a body without `data` (the node answered 404).
//!
//! File names are exact ([`list_keys`]): `<N>.json` or `<N>.json.gz`, N in decimal without
//! leading zeros; names starting with `.` are ignored; any other name, or one N both plain and
//! gzipped, is an error. A response may be at most [`MAX_INFLATED_BYTES`] once inflated.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use slasher_adapters::slasher::types::{
    AttestationData, BeaconBlockHeader, Checkpoint, Hash256, SignedBeaconBlockHeader,
};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most bytes one response file may hold once inflated (64 MiB): far above any real
/// response (a mainnet committees response for ~1M validators is ~10 MB), far below what a
/// small gzip can inflate to.
pub const MAX_INFLATED_BYTES: u64 = 64 << 20;

/// The most members a committee has (the consensus spec's `MAX_VALIDATORS_PER_COMMITTEE`), so
/// the most bits a pre-Electra `aggregation_bits` bitlist holds.
pub const MAX_VALIDATORS_PER_COMMITTEE: usize = 2048;

/// Committees per slot at most (`MAX_COMMITTEES_PER_SLOT`): the length of Electra's
/// `committee_bits` bitvector (8 bytes).
pub const MAX_COMMITTEES_PER_SLOT: usize = 64;

/// The most bits an Electra `aggregation_bits` holds: one aggregate may span every committee of
/// its slot (`MAX_VALIDATORS_PER_COMMITTEE × MAX_COMMITTEES_PER_SLOT`).
pub const MAX_ELECTRA_AGGREGATION_BITS: usize =
    MAX_VALIDATORS_PER_COMMITTEE * MAX_COMMITTEES_PER_SLOT;

/// Why a response file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiFileError {
    /// I/O (the cause is the error's `source`).
    #[error("read {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Not the JSON expected (the parser's message is the error's `source`).
    #[error("{}: invalid response JSON", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: serde_json::Error,
    },
    /// The file inflates (or is) larger than the cap.
    #[error(
        "{}: larger than {} MiB once inflated, the cap on one response file; not a beacon API \
         response (or a corrupt or hostile gzip)",
        path.display(),
        limit >> 20
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap in bytes ([`MAX_INFLATED_BYTES`]).
        limit: u64,
    },
    /// Entries of a response directory whose names break the file-name rules.
    #[error(
        "{}: {} file name(s) not of the form <N>.json or <N>.json.gz (N in decimal without \
         leading zeros): {}",
        dir.display(),
        names.len(),
        names.join(", ")
    )]
    BadNames {
        /// The directory.
        dir: PathBuf,
        /// The names that did not match.
        names: Vec<String>,
    },
    /// One key both as `<N>.json` and `<N>.json.gz`.
    #[error(
        "{}: slot/epoch {key} is there twice, as {key}.json and {key}.json.gz; keep one",
        dir.display()
    )]
    Duplicate {
        /// The directory.
        dir: PathBuf,
        /// The slot or epoch.
        key: u64,
    },
}

/// A u64 the API serves as a decimal string (plain JSON numbers are accepted too).
fn quoted_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Str(String),
        Num(u64),
    }
    match Raw::deserialize(d)? {
        Raw::Str(s) => s
            .parse()
            .map_err(|_| D::Error::custom(format!("bad integer {s:?}"))),
        Raw::Num(n) => Ok(n),
    }
}

fn hex_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let s = String::deserialize(d)?;
    let digits = s
        .strip_prefix("0x")
        .ok_or_else(|| D::Error::custom("hex without 0x"))?;
    hex::decode(digits).map_err(|e| D::Error::custom(format!("bad hex: {e}")))
}

/// An `aggregation_bits` bitlist, refused if longer than the fork allows: before Electra it is
/// `Bitlist[MAX_VALIDATORS_PER_COMMITTEE]` (2,048 bits, 257 bytes); from Electra, with
/// `committee_bits`, `Bitlist[MAX_VALIDATORS_PER_COMMITTEE × MAX_COMMITTEES_PER_SLOT]` and at
/// most 2,048 bits per committee it names. A longer bitlist is refused when parsed: the
/// importer infers the active-set size from bitlist lengths, and one long bitlist would make it
/// shuffle billions of validators.
fn check_aggregation_bits(bits: &[u8], committee_bits: Option<&[u8; 8]>) -> Result<(), String> {
    let committees = committee_bits.map(|c| c.iter().map(|b| b.count_ones() as usize).sum());
    let cap = match committees {
        None => MAX_VALIDATORS_PER_COMMITTEE,
        Some(0) => return Err("committee_bits names no committee".into()),
        Some(n) => MAX_VALIDATORS_PER_COMMITTEE * n,
    };
    if bits.len() > cap / 8 + 1 || bitlist_len(bits).is_some_and(|n| n > cap) {
        return Err(format!(
            "aggregation_bits of {} bytes holds more than {cap} bits{}",
            bits.len(),
            committees.map_or_else(String::new, |n| format!(
                " ({MAX_VALIDATORS_PER_COMMITTEE} for each of the {n} committees in \
                 committee_bits)"
            ))
        ));
    }
    Ok(())
}

/// Hex bytes of at most an Electra aggregate's length, so that an absurd value is refused
/// before it is held twice.
fn bitlist_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    let s = String::deserialize(d)?;
    if s.len() > 2 + 2 * (MAX_ELECTRA_AGGREGATION_BITS / 8 + 1) {
        return Err(D::Error::custom(format!(
            "aggregation_bits of {} hex digits holds more than {MAX_ELECTRA_AGGREGATION_BITS} bits",
            s.len().saturating_sub(2)
        )));
    }
    let digits = s
        .strip_prefix("0x")
        .ok_or_else(|| D::Error::custom("hex without 0x"))?;
    hex::decode(digits).map_err(|e| D::Error::custom(format!("bad hex: {e}")))
}

fn committee_bits<'de, D: Deserializer<'de>>(d: D) -> Result<Option<[u8; 8]>, D::Error> {
    hex_fixed::<D, 8>(d).map(Some)
}

/// The committees an Electra `committee_bits` names, ascending.
pub fn committee_indices(committee_bits: &[u8; 8]) -> Vec<u64> {
    (0..MAX_COMMITTEES_PER_SLOT)
        .filter(|&i| bit(committee_bits, i))
        .map(|i| i as u64)
        .collect()
}

fn hex_fixed<'de, D: Deserializer<'de>, const N: usize>(d: D) -> Result<[u8; N], D::Error> {
    let bytes = hex_bytes(d)?;
    let len = bytes.len();
    bytes
        .try_into()
        .map_err(|_| D::Error::custom(format!("expected {N} bytes, got {len}")))
}

fn root<'de, D: Deserializer<'de>>(d: D) -> Result<Hash256, D::Error> {
    Ok(Hash256::from(hex_fixed::<D, 32>(d)?))
}

fn quoted_u64_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
    let raw = Vec::<String>::deserialize(d)?;
    raw.iter()
        .map(|s| {
            s.parse()
                .map_err(|_| D::Error::custom(format!("bad integer {s:?}")))
        })
        .collect()
}

/// `Checkpoint` JSON.
#[derive(Debug, Clone, Deserialize)]
pub struct ApiCheckpoint {
    /// Epoch.
    #[serde(deserialize_with = "quoted_u64")]
    pub epoch: u64,
    /// Root.
    #[serde(deserialize_with = "root")]
    pub root: Hash256,
}

/// `AttestationData` JSON.
#[derive(Debug, Clone, Deserialize)]
pub struct ApiAttestationData {
    /// Slot.
    #[serde(deserialize_with = "quoted_u64")]
    pub slot: u64,
    /// Committee index.
    #[serde(deserialize_with = "quoted_u64")]
    pub index: u64,
    /// Head vote.
    #[serde(deserialize_with = "root")]
    pub beacon_block_root: Hash256,
    /// Source.
    pub source: ApiCheckpoint,
    /// Target.
    pub target: ApiCheckpoint,
}

impl ApiAttestationData {
    /// The SSZ type.
    pub fn to_data(&self) -> AttestationData {
        let cp = |c: &ApiCheckpoint| Checkpoint {
            epoch: c.epoch,
            root: c.root,
        };
        AttestationData {
            slot: self.slot,
            index: self.index,
            beacon_block_root: self.beacon_block_root,
            source: cp(&self.source),
            target: cp(&self.target),
        }
    }
}

/// An `Attestation` as served in a block, of any fork: phase0 to Deneb (one committee,
/// `data.index`) or Electra and later (`committee_bits` names the committees, `data.index` is
/// 0, and `aggregation_bits` covers the named committees one after another). The bitlist
/// keeps its SSZ length bit.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "RawAttestation<ApiAttestationData>")]
pub struct ApiAttestation {
    /// The bitlist bytes (see [`check_aggregation_bits`] for the bound).
    pub aggregation_bits: Vec<u8>,
    /// The data.
    pub data: ApiAttestationData,
    /// The aggregate signature.
    pub signature: [u8; 96],
    /// Electra's `committee_bits`; `None` before Electra.
    pub committee_bits: Option<[u8; 8]>,
}

/// Only the fields of an attestation needed to infer committee sizes.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "RawAttestation<ApiSlotIndex>")]
pub struct ApiAttestationShape {
    /// The bitlist bytes.
    pub aggregation_bits: Vec<u8>,
    /// The data (slot and index are used).
    pub data: ApiSlotIndex,
    /// Electra's `committee_bits`; `None` before Electra.
    pub committee_bits: Option<[u8; 8]>,
}

/// The JSON fields of an attestation, checked by the `TryFrom`s below.
#[derive(Debug, Deserialize)]
struct RawAttestation<D> {
    #[serde(deserialize_with = "bitlist_bytes")]
    aggregation_bits: Vec<u8>,
    data: D,
    #[serde(default, deserialize_with = "hex_signature")]
    signature: Option<[u8; 96]>,
    #[serde(default, deserialize_with = "committee_bits")]
    committee_bits: Option<[u8; 8]>,
}

fn hex_signature<'de, D: Deserializer<'de>>(d: D) -> Result<Option<[u8; 96]>, D::Error> {
    hex_fixed::<D, 96>(d).map(Some)
}

impl TryFrom<RawAttestation<ApiAttestationData>> for ApiAttestation {
    type Error = String;

    fn try_from(raw: RawAttestation<ApiAttestationData>) -> Result<Self, String> {
        check_aggregation_bits(&raw.aggregation_bits, raw.committee_bits.as_ref())?;
        if raw.committee_bits.is_some() && raw.data.index != 0 {
            return Err(format!(
                "an attestation with committee_bits (Electra) has data.index {}, not 0",
                raw.data.index
            ));
        }
        Ok(ApiAttestation {
            aggregation_bits: raw.aggregation_bits,
            data: raw.data,
            signature: raw.signature.ok_or("missing field `signature`")?,
            committee_bits: raw.committee_bits,
        })
    }
}

impl TryFrom<RawAttestation<ApiSlotIndex>> for ApiAttestationShape {
    type Error = String;

    fn try_from(raw: RawAttestation<ApiSlotIndex>) -> Result<Self, String> {
        check_aggregation_bits(&raw.aggregation_bits, raw.committee_bits.as_ref())?;
        Ok(ApiAttestationShape {
            aggregation_bits: raw.aggregation_bits,
            data: raw.data,
            committee_bits: raw.committee_bits,
        })
    }
}

/// `slot` and `index` of an `AttestationData`.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct ApiSlotIndex {
    /// Slot.
    #[serde(deserialize_with = "quoted_u64")]
    pub slot: u64,
    /// Committee index.
    #[serde(deserialize_with = "quoted_u64")]
    pub index: u64,
}

/// `GET /eth/v1/beacon/blocks/<slot>/attestations`.
#[derive(Debug, Clone, Deserialize)]
pub struct AttestationsResponse<A> {
    /// `None` for a missed slot.
    pub data: Option<Vec<A>>,
}

/// `BeaconBlockHeader` JSON.
#[derive(Debug, Clone, Deserialize)]
pub struct ApiHeaderMessage {
    /// Slot.
    #[serde(deserialize_with = "quoted_u64")]
    pub slot: u64,
    /// Proposer.
    #[serde(deserialize_with = "quoted_u64")]
    pub proposer_index: u64,
    /// Parent root.
    #[serde(deserialize_with = "root")]
    pub parent_root: Hash256,
    /// State root.
    #[serde(deserialize_with = "root")]
    pub state_root: Hash256,
    /// Body root.
    #[serde(deserialize_with = "root")]
    pub body_root: Hash256,
}

/// `SignedBeaconBlockHeader` JSON.
#[derive(Debug, Clone, Deserialize)]
pub struct ApiSignedHeader {
    /// The header.
    pub message: ApiHeaderMessage,
    /// Signature.
    #[serde(deserialize_with = "hex_fixed")]
    pub signature: [u8; 96],
}

impl ApiSignedHeader {
    /// The SSZ type.
    pub fn to_header(&self) -> SignedBeaconBlockHeader {
        let m = &self.message;
        SignedBeaconBlockHeader {
            message: BeaconBlockHeader {
                slot: m.slot,
                proposer_index: m.proposer_index,
                parent_root: m.parent_root,
                state_root: m.state_root,
                body_root: m.body_root,
            },
            signature: self.signature,
        }
    }
}

/// `data` of the headers response.
#[derive(Debug, Clone, Deserialize)]
pub struct ApiHeaderData {
    /// The signed header.
    pub header: ApiSignedHeader,
}

/// `GET /eth/v1/beacon/headers/<slot>`.
#[derive(Debug, Clone, Deserialize)]
pub struct HeaderResponse {
    /// `None` for a missed slot.
    pub data: Option<ApiHeaderData>,
}

/// One committee of the committees response.
#[derive(Debug, Clone, Deserialize)]
pub struct ApiCommittee {
    /// Committee index.
    #[serde(deserialize_with = "quoted_u64")]
    pub index: u64,
    /// Slot.
    #[serde(deserialize_with = "quoted_u64")]
    pub slot: u64,
    /// Members in committee order.
    #[serde(deserialize_with = "quoted_u64_list")]
    pub validators: Vec<u64>,
}

/// `GET /eth/v1/beacon/states/<id>/committees?epoch=<e>`.
#[derive(Debug, Clone, Deserialize)]
pub struct CommitteesResponse {
    /// The committees (`None` if the node had none).
    pub data: Option<Vec<ApiCommittee>>,
}

/// The file for `key` (a slot or an epoch) in `dir`: `<key>.json.gz` if present, else
/// `<key>.json`, else `None`.
pub fn response_file(dir: &Path, key: u64) -> Option<PathBuf> {
    let gz = dir.join(format!("{key}.json.gz"));
    if gz.is_file() {
        return Some(gz);
    }
    let plain = dir.join(format!("{key}.json"));
    plain.is_file().then_some(plain)
}

/// The key of a response file name: `<N>.json` or `<N>.json.gz` with N a decimal u64 without
/// leading zeros (`0` itself is allowed). `None` for any other name.
pub fn key_of_name(name: &str) -> Option<u64> {
    let stem = name
        .strip_suffix(".json.gz")
        .or_else(|| name.strip_suffix(".json"))?;
    let canonical = !stem.is_empty()
        && stem.bytes().all(|b| b.is_ascii_digit())
        && (stem == "0" || !stem.starts_with('0'));
    canonical.then(|| stem.parse().ok()).flatten()
}

/// The keys (slots or epochs) of the response files in `dir`, ascending.
///
/// # Errors
/// The directory cannot be listed; [`ApiFileError::BadNames`] if an entry (other than a name
/// starting with `.`) is not named as [`key_of_name`] wants; [`ApiFileError::Duplicate`] if a
/// key is there both as `.json` and `.json.gz`.
pub fn list_keys(dir: &Path) -> Result<Vec<u64>, ApiFileError> {
    let io = |source| ApiFileError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut keys = Vec::new();
    let mut bad = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let name = entry.map_err(io)?.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        match key_of_name(&name) {
            Some(key) => keys.push(key),
            None => bad.push(name.into_owned()),
        }
    }
    if !bad.is_empty() {
        bad.sort();
        return Err(ApiFileError::BadNames {
            dir: dir.to_path_buf(),
            names: bad,
        });
    }
    keys.sort_unstable();
    if let Some(pair) = keys.windows(2).find(|w| w.first() == w.get(1)) {
        return Err(ApiFileError::Duplicate {
            dir: dir.to_path_buf(),
            key: pair.first().copied().unwrap_or_default(),
        });
    }
    Ok(keys)
}

/// Read a response body from a file, gunzipping it if it starts with the gzip magic; at most
/// [`MAX_INFLATED_BYTES`].
///
/// # Errors
/// I/O or gzip errors; [`ApiFileError::TooLarge`] past the cap.
pub fn read_body(path: &Path) -> Result<Vec<u8>, ApiFileError> {
    read_body_limited(path, MAX_INFLATED_BYTES)
}

/// [`read_body`] with a cap of `limit` bytes (of the file, and of its inflated content).
///
/// # Errors
/// As [`read_body`].
pub fn read_body_limited(path: &Path, limit: u64) -> Result<Vec<u8>, ApiFileError> {
    let io = |source| ApiFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let too_large = || ApiFileError::TooLarge {
        path: path.to_path_buf(),
        limit,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut raw = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut raw)
        .map_err(io)?;
    if raw.len() as u64 > limit {
        return Err(too_large());
    }
    if raw.starts_with(&[0x1f, 0x8b]) {
        gunzip_limited(&raw, path, limit)
    } else {
        Ok(raw)
    }
}

/// Inflate the gzip member(s) in `raw`, at most `limit` bytes; `path` names them in errors.
fn gunzip_limited(raw: &[u8], path: &Path, limit: u64) -> Result<Vec<u8>, ApiFileError> {
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(raw)
        .take(limit.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|source| ApiFileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if out.len() as u64 > limit {
        return Err(ApiFileError::TooLarge {
            path: path.to_path_buf(),
            limit,
        });
    }
    Ok(out)
}

/// Parse a response file; a top-level `null` gives `None`.
///
/// # Errors
/// I/O, gzip or JSON errors.
pub fn read_response<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, ApiFileError> {
    let body = read_body(path)?;
    parse_json(&body, path)
}

/// Parse one response document held in memory, as [`read_response`] parses a file's bytes:
/// gunzipped if it starts with the gzip magic, at most [`MAX_INFLATED_BYTES`] (raw and
/// inflated); a top-level `null` gives `None`. `path` only names the document in errors. (The
/// importer reads files; this is the same decoding for callers holding the bytes, such as the
/// fuzz tier.)
///
/// # Errors
/// [`ApiFileError::TooLarge`], gzip errors (as [`ApiFileError::Io`]) and JSON errors.
pub fn parse_response<T: for<'de> Deserialize<'de>>(
    raw: &[u8],
    path: &Path,
) -> Result<Option<T>, ApiFileError> {
    if raw.len() as u64 > MAX_INFLATED_BYTES {
        return Err(ApiFileError::TooLarge {
            path: path.to_path_buf(),
            limit: MAX_INFLATED_BYTES,
        });
    }
    if raw.starts_with(&[0x1f, 0x8b]) {
        parse_json(&gunzip_limited(raw, path, MAX_INFLATED_BYTES)?, path)
    } else {
        parse_json(raw, path)
    }
}

fn parse_json<T: for<'de> Deserialize<'de>>(
    body: &[u8],
    path: &Path,
) -> Result<Option<T>, ApiFileError> {
    serde_json::from_slice::<Option<T>>(body).map_err(|source| ApiFileError::Json {
        path: path.to_path_buf(),
        source,
    })
}

/// Length of an SSZ bitlist (the position of its highest set bit, the length marker), or `None`
/// if the bytes hold no marker or have superfluous trailing bytes.
pub fn bitlist_len(bytes: &[u8]) -> Option<usize> {
    let (&last, rest) = bytes.split_last()?;
    if last == 0 {
        return None;
    }
    Some(rest.len() * 8 + (7 - last.leading_zeros() as usize))
}

/// Whether bit `i` of a bitlist is set.
pub fn bit(bytes: &[u8], i: usize) -> bool {
    bytes.get(i / 8).is_some_and(|b| (b >> (i % 8)) & 1 == 1)
}
