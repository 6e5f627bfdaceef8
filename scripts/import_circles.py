#!/usr/bin/env python3
"""Fails when modules of one crate import each other, two or a group in a ring (the house rule of ARCHITECTURE.md:
layers point one way). A module's imports are the `crate::…` and `super::…` paths in its
code outside `#[cfg(test)]` and comments; a name the crate root re-exports (`pub use m::{X}`)
counts as an import of `m`, and a name a module re-exports from its child (`crate::ab::X`, with
`pub use within::{X}` in `ab`) as an import of the child. A module and its own parent or child are not a circle.

Usage: scripts/import_circles.py [REPO]   (prints each circle; exit 1 when there is one)
"""
import glob
import os
import re
import sys


def module_name(crate_src, path):
    parts = os.path.relpath(path, crate_src)[:-3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return "::".join(parts)


def reexports(crate_src):
    names = {}
    for root in ("lib.rs", "main.rs"):
        p = os.path.join(crate_src, root)
        if not os.path.exists(p):
            continue
        text = open(p, encoding="utf-8").read()
        for m in re.finditer(r"pub use (\w+)::\{([^}]*)\}", text):
            for n in re.findall(r"\w+", m.group(2)):
                names[n] = m.group(1)
        for m in re.finditer(r"pub use (\w+)::(\w+);", text):
            names[m.group(2)] = m.group(1)
    return names


def child_reexports(mods):
    """(module, name) -> the child module a module's `pub use child::{name}` takes it from."""
    out = {}
    for mod, path in mods.items():
        text = open(path, encoding="utf-8").read().split("#[cfg(test)]")[0]
        for m in re.finditer(r"pub use (?:self::)?(\w+)::\{([^}]*)\}", text):
            child = (mod + "::" if mod else "") + m.group(1)
            if child in mods:
                for n in re.findall(r"\w+", m.group(2)):
                    out[(mod, n)] = child
        for m in re.finditer(r"pub use (?:self::)?(\w+)::(\w+);", text):
            child = (mod + "::" if mod else "") + m.group(1)
            if child in mods:
                out[(mod, m.group(2))] = child
    return out


def imports(crate_src):
    files = glob.glob(os.path.join(crate_src, "**", "*.rs"), recursive=True)
    mods = {module_name(crate_src, f): f for f in files}
    roots = reexports(crate_src)
    inner = child_reexports(mods)
    graph = {}
    for mod, path in mods.items():
        code = open(path, encoding="utf-8").read().split("#[cfg(test)]")[0]
        code = re.sub(r"//[^\n]*", "", code)
        deps = set()
        for m in re.finditer(r"\bcrate::((?:\w+::)*\w+)", code):
            parts = m.group(1).split("::")
            for i in range(len(parts), 0, -1):
                if "::".join(parts[:i]) in mods:
                    found = "::".join(parts[:i])
                    # A name a module re-exports from its child is the child's.
                    if i < len(parts):
                        found = inner.get((found, parts[i]), found)
                    deps.add(found)
                    break
            else:
                if parts[0] in roots:
                    deps.add(roots[parts[0]])
        parent = "::".join(mod.split("::")[:-1])
        for m in re.finditer(r"\bsuper::(\w+)", code):
            cand = (parent + "::" if parent else "") + m.group(1)
            if cand in mods:
                deps.add(cand)
        graph[mod] = {
            d
            for d in deps
            if d and d != mod and not mod.startswith(d + "::") and not d.startswith(mod + "::")
        }
    return graph


def groups(graph):
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next((x for x in it if x in graph), None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = counter
                counter += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(graph[w]))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return out


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else "."
    circles = []
    for crate_src in sorted(glob.glob(os.path.join(repo, "crates", "*", "src"))):
        for comp in groups(imports(crate_src)):
            circles.append(f"{os.path.dirname(crate_src)}: {' <-> '.join(comp)}")
    for c in circles:
        print(f"import circle: {c}")
    return 1 if circles else 0


if __name__ == "__main__":
    sys.exit(main())
