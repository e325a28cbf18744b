#!/usr/bin/env python3
"""Checks that kolo's layers point one way and that no two units include
each other, by reading every #include under src/ and tools/.

Run as a test (tests/CMakeLists.txt): layering_check.py <source tree>

Layers. Every folder under src/ has a rank, and a file may include headers
of its own folder and of folders ranked below it, never above:

  common < net < metrics < store < transport < cuda < collectives
    < runtime < elastic < (src/*.cc, *.h: process, api) < training < torch
    < python < internal

A folder under src/ that is not in LAYERS fails the check: a new folder
must be given its place. tools/ include the public kolo/ headers, the
internal interface kolo_internal/ (src/internal/) and their own files,
never a src/ folder.

Includes. Every form counts: #include "x", #include <x> and the indented
or spaced forms (#  include, # include). A quoted include that names a
folder of src/ is kolo's; an angle-bracket one is kolo's when it names a
file that exists under src/ (so <torch/torch.h>, LibTorch's, is not
src/torch/'s), and kolo_internal/ is always kolo's.

Cycles. A unit is a file without its extension (common/config.h and
common/config.cc are the unit common/config). A cycle of units that include
each other fails the check, whatever their layers: each unit must be
understandable from the ones below it.
"""

import os
import re
import sys

# Lowest first; see the docstring. "" is the root of src/ (process.cc ...).
LAYERS = [
    "common", "net", "metrics", "store", "transport", "cuda", "collectives",
    "runtime", "elastic", "", "training", "torch", "python", "internal",
]
RANK = {name: rank for rank, name in enumerate(LAYERS)}
SOURCE_SUFFIXES = (".h", ".cc")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def Sources(root, tree):
    """Every .h and .cc file under root/tree, relative to root, sorted."""
    found = []
    for folder, _, files in os.walk(os.path.join(root, tree)):
        for name in files:
            if name.endswith(SOURCE_SUFFIXES):
                found.append(
                    os.path.relpath(os.path.join(folder, name), root))
    return sorted(found)


def Includes(root, path):
    """(line number, line, quote, included path) for every include."""
    with open(os.path.join(root, path), encoding="utf-8",
              errors="replace") as f:
        for number, line in enumerate(f, 1):
            match = INCLUDE.match(line)
            if match:
                yield number, line.strip(), match.group(1), match.group(2)


def SrcFolders(root):
    src = os.path.join(root, "src")
    return sorted(name for name in os.listdir(src)
                  if os.path.isdir(os.path.join(src, name)))


def Resolve(root, path, quote, included, folders):
    """The file under src/ an include names, relative to root, or None when
    it is not one of kolo's internal headers (kolo/, a tool's own file, the
    standard library, a dependency)."""
    first = included.split("/", 1)[0]
    if first == "kolo_internal":
        return os.path.join("src", "internal", included)
    if "/" not in included:
        # Beside the including file, else at src/'s root (an include
        # directory): process.h from src/api.cc or src/elastic/x.cc.
        if quote != '"' or not path.startswith("src" + os.sep):
            return None
        for candidate in (os.path.join(os.path.dirname(path), included),
                          os.path.join("src", included)):
            if os.path.isfile(os.path.join(root, candidate)):
                return candidate
        return None
    if first not in folders:
        return None
    candidate = os.path.join("src", included)
    if quote == "<" and not os.path.isfile(os.path.join(root, candidate)):
        return None
    return candidate


def FolderOf(path):
    """The src/ folder a file under src/ belongs to; "" for src/'s root."""
    parts = path.split(os.sep)
    return parts[1] if len(parts) > 2 else ""


def Unit(path):
    return os.path.splitext(path)[0]


def FindCycles(edges):
    """Strongly connected components of more than one unit (Tarjan)."""
    index, low, on_stack, stack, cycles = {}, {}, set(), [], []
    counter = [0]

    def Visit(unit):
        # Iterative, so that a deep include chain cannot overflow Python.
        work = [(unit, iter(sorted(edges.get(unit, ()))))]
        index[unit] = low[unit] = counter[0]
        counter[0] += 1
        stack.append(unit)
        on_stack.add(unit)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))

    for unit in sorted(edges):
        if unit not in index:
            Visit(unit)
    return sorted(cycles)


def Check(root):
    """Every violation in the tree at `root`, as lines of text."""
    violations = []
    folders = SrcFolders(root)
    for folder in folders:
        if folder not in RANK:
            violations.append(
                "src/%s/: a folder with no place in the layers; give it "
                "one in %s" % (folder, os.path.basename(__file__)))
    edges = {}
    for tree in ("src", "tools"):
        for path in Sources(root, tree):
            own = FolderOf(path) if tree == "src" else None
            for number, line, quote, included in Includes(root, path):
                target = Resolve(root, path, quote, included, folders)
                if target is None:
                    continue
                where = "%s:%d: %s: " % (path, number, line)
                if tree == "tools":
                    if not included.startswith("kolo_internal/"):
                        violations.append(
                            where + "tools see src/ only through "
                            "kolo_internal/ (src/internal/)")
                    continue
                theirs = FolderOf(target)
                if (own in RANK and theirs in RANK and
                        RANK[theirs] > RANK[own]):
                    violations.append(
                        where + "%s must not depend on %s, a layer above it"
                        % (own or "src/'s root", theirs or "src/'s root"))
                if Unit(target) != Unit(path):
                    edges.setdefault(Unit(path), set()).add(Unit(target))
    for cycle in FindCycles(edges):
        violations.append("units include each other: " + " <-> ".join(cycle))
    return violations


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: %s <the kolo source tree>\n" % argv[0])
        return 2
    violations = Check(argv[1])
    if violations:
        sys.stderr.write("%d include(s) break kolo's layering:\n  %s\n" %
                         (len(violations), "\n  ".join(violations)))
        return 1
    print("layering: no include against the layers, no cycle of units")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
