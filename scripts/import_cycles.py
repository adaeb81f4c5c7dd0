#!/usr/bin/env python3
"""Lists import circles between the source files of the workspace's crates.

Usage: scripts/import_cycles.py [--all] [CRATE_SRC_DIR...]
       (default: backend/src adapters/src slasher-bench/src test-support/src tests/src)

A file "imports from" another when it names one of that file's items by a path: a `use`
declaration (`use crate::a::b::{C, d::E}`, `use super::X`, `use self::m::Y`, `use m::Z` for a
child module `m`) or a path written in the code or a type (`crate::a::f()`, `super::T`,
`super::x::Y`, `m::CONST` for a child module `m`, `segment::file_name()` after
`use crate::segment::{self}`, `Error::io()` after `use crate::error::Error`). A path is
charged to the file of the longest module prefix it names: `crate::segment::Block` is taken from
segment/mod.rs (the name it is reached through, re-export or not); `crate::segment::block::Block`
from segment/block.rs. A module's `#[cfg(test)] mod tests` file and inline `mod x { ... }`
blocks count as part of the file that declares them for `super::` but are reported as their own
file (`use super::*` in a test file is expected, the parent does not import it back).

It prints every pair of files that import from each other (a circle of two) with the names each
takes from the other, and exits 1 if there is any. That includes a folder's `mod.rs` and a file
it declares (`mod child; pub use child::X;` beside the child's `use super::Y` or `use super::*`),
marked as such: a folder's mod.rs only declares its files and re-exports their items, and what
its files share lives in a file of its own that they import by name. (`--strict`, which used to
turn that check on, is accepted and does nothing: it is always on.) With --all it also reports
longer circles (strongly connected groups of files). A directory that does not exist is an
error (exit 2), not a crate without circles. Only the crates' own `src/` trees are read; each crate is its own graph; test modules are left out. No dependency
beyond Python 3.
"""

from __future__ import annotations

import os
import re
import sys
from collections import defaultdict

DEFAULT_DIRS = ["backend/src", "adapters/src", "slasher-bench/src", "test-support/src", "tests/src"]


def strip_comments_and_strings(text: str) -> str:
    """Blanks out comments, string and char literals (keeps newlines and braces of code)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    out.append("\n" if text[i] == "\n" else "")
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F}') or a lifetime ('a): only the former is blanked.
            m = re.match(r"'(\\.[^']*|[^'\\])'", text[i:])
            if m:
                out.append("' '")
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def use_bindings(tree: str) -> list[tuple[str, str]]:
    """(name bound, path) of each leaf of a use tree: `a::{b, c as d, e::{self}}` ->
    [('b', 'a::b'), ('d', 'a::c'), ('e', 'a::e')] (globs bind nothing)."""
    tree = re.sub(r"\s+as\s+(\w+)", r"@\1", tree)  # `a::b as c` -> a::b@c
    out = []
    for leaf in expand_use_tree(tree, keep_alias=True):
        path, _, alias = leaf.partition("@")
        name = alias or path.rsplit("::", 1)[-1]
        if name and name not in ("*", "_", "self", "super", "crate"):
            out.append((name, path))
    return out


def expand_use_tree(tree: str, keep_alias: bool = False) -> list[str]:
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e'] (aliases and globs kept as a path)."""
    if not keep_alias:
        tree = re.sub(r"\s+as\s+\w+", "", tree)  # `a::b as c` takes a::b
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [tree]
    prefix, inner = tree[:brace], tree[brace + 1:tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    paths = []
    for p in parts:
        if not p:
            continue
        for sub in expand_use_tree(p, keep_alias):
            if sub == "self" or sub.startswith("self@"):
                paths.append(prefix.rstrip(":") + sub[4:])
            else:
                paths.append(prefix + sub)
    return paths


class Crate:
    def __init__(self, src: str):
        self.src = src
        self.module_file: dict[tuple[str, ...], str] = {}  # module path -> file (relative)
        for root, _, files in os.walk(src):
            for f in files:
                if f.endswith(".rs"):
                    rel = os.path.relpath(os.path.join(root, f), src)
                    self.module_file[self.module_of(rel)] = rel

    @staticmethod
    def module_of(rel: str) -> tuple[str, ...]:
        parts = rel[:-3].split(os.sep)
        if parts[-1] in ("lib", "main") and len(parts) == 1:
            return ()
        if parts[-1] == "mod":
            parts = parts[:-1]
        return tuple(parts)

    def resolve(
        self, path: list[str], here: tuple[str, ...], bound: dict[str, list[str]] | None = None
    ) -> tuple[str, ...] | None:
        """The module path a `crate::`/`super::`/`self::`/child path starts in, made absolute;
        with `bound` (the names the module's `use` declarations bind, and their paths), also a
        path that starts with such a name."""
        if not path:
            return None
        if bound and path[0] in bound and path[0] not in ("crate", "super", "self"):
            via = bound[path[0]]
            if via and via[0] != path[0]:
                target = self.resolve(via, here)
                return None if target is None else target + tuple(path[1:])
        if path[0] == "crate":
            base, rest = (), path[1:]
        elif path[0] in ("super", "self"):
            base, rest = here, path
            while rest and rest[0] in ("super", "self"):
                if rest[0] == "super":
                    if not base:
                        return None
                    base = base[:-1]
                rest = rest[1:]
        elif tuple(here) + (path[0],) in self.module_file:
            base, rest = here, path
        else:
            return None  # std, an external crate, or a local item
        return base + tuple(rest)

    def declares(self, parent: str, child: str) -> bool:
        """Whether `parent` is the mod.rs (or lib.rs/main.rs) that declares the file `child`."""
        if os.path.basename(parent) not in ("mod.rs", "lib.rs", "main.rs"):
            return False
        p, c = self.module_of(parent), self.module_of(child)
        return len(c) == len(p) + 1 and c[: len(p)] == p

    def file_for(self, absolute: tuple[str, ...]) -> str | None:
        for k in range(len(absolute), -1, -1):
            f = self.module_file.get(absolute[:k])
            if f is not None:
                return f
        return None

    def edges(self) -> dict[str, dict[str, set[str]]]:
        """file -> {file it imports from -> the paths that take names from it}."""
        graph: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
        for rel in sorted(self.module_file.values()):
            here_file = self.module_of(rel)
            text = strip_comments_and_strings(open(os.path.join(self.src, rel), encoding="utf-8").read())
            # Inline `mod name {` blocks shift where `super::` points; track them by brace depth.
            # Two passes: the first gathers the names each module's `use` declarations bind
            # (a path in the code may come before the `use` that makes it resolve).
            bound: dict[tuple[str, ...], dict[str, list[str]]] = defaultdict(dict)
            for gathering in (True, False):
                self.scan(rel, text, here_file, bound, gathering, graph)
        return graph

    def scan(
        self,
        rel: str,
        text: str,
        here_file: tuple[str, ...],
        bound: dict[tuple[str, ...], dict[str, list[str]]],
        gathering: bool,
        graph: dict[str, dict[str, set[str]]],
    ) -> None:
        """One pass over a file's tokens: gather `use` bindings, or record the edges."""
        mod_stack: list[tuple[str, int]] = []
        depth = 0
        tokens = re.finditer(
            r"(?P<mod>\bmod\s+(?P<name>\w+)\s*\{)|(?P<use>\buse\s+(?P<tree>[^;]+);)"
            r"|(?P<path>(?<![\w:])\s*(?:::\s*)?\w+(?:\s*::\s*\w+)+)|(?P<open>\{)|(?P<close>\})",
            text,
        )
        for m in tokens:
            if m.group("mod"):
                depth += 1
                mod_stack.append((m.group("name"), depth))
                continue
            if m.group("open"):
                depth += 1
                continue
            if m.group("close"):
                if mod_stack and mod_stack[-1][1] == depth:
                    mod_stack.pop()
                depth -= 1
                continue
            here = here_file + tuple(name for name, _ in mod_stack)
            if gathering:
                if m.group("use"):
                    for name, p in use_bindings(m.group("tree")):
                        bound[here][name] = [s for s in p.split("::") if s]
                continue
            if m.group("use"):
                paths = expand_use_tree(m.group("tree"))
                names = None
            else:
                paths = [re.sub(r"\s+", "", m.group("path"))]
                if paths[0].startswith("::"):
                    continue  # `::name::...`: an external crate
                names = bound.get(here)
            for p in paths:
                segs = [s for s in p.split("::") if s and s != "*"]
                absolute = self.resolve(segs, here, names)
                if absolute is None:
                    continue
                target = self.file_for(absolute)
                if target is None or target == rel:
                    continue
                # A child module's file is not "imported" by naming the module itself
                # (`mod x;` / `use x;`); a test module's `super::` is its parent by design.
                graph[rel][target].add(p)


def strongly_connected(graph: dict[str, dict[str, set[str]]]) -> list[list[str]]:
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    args = sys.argv[1:]
    unknown = [a for a in args if a.startswith("-") and a not in ("--all", "--strict")]
    if unknown:
        print(f"unknown option {unknown[0]}", file=sys.stderr)
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    show_all = "--all" in args
    dirs = [a for a in args if a not in ("--all", "--strict")] or DEFAULT_DIRS
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = 0
    for d in dirs:
        src = d if os.path.isabs(d) else os.path.join(repo, d)
        if not os.path.isdir(src):
            print(f"{d}: no such directory (give a crate's src/ folder)", file=sys.stderr)
            return 2
        crate = Crate(src)
        graph = crate.edges()
        is_test = lambda f: os.path.basename(f) in ("tests.rs",) or "/tests/" in f or f.startswith("tests/")
        for a in sorted(graph):
            for b in sorted(graph[a]):
                if a < b and a in graph.get(b, {}):
                    if is_test(a) or is_test(b):
                        continue
                    if crate.declares(a, b) or crate.declares(b, a):
                        print(f"{d}: {a} <-> {b} (a folder's mod.rs and its own file)")
                    else:
                        print(f"{d}: {a} <-> {b}")
                    found += 1
                    print(f"    {a} takes {', '.join(sorted(graph[a][b]))}")
                    print(f"    {b} takes {', '.join(sorted(graph[b][a]))}")
        if show_all:
            for comp in strongly_connected(graph):
                comp = [f for f in comp if not is_test(f)]
                if len(comp) > 2:
                    print(f"{d}: circle of {len(comp)} files: {' '.join(comp)}")
    if found:
        print(f"{found} import circle(s) of two files")
        return 1
    print("no import circle of two files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
