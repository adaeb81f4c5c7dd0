//! The slasher settings a replay runs with (Lighthouse's by default) and their validation.

use slasher_adapters::slasher::TileCodecKind;

/// Slot duration on mainnet, seconds: one fixture batch per slot.
pub(crate) const SECONDS_PER_SLOT: u64 = 12;

/// The settings a Lighthouse operator gives the slasher (`--slasher-*` flags, same names
/// without the prefix, same units and defaults). The geometry (C, K, H) defaults to the
/// fixture's config hint, which is Lighthouse's default unless the fixture says otherwise.
#[derive(Debug, Clone, clap::Args)]
pub struct SlasherSettings {
    /// Epochs of history kept (Lighthouse `--slasher-history-length`, default 4096; default
    /// here: the fixture's hint).
    #[arg(long)]
    pub history_length: Option<usize>,
    /// Epochs per tile of the target arrays (`--slasher-chunk-size`, 16).
    #[arg(long)]
    pub chunk_size: Option<usize>,
    /// Validators per tile (`--slasher-validator-chunk-size`, 256).
    #[arg(long)]
    pub validator_chunk_size: Option<usize>,
    /// LMDB map size / MDBX size limit in GiB (`--slasher-max-db-size`, 512).
    #[arg(long, default_value_t = 512)]
    pub max_db_size: usize,
    /// Entries of the attestation-root LRU (`--slasher-att-cache-size`, 100,000).
    #[arg(long, default_value_t = 100_000)]
    pub att_cache_size: usize,
    /// Seconds between two batches (`--slasher-update-period`, 12): a multiple of the 12-second
    /// slot; every batch processes the slots since the previous one.
    #[arg(long, default_value_t = SECONDS_PER_SLOT)]
    pub update_period: u64,
    /// How tiles are compressed: `lighthouse` (zlib level 6, as Lighthouse) or `fast`
    /// (libdeflate level 1).
    #[arg(long, default_value = "lighthouse", value_parser = parse_tile_codec)]
    pub tile_codec: TileCodecKind,
}

impl Default for SlasherSettings {
    fn default() -> Self {
        Self {
            history_length: None,
            chunk_size: None,
            validator_chunk_size: None,
            max_db_size: 512,
            att_cache_size: 100_000,
            update_period: SECONDS_PER_SLOT,
            tile_codec: TileCodecKind::Lighthouse,
        }
    }
}

pub(super) fn parse_tile_codec(name: &str) -> Result<TileCodecKind, String> {
    TileCodecKind::from_name(name)
        .ok_or_else(|| format!("unknown tile codec {name:?}; expected `lighthouse` or `fast`"))
}

impl SlasherSettings {
    /// Fixture batches (slots) per slasher batch.
    pub(super) fn slots_per_batch(&self) -> u64 {
        self.update_period / SECONDS_PER_SLOT
    }

    /// The same settings as command-line arguments, for the child process.
    pub(super) fn to_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (flag, value) in [
            ("--history-length", self.history_length),
            ("--chunk-size", self.chunk_size),
            ("--validator-chunk-size", self.validator_chunk_size),
        ] {
            if let Some(v) = value {
                out.extend([flag.to_string(), v.to_string()]);
            }
        }
        out.extend([
            "--max-db-size".into(),
            self.max_db_size.to_string(),
            "--att-cache-size".into(),
            self.att_cache_size.to_string(),
            "--update-period".into(),
            self.update_period.to_string(),
            "--tile-codec".into(),
            self.tile_codec.name().into(),
        ]);
        out
    }
}
