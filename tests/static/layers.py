#!/usr/bin/env python3
"""layers.py: checks the library's layering (run by tests/static/test_layers.sh).

The layers are the folders of src/, top to bottom in the order src/README.md lists them. A file
"calls" another when its code names a non-static lg_ function or variable defined there: read
from the sources (comments and strings stripped), and, when the objects are given, from what
each object file leaves undefined (which also sees an inline helper of a header reaching into
another file's globals). Fails on:
  - a call from a file to a file of a layer above its own;
  - a circle of calls among files (inside one layer too);
  - a C file or Python module of the library of 500 lines or more, a header of 700 or more.
usage: layers.py SRC_DIR PY_DIR [OBJ_DIR]      prints one line per fault, then a summary
"""
import collections
import glob
import os
import re
import subprocess
import sys

C_MAX, H_MAX, PY_MAX = 500, 700, 500


def layer_order(src):
    """The layer folders, top first, as src/README.md's layer table lists them (| `name/` |)."""
    text = open(os.path.join(src, "README.md")).read()
    return re.findall(r"^\|\s*`([a-z_]+)/`\s*\|", text, flags=re.M)


def strip(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"'(\\.|[^'\\])'", "' '", text)
    return re.sub(r'"(\\.|[^"\\\n])*"', '""', text)


# A definition at file scope: a line that starts with a type (not static) and names lg_x followed
# by "(" (a function whose body opens on a later line or the same one) or by "=", ";", "[".
DEF = re.compile(r"^(?!static\b|extern\b|typedef\b|return\b|#)[A-Za-z_][\w \*]*?\b(lg_\w+)\s*(\(|=|;|\[)", re.M)


def definitions(code):
    names = set()
    for m in DEF.finditer(code):
        if m.group(2) == "(":
            # a prototype ends with ");" before any "{"
            rest = code[m.end():]
            brace, semi = rest.find("{"), rest.find(";")
            if semi != -1 and (brace == -1 or semi < brace):
                continue
        names.add(m.group(1))
    return names


def sccs(nodes, edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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
            out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    src, pydir = sys.argv[1], sys.argv[2]
    objdir = sys.argv[3] if len(sys.argv) > 3 else None
    faults = []
    order = layer_order(src)
    if len(order) < 2:
        print("src/README.md lists no layer table (| `folder/` | rows)")
        return 1
    rank = {name: i for i, name in enumerate(order)}  # 0 is the top
    layer_of, code = {}, {}
    for path in sorted(glob.glob(os.path.join(src, "**", "*.c"), recursive=True)):
        rel = os.path.relpath(path, src)
        parts = rel.split(os.sep)
        name = os.path.basename(path)[:-2]
        if len(parts) != 2 or parts[0] not in rank:
            faults.append(f"{rel}: not in a layer folder ({', '.join(order)})")
            continue
        if name in layer_of:
            faults.append(f"{rel}: a second file named {name}.c")
            continue
        layer_of[name] = parts[0]
        code[name] = strip(open(path).read())
    for d in glob.glob(os.path.join(src, "*", "")):
        if os.path.basename(os.path.dirname(d)) not in rank:
            faults.append(f"src/{os.path.basename(os.path.dirname(d))}/: a folder the layer table does not list")

    owner = {}
    for name, text in code.items():
        for sym in definitions(text):
            owner.setdefault(sym, name)
    edges, why = collections.defaultdict(set), collections.defaultdict(set)

    def add(a, b, sym):
        if a != b and a in layer_of and b in layer_of:
            edges[a].add(b)
            why[(a, b)].add(sym)

    for name, text in code.items():
        for sym in set(re.findall(r"\blg_\w+", text)):
            if sym in owner:
                add(name, owner[sym], sym)
    if objdir:
        defined, undefined = {}, {}
        for obj in glob.glob(os.path.join(objdir, "*.o")):
            name = os.path.basename(obj)[:-2]
            if name not in layer_of:
                continue
            out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
            for line in out.splitlines():
                f = line.split()
                if len(f) == 3 and f[1] in "TDBRC":
                    defined[f[2]] = name
                elif len(f) == 2 and f[0] == "U":
                    undefined.setdefault(name, set()).add(f[1])
        for name, syms in undefined.items():
            for sym in syms:
                if sym in defined:
                    add(name, defined[sym], sym)

    for a in sorted(edges):
        for b in sorted(edges[a]):
            if rank[layer_of[b]] < rank[layer_of[a]]:
                faults.append(f"upward call: {layer_of[a]}/{a}.c -> {layer_of[b]}/{b}.c "
                              f"({', '.join(sorted(why[(a, b)])[:4])})")
    for comp in sccs(layer_of, edges):
        if len(comp) > 1:
            ties = [f"{a}->{b} ({sorted(why[(a, b)])[0]})" for a in comp for b in sorted(edges[a]) if b in comp]
            faults.append(f"circle: {' '.join(comp)}: {'; '.join(ties)}")

    sizes = []
    for path in glob.glob(os.path.join(src, "**", "*.[ch]"), recursive=True):
        sizes.append((path, H_MAX if path.endswith(".h") else C_MAX))
    for path in glob.glob(os.path.join(pydir, "**", "*.py"), recursive=True):
        sizes.append((path, PY_MAX))
    biggest = (0, "")
    for path, cap in sorted(sizes):
        n = sum(1 for _ in open(path))
        biggest = max(biggest, (n, os.path.relpath(path, os.path.dirname(src))))
        if n >= cap:
            faults.append(f"{os.path.relpath(path, os.path.dirname(src))}: {n} lines (a reader holds fewer than {cap})")

    for f in faults:
        print(f)
    n_edges = sum(len(v) for v in edges.values())
    print(f"layers: {' > '.join(order)}; {len(layer_of)} C files, {n_edges} calls between files, "
          f"largest {biggest[1]} ({biggest[0]} lines); {len(faults)} fault(s)")
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(main())
