//! `integration/lighthouse/patch.py` on a small synthetic tree shaped like the parts of a
//! Lighthouse checkout its anchors key on (written here, no Lighthouse file): re-runs follow
//! the current options, the anchors key on structure, a moved or hand-edited tree is refused
//! unchanged, and the dependency check names what is missing.
//!
//! Needs python3 and git; without them the tests skip outside CI and fail under `CI=true`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ANY_OLD: &str = r#"any(feature = "mdbx", feature = "lmdb", feature = "redb")"#;

fn patch_py() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../integration/lighthouse/patch.py")
}

fn adapters() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters")
}

/// A fresh, empty directory for one test.
fn work_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("lighthouse_glue")
        .join(test);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether python3 and git run; skips (failing under CI) when they do not.
fn tools(test: &str) -> bool {
    for tool in ["python3", "git"] {
        if Command::new(tool).arg("--version").output().is_err() {
            butter_test_support::skip(test, &format!("{tool} not found"));
            return false;
        }
    }
    true
}

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=glue test",
            "-c",
            "user.email=glue@example.invalid",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A one-commit repository holding `files`; returns its commit.
fn repo(dir: &Path, files: &[&str]) -> String {
    for f in files {
        write(&dir.join(f), "# made by the glue test\n");
    }
    git(dir, &["init", "-q"]);
    git(dir, &["add", "."]);
    git(dir, &["commit", "-qm", "glue test dependency"]);
    git(dir, &["rev-parse", "HEAD"])
}

/// The three dependency checkouts under `deps`: (lmdb-rs, libmdbx-rs, quick-protobuf) commits.
fn deps(deps: &Path) -> [String; 3] {
    [
        repo(
            &deps.join("lmdb-rs"),
            &[
                "Cargo.toml",
                "lmdb-sys/Cargo.toml",
                "lmdb-sys/lmdb/libraries/liblmdb/mdb.c",
            ],
        ),
        repo(&deps.join("libmdbx-rs"), &["Cargo.toml"]),
        repo(&deps.join("quick-protobuf"), &["quick-protobuf/Cargo.toml"]),
    ]
}

/// The synthetic tree: the tables, keys and lines the anchors look for, with `redb` at
/// `redb_version` and the git dependencies pinned at `revs`.
fn tree(root: &Path, redb_version: &str, revs: &[String; 3]) {
    let [lmdb, mdbx, protobuf] = revs;
    write(
        &root.join("Cargo.toml"),
        &format!(
            "[workspace]\nmembers = [\"slasher\", \"lighthouse\"]\n\n[patch.crates-io]\n\
             quick-protobuf = {{ git = \"https://github.com/sigp/quick-protobuf.git\", rev = \"{protobuf}\" }}\n"
        ),
    );
    write(
        &root.join("slasher/Cargo.toml"),
        &format!(
            "[package]\nname = \"slasher\"\n\n[features]\ndefault = [\"lmdb\"]\n\
             mdbx = [\"dep:mdbx\"]\nredb = [\"dep:redb\"]\n\n[dependencies]\n\
             mdbx = {{ package = \"libmdbx\", git = \"https://github.com/sigp/libmdbx-rs\", rev = \"{mdbx}\", optional = true }}\n\
             lmdb-rkv = {{ git = \"https://github.com/sigp/lmdb-rs\", rev = \"{lmdb}\", optional = true }}\n\
             lmdb-rkv-sys = {{ git = \"https://github.com/sigp/lmdb-rs\", rev = \"{lmdb}\", optional = true }}\n\
             redb = {{ version = \"{redb_version}\", optional = true }}\n\n[dev-dependencies]\n"
        ),
    );
    write(
        &root.join("lighthouse/Cargo.toml"),
        "[features]\nslasher-redb = [\"slasher/redb\"]\n",
    );
    malloc_utils(root, JEMALLOC_CTL_STABLE);
    write(
        &root.join("slasher/src/database.rs"),
        "mod lmdb_impl;\nmod redb_impl;\n",
    );
    let twins: String = (0..20)
        .map(|i| format!("    #[cfg(feature = \"redb\")]\n    Redb(redb_impl::Item{i}),\n"))
        .collect();
    write(
        &root.join("slasher/src/database/interface.rs"),
        &format!("enum Items {{\n{twins}}}\n"),
    );
    write(
        &root.join("slasher/src/config.rs"),
        &format!(
            "enum DatabaseBackend {{\n    #[cfg(feature = \"redb\")]\n    Redb,\n}}\n\
             #[cfg(not({ANY_OLD}))]\npub const DEFAULT_BACKEND: DatabaseBackend = DatabaseBackend::Disabled;\n"
        ),
    );
    write(
        &root.join("slasher/src/error.rs"),
        "enum Error {\n    #[cfg(feature = \"redb\")]\n    DatabaseRedbError(redb::Error),\n}\n",
    );
    write(
        &root.join("slasher/src/lib.rs"),
        &format!("#![cfg_attr(not({ANY_OLD}), allow(unused))]\npub use error::Error;\n"),
    );
    write(
        &root.join("slasher/service/src/service.rs"),
        "fn update() {\n            let database_size = size_of_dir(&slasher.config().database_path);\n}\n",
    );
    write(
        &root.join("testing/simulator/Cargo.toml"),
        "[package]\nname = \"simulator\"\n\n[dependencies]\ntypes = { workspace = true }\n",
    );
    write(
        &root.join("testing/simulator/src/main.rs"),
        "mod basic_sim;\nfn main() {\n    match m {\n        Some((\"fallback-sim\", matches)) => (),\n    }\n}\n",
    );
    write(
        &root.join("testing/simulator/src/cli.rs"),
        "fn cli_app() {\n    app\n        .subcommand(\n            Command::new(\"fallback-sim\"))\n}\n",
    );
    let listen = "    listen(\n            std::net::Ipv4Addr::UNSPECIFIED,\n        );\n";
    write(
        &root.join("testing/simulator/src/local_network.rs"),
        &format!("fn boot() {{\n{listen}}}\nfn node() {{\n{listen}}}\n"),
    );
    for name in [
        "attester_slashings",
        "proposer_slashings",
        "random",
        "wrap_around",
    ] {
        write(
            &root.join(format!("slasher/tests/{name}.rs")),
            &format!("#![cfg({ANY_OLD})]\n"),
        );
    }
}

/// Lighthouse's jemalloc control crate as stable names it in malloc_utils, and as unstable does.
const JEMALLOC_CTL_STABLE: &str = r#"jemalloc-ctl = { version = "0.5.0", optional = true }"#;
const JEMALLOC_CTL_UNSTABLE: &str =
    r#"tikv-jemalloc-ctl = { version = "0.6.0", optional = true, features = ["stats"] }"#;

/// The synthetic `common/malloc_utils/Cargo.toml` with `entry` in its [dependencies] (and the
/// allocator itself in a target table, whose name the glue must not take for the control
/// crate).
fn malloc_utils(root: &Path, entry: &str) {
    write(
        &root.join("common/malloc_utils/Cargo.toml"),
        &format!(
            "[package]\nname = \"malloc_utils\"\n\n[dependencies]\nlibc = \"0.2.79\"\n{entry}\n\n\
             [target.'cfg(target_os = \"linux\")'.dependencies]\n\
             jemallocator = {{ version = \"0.5.0\", optional = true }}\n"
        ),
    );
}

/// Every file under `root` (but `.git`) and its text.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut files = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.insert(path.clone(), fs::read_to_string(&path).unwrap());
            }
        }
    }
    files
}

/// Every file under `root` and its modification time.
fn modified(root: &Path) -> BTreeMap<PathBuf, std::time::SystemTime> {
    snapshot(root)
        .into_keys()
        .map(|path| {
            let time = fs::metadata(&path).unwrap().modified().unwrap();
            (path, time)
        })
        .collect()
}

fn run(args: &[&Path]) -> Output {
    Command::new("python3")
        .arg(patch_py())
        .args(args)
        .output()
        .unwrap()
}

fn patch(root: &Path, deps: Option<&Path>) -> Output {
    let out = run(&[root, adapters().as_path()]
        .into_iter()
        .chain(deps)
        .collect::<Vec<_>>());
    assert!(
        out.status.success(),
        "patch.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn refused(out: &Output) -> String {
    assert!(!out.status.success(), "patch.py should have refused");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The synthetic tree (redb "2.1") and its dependency checkouts for `test`: (tree, deps
/// directory, their commits), or `None` after a skip when python3 or git is missing.
fn tree_with_deps(test: &str) -> Option<(PathBuf, PathBuf, [String; 3])> {
    if !tools(test) {
        return None;
    }
    let dir = work_dir(test);
    let (root, deps_dir) = (dir.join("lighthouse"), dir.join("deps"));
    let revs = deps(&deps_dir);
    tree(&root, "2.1", &revs);
    Some((root, deps_dir, revs))
}

/// A run with DEPS_DIR after one without must add the [patch] sections (an earlier version saw
/// its own marker and only refreshed butter_impl.rs), one without must take them out, and one
/// with the same options as the last must not touch a file.
#[test]
fn rerun_brings_the_tree_to_the_current_options() {
    let Some((root, deps_dir, _)) = tree_with_deps("rerun_brings_the_tree_to_the_current_options")
    else {
        return;
    };
    let original = snapshot(&root);

    patch(&root, None);
    let without = snapshot(&root);
    assert_eq!(
        without[&root.join("Cargo.toml")],
        original[&root.join("Cargo.toml")]
    );
    assert!(without[&root.join("slasher/Cargo.toml")].contains("slasher-adapters = { path"));

    patch(&root, Some(&deps_dir));
    let cargo = fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for line in [
        "[patch.\"https://github.com/sigp/lmdb-rs\"]".to_string(),
        format!(
            "lmdb-rkv-sys = {{ path = \"{}\" }}",
            deps_dir.join("lmdb-rs/lmdb-sys").display()
        ),
        "[patch.\"https://github.com/sigp/libmdbx-rs\"]".to_string(),
        format!(
            "quick-protobuf = {{ path = \"{}\" }}",
            deps_dir.join("quick-protobuf/quick-protobuf").display()
        ),
    ] {
        assert!(
            cargo.contains(&line),
            "Cargo.toml lacks {line:?} after the run with DEPS_DIR:\n{cargo}"
        );
    }
    let with = snapshot(&root);
    let written = modified(&root);
    patch(&root, Some(&deps_dir));
    assert_eq!(
        snapshot(&root),
        with,
        "a second run with the same options changed the tree"
    );
    // Rewriting a file with its own text would still make cargo rebuild the slasher crate.
    assert_eq!(
        modified(&root),
        written,
        "a second run with the same options rewrote files"
    );

    patch(&root, None);
    assert_eq!(
        snapshot(&root),
        without,
        "a run without DEPS_DIR left the [patch] sections"
    );
}

/// The Cargo anchors are the `redb` entries of [features] and [dependencies] whatever redb's
/// version (stable pins "2.1", unstable "2.1.4"), and malloc_utils' jemalloc control crate
/// whichever it is (stable: jemalloc-ctl 0.5, unstable: tikv-jemalloc-ctl 0.6), which the
/// slasher gets as `jemalloc-ctl`; the Rust edits land once each.
#[test]
fn anchors_key_on_structure() {
    if !tools("anchors_key_on_structure") {
        return;
    }
    for (version, malloc_entry, jemalloc_ctl) in [
        (
            "2.1",
            JEMALLOC_CTL_STABLE,
            r#"package = "jemalloc-ctl", version = "0.5.0""#,
        ),
        (
            "2.1.4",
            JEMALLOC_CTL_UNSTABLE,
            r#"package = "tikv-jemalloc-ctl", version = "0.6.0""#,
        ),
    ] {
        let dir = work_dir(&format!("anchors-{version}"));
        let root = dir.join("lighthouse");
        tree(&root, version, &Default::default());
        malloc_utils(&root, malloc_entry);
        let malloc_before =
            fs::read_to_string(root.join("common/malloc_utils/Cargo.toml")).unwrap();
        patch(&root, None);
        let slasher = fs::read_to_string(root.join("slasher/Cargo.toml")).unwrap();
        let features = slasher.split("[dependencies]").next().unwrap();
        assert!(
            features.contains("redb = [\"dep:redb\"]\n# butter_db integration (scripts/lighthouse.sh)\nbutter = [\"dep:slasher-adapters\", \"dep:jemalloc-ctl\"]\n"),
            "redb {version}: no butter feature after redb's:\n{slasher}"
        );
        assert!(
            slasher.contains(&format!(
                "redb = {{ version = \"{version}\", optional = true }}\n# butter_db integration (scripts/lighthouse.sh)\nslasher-adapters = {{ path = "
            )),
            "redb {version}: no adapters dependency after redb's:\n{slasher}"
        );
        assert!(
            slasher.contains(&format!(
                "\njemalloc-ctl = {{ {jemalloc_ctl}, optional = true }}\n"
            )),
            "redb {version}: not malloc_utils' jemalloc control crate:\n{slasher}"
        );
        assert_eq!(
            fs::read_to_string(root.join("common/malloc_utils/Cargo.toml")).unwrap(),
            malloc_before,
            "patch.py edited malloc_utils, which it only reads"
        );
        assert!(
            slasher.contains("[dev-dependencies]\n# butter_db integration (scripts/lighthouse.sh)\nserde_json = { workspace = true }\n"),
            "redb {version}: no serde_json dev-dependency for the replay runner:\n{slasher}"
        );
        let interface = fs::read_to_string(root.join("slasher/src/database/interface.rs")).unwrap();
        assert_eq!(interface.matches("Butter(butter_impl::Item").count(), 20);
        assert!(root.join("slasher/src/database/butter_impl.rs").is_file());
        for test in ["butter_database_size.rs", "butter_memory_pressure.rs"] {
            assert!(root.join("slasher/tests").join(test).is_file(), "{test}");
        }
        // The size gauge asks the glue first, and the glue's function exists in every build.
        let service = fs::read_to_string(root.join("slasher/service/src/service.rs")).unwrap();
        assert!(
            service.contains("let database_size = slasher::butter_database_size(&slasher.config().database_path)\n                .unwrap_or_else(|| size_of_dir(&slasher.config().database_path));"),
            "{service}"
        );
        let lib = fs::read_to_string(root.join("slasher/src/lib.rs")).unwrap();
        assert_eq!(lib.matches("butter_database_size").count(), 2, "{lib}");
        assert!(
            lib.contains("#[cfg(feature = \"butter\")]\npub use database::butter_impl::jemalloc_on_memory_pressure as butter_on_memory_pressure;\n"),
            "{lib}"
        );
        assert!(
            lib.contains("#[cfg(not(feature = \"butter\"))]\npub fn butter_database_size("),
            "{lib}"
        );
    }
}

/// A tree without an anchor, with a file changed since patch.py wrote it, or patched without a
/// record, is refused with the file or the reset named and nothing changed.
#[test]
fn moved_or_edited_trees_are_refused_unchanged() {
    if !tools("moved_or_edited_trees_are_refused_unchanged") {
        return;
    }
    let dir = work_dir("refused");
    let root = dir.join("lighthouse");
    tree(&root, "2.1", &Default::default());
    let features = root.join("lighthouse/Cargo.toml");
    write(&features, "[features]\nslasher-mdbx = [\"slasher/mdbx\"]\n");
    let before = snapshot(&root);
    let err = refused(&run(&[&root, &adapters()]));
    assert!(
        err.contains("has moved")
            && err.contains("lighthouse/Cargo.toml")
            && err.contains("`slasher-redb = ...` in [features]"),
        "{err}"
    );
    assert_eq!(snapshot(&root), before, "a refused run changed the tree");
    write(&features, "[features]\nslasher-redb = [\"slasher/redb\"]\n");

    // malloc_utils without a jemalloc control crate the glue knows.
    malloc_utils(
        &root,
        r#"jemalloc-control = { version = "0.7.0", optional = true }"#,
    );
    let before = snapshot(&root);
    let err = refused(&run(&[&root, &adapters()]));
    assert!(
        err.contains("has moved")
            && err.contains("common/malloc_utils/Cargo.toml")
            && err.contains("jemalloc-ctl, tikv-jemalloc-ctl"),
        "{err}"
    );
    assert_eq!(snapshot(&root), before, "a refused run changed the tree");
    malloc_utils(&root, JEMALLOC_CTL_STABLE);

    patch(&root, None);
    let slasher = root.join("slasher/Cargo.toml");
    write(
        &slasher,
        &(fs::read_to_string(&slasher).unwrap() + "# a hand edit\n"),
    );
    let before = snapshot(&root);
    let err = refused(&run(&[&root, &adapters()]));
    assert!(
        err.contains("slasher/Cargo.toml has changed since patch.py wrote it"),
        "{err}"
    );
    assert_eq!(snapshot(&root), before, "a refused run changed the tree");

    // As a checkout patched by the script before it kept a record: the marker, no record.
    fs::remove_file(root.join(".butter_db.json")).unwrap();
    let before = snapshot(&root);
    let err = refused(&run(&[&root, &adapters()]));
    assert!(
        err.contains("without its record") && err.contains("checkout -- ."),
        "{err}"
    );
    assert_eq!(snapshot(&root), before, "a refused run changed the tree");
}

/// `--check-deps` lists each problem: a checkout at another revision, a missing one, and the
/// LMDB sources copied one level too deep.
#[test]
fn the_dependency_check_names_what_is_missing() {
    let Some((root, deps_dir, revs)) = tree_with_deps("the_dependency_check_names_what_is_missing")
    else {
        return;
    };
    let ok = run(&[Path::new("--check-deps"), &root, &deps_dir]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );

    let lmdb = deps_dir.join("lmdb-rs/lmdb-sys/lmdb");
    fs::create_dir_all(lmdb.join("lmdb")).unwrap();
    fs::rename(lmdb.join("libraries"), lmdb.join("lmdb/libraries")).unwrap();
    let mdbx = deps_dir.join("libmdbx-rs");
    write(&mdbx.join("NEWS"), "later\n");
    git(&mdbx, &["add", "."]);
    git(&mdbx, &["commit", "-qm", "a later commit"]);
    fs::remove_dir_all(deps_dir.join("quick-protobuf")).unwrap();

    let err = refused(&run(&[Path::new("--check-deps"), &root, &deps_dir]));
    for want in [
        format!("{}: at ", mdbx.display()),
        format!("this tree pins {}", revs[1]),
        format!("{}: missing", deps_dir.join("quick-protobuf").display()),
        "nested one level too deep".to_string(),
    ] {
        assert!(err.contains(&want), "no {want:?} in:\n{err}");
    }
    let before = snapshot(&root);
    let err = refused(&run(&[&root, &adapters(), &deps_dir]));
    assert!(
        err.contains("DEPS_DIR is not usable, nothing was changed"),
        "{err}"
    );
    assert_eq!(snapshot(&root), before, "a refused run changed the tree");
}

/// A lockfile entry in Cargo's format.
fn lock_entry(name: &str, version: &str) -> String {
    format!("[[package]]\nname = \"{name}\"\nversion = \"{version}\"\n\n")
}

/// `--lock-check` passes a lockfile that only gained packages, and fails, naming the package and
/// both versions, one in which a version the commit pinned was replaced (what a newer dependency
/// floor of the glue does to Lighthouse's lockfile).
#[test]
fn the_lock_check_allows_added_packages_and_names_a_moved_version() {
    let test = "the_lock_check_allows_added_packages_and_names_a_moved_version";
    if !tools(test) {
        return;
    }
    let root = work_dir(test);
    let pinned = lock_entry("serde", "1.0.204") + &lock_entry("libc", "0.2.155");
    write(
        &root.join("Cargo.lock"),
        &format!("version = 3\n\n{pinned}"),
    );
    git(&root, &["init", "-q"]);
    git(&root, &["add", "."]);
    git(&root, &["commit", "-qm", "a lockfile"]);

    let added = format!(
        "version = 3\n\n{pinned}{}",
        lock_entry("butter_db", "0.1.0")
    );
    write(&root.join("Cargo.lock"), &added);
    let out = run(&[Path::new("--lock-check"), &root]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("adds 1 packages: butter_db 0.1.0"), "{said}");

    let raised = format!(
        "version = 3\n\n{}{}{}",
        lock_entry("serde", "1.0.229"),
        lock_entry("libc", "0.2.155"),
        lock_entry("butter_db", "0.1.0")
    );
    write(&root.join("Cargo.lock"), &raised);
    let err = refused(&run(&[Path::new("--lock-check"), &root]));
    assert!(err.contains("1 versions pinned"), "{err}");
    assert!(err.contains("serde 1.0.204 -> 1.0.229"), "{err}");
    assert!(!err.contains("libc"), "{err}");
}

/// What the glue asks of the adapters crate (`default-features = false, features =
/// ["butter"]`) must not bring the slasher port's SSZ stack, nor another backend, into
/// Lighthouse's build: `cargo tree` of that shape lists the engine and no SSZ crate.
#[test]
fn the_glues_feature_set_brings_only_the_engine() {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
            "-p",
            "slasher-adapters",
        ])
        .args([
            "--no-default-features",
            "--features",
            "butter",
            "--manifest-path",
        ])
        .arg(adapters().join("Cargo.toml"))
        .output()
        .unwrap();
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(tree.contains("butter_db"), "{tree}");
    for foreign in [
        "ethereum_ssz",
        "ssz_types",
        "tree_hash",
        "bincode",
        "lmdb-rkv",
        "libmdbx",
        "redb",
        "serde ",
    ] {
        assert!(
            !tree.lines().any(|l| l.starts_with(foreign)),
            "the glue's feature set pulls {foreign}:\n{tree}"
        );
    }
}
