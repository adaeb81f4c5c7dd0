//! The source checks `scripts/test.sh` runs, on small crates written here:
//! `scripts/import_cycles.py`, that no two source files import from each other (a circle
//! written as a path in the code or a type, not a `use` line, fails it; the same files without
//! that path pass; a directory that does not exist is an error rather than a crate without
//! circles), and `scripts/long_fns.py --over N`, the gate on the length of the engine's, the
//! bench's and the tools' functions (one tree or several in one call).
//!
//! Needs python3; without it the tests skip outside CI and fail under `CI=true`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/import_cycles.py")
}

/// A fresh `src/` for `test` holding `files` (path, text), or `None` after a skip when python3
/// is missing.
fn crate_src(test: &str, files: &[(&str, &str)]) -> Option<PathBuf> {
    if Command::new("python3").arg("--version").output().is_err() {
        butter_test_support::skip(test, "python3 not found");
        return None;
    }
    let src = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("import_check")
        .join(test)
        .join("src");
    let _ = fs::remove_dir_all(&src);
    for (path, text) in files {
        let path = src.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    Some(src)
}

fn check(src: &Path) -> Output {
    Command::new("python3")
        .arg(script())
        .arg(src)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const LIB: &str = "mod env;\nmod cache;\nmod segment;\n";
/// The folder's mod.rs names its child's constant by a path in the code, and the child takes a
/// type from mod.rs in a signature: no `use` line joins them.
const ENV_MOD: &str = "mod policy;\n\npub struct Env {\n    bytes: u64,\n}\n\n\
                       pub fn new() -> Env {\n    Env { bytes: policy::PARTITION_BYTES }\n}\n";
const POLICY_CIRCLE: &str = "pub const PARTITION_BYTES: u64 = 64 << 20;\n\n\
                             pub fn plan(env: &super::Env) -> u64 {\n    let _ = env;\n    1\n}\n";
const POLICY_ALONE: &str = "pub const PARTITION_BYTES: u64 = 64 << 20;\n";
/// Two sibling files that name each other through `crate::` paths in types and calls.
const CACHE: &str = "pub struct Cache(Vec<crate::segment::block::Block>);\n";
const SEGMENT_MOD: &str = "pub mod block;\n";
const BLOCK: &str = "pub struct Block;\n\nfn cached(c: &crate::cache::Cache) -> usize {\n    \
                     let _ = c;\n    0\n}\n";
const BLOCK_ALONE: &str = "pub struct Block;\n";

#[test]
fn a_circle_written_as_a_path_in_code_fails_the_check() {
    let test = "a_circle_written_as_a_path_in_code_fails_the_check";
    let Some(src) = crate_src(
        test,
        &[
            ("lib.rs", LIB),
            ("env/mod.rs", ENV_MOD),
            ("env/policy.rs", POLICY_CIRCLE),
            ("cache.rs", CACHE),
            ("segment/mod.rs", SEGMENT_MOD),
            ("segment/block.rs", BLOCK),
        ],
    ) else {
        return;
    };
    let out = check(&src);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("env/mod.rs <-> env/policy.rs"),
        "the circle through policy::PARTITION_BYTES and super::Env: {said}"
    );
    assert!(said.contains("policy::PARTITION_BYTES"), "{said}");
    assert!(
        said.contains("cache.rs <-> segment/block.rs"),
        "the circle through crate:: paths in types: {said}"
    );
    assert!(said.contains("2 import circle(s)"), "{said}");
}

#[test]
fn the_same_files_without_the_paths_back_pass_the_check() {
    let test = "the_same_files_without_the_paths_back_pass_the_check";
    let Some(src) = crate_src(
        test,
        &[
            ("lib.rs", LIB),
            ("env/mod.rs", ENV_MOD),
            ("env/policy.rs", POLICY_ALONE),
            ("cache.rs", CACHE),
            ("segment/mod.rs", SEGMENT_MOD),
            ("segment/block.rs", BLOCK_ALONE),
        ],
    ) else {
        return;
    };
    let out = check(&src);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("no import circle"), "{said}");
}

#[test]
fn a_directory_that_does_not_exist_is_an_error() {
    let test = "a_directory_that_does_not_exist_is_an_error";
    let Some(src) = crate_src(test, &[]) else {
        return;
    };
    let missing = src.join("not-here");
    let out = check(&missing);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("no such directory"), "{said}");
}

// ---- scripts/long_fns.py --over: the gate on function length --------------------------------

fn long_fns(srcs: &[impl AsRef<std::ffi::OsStr>], over: u32) -> Output {
    Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/long_fns.py"))
        .args(["--over", &over.to_string()])
        .args(srcs)
        .output()
        .unwrap()
}

/// A function of `body` lines between its signature and its closing brace.
fn function_of(body: usize) -> String {
    let mut f = String::from("pub fn long() -> u64 {\n    let mut x = 0;\n");
    for _ in 0..body.saturating_sub(1) {
        f.push_str("    x += 1;\n");
    }
    f.push_str("}\n");
    f
}

#[test]
fn a_function_over_the_limit_fails_the_length_gate_and_one_at_it_passes() {
    // 100 lines from `fn` to its closing brace: the signature, 98 body lines, the brace.
    let Some(src) = crate_src("long_fns_at", &[("lib.rs", &function_of(98))]) else {
        return;
    };
    let out = long_fns(&[&src], 100);
    assert!(out.status.success(), "{}", text(&out));
    let Some(src) = crate_src("long_fns_over", &[("lib.rs", &function_of(99))]) else {
        return;
    };
    let out = long_fns(&[&src], 100);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("lib.rs:1 long"), "{}", text(&out));
    let out = long_fns(&[&src.join("missing")], 100);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn the_length_gate_over_several_trees_fails_for_a_long_function_in_any_of_them() {
    // scripts/test.sh gates backend/src, slasher-bench/src and tools/src in one call.
    let Some(short) = crate_src("long_fns_trees_short", &[("lib.rs", &function_of(98))]) else {
        return;
    };
    let Some(long) = crate_src("long_fns_trees_long", &[("main.rs", &function_of(99))]) else {
        return;
    };
    let out = long_fns(&[&short, &short], 100);
    assert!(out.status.success(), "{}", text(&out));
    let out = long_fns(&[&short, &long], 100);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("main.rs:1 long"), "{}", text(&out));
    assert!(
        text(&out).contains("1 function(s) over 100 lines"),
        "{}",
        text(&out)
    );
}
