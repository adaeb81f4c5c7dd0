#!/usr/bin/env python3
"""Lists the longest functions of Rust source trees, by lines from `fn` to its closing brace.

Usage: scripts/long_fns.py [-n COUNT] [--over LINES] [--tests] DIR...
       (default: the 15 longest in backend/src, test modules and files left out)

A function's length counts its signature and body lines (not its doc comment). Functions
inside `#[cfg(test)] mod tests { ... }` blocks, files named tests.rs and files under a
folder named tests or *_tests (`mod fuzz_tests`) are left out unless --tests is given. With
--over LINES it prints only the functions longer than that and exits 1 if there is any. No dependency beyond
Python 3; comments and literals are blanked out by the import check's own scanner.
"""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from import_cycles import strip_comments_and_strings  # noqa: E402


def functions(path: str, rel: str, with_tests: bool) -> list[tuple[int, str, int]]:
    """(lines, `file:line name`, line) of every function with a body in the file."""
    text = strip_comments_and_strings(open(path, encoding="utf-8").read())
    out = []
    sig_text = text.replace("->", "  ")  # an arrow's `>` is not a closing angle bracket
    # Where the test modules are: `#[cfg(test)]` then `mod name {`.
    test_spans = []
    if not with_tests:
        for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
            end = match_brace(text, m.end() - 1)
            test_spans.append((m.start(), end))
    for m in re.finditer(r"\bfn\s+(\w+)", text):
        if any(a <= m.start() < b for a, b in test_spans):
            continue
        # The body's opening brace, unless a `;` (a declaration in a trait) comes first.
        i, depth = m.end(), 0
        while i < len(text):
            c = sig_text[i]
            if c in "(<[":
                depth += 1
            elif c in ")>]":
                depth -= 1
            elif c == ";" and depth <= 0:
                i = -1
                break
            elif c == "{" and depth <= 0:
                break
            i += 1
        if i < 0 or i >= len(text):
            continue
        end = match_brace(text, i)
        first = text.count("\n", 0, m.start()) + 1
        last = text.count("\n", 0, end) + 1
        out.append((last - first + 1, f"{rel}:{first} {m.group(1)}", first))
    return out


def match_brace(text: str, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text) - 1


def main() -> int:
    args = sys.argv[1:]
    count, over, with_tests, dirs = 15, None, False, []
    while args:
        a = args.pop(0)
        if a == "-n":
            count = int(args.pop(0))
        elif a == "--over":
            over = int(args.pop(0))
        elif a == "--tests":
            with_tests = True
        elif a.startswith("-"):
            print(f"unknown option {a}", file=sys.stderr)
            return 2
        else:
            dirs.append(a)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = []
    for d in dirs or ["backend/src"]:
        src = d if os.path.isabs(d) else os.path.join(repo, d)
        if not os.path.isdir(src):
            print(f"{d}: no such directory", file=sys.stderr)
            return 2
        for root, _, files in os.walk(src):
            for f in sorted(files):
                if not f.endswith(".rs"):
                    continue
                path = os.path.join(root, f)
                rel = os.path.relpath(path, repo)
                folders = os.path.relpath(root, src).split(os.sep)
                is_test = f == "tests.rs" or any(p == "tests" or p.endswith("_tests") for p in folders)
                if is_test and not with_tests:
                    continue
                found.extend(functions(path, rel, with_tests))
    found.sort(key=lambda t: (-t[0], t[1]))
    if over is not None:
        long = [f for f in found if f[0] > over]
        for lines, name, _ in long:
            print(f"{lines:5}  {name}")
        print(f"{len(long)} function(s) over {over} lines")
        return 1 if long else 0
    for lines, name, _ in found[:count]:
        print(f"{lines:5}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
