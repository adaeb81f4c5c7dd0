//! `Segment::open` on the input as a segment file, then every entry read back.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

/// One scratch file per fuzzing process (the segment reader takes a file).
fn scratch() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        dir.join(format!("butter-fuzz-segment-{}.seg", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let entries = butter_db::fuzzing::footer_entry_count(data).unwrap_or(0);
    let _ = butter_db::fuzzing::read_segment(data, scratch(), entries);
});
