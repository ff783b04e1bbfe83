#!/usr/bin/env python3
"""Each parameter of the table (common/param_table.h) is spelled in C++ exactly once: its row.

Reads the parameters' HVD_* and HOROVOD_* names from `hvdrun --print-env-doc`, then looks for
each as a whole string literal ("HVD_FUSION_THRESHOLD") in the tree's C++ files, tests excepted
(they may name what they check). Any other spelling is a second definition that can drift from
the row: code reads the value through ParamValues with a ParamId, and names the variable with
params::envName(). Prints every name found other than once, with file:line of each spelling.

  check_param_table.py --root SRC --hvdrun BUILD/apps/hvdrun
"""
import argparse
import os
import re
import subprocess
import sys

CPP_EXT = (".h", ".hpp", ".cc", ".cu", ".c")
SKIP_TOP = {"test", "docs", "third_party"}


def table_names(hvdrun):
    rows = subprocess.run([hvdrun, "--print-env-doc"], check=True, capture_output=True,
                          text=True).stdout.splitlines()
    names = []
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        m = re.fullmatch(r"`(HVD_\w+)`", cells[0])
        if m:
            names.append(m.group(1))
            names += re.findall(r"`(HOROVOD_\w+)`", cells[1])
    return names


def cpp_files(root):
    for top in sorted(os.listdir(root)):
        if top.startswith((".", "build")) or top in SKIP_TOP:
            continue
        path = os.path.join(root, top)
        if os.path.isfile(path):
            if top.endswith(CPP_EXT):
                yield top
            continue
        for folder, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for f in sorted(files):
                if f.endswith(CPP_EXT):
                    yield os.path.relpath(os.path.join(folder, f), root)


def spellings(root, names):
    found = {n: [] for n in names}
    literal = re.compile(r'"((?:HVD|HOROVOD)_\w+)"')
    for rel in cpp_files(root):
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                for m in literal.finditer(line):
                    if m.group(1) in found:
                        found[m.group(1)].append(f"{rel}:{number}")
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--hvdrun", required=True)
    args = ap.parse_args()
    names = table_names(args.hvdrun)
    if not names:
        sys.exit("hvdrun --print-env-doc listed no parameters")
    bad = 0
    for name, where in spellings(args.root, names).items():
        if len(where) != 1:
            bad += 1
            print(f"{name}: spelled {len(where)} times in C++, expected once (its row in the "
                  f"parameter table): {', '.join(where) or 'nowhere'}")
    if bad:
        print(f"{bad} of {len(names)} names are not spelled exactly once; read them through "
              "ParamId and params::envName()")
        return 1
    print(f"every one of {len(names)} parameter names is spelled once in C++")
    return 0


if __name__ == "__main__":
    sys.exit(main())
