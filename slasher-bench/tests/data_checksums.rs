//! The mainnet sample committed in `data/mainnet-merge-2022` is byte for byte the one its
//! `SHA256SUMS` lists: every listed file exists and hashes to its line, and no file is there that
//! the list does not name (`PROVENANCE.md` and `SHA256SUMS` itself aside). A second test runs the
//! same check on a scratch directory to show that a changed, a missing and an extra file are
//! each caught.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const SAMPLE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../data/mainnet-merge-2022");

/// Files in the sample directory that the checksum list does not cover.
const UNLISTED: [&str; 2] = ["SHA256SUMS", "PROVENANCE.md"];

/// Parse `sha256sum` output: `<64 lowercase hex>  <relative path>` per line, paths unique,
/// relative and without `..`. Panics on anything else, naming the line.
fn parse_sums(text: &str) -> BTreeMap<String, String> {
    let mut sums = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let (hash, path) = line
            .split_once("  ")
            .unwrap_or_else(|| panic!("SHA256SUMS line {}: no two-space separator", n + 1));
        assert!(
            hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
            "SHA256SUMS line {}: bad hash {hash:?}",
            n + 1
        );
        assert!(
            !path.is_empty()
                && !path.starts_with('/')
                && path.split('/').all(|part| part != ".." && part != "."),
            "SHA256SUMS line {}: path {path:?} is not a plain relative path",
            n + 1
        );
        let previous = sums.insert(path.to_string(), hash.to_string());
        assert!(previous.is_none(), "SHA256SUMS lists {path} twice");
    }
    sums
}

/// Every regular file under `dir`, as paths relative to it with `/` separators.
fn files_under(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).unwrap();
                out.push(rel.to_str().expect("UTF-8 file name").replace('\\', "/"));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Check `dir` against the `SHA256SUMS` in it; one line per problem, empty when all is well.
fn problems(dir: &Path) -> Vec<String> {
    let sums = parse_sums(&std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap());
    let on_disk: Vec<String> = files_under(dir)
        .into_iter()
        .filter(|f| !UNLISTED.contains(&f.as_str()))
        .collect();
    let mut out = Vec::new();
    for file in &on_disk {
        match sums.get(file) {
            None => out.push(format!("extra file, not in SHA256SUMS: {file}")),
            Some(want) => {
                let got = hex::encode(Sha256::digest(std::fs::read(dir.join(file)).unwrap()));
                if &got != want {
                    out.push(format!("{file}: SHA-256 {got}, SHA256SUMS says {want}"));
                }
            }
        }
    }
    for file in sums.keys() {
        if on_disk.binary_search(file).is_err() {
            out.push(format!("missing file, listed in SHA256SUMS: {file}"));
        }
    }
    out
}

#[test]
fn committed_sample_matches_sha256sums() {
    let dir = PathBuf::from(SAMPLE_DIR);
    let found = problems(&dir);
    assert!(
        found.is_empty(),
        "{} problem(s):\n{}",
        found.len(),
        found.join("\n")
    );

    // The list covers the whole window: one attestations file and one headers file per slot
    // 4,699,968..=4,700,991, missed slots included (their files hold `null`).
    let sums = parse_sums(&std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap());
    let mut expected: Vec<String> = ["attestations", "headers"]
        .iter()
        .flat_map(|kind| (4_699_968u64..=4_700_991).map(move |s| format!("{kind}/{s}.json.gz")))
        .collect();
    expected.sort();
    assert_eq!(sums.keys().cloned().collect::<Vec<_>>(), expected);
}

#[test]
fn a_changed_missing_or_extra_file_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("headers")).unwrap();
    let files = [
        ("headers/1.json.gz", &b"one"[..]),
        ("headers/2.json.gz", b"two"),
    ];
    let mut sums = String::new();
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
        sums.push_str(&format!("{}  {name}\n", hex::encode(Sha256::digest(bytes))));
    }
    std::fs::write(dir.join("SHA256SUMS"), sums).unwrap();
    std::fs::write(dir.join("PROVENANCE.md"), "not listed, not checked").unwrap();
    assert_eq!(problems(dir), Vec::<String>::new());

    std::fs::write(dir.join("headers/1.json.gz"), b"One").unwrap();
    let found = problems(dir);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("headers/1.json.gz: SHA-256 "),
        "{found:?}"
    );

    std::fs::write(dir.join("headers/1.json.gz"), b"one").unwrap();
    std::fs::remove_file(dir.join("headers/2.json.gz")).unwrap();
    std::fs::write(dir.join("headers/3.json.gz"), b"three").unwrap();
    assert_eq!(
        problems(dir),
        vec![
            "extra file, not in SHA256SUMS: headers/3.json.gz".to_string(),
            "missing file, listed in SHA256SUMS: headers/2.json.gz".to_string(),
        ]
    );
}
