//! Tells the binary which cargo profile built it (`release`, `maxperf`, `dev`'s `debug`): the
//! directory cargo builds it in, three levels above `OUT_DIR`
//! (`<target>/<profile>/build/<package>-<hash>/out`). The report's build line shows it, so that
//! runs of differently optimised binaries are not compared unawares.
fn main() {
    let out_dir = std::env::var("OUT_DIR").unwrap_or_default();
    let profile = std::path::Path::new(&out_dir)
        .ancestors()
        .nth(3)
        .and_then(|dir| dir.file_name())
        .and_then(|name| name.to_str())
        .unwrap_or("unknown")
        .to_string();
    println!("cargo:rustc-env=SLASHER_BENCH_CARGO_PROFILE={profile}");
    println!("cargo:rerun-if-changed=build.rs");
}
