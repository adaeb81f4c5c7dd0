//! `FixtureReader::open` on the input as a fixture file, then every batch.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

/// One scratch file per fuzzing process (the fixture reader takes a file).
fn scratch() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        dir.join(format!("slasher-fuzz-{}.fixture", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    if std::fs::write(scratch(), data).is_err() {
        return;
    }
    if let Ok(reader) = slasher_bench::fixtures::file::FixtureReader::open(scratch()) {
        for batch in reader {
            if batch.is_err() {
                break;
            }
        }
    }
});
