#!/usr/bin/env python3
"""Checks the include graph (and the CMake link graph) against cmake/layers.txt.

Every #include "..." in the tree's .h/.hpp/.cc/.cu/.c files is resolved to a file, both files are
mapped to their layers by path, and an include that the including layer may not make is reported
as file:line, the include and the two layers. With --links (written by CMake at configure time:
build/hvd_layer_links.txt), each layer target's links are checked too: it links only layers it
may use, it links every layer it includes, and it links PUBLIC exactly the layers its headers
include. With --diagram DOC, the layer diagram between DOC's markers (docs/architecture.md) must
be the one drawn from the layers file (--write redraws it). Exit status 1 when anything is
wrong, with one line per finding.

  python3 scripts/check_layers.py [--root DIR] [--layers FILE] [--links FILE]
                                  [--diagram DOC [--write]]
"""
import argparse
import os
import re
import subprocess
import sys
from collections import defaultdict

SOURCE_EXT = (".h", ".hpp", ".cc", ".cu", ".c")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')
# Folders that hold a public include root, searched after the including file's folder and the
# source root (as the compiler does): runtime/include holds <hvd/hvd.h>.
INCLUDE_ROOTS = ("runtime/include",)


class Layer:
    def __init__(self, name, line):
        self.name = name
        self.line = line
        self.target = None
        self.paths = []
        self.uses = {}  # layer -> None (any header) or set of headers
        self.any = False
        self.public = None  # None: every header
        self.bans = []

    def __repr__(self):
        return self.name


def parse_layers(path):
    layers = {}
    current = None
    errors = []
    with open(path) as f:
        for number, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].rstrip()
            if not line.strip():
                continue
            words = line.split()
            key, values = words[0], words[1:]
            where = f"{path}:{number}"
            if key == "layer":
                if len(values) != 1 or values[0] in layers:
                    errors.append(f"{where}: 'layer' wants one new name")
                    continue
                current = layers[values[0]] = Layer(values[0], number)
            elif current is None:
                errors.append(f"{where}: '{key}' before the first 'layer'")
            elif key == "target":
                current.target = None if values == ["-"] else values[0]
            elif key == "paths":
                current.paths += values
            elif key == "uses":
                for value in values:
                    if value == "-":
                        continue
                    if value == "*":
                        current.any = True
                        continue
                    m = re.fullmatch(r"([\w-]+)(?:\((.*)\))?", value)
                    if not m:
                        errors.append(f"{where}: cannot read 'uses {value}'")
                        continue
                    headers = set(m.group(2).split(",")) if m.group(2) else None
                    current.uses[m.group(1)] = headers
            elif key == "public":
                current.public = set(values)
            elif key == "bans":
                current.bans += values
            else:
                errors.append(f"{where}: unknown key '{key}'")
    for layer in layers.values():
        for used in layer.uses:
            if used not in layers:
                errors.append(f"{path}:{layer.line}: layer {layer.name} uses unknown layer {used}")
    return layers, errors


class LayerMap:
    """Maps a file to its layer: its exact entry, then its folder's "dir/", then the nearest
    "dir/**" above it."""

    def __init__(self, layers):
        self.files, self.dirs, self.trees = {}, {}, {}
        for layer in layers.values():
            for p in layer.paths:
                if p.endswith("/**"):
                    self.trees[p[:-3]] = layer
                elif p.endswith("/"):
                    self.dirs[p[:-1]] = layer
                else:
                    self.files[p] = layer

    def __call__(self, path):
        if path in self.files:
            return self.files[path]
        folder = os.path.dirname(path)
        if folder in self.dirs:
            return self.dirs[folder]
        while folder:
            if folder in self.trees:
                return self.trees[folder]
            folder = os.path.dirname(folder)
        return None


def source_files(root):
    try:
        out = subprocess.run(
            ["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"],
            check=True, capture_output=True, text=True).stdout.split("\n")
        files = [f for f in out if f.endswith(SOURCE_EXT) and os.path.isfile(os.path.join(root, f))]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: walk, skip builds
        files = []
        for folder, subdirs, names in os.walk(root):
            subdirs[:] = [d for d in subdirs if not d.startswith((".", "build"))
                          and not os.path.exists(os.path.join(folder, d, "CMakeCache.txt"))]
            rel = os.path.relpath(folder, root)
            files += [os.path.normpath(os.path.join(rel, n)) for n in names
                      if n.endswith(SOURCE_EXT)]
    return sorted(files)


def resolve(root, including, name):
    for base in [os.path.dirname(including), ""] + list(INCLUDE_ROOTS):
        candidate = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None


def describe_uses(layer):
    if layer.any:
        return "anything"
    if not layer.uses:
        return "no other layer"
    return " ".join(n if h is None else f"{n}({','.join(sorted(h))})"
                    for n, h in sorted(layer.uses.items()))


def include_problem(src, dst, header):
    """Why layer `src` may not include `header` of layer `dst`, or None."""
    if src is dst or src.any:
        return None
    if dst.name not in src.uses:
        return f"layer {src.name} may not include layer {dst.name} (it may use: {describe_uses(src)})"
    only = src.uses[dst.name]
    if only is not None and header not in only:
        return (f"layer {src.name} may include only {', '.join(sorted(only))} of layer "
                f"{dst.name}")
    if only is None and dst.public is not None and header not in dst.public:
        return (f"{header} is private to layer {dst.name} (its public headers: "
                f"{', '.join(sorted(dst.public))}), included from layer {src.name}")
    return None


def check_includes(root, layers, files):
    """Returns (problems, deps): deps[layer][other] = first "file:line" per kind ('all',
    'header') of an include from layer into other."""
    layer_of = LayerMap(layers)
    problems = []
    deps = defaultdict(lambda: {"all": {}, "header": {}})
    for path in files:
        src = layer_of(path)
        if src is None:
            problems.append(f"{path}: belongs to no layer (add it to the 'paths' of one in "
                            "cmake/layers.txt)")
            continue
        with open(os.path.join(root, path), errors="replace") as f:
            for number, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                kind, name = m.groups()
                where = f"{path}:{number}"
                if kind == "<":
                    for ban in src.bans:
                        if name.startswith(ban):
                            problems.append(f"{where}: #include <{name}>: layer {src.name} "
                                            f"bans <{ban}...>")
                    continue
                target = resolve(root, path, name)
                if target is None:
                    problems.append(f'{where}: #include "{name}": no such file in the tree')
                    continue
                dst = layer_of(target)
                if dst is None:
                    continue  # reported as a file in no layer
                why = include_problem(src, dst, target)
                if why:
                    problems.append(f'{where}: #include "{name}": {why}')
                if dst is not src:
                    deps[src.name]["all"].setdefault(dst.name, where)
                    if path.endswith((".h", ".hpp")):
                        deps[src.name]["header"].setdefault(dst.name, where)
    return problems, deps


def check_named_headers(root, layers):
    """The headers that 'public' and 'uses l(...)' name exist and belong to their layer."""
    layer_of = LayerMap(layers)
    problems = []
    for layer in layers.values():
        named = [(layer, h) for h in layer.public or ()]
        named += [(layers[l], h) for l, only in layer.uses.items() if l in layers for h in only or ()]
        for owner, header in named:
            if not os.path.isfile(os.path.join(root, header)) or layer_of(header) is not owner:
                problems.append(f"cmake/layers.txt:{layer.line}: {header} is not a header of "
                                f"layer {owner.name}")
    return problems


def read_links(path):
    """target -> (direct links, public links), each a list of names."""
    links = {}
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                continue
            target, direct, interface = parts
            private = re.findall(r"\$<LINK_ONLY:([^>]+)>", interface)
            interface = re.sub(r"\$<LINK_ONLY:[^>]+>", "", interface)
            public = [t for t in interface.split(";") if t and not t.startswith("$<")]
            links[target] = ([t for t in direct.split(";") if t] + public + private, public)
    return links


def check_links(layers, deps, links):
    problems = []
    by_target = {l.target: l for l in layers.values() if l.target}
    for layer in layers.values():
        if layer.target is None or layer.any:
            continue
        if layer.target not in links:
            continue  # not built in this configuration (the Python module without nanobind)
        direct_names, public_names = links[layer.target]
        direct = {by_target[t].name for t in direct_names if t in by_target}
        public = {by_target[t].name for t in public_names if t in by_target}
        name = f"target {layer.target} (layer {layer.name})"
        for other in sorted(direct - {layer.name}):
            if other not in layer.uses:
                problems.append(f"{name} links {layers[other].target}, but layer {layer.name} "
                                f"may not use layer {other}")
        for other, where in sorted(deps[layer.name]["all"].items()):
            if other not in direct and layers[other].target:
                problems.append(f"{name} includes layer {other} ({where}) but does not link "
                                f"{layers[other].target}")
        headers = deps[layer.name]["header"]
        for other in sorted(public - set(headers)):
            problems.append(f"{name} links {layers[other].target} PUBLIC, but no header of "
                            f"layer {layer.name} includes it: link it PRIVATE")
        for other, where in sorted(headers.items()):
            if other not in public and layers[other].target:
                problems.append(f"{name}: its header includes layer {other} ({where}), so it "
                                f"must link {layers[other].target} PUBLIC")
    return problems


DIAGRAM_BEGIN = "<!-- layer diagram: drawn from cmake/layers.txt by scripts/check_layers.py " \
    "--diagram docs/architecture.md --write; CTest checks it -->"
DIAGRAM_END = "<!-- end of the layer diagram -->"


def diagram(layers):
    """Each layer (in the file's order) and the layers it may include; "l (h only)" for a layer
    of which only some headers may be included."""
    width = max(len(name) for name in layers)
    lines = ["```"]
    for layer in layers.values():
        uses = []
        for used, headers in layer.uses.items():
            if headers is None:
                uses.append(used)
            else:
                names = ", ".join(sorted(os.path.basename(h) for h in headers))
                uses.append(f"{used} ({names} only)")
        if layer.any:
            uses.append("anything")
        line = f"{layer.name:<{width}}" + (f"  -> {', '.join(uses)}" if uses else "")
        if layer.target:
            line += f"   [{layer.target}]"
        lines.append(line.rstrip())
    lines.append("```")
    return "\n".join(lines)


def check_diagram(doc, layers, write):
    """Problems with the diagram between the markers of `doc`; with `write`, redraws it."""
    with open(doc) as f:
        text = f.read()
    begin, end = text.find(DIAGRAM_BEGIN), text.find(DIAGRAM_END)
    if begin < 0 or end < begin:
        return [f"{doc}: no layer diagram markers ({DIAGRAM_BEGIN!r} ... {DIAGRAM_END!r})"]
    start = begin + len(DIAGRAM_BEGIN)
    drawn = "\n" + diagram(layers) + "\n"
    if text[start:end] == drawn:
        return []
    if write:
        with open(doc, "w") as f:
            f.write(text[:start] + drawn + text[end:])
        print(f"{doc}: layer diagram redrawn")
        return []
    return [f"{doc}: the layer diagram differs from cmake/layers.txt; redraw it with "
            f"scripts/check_layers.py --diagram {doc} --write"]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.dirname(here))
    parser.add_argument("--layers", help="default: <root>/cmake/layers.txt")
    parser.add_argument("--links", help="the build's hvd_layer_links.txt (checks the targets)")
    parser.add_argument("--diagram", help="a document whose layer diagram must match")
    parser.add_argument("--write", action="store_true", help="redraw --diagram's diagram")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    layers, problems = parse_layers(args.layers or os.path.join(root, "cmake", "layers.txt"))
    files = source_files(root)
    problems += check_named_headers(root, layers)
    include_problems, deps = check_includes(root, layers, files)
    problems += include_problems
    if args.links:
        problems += check_links(layers, deps, read_links(args.links))
    if args.diagram:
        problems += check_diagram(args.diagram, layers, args.write)
    for p in problems:
        print(p)
    checked = f"{len(files)} files, {len(layers)} layers" + (", links" if args.links else "") \
        + (", diagram" if args.diagram else "")
    if problems:
        print(f"layers: {len(problems)} problem(s) ({checked})")
        return 1
    print(f"layers: include graph OK ({checked})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
