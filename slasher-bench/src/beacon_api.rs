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

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use slasher_adapters::slasher::types::{
    AttestationData, BeaconBlockHeader, Checkpoint, Hash256, SignedBeaconBlockHeader,
};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Why a response file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiFileError {
    /// I/O.
    #[error("read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// Not the JSON expected.
    #[error("{}: invalid response JSON: {source}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: serde_json::Error,
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

/// A phase0 `Attestation` as served in a block (`aggregation_bits` is an SSZ bitlist with its
/// length bit).
#[derive(Debug, Clone, Deserialize)]
pub struct ApiAttestation {
    /// The bitlist bytes.
    #[serde(deserialize_with = "hex_bytes")]
    pub aggregation_bits: Vec<u8>,
    /// The data.
    pub data: ApiAttestationData,
    /// The aggregate signature.
    #[serde(deserialize_with = "hex_fixed")]
    pub signature: [u8; 96],
}

/// Only the fields of an attestation needed to infer committee sizes.
#[derive(Debug, Clone, Deserialize)]
pub struct ApiAttestationShape {
    /// The bitlist bytes.
    #[serde(deserialize_with = "hex_bytes")]
    pub aggregation_bits: Vec<u8>,
    /// The data (slot and index are used).
    pub data: ApiSlotIndex,
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

/// The keys (slots or epochs) of the response files in `dir`, ascending.
///
/// # Errors
/// The directory cannot be listed.
pub fn list_keys(dir: &Path) -> Result<Vec<u64>, ApiFileError> {
    let io = |source| ApiFileError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut keys = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let name = entry.map_err(io)?.file_name();
        let name = name.to_string_lossy();
        let stem = name
            .strip_suffix(".json.gz")
            .or_else(|| name.strip_suffix(".json"));
        if let Some(key) = stem.and_then(|s| s.parse::<u64>().ok()) {
            keys.push(key);
        }
    }
    keys.sort_unstable();
    keys.dedup();
    Ok(keys)
}

/// Read a response body from a file, gunzipping it if it starts with the gzip magic.
///
/// # Errors
/// I/O or gzip errors.
pub fn read_body(path: &Path) -> Result<Vec<u8>, ApiFileError> {
    let io = |source| ApiFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let raw = std::fs::read(path).map_err(io)?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::with_capacity(raw.len() * 8);
        flate2::read::MultiGzDecoder::new(raw.as_slice())
            .read_to_end(&mut out)
            .map_err(io)?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// Parse a response file; a top-level `null` gives `None`.
///
/// # Errors
/// I/O, gzip or JSON errors.
pub fn read_response<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, ApiFileError> {
    let body = read_body(path)?;
    serde_json::from_slice::<Option<T>>(&body).map_err(|source| ApiFileError::Json {
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
