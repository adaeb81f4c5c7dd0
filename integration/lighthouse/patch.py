#!/usr/bin/env python3
"""Adds the butter_db backend to a Lighthouse checkout (run by scripts/lighthouse.sh).

Usage: patch.py LIGHTHOUSE_DIR ADAPTERS_DIR [DEPS_DIR]   patch (again) for these options
       patch.py --pins LIGHTHOUSE_DIR                    the git dependencies the tree pins,
                                                         one `checkout rev url` line each
       patch.py --check-deps LIGHTHOUSE_DIR DEPS_DIR     are the checkouts in DEPS_DIR usable?
       patch.py --lock-check LIGHTHOUSE_DIR              does Cargo.lock still hold every package
                                                         version of the commit's own Cargo.lock?

Every edit is anchored on the structure of the tree: a key in a named table of a Cargo.toml
(whatever its value, e.g. the redb line whatever its version), or a Rust line that must occur
an exact, known number of times. If an anchor is missing or appears a different number of
times the tree has moved and the script stops before writing anything, naming the file and the
anchor. The anchors hold for Lighthouse `stable` (2e0eb6d1b8) and `unstable` (40d3423193).

The first run keeps the original text of every file it edits in LIGHTHOUSE_DIR/.butter_db.json
with a digest of what it wrote. A later run starts again from those originals and applies the
edits the current options ask for, so running it with or without DEPS_DIR, in any order, always
leaves the tree as that run's options say (e.g. a run with DEPS_DIR after one without adds the
[patch] sections). It refuses, changing nothing, if a file it wrote has been changed since, or
if the tree carries a butter integration it has no record of; it then says what to reset.

The edits, all in the checkout (none of Lighthouse's text is kept in this repository):
  slasher/src/database/butter_impl.rs  copied from this directory;
  slasher/tests/butter_database_size.rs  copied from database_size_test.rs (butter builds only);
  slasher/tests/butter_memory_pressure.rs  copied from memory_pressure_test.rs (butter builds
                                       only): the glue registers its allocator function;
  slasher/src/database.rs              `pub(crate) mod butter_impl;` next to `mod redb_impl;`;
  slasher/src/database/interface.rs    a `Butter` twin of every redb variant and match arm;
  slasher/src/config.rs                `DatabaseBackend::Butter` (CLI value `butter`), which is
                                       the default only when it is the sole backend compiled in;
  slasher/src/error.rs                 `DatabaseButterError(slasher_adapters::Error)`;
  slasher/src/lib.rs, slasher/tests/*  `butter` joins the "any backend" feature gates;
  slasher/src/lib.rs                   `butter_database_size`: the glue's size of a butter
                                       database (`None` without one, or without the feature);
                                       with the feature, `butter_on_memory_pressure`: the
                                       glue's allocator function, for its test;
  slasher/service/src/service.rs       the `slasher_database_size` gauge asks it first, then
                                       falls back to Lighthouse's own `size_of_dir` (which
                                       counts only top-level files, a few KB for butter);
  slasher/Cargo.toml                   feature `butter`: the path dependency on ADAPTERS_DIR
                                       with default features off (no second LMDB/MDBX/redb),
                                       and as `jemalloc-ctl` the jemalloc control crate and
                                       version common/malloc_utils/Cargo.toml names (read, not
                                       edited: jemalloc-ctl 0.5 at stable, tikv-jemalloc-ctl 0.6
                                       at unstable), for the glue's memory-pressure function;
                                       serde_json (the workspace's) as a dev-dependency, for
                                       the replay runner example's JSON lines;
  lighthouse/Cargo.toml                feature `slasher-butter`;
  testing/simulator/src/butter_slashing_sim.rs  copied from slashing_sim.rs: the scenario
                                       `simulator butter-slashing-sim` (docs/lighthouse.md §6);
  testing/simulator/src/{main,cli}.rs  its module, subcommand and dispatch;
  testing/simulator/Cargo.toml         the slasher crate with lmdb and butter (the scenario
                                       names both backends) and ethereum_ssz;
  testing/simulator/src/local_network.rs  nodes listen on 127.0.0.1 instead of 0.0.0.0;
  Cargo.toml                           with DEPS_DIR: Lighthouse's git dependencies (sigp/lmdb-rs,
                                       sigp/libmdbx-rs, sigp/quick-protobuf) patched in by path.
"""

import hashlib
import json
import pathlib
import re
import subprocess
import sys

MARKER = "# butter_db integration (scripts/lighthouse.sh)"
STATE = ".butter_db.json"
IMPL = "slasher/src/database/butter_impl.rs"
# Files of this directory copied into the checkout: (where, from).
SIM = "testing/simulator"
COPIED = [
    (IMPL, "butter_impl.rs"),
    ("slasher/tests/butter_database_size.rs", "database_size_test.rs"),
    (f"{SIM}/src/butter_slashing_sim.rs", "slashing_sim.rs"),
    ("slasher/tests/butter_memory_pressure.rs", "memory_pressure_test.rs"),
]
# Lighthouse's allocator code and the jemalloc control crates it may name (one of them).
MALLOC_UTILS = "common/malloc_utils/Cargo.toml"
JEMALLOC_CTL = ("jemalloc-ctl", "tikv-jemalloc-ctl")


class Moved(Exception):
    pass


def digest(text):
    return hashlib.sha256(text.encode()).hexdigest()


class Tree:
    """Reads files once, applies anchored edits in memory, writes them all at the end."""

    def __init__(self, root):
        self.root = root
        self.files = {}

    def text(self, rel):
        if rel not in self.files:
            path = self.root / rel
            if not path.is_file():
                raise Moved(f"{rel}: file not found")
            self.files[rel] = path.read_text()
        return self.files[rel]

    def replace(self, rel, old, new, count=1):
        """Replaces `old` by `new`; `old` must occur exactly `count` times."""
        text = self.text(rel)
        found = text.count(old)
        if found != count:
            raise Moved(f"{rel}: expected {count} x {old!r}, found {found}")
        self.files[rel] = text.replace(old, new)

    def toml_entry(self, rel, table, key):
        """The lines of `rel` and the index of the one-line `key = ...` entry of `[table]`."""
        lines = self.text(rel).split("\n")
        current, found = None, []
        for i, line in enumerate(lines):
            header = re.match(r"\s*\[([^\[\]]+)\]\s*(#.*)?$", line)
            if header:
                current = header.group(1).strip()
            elif current == table and re.match(rf"{re.escape(key)}\s*=", line):
                found.append(i)
        if len(found) != 1:
            raise Moved(f"{rel}: expected 1 entry `{key} = ...` in [{table}], found {len(found)}")
        line = lines[found[0]]
        if line.count("[") != line.count("]") or line.count("{") != line.count("}"):
            raise Moved(f"{rel}: the entry `{key}` in [{table}] spans several lines")
        return lines, found[0]

    def insert_after(self, rel, table, key, new_lines):
        lines, i = self.toml_entry(rel, table, key)
        self.files[rel] = "\n".join(lines[: i + 1] + new_lines + lines[i + 1 :])

    def insert_after_header(self, rel, table, new_lines):
        """Inserts `new_lines` first in `[table]`, whose header must occur exactly once."""
        lines = self.text(rel).split("\n")
        found = [i for i, line in enumerate(lines) if re.match(rf"\s*\[{re.escape(table)}\]\s*(#.*)?$", line)]
        if len(found) != 1:
            raise Moved(f"{rel}: expected 1 table [{table}], found {len(found)}")
        i = found[0]
        self.files[rel] = "\n".join(lines[: i + 1] + new_lines + lines[i + 1 :])

    def set_entry(self, rel, table, key, new_line):
        lines, i = self.toml_entry(rel, table, key)
        lines[i] = new_line
        self.files[rel] = "\n".join(lines)

    def twin_redb(self, rel, count):
        """After every `#[cfg(feature = "redb")]` line and the line it guards, adds the same pair
        for butter (redb -> butter, Redb -> Butter). Expects `count` such pairs."""
        lines = self.text(rel).split("\n")
        out, pairs, i = [], 0, 0
        while i < len(lines):
            line = lines[i]
            out.append(line)
            if line.strip() == '#[cfg(feature = "redb")]' and i + 1 < len(lines):
                guarded = lines[i + 1]
                out.append(guarded)
                out.append(line.replace('"redb"', '"butter"'))
                out.append(guarded.replace("redb_impl", "butter_impl").replace("Redb", "Butter"))
                pairs += 1
                i += 2
                continue
            i += 1
        if pairs != count:
            raise Moved(f"{rel}: expected {count} redb-guarded items, found {pairs}")
        self.files[rel] = "\n".join(out)


ANY_OLD = 'any(feature = "mdbx", feature = "lmdb", feature = "redb")'
ANY_NEW = 'any(feature = "mdbx", feature = "lmdb", feature = "redb", feature = "butter")'
# Lighthouse's git dependencies: the checkout's directory name under DEPS_DIR, the url's tail,
# and where each crate lives in the checkout. The revisions are read from the tree.
GIT_DEPS = [
    ("lmdb-rs", "sigp/lmdb-rs", {"lmdb-rkv": "", "lmdb-rkv-sys": "lmdb-sys"}),
    ("libmdbx-rs", "sigp/libmdbx-rs", {"libmdbx": ""}),
    ("quick-protobuf", "sigp/quick-protobuf", {"quick-protobuf": "quick-protobuf"}),
]
# The LMDB C sources, a git submodule of lmdb-rs that a plain clone leaves empty.
LMDB_SOURCE = "lmdb-sys/lmdb/libraries/liblmdb/mdb.c"
ENTRY = re.compile(r'(?:package = "(?P<package>[^"]+)".*)?git = "(?P<url>[^"]+)".*rev = "(?P<rev>[0-9a-f]+)"')


def pins(tree):
    """[(checkout, url, rev, {crate: subdir}, [(file, table, key)])] for every git dependency."""
    where = [("slasher/Cargo.toml", "dependencies", k) for k in ("lmdb-rkv", "lmdb-rkv-sys", "mdbx")]
    where.append(("Cargo.toml", "patch.crates-io", "quick-protobuf"))
    found = {}
    for rel, table, key in where:
        lines, i = tree.toml_entry(rel, table, key)
        m = ENTRY.search(lines[i])
        if not m:
            raise Moved(f"{rel}: the entry `{key}` in [{table}] has no git url and rev")
        found.setdefault(m.group("url"), []).append((m.group("rev"), (rel, table, key)))
    out = []
    for checkout, tail, crates in GIT_DEPS:
        urls = [u for u in found if u.removesuffix(".git").endswith(tail)]
        if len(urls) != 1:
            raise Moved(f"expected one git url for {tail} in slasher/Cargo.toml or Cargo.toml")
        revs = {rev for rev, _ in found[urls[0]]}
        if len(revs) != 1:
            raise Moved(f"{urls[0]} is pinned at several revisions: {sorted(revs)}")
        out.append((checkout, urls[0], revs.pop(), crates, [e for _, e in found[urls[0]]]))
    return out


def jemalloc_ctl_dep(tree):
    """The slasher's dependency line `jemalloc-ctl = { package = ..., version = ..., optional =
    true }` for the crate and version Lighthouse's malloc_utils names in its [dependencies]:
    Lighthouse's own jemalloc, so the lockfile gains no package (a second crate that links
    jemalloc could not be built beside it). The glue calls the crate `jemalloc_ctl` whichever
    it is; both have the same safe API."""
    text = tree.text(MALLOC_UTILS)
    named = [c for c in JEMALLOC_CTL if re.search(rf"^{re.escape(c)}\s*=", text, re.M)]
    if len(named) != 1:
        raise Moved(f"{MALLOC_UTILS}: expected an entry for one of {', '.join(JEMALLOC_CTL)}, found {named or 'none'}")
    lines, i = tree.toml_entry(MALLOC_UTILS, "dependencies", named[0])
    value = lines[i].split("=", 1)[1].strip()
    m = re.match(r'"([^"]+)"', value) or re.search(r'\bversion\s*=\s*"([^"]+)"', value)
    if not m:
        raise Moved(f"{MALLOC_UTILS}: the entry `{named[0]}` in [dependencies] names no version")
    return f'jemalloc-ctl = {{ package = "{named[0]}", version = "{m.group(1)}", optional = true }}'


def head(path):
    r = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def deps_problems(tree, deps):
    """What DEPS_DIR lacks for this tree, one sentence each (empty: usable)."""
    problems = []
    for checkout, url, rev, crates, _ in pins(tree):
        path = deps / checkout
        if not path.is_dir():
            problems.append(f"{path}: missing (a checkout of {url} at {rev})")
            continue
        at = head(path)
        if at is None:
            problems.append(f"{path}: not a git checkout (its revision cannot be checked)")
        elif at != rev:
            problems.append(
                f"{path}: at {at}, this tree pins {rev} (`git -C {path} checkout {rev}`, or a "
                "separate DEPS_DIR for this revision set)"
            )
        for sub in crates.values():
            if not (path / sub / "Cargo.toml").is_file():
                problems.append(f"{path / sub / 'Cargo.toml'}: missing")
    lmdb = deps / "lmdb-rs"
    if lmdb.is_dir() and not (lmdb / LMDB_SOURCE).is_file():
        nested = lmdb / "lmdb-sys/lmdb/lmdb/libraries"
        if nested.is_dir():
            fix = f"they are nested one level too deep: move the contents of {nested.parent} up"
        else:
            fix = "`scripts/lighthouse.sh LIGHTHOUSE_DIR deps DIR` fills an empty lmdb-sys/lmdb"
        problems.append(f"{lmdb / LMDB_SOURCE}: missing, the LMDB C sources; {fix}")
    return problems


def patch(tree, here, adapters, deps):
    # The backend module and its registration.
    tree.replace("slasher/src/database.rs", "mod redb_impl;\n", "mod redb_impl;\npub(crate) mod butter_impl;\n")
    tree.twin_redb("slasher/src/database/interface.rs", count=20)

    # The backend's name and the default-backend cascade.
    tree.twin_redb("slasher/src/config.rs", count=1)
    tree.replace(
        "slasher/src/config.rs",
        f"#[cfg(not({ANY_OLD}))]\npub const DEFAULT_BACKEND",
        f'#[cfg(all(feature = "butter", not({ANY_OLD})))]\n'
        "pub const DEFAULT_BACKEND: DatabaseBackend = DatabaseBackend::Butter;\n"
        f"#[cfg(not({ANY_NEW}))]\npub const DEFAULT_BACKEND",
    )

    # The error variant (its From conversion lives in butter_impl.rs).
    tree.replace(
        "slasher/src/error.rs",
        "    DatabaseRedbError(redb::Error),\n",
        "    DatabaseRedbError(redb::Error),\n"
        '    #[cfg(feature = "butter")]\n'
        "    DatabaseButterError(slasher_adapters::Error),\n",
    )

    # The size gauge: the glue's size of a butter database, asked before Lighthouse's own.
    tree.replace(
        "slasher/src/lib.rs",
        "pub use error::Error;\n",
        "pub use error::Error;\n"
        '#[cfg(feature = "butter")]\n'
        "pub use database::butter_impl::database_size as butter_database_size;\n"
        '#[cfg(feature = "butter")]\n'
        "pub use database::butter_impl::jemalloc_on_memory_pressure as butter_on_memory_pressure;\n"
        "/// Without the butter backend there is no butter database to measure.\n"
        '#[cfg(not(feature = "butter"))]\n'
        "pub fn butter_database_size(_path: &std::path::Path) -> Option<u64> {\n"
        "    None\n"
        "}\n",
    )
    tree.replace(
        "slasher/service/src/service.rs",
        "let database_size = size_of_dir(&slasher.config().database_path);\n",
        "let database_size = slasher::butter_database_size(&slasher.config().database_path)\n"
        "                .unwrap_or_else(|| size_of_dir(&slasher.config().database_path));\n",
    )

    # Feature gates: the crate-level allow and the gate at the top of each test file.
    tree.replace("slasher/src/lib.rs", f"not({ANY_OLD})", f"not({ANY_NEW})")
    for name in ["attester_slashings", "proposer_slashings", "random", "wrap_around"]:
        tree.replace(f"slasher/tests/{name}.rs", f"#![cfg({ANY_OLD})]", f"#![cfg({ANY_NEW})]")

    # Cargo: the feature, the dependency on this repository's adapter crate and the jemalloc
    # control crate for the glue's allocator function, after the redb entry of each table
    # (whatever redb's version).
    adapters_dep = (
        f'slasher-adapters = {{ path = "{adapters}", default-features = false, '
        'features = ["butter"], optional = true }'
    )
    slasher = "slasher/Cargo.toml"
    jemalloc_dep = jemalloc_ctl_dep(tree)
    tree.insert_after(
        slasher, "features", "redb", [MARKER, 'butter = ["dep:slasher-adapters", "dep:jemalloc-ctl"]']
    )
    tree.insert_after(slasher, "dependencies", "redb", [MARKER, adapters_dep, jemalloc_dep])
    # The replay runner (an example of the slasher crate) writes its rows as JSON lines.
    tree.insert_after_header(slasher, "dev-dependencies", [MARKER, "serde_json = { workspace = true }"])
    tree.insert_after(
        "lighthouse/Cargo.toml",
        "features",
        "slasher-redb",
        ["# Support slasher butter_db backend (btrfs only).", 'slasher-butter = ["slasher/butter"]'],
    )

    # The simulator scenario: module, subcommand, dispatch, the slasher dependency, loopback.
    tree.replace(f"{SIM}/src/main.rs", "mod basic_sim;\n", "mod basic_sim;\nmod butter_slashing_sim;\n")
    tree.replace(
        f"{SIM}/src/main.rs",
        '        Some(("fallback-sim", matches)) =>',
        '        Some(("butter-slashing-sim", matches)) => match butter_slashing_sim::run(matches) {\n'
        '            Ok(()) => println!("Simulation exited successfully"),\n'
        "            Err(e) => {\n"
        '                eprintln!("Simulation exited with error: {}", e);\n'
        "                std::process::exit(1)\n"
        "            }\n"
        "        },\n"
        '        Some(("fallback-sim", matches)) =>',
    )
    tree.replace(
        f"{SIM}/src/cli.rs",
        '        .subcommand(\n            Command::new("fallback-sim")',
        '        .subcommand(crate::butter_slashing_sim::cli_app())\n'
        '        .subcommand(\n            Command::new("fallback-sim")',
    )
    tree.insert_after(
        f"{SIM}/Cargo.toml",
        "dependencies",
        "types",
        [MARKER, 'slasher = { workspace = true, features = ["lmdb", "butter"] }', "ethereum_ssz = { workspace = true }"],
    )
    tree.replace(
        f"{SIM}/src/local_network.rs",
        "            std::net::Ipv4Addr::UNSPECIFIED,\n",
        "            std::net::Ipv4Addr::LOCALHOST,\n",
        count=2,
    )

    if deps is not None:
        patch_git_deps(tree, deps)


def patch_git_deps(tree, deps):
    """Points Lighthouse's git dependencies at local checkouts under `deps`."""
    problems = deps_problems(tree, deps)
    if problems:
        raise SystemExit("patch.py: DEPS_DIR is not usable, nothing was changed:\n  " + "\n  ".join(problems))
    sections = []
    for checkout, url, _, crates, entries in pins(tree):
        for rel, table, key in entries:
            if table == "patch.crates-io":
                # A [patch] of crates-io that is a git url cannot be patched again: set the path.
                path = deps / checkout / crates[key]
                tree.set_entry(rel, table, key, f'{key} = {{ path = "{path}" }}')
                break
        else:
            sections.append(f'[patch."{url}"]')
            sections += [f'{c} = {{ path = "{deps / checkout / s}" }}' for c, s in crates.items()]
    cargo = tree.text("Cargo.toml").rstrip("\n")
    tree.files["Cargo.toml"] = cargo + "\n\n" + "\n".join([MARKER] + sections) + "\n"


def lock_packages(text):
    """The (name, version) pairs of a Cargo.lock."""
    import tomllib

    return {(p["name"], p["version"]) for p in tomllib.loads(text).get("package", [])}


def lock_check(root):
    """Compares the checkout's Cargo.lock with the one its commit holds. What the glue brings may
    add packages Lighthouse lacks, but must not move a version Lighthouse pins: a moved version
    means the control (LMDB) would no longer be built against Lighthouse's own lockfile. Returns
    (added, moved), each a sorted list of "name version" strings; `moved` names the versions of the
    commit's lockfile that are gone, with what replaced them."""
    committed = subprocess.run(
        ["git", "-C", str(root), "show", "HEAD:Cargo.lock"], capture_output=True, text=True
    )
    if committed.returncode != 0:
        raise SystemExit(f"patch.py: no Cargo.lock in {root}'s HEAD: {committed.stderr.strip()}")
    old = lock_packages(committed.stdout)
    new = lock_packages((root / "Cargo.lock").read_text())
    added = sorted(f"{n} {v}" for n, v in new - old)
    moved = []
    for name, version in sorted(old - new):
        now = sorted(v for n, v in new if n == name)
        moved.append(f"{name} {version} -> {', '.join(now) or 'removed'}")
    return added, moved


def load_state(root, tree):
    """Puts the original text of every file an earlier run edited back into `tree` (in memory)
    and returns that record; refuses if the tree is not as that run left it."""
    path = root / STATE
    edited = ["slasher/Cargo.toml", "slasher/src/database.rs", "Cargo.toml"]
    reset = (
        f"to start again from Lighthouse's own files: `git -C {root} checkout -- .` and "
        f"`rm -f {' '.join(str(root / rel) for rel, _ in COPIED)} {path}`"
    )
    if not path.exists():
        if (root / IMPL).exists() or any(MARKER in tree.text(rel) for rel in edited):
            raise SystemExit(
                f"patch.py: {root} carries a butter integration without its record {STATE} (an "
                f"earlier version of this script made it); nothing was changed; {reset}"
            )
        return {}
    state = json.loads(path.read_text())
    for rel, entry in state.items():
        text = tree.text(rel)
        if digest(text) != entry["written"]:
            raise SystemExit(
                f"patch.py: {root / rel} has changed since patch.py wrote it; nothing was "
                f"changed; {reset}"
            )
        tree.files[rel] = entry["original"]
    return state


def write(root, tree, state, here):
    """Writes the record first (the originals, once), then the files, then the digests. A file
    that already has its text is left untouched, so that a re-run with the same options does not
    make cargo rebuild the slasher crate."""
    for rel in tree.files:
        state.setdefault(rel, {"original": (root / rel).read_text(), "written": None})
    write_changed(root / STATE, json.dumps(state, sort_keys=True))
    for rel, text in tree.files.items():
        write_changed(root / rel, text)
        state[rel]["written"] = digest(text)
    for rel, source in COPIED:
        write_changed(root / rel, (here / source).read_text())
    write_changed(root / STATE, json.dumps(state, sort_keys=True))


def write_changed(path, text):
    if not path.is_file() or path.read_text() != text:
        path.write_text(text)


def main():
    args = sys.argv[1:]
    try:
        if len(args) == 2 and args[0] == "--pins":
            tree = Tree(pathlib.Path(args[1]).resolve())
            # An earlier patch with DEPS_DIR rewrote the pins to paths: read Lighthouse's own.
            load_state(tree.root, tree)
            for checkout, url, rev, _, _ in pins(tree):
                print(checkout, rev, url)
            return
        if len(args) == 3 and args[0] == "--check-deps":
            tree = Tree(pathlib.Path(args[1]).resolve())
            load_state(tree.root, tree)
            problems = deps_problems(tree, pathlib.Path(args[2]).resolve())
            if problems:
                raise SystemExit("patch.py: DEPS_DIR is not usable:\n  " + "\n  ".join(problems))
            print(f"patch.py: {args[2]} has every git dependency at the revision the tree pins")
            return
        if len(args) == 2 and args[0] == "--lock-check":
            root = pathlib.Path(args[1]).resolve()
            added, moved = lock_check(root)
            print(f"patch.py: {root}/Cargo.lock adds {len(added)} packages: {', '.join(added) or '-'}")
            if moved:
                raise SystemExit(
                    f"patch.py: {len(moved)} versions pinned by Lighthouse's Cargo.lock changed:\n  "
                    + "\n  ".join(moved)
                )
            print("patch.py: every version Lighthouse's Cargo.lock pins is unchanged")
            return
        if len(args) not in (2, 3) or args[0].startswith("--"):
            raise SystemExit(__doc__)
        root = pathlib.Path(args[0]).resolve()
        adapters = pathlib.Path(args[1]).resolve()
        deps = pathlib.Path(args[2]).resolve() if len(args) == 3 else None
        here = pathlib.Path(__file__).resolve().parent
        tree = Tree(root)
        state = load_state(root, tree)
        patch(tree, here, adapters, deps)
    except Moved as e:
        raise SystemExit(
            f"patch.py: the Lighthouse tree has moved, nothing was changed: {e}\n"
            "(the edits are written for the commits named in docs/lighthouse.md)"
        )
    again = "again " if state else ""
    write(root, tree, state, here)
    how = f"git dependencies from {deps}" if deps else "git dependencies from their urls"
    print(f"patch.py: butter backend added {again}to {root} ({how})")


if __name__ == "__main__":
    main()
