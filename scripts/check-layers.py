#!/usr/bin/env python3
"""Checks lcr's layering from its #include lines (run by ctest as layout.layers).

The top-level folders are layers, bottom-up:
    kernels (with the foundation kernels/base) < parallel < core < experiments
and tests/ stands on all of them. A source file may include from its own layer or a lower
one; an include reaching up a layer is an error. Inside each layer the folders one level
down (kernels/base, core/data, core/model, parallel/ring, ...) must not include each other
in a cycle. kernels/attention (the API: spec, dispatch) and kernels/schemes (the scheme units
it dispatches to, which use the spec) are one unit for this check.

    scripts/check-layers.py           # prints every cross-folder include, then the verdict
    scripts/check-layers.py --quiet   # the verdict only; exit 1 on a violation
"""
import collections
import os
import re
import sys

LAYERS = ["kernels", "parallel", "core", "experiments"]
SOURCE = re.compile(r"\.(cpp|hpp|cu|cuh|inl|h)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# Folders treated as one unit by the cycle check (see the docstring).
MERGED = {"kernels/schemes": "kernels/attention"}


def includes(root):
    """Yields (file, included path) for every project include under the layers."""
    for top in LAYERS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not SOURCE.search(name):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root)
                with open(path, errors="replace") as f:
                    for inc in INCLUDE.findall(f.read()):
                        if inc.split("/")[0] in LAYERS:
                            yield rel, inc


def folder(path):
    unit = "/".join(path.split("/")[:2]) if path.count("/") >= 2 else path.split("/")[0]
    return MERGED.get(unit, unit)


def cycles(graph):
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main():
    quiet = "--quiet" in sys.argv
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    upward, cross = [], collections.Counter()
    graph, example = collections.defaultdict(set), {}
    for src, inc in includes(root):
        a, b = src.split("/")[0], inc.split("/")[0]
        if a != b:
            cross[(a, b)] += 1
            if LAYERS.index(b) > LAYERS.index(a):
                upward.append(f"{src} includes {inc} ({a} is below {b})")
        else:
            fa, fb = folder(src), folder(inc)
            if fa != fb:
                graph[fa].add(fb)
                graph[fb]
                example.setdefault((fa, fb), f"{src} -> {inc}")
    if not quiet:
        print("cross-layer includes (from -> to: count):")
        for (a, b), n in sorted(cross.items()):
            print(f"  {a} -> {b}: {n}")
    problems = list(upward)
    for comp in cycles(graph):
        edges = [example[(a, b)] for a in comp for b in sorted(graph[a]) if b in comp]
        problems.append("folders include each other in a cycle: " + ", ".join(comp) +
                        "\n      " + "\n      ".join(edges))
    for p in problems:
        print("check-layers: " + p, file=sys.stderr)
    if problems:
        print("check-layers: move the included code down a layer, or the includer up "
              "(layers bottom-up: " + " < ".join(LAYERS) + ")", file=sys.stderr)
        return 1
    print("check-layers: ok (" + " < ".join(LAYERS) + "; no upward include, no folder cycle)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
