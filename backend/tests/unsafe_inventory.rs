//! UNSAFE.md is the inventory of every `unsafe` block in the engine. This test reads
//! `backend/src/sys.rs` (the only module allowed `unsafe`) and fails if a block lacks a
//! `// SAFETY:` comment right above it, if the function holding it has no row in UNSAFE.md, or
//! if UNSAFE.md lists a site that no longer holds an `unsafe` block.

use std::collections::BTreeSet;
use std::path::Path;

/// The functions of `source` that contain an `unsafe {` block, each with the line of the block
/// and whether a `// SAFETY:` comment precedes it (within the comment lines directly above,
/// above the statement's first line).
fn unsafe_sites(source: &str) -> Vec<(String, usize, bool)> {
    let lines: Vec<&str> = source.lines().collect();
    let mut current_fn: Option<String> = None;
    let mut sites = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        if let Some(rest) = code
            .strip_prefix("pub fn ")
            .or_else(|| code.strip_prefix("fn "))
            .or_else(|| code.strip_prefix("pub(crate) fn "))
        {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            current_fn = Some(name);
        }
        if code.contains("unsafe {") {
            let mut documented = false;
            // A statement rustfmt broke after `=` starts on an earlier line.
            let mut j = i;
            while j > 0 && lines[j - 1].trim_end().ends_with('=') {
                j -= 1;
            }
            while j > 0 {
                j -= 1;
                let above = lines[j].trim_start();
                if !above.starts_with("//") {
                    break;
                }
                if above.starts_with("// SAFETY:") {
                    documented = true;
                    break;
                }
            }
            let name = current_fn
                .clone()
                .unwrap_or_else(|| format!("<no function before line {}>", i + 1));
            sites.push((name, i + 1, documented));
        }
    }
    sites
}

/// The names in backticks in the first column of UNSAFE.md's table of sites.
fn listed_sites(inventory: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for row in inventory.lines().filter(|l| l.starts_with("| `")) {
        let first_cell = row.split('|').nth(1).unwrap_or("");
        for (k, part) in first_cell.split('`').enumerate() {
            if k % 2 == 1 {
                names.insert(part.to_string());
            }
        }
    }
    names
}

#[test]
fn every_unsafe_block_is_documented_and_listed() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sys = std::fs::read_to_string(root.join("src/sys.rs")).expect("read backend/src/sys.rs");
    let inventory =
        std::fs::read_to_string(root.join("../UNSAFE.md")).expect("read UNSAFE.md at the root");
    let sites = unsafe_sites(&sys);
    assert!(
        sites.len() >= 10,
        "expected the ioctl module's unsafe blocks, found {}: is the scan broken?",
        sites.len()
    );
    let listed = listed_sites(&inventory);
    let mut problems = Vec::new();
    for (name, line, documented) in &sites {
        if !documented {
            problems.push(format!(
                "sys.rs:{line} in `{name}`: no `// SAFETY:` comment above"
            ));
        }
        if !listed.contains(name) {
            problems.push(format!("sys.rs:{line}: `{name}` has no row in UNSAFE.md"));
        }
    }
    let holding: BTreeSet<&str> = sites.iter().map(|(n, _, _)| n.as_str()).collect();
    for name in &listed {
        if !holding.contains(name.as_str()) {
            problems.push(format!(
                "UNSAFE.md lists `{name}`, which holds no unsafe block"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_scan_catches_an_undocumented_unlisted_block() {
    let source = "pub fn listed() {\n    // SAFETY: fine.\n    unsafe { a() };\n}\n\
                  pub fn hidden() {\n    // a comment, not a reason\n    unsafe { b() };\n}\n";
    let sites = unsafe_sites(source);
    assert_eq!(
        sites,
        vec![
            ("listed".to_string(), 3, true),
            ("hidden".to_string(), 7, false)
        ]
    );
    let listed = listed_sites("| Site | Call |\n|---|---|\n| `listed` | x |\n");
    assert!(listed.contains("listed") && !listed.contains("hidden"));
}
