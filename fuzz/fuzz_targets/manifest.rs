//! `Manifest::decode` (and, for a manifest it accepts, encoding back to the same bytes).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = butter_db::fuzzing::decode_manifest(data);
});
