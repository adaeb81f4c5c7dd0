//! One Beacon API attestations or headers document (gzipped or not) into records:
//! `beacon_api::parse_response`, each attestation's bitlist into attesting indices (its
//! committee taken as `0..bits`) and an `IndexedAttestation`, the header into its SSZ type.
#![no_main]

use libfuzzer_sys::fuzz_target;
use slasher_adapters::slasher::types::IndexedAttestation;
use slasher_bench::fixtures::beacon_api::{
    self, ApiAttestation, AttestationsResponse, HeaderResponse,
};
use ssz::Encode;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("<fuzz>/0.json");
    if let Ok(Some(doc)) =
        beacon_api::parse_response::<AttestationsResponse<ApiAttestation>>(data, path)
    {
        for att in doc.data.unwrap_or_default() {
            let Some(bits) = beacon_api::bitlist_len(&att.aggregation_bits) else {
                continue;
            };
            let members: Vec<u64> = (0..bits)
                .filter(|&i| beacon_api::bit(&att.aggregation_bits, i))
                .map(|i| i as u64)
                .collect();
            if let Ok(a) = IndexedAttestation::new(members, att.data.to_data(), att.signature) {
                let _ = a.as_ssz_bytes();
            }
        }
    }
    if let Ok(Some(doc)) = beacon_api::parse_response::<HeaderResponse>(data, path) {
        if let Some(h) = doc.data {
            assert_eq!(h.header.to_header().as_ssz_bytes().len(), 208);
        }
    }
});
