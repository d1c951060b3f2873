#!/usr/bin/env python3
"""The folders of src/ import one way: no cycle among them, at either depth.

Reads every #include "..." in src/ and builds two graphs: one of the top
folders (sink, pipeline, storage, query, server, ...), one of the second
level where a folder has subfolders (pipeline/durable, storage/clickhouse,
...). Fails, naming the files that close a cycle, if either has one, or if a
folder imports one it must not (RULES). Run by scripts/lint.sh.
"""
import collections
import os
import re
import sys

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
# Folders whose subfolders are components of their own.
SPLIT = {"pipeline", "storage", "receivers", "tools"}
# What a folder may import, beyond the rule of no cycles: the sink contract
# and the stores know nothing of the pipeline that feeds them.
RULES = {
    "sink": {"common", "model"},
    "common": set(),
    "model": {"common"},
    # Several nodes as one: ownership, health and the peer sink (a sink
    # plug-in over the codec), nothing of the pipeline, the receivers or the
    # server that wires them.
    "peers": {"common", "model", "codec", "sink"},
}
FORBIDDEN = {
    "storage": {"pipeline", "server", "receivers"},
    "query": {"storage", "server", "receivers"},
    "pipeline": {"query", "storage", "server", "receivers"},
}


def folder(path, depth):
    parts = path.split("/")
    if len(parts) == 1:
        return None  # main.cc: the binary, above everything
    if depth == 2 and parts[0] in SPLIT and len(parts) > 2:
        return parts[0] + "/" + parts[1]
    return parts[0]


def graph(depth):
    edges = collections.defaultdict(lambda: collections.defaultdict(list))
    for root, _, files in os.walk(SRC):
        for f in files:
            if not f.endswith((".h", ".cc")):
                continue
            rel = os.path.relpath(os.path.join(root, f), SRC).replace(os.sep, "/")
            a = folder(rel, depth)
            if a is None:
                continue
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                for m in re.finditer(r'^#include "([^"]+)"', fh.read(), re.M):
                    inc = m.group(1)
                    if not os.path.exists(os.path.join(SRC, inc)):
                        continue  # generated or from a library
                    b = folder(inc, depth)
                    if b is not None and a != b:
                        edges[a][b].append(f"{rel} -> {inc}")
    return edges


def cycles(edges):
    """Strongly connected components with more than one folder (Tarjan)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
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

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def main():
    problems = []
    for depth in (1, 2):
        edges = graph(depth)
        for comp in cycles(edges):
            problems.append(f"cycle among {', '.join(comp)}:")
            for a in comp:
                for b in comp:
                    for why in edges[a].get(b, [])[:3]:
                        problems.append(f"  {why}")
    top = graph(1)
    for a, allowed in RULES.items():
        for b, why in top.get(a, {}).items():
            if b not in allowed:
                problems.append(f"{a} may import only {sorted(allowed)}: {why[0]}")
    for a, banned in FORBIDDEN.items():
        for b, why in top.get(a, {}).items():
            if b in banned:
                problems.append(f"{a} must not import {b}: {why[0]}")
    if problems:
        print("check_deps: the folders do not import one way", file=sys.stderr)
        print("\n".join(problems), file=sys.stderr)
        return 1
    order = sorted(top, key=lambda a: len(top[a]))
    print(f"check_deps: no cycle among {len(order)} folders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
