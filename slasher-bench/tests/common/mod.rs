//! Helpers shared by the tests that run the built `slasher-bench` binary.

use std::path::Path;
use std::process::{Command, Output};

/// `slasher-bench ARGS`, its output echoed on stderr (shown when the test fails).
pub fn run(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_slasher-bench"))
        .args(args)
        .output()
        .expect("runs slasher-bench");
    eprintln!(
        "$ slasher-bench {}\n--- stdout\n{}--- stderr\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A path as a command-line argument.
pub fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}
