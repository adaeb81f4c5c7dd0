#!/usr/bin/env python3
"""Adds the butter_db backend to a Lighthouse checkout (run by scripts/lighthouse.sh).

Usage: patch.py LIGHTHOUSE_DIR ADAPTERS_DIR [DEPS_DIR]

Every edit is anchored on text that Lighthouse's `stable` tree has an exact, known number of
times; if an anchor is missing or appears a different number of times the tree has moved and
the script stops before writing anything, naming the file and the anchor. Running it twice is
harmless: a tree that already carries the edits (the marker comment in slasher/Cargo.toml) only
gets the current butter_impl.rs.

The edits, all in the checkout (none of Lighthouse's text is kept in this repository):
  slasher/src/database/butter_impl.rs  copied from this directory;
  slasher/src/database.rs              `mod butter_impl;` next to `mod redb_impl;`;
  slasher/src/database/interface.rs    a `Butter` twin of every redb variant and match arm;
  slasher/src/config.rs                `DatabaseBackend::Butter` (CLI value `butter`), which is
                                       the default only when it is the sole backend compiled in;
  slasher/src/error.rs                 `DatabaseButterError(slasher_adapters::Error)`;
  slasher/src/lib.rs, slasher/tests/*  `butter` joins the "any backend" feature gates;
  slasher/Cargo.toml                   feature `butter` and the path dependency on ADAPTERS_DIR
                                       with default features off (no second LMDB/MDBX/redb);
  lighthouse/Cargo.toml                feature `slasher-butter`;
  Cargo.toml                           with DEPS_DIR: Lighthouse's git dependencies (sigp/lmdb-rs,
                                       sigp/libmdbx-rs, sigp/quick-protobuf) patched in by path.
"""

import pathlib
import re
import shutil
import sys

MARKER = "# butter_db integration (scripts/lighthouse.sh)"


class Moved(Exception):
    pass


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

    def write(self):
        for rel, text in self.files.items():
            (self.root / rel).write_text(text)


ANY_OLD = 'any(feature = "mdbx", feature = "lmdb", feature = "redb")'
ANY_NEW = 'any(feature = "mdbx", feature = "lmdb", feature = "redb", feature = "butter")'
GIT_DEPS = {
    "https://github.com/sigp/lmdb-rs": ("lmdb-rs", {"lmdb-rkv": "", "lmdb-rkv-sys": "lmdb-sys"}),
    "https://github.com/sigp/libmdbx-rs": ("libmdbx-rs", {"libmdbx": ""}),
}


def patch(tree, here, adapters, deps):
    # The backend module and its registration.
    tree.replace("slasher/src/database.rs", "mod redb_impl;\n", "mod redb_impl;\nmod butter_impl;\n")
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

    # Feature gates: the crate-level allow and the gate at the top of each test file.
    tree.replace("slasher/src/lib.rs", f"not({ANY_OLD})", f"not({ANY_NEW})")
    for name in ["attester_slashings", "proposer_slashings", "random", "wrap_around"]:
        tree.replace(f"slasher/tests/{name}.rs", f"#![cfg({ANY_OLD})]", f"#![cfg({ANY_NEW})]")

    # Cargo: the feature and the dependency on this repository's adapter crate.
    adapters_dep = (
        f'slasher-adapters = {{ path = "{adapters}", default-features = false, '
        'features = ["butter"], optional = true }'
    )
    tree.replace(
        "slasher/Cargo.toml",
        'redb = ["dep:redb"]\n',
        f'redb = ["dep:redb"]\n{MARKER}\nbutter = ["dep:slasher-adapters"]\n',
    )
    tree.replace(
        "slasher/Cargo.toml",
        '\nredb = { version = "2.1", optional = true }\n',
        f'\nredb = {{ version = "2.1", optional = true }}\n{MARKER}\n{adapters_dep}\n',
    )
    tree.replace(
        "lighthouse/Cargo.toml",
        'slasher-redb = ["slasher/redb"]\n',
        'slasher-redb = ["slasher/redb"]\n# Support slasher butter_db backend (btrfs only).\n'
        'slasher-butter = ["slasher/butter"]\n',
    )

    if deps is not None:
        patch_git_deps(tree, deps)

    tree.write()
    shutil.copyfile(here / "butter_impl.rs", tree.root / "slasher/src/database/butter_impl.rs")


def patch_git_deps(tree, deps):
    """Points Lighthouse's git dependencies at local checkouts under `deps`."""
    cargo = tree.text("Cargo.toml")
    m = re.search(r'^quick-protobuf = \{ git = "[^"]*", rev = "([0-9a-f]+)" \}$', cargo, re.M)
    if not m:
        raise Moved("Cargo.toml: the [patch.crates-io] line for quick-protobuf is not there")
    check_dir(deps / "quick-protobuf" / "quick-protobuf")
    tree.replace(
        "Cargo.toml",
        m.group(0),
        f'quick-protobuf = {{ path = "{deps / "quick-protobuf" / "quick-protobuf"}" }}',
    )
    sections = [MARKER]
    for url, (checkout, crates) in GIT_DEPS.items():
        if url not in tree.text("slasher/Cargo.toml"):
            raise Moved(f"slasher/Cargo.toml: no dependency on {url}")
        sections.append(f'[patch."{url}"]')
        for crate, sub in crates.items():
            path = deps / checkout / sub if sub else deps / checkout
            check_dir(path)
            sections.append(f'{crate} = {{ path = "{path}" }}')
    tree.files["Cargo.toml"] = tree.text("Cargo.toml").rstrip("\n") + "\n\n" + "\n".join(sections) + "\n"


def check_dir(path):
    if not (path / "Cargo.toml").is_file():
        raise SystemExit(f"patch.py: {path}/Cargo.toml not found (see docs/lighthouse.md, step 1)")


def main():
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    root = pathlib.Path(sys.argv[1]).resolve()
    adapters = pathlib.Path(sys.argv[2]).resolve()
    deps = pathlib.Path(sys.argv[3]).resolve() if len(sys.argv) == 4 else None
    here = pathlib.Path(__file__).resolve().parent
    tree = Tree(root)
    try:
        if MARKER in tree.text("slasher/Cargo.toml"):
            shutil.copyfile(here / "butter_impl.rs", root / "slasher/src/database/butter_impl.rs")
            print(f"patch.py: {root} already carries the butter backend; butter_impl.rs refreshed")
            return
        patch(tree, here, adapters, deps)
    except Moved as e:
        raise SystemExit(
            f"patch.py: the Lighthouse tree has moved, nothing was changed: {e}\n"
            "(the edits are written for the commit named in docs/lighthouse.md)"
        )
    print(f"patch.py: butter backend added to {root}")


if __name__ == "__main__":
    main()
