#!/usr/bin/env python3
"""The layout rules of src/ (HACKING.md "The layout of src/"), checked:

  1. no file in src/ over 1,000 lines;
  2. no include cycle between the directories of src/ (an arrow runs only
     downwards: a directory's headers and sources include only directories
     below it);
  3. no two .c files of one directory calling each other in a circle (a
     file calls another when it names, followed by "(", a function the other
     defines without `static`).

A regular-expression reading of C, not a compiler's: good enough for this
tree's style (one function definition starts at column 0 with its name and
its "(" on that line). Prints each violation and exits 1; prints nothing
on success. Run by scripts/static-check.sh (make check).
"""

import collections
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
MAX_LINES = 1000
DEF = re.compile(r"^(?!static\b)[A-Za-z_][\w \*]*?\b(\w+)\s*\([^;{]*\)\s*\{", re.M)
INCLUDE = re.compile(r'#include\s+"([^"]+)"')


def sccs(graph):
    """Tarjan's strongly connected components with more than one node."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def strip_comments(text):
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)


def main():
    problems = []
    dirs = sorted(d for d in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, d)))
    include_edges = collections.defaultdict(dict)
    for d in dirs:
        files = sorted(f for f in os.listdir(os.path.join(ROOT, d)) if f.endswith((".c", ".h", ".cpp")))
        texts = {f: open(os.path.join(ROOT, d, f), encoding="utf-8").read() for f in files}
        for f, t in texts.items():
            n = t.count("\n")
            if n > MAX_LINES:
                problems.append(f"src/{d}/{f}: {n} lines (at most {MAX_LINES}: split it by concern)")
            for inc in INCLUDE.findall(t):
                top = inc.split("/")[0] if "/" in inc else d
                if top != d and top in dirs:
                    include_edges[d].setdefault(top, f"src/{d}/{f} includes {inc}")
        # calls between the .c files of this directory
        code = {f: strip_comments(t) for f, t in texts.items() if f.endswith(".c")}
        defined = {}
        for f, t in code.items():
            for name in DEF.findall(t):
                defined[name] = f
        calls = collections.defaultdict(dict)
        for f, t in code.items():
            for name, g in defined.items():
                if g != f and g not in calls[f] and re.search(r"\b" + name + r"\s*\(", t):
                    calls[f][g] = name
        for comp in sccs({f: set(v) for f, v in calls.items()}):
            edges = [f"{a} -> {b} ({calls[a][b]})" for a in comp for b in comp if b in calls[a]]
            problems.append(f"src/{d}/: files call each other in a circle: " + "; ".join(edges))
    for comp in sccs({d: set(v) for d, v in include_edges.items()}):
        edges = [include_edges[a][b] for a in comp for b in comp if b in include_edges[a]]
        problems.append("include cycle between " + ", ".join(f"src/{c}/" for c in comp) + ": " + "; ".join(edges))
    for p in problems:
        print("layout-check: " + p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
