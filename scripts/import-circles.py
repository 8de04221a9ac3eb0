#!/usr/bin/env python3
"""File-level import circles in the workspace's crates.

For every crate (a `src/` with `lib.rs` or `main.rs`), each `.rs` file is a
node; a file imports another when it names a path into it (`use crate::..`,
`use super::..`, `use self::..`, or `crate::..`/`super::..` written inline).
A path to a module that only re-exports an item (`pub use child::Item`) is
followed to the child that defines it, and paths to the crate root (the
index every crate keeps) are not edges.

A circle is allowed when all its files live in one folder ("one room"), or
when every file of it says why at its top, in a line of its doc comment that
contains "import circle:". Any other circle is printed and the script exits
with 1. Run: `scripts/import-circles.py` (from anywhere in the repository);
`--all` also lists the circles within one folder.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SKIP_DIRS = {"target", ".git", "node_modules"}

USE_RE = re.compile(r"\buse\s+((?:crate|super|self)(?:::[^;]*)?);", re.S)
INLINE_RE = re.compile(r"\b((?:crate|super)(?:::(?:super|[A-Za-z_][A-Za-z0-9_]*))+)")
PUB_USE_RE = re.compile(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", re.S)
COMMENT_RE = re.compile(r"//[^\n]*")


def crate_roots():
    """Every src/ folder holding a lib.rs or main.rs, outside target/."""
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        if os.path.basename(dirpath) == "src" and (
            "lib.rs" in filenames or "main.rs" in filenames
        ):
            yield Path(dirpath)


def module_files(src: Path) -> dict[tuple[str, ...], Path]:
    """Module path -> file, for the files of one crate (bin/ targets apart)."""
    modules: dict[tuple[str, ...], Path] = {}
    for path in src.rglob("*.rs"):
        rel = path.relative_to(src)
        if rel.parts[0] == "bin":
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "mod":
            parts.pop()
        if parts in (["lib"], ["main"]):
            parts = []
        modules[tuple(parts)] = path
    return modules


def expand_use_tree(tree: str) -> list[str]:
    """`a::{b, c::{d, e}}` -> [`a::b`, `a::c::d`, `a::c::e`]."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"\bas\b.*$", "", tree)]
    prefix, inner = tree[:brace], tree[brace + 1 : tree.rfind("}")]
    items, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(inner[start:i])
            start = i + 1
    items.append(inner[start:])
    paths = []
    for item in filter(None, items):
        for sub in expand_use_tree(item):
            paths.append(prefix + sub if sub != "self" else prefix.rstrip(":"))
    return paths


def absolute(path: str, here: tuple[str, ...]) -> list[str] | None:
    """A `crate::`/`super::`/`self::` path as segments from the crate root."""
    segments = [s for s in path.split("::") if s]
    if not segments:
        return None
    if segments[0] == "crate":
        return segments[1:]
    base = list(here)
    if segments[0] == "self":
        return base + segments[1:]
    while segments and segments[0] == "super":
        if not base:
            return None
        base.pop()
        segments.pop(0)
    return base + segments


def reexports(text: str, here: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Item name -> the child module a `pub use` of this module takes it from."""
    table: dict[str, tuple[str, ...]] = {}
    for tree in PUB_USE_RE.findall(text):
        for path in expand_use_tree(tree):
            segments = path.split("::")
            if segments[0] in ("crate", "super"):
                continue
            if segments[0] == "self":
                segments = segments[1:]
            if len(segments) >= 2:
                table[segments[-1]] = here + tuple(segments[:-1])
    return table


def resolve(segments, modules, exports):
    """The file a path lands in: the longest module prefix, then the
    re-exports of the item named next, followed to the module defining it."""
    for cut in range(len(segments), -1, -1):
        module = tuple(segments[:cut])
        if module not in modules:
            continue
        item = segments[cut] if cut < len(segments) else None
        seen = {module}
        while item is not None and item in exports.get(module, {}):
            target = exports[module][item]
            while target and target not in modules:
                target = target[:-1]
            if target in seen:
                break
            seen.add(target)
            module = target
        return module
    return None


def strongly_connected(graph):
    index, low, stack, on_stack, result, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for succ in graph.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                result.append(component)

    sys.setrecursionlimit(10000)
    for node in list(graph):
        if node not in index:
            visit(node)
    return result


def says_why(path: Path) -> bool:
    head = path.read_text(encoding="utf-8").splitlines()[:40]
    return any("import circle:" in line for line in head if line.lstrip().startswith("//"))


def main() -> int:
    failures = 0
    for src in sorted(crate_roots()):
        modules = module_files(src)
        texts = {m: COMMENT_RE.sub("", p.read_text(encoding="utf-8")) for m, p in modules.items()}
        exports = {m: reexports(t, m) for m, t in texts.items()}
        graph: dict[tuple[str, ...], set[tuple[str, ...]]] = {m: set() for m in modules}
        for module, text in texts.items():
            paths = [p for tree in USE_RE.findall(text) for p in expand_use_tree(tree)]
            paths += INLINE_RE.findall(text)
            for path in paths:
                segments = absolute(path, module)
                if segments is None:
                    continue
                target = resolve(segments, modules, exports)
                if target is None or target == () or target == module:
                    continue
                graph[module].add(target)
        for component in strongly_connected(graph):
            files = sorted(modules[m] for m in component)
            rooms = {f.parent for f in files}
            if len(rooms) == 1 or all(says_why(f) for f in files):
                if "--all" in sys.argv:
                    print("circle within one folder (allowed):")
                    for f in files:
                        print(f"  {f.relative_to(ROOT)}")
                continue
            failures += 1
            print("import circle across folders:", file=sys.stderr)
            for f in files:
                print(f"  {f.relative_to(ROOT)}", file=sys.stderr)
    if failures:
        print(
            f"{failures} circle(s): break them, or write the reason at the top of each file "
            "(a comment line containing 'import circle:')",
            file=sys.stderr,
        )
        return 1
    print("no import circles across folders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
