#!/usr/bin/env python3
"""docs/cli.md's flag tables name exactly the flags hvdrun accepts.

`hvdrun --print-flags` lists every option CLI11 knows (the launcher's own, the parameter table's,
--help and --version), each with every name it is accepted as (-np, -hostfile and -cb included)
and its help text. The flag tables are the tables of the doc's hvdrun section whose first column
is "flag"; a row names the flags that start its first column's `code` spans. Fails naming each
flag that
  - hvdrun accepts but no row names,
  - a row names but hvdrun does not accept,
  - comes from the parameter table with a default (--help's "(HVD_X, default D)") while the
    default column of its row does not mention D.

  check_cli_doc.py --hvdrun BUILD/apps/hvdrun --doc SRC/docs/cli.md
"""
import argparse
import re
import subprocess
import sys

SECTION = "# `hvdrun` command line"
PARAM_DEFAULT = re.compile(r"\((HVD_\w+), default (.+)\)$")


def hvdrun_flags(hvdrun):
    """[(names, help)] per option, from hvdrun --print-flags."""
    out = subprocess.run([hvdrun, "--print-flags"], check=True, capture_output=True,
                         text=True).stdout
    options = []
    for line in out.splitlines():
        names, _, help_text = line.partition("\t")
        options.append((names.split(), help_text))
    if not options:
        sys.exit(f"{hvdrun} --print-flags listed no options")
    return options


def cells(row):
    return [c.strip() for c in re.split(r"(?<!\\)\|", row.strip())[1:-1]]


def row_flags(first_cell):
    """The flags a row names: the first word of each `code` span that starts with '-'."""
    out = []
    for span in re.findall(r"`([^`]*)`", first_cell):
        words = span.split()
        if words and re.fullmatch(r"--?[A-Za-z][\w-]*", words[0]):
            out.append(words[0])
    return out


def doc_rows(text, doc):
    """[(line number, row, flags, default cell)] of the flag tables in the hvdrun section."""
    lines = text.splitlines()
    try:
        start = lines.index(SECTION)
    except ValueError:
        sys.exit(f"{doc}: no '{SECTION}' section")
    rows = []
    in_flag_table = False
    header = True
    for number, line in enumerate(lines[start + 1:], start + 2):
        if line.startswith("# "):
            break
        if not line.startswith("|"):
            in_flag_table = False
            header = True
            continue
        if header:
            in_flag_table = cells(line)[:1] == ["flag"]
            header = False
            continue
        if in_flag_table and not re.fullmatch(r"[\s|:-]+", line):
            c = cells(line)
            rows.append((number, line, row_flags(c[0]), c[1] if len(c) > 1 else ""))
    if not rows:
        sys.exit(f"{doc}: no flag table (a table whose first column is 'flag') in '{SECTION}'")
    return rows


def mentions(cell, value):
    plain = cell.replace("`", "")
    return re.search(r"(?<![\w.])" + re.escape(value) + r"(?![\w.])", plain) is not None


def problems(options, rows, doc):
    accepted = {name for names, _ in options for name in names}
    documented = {}
    for number, row, flags, default in rows:
        if not flags:
            yield f"{doc}:{number}: a flag table's row names no flag\n  {row}"
        for flag in flags:
            documented.setdefault(flag, []).append((number, row, default))
    for names, help_text in options:
        for name in names:
            if name not in documented:
                yield (f"{name}: hvdrun accepts it but {doc} has no row for it\n"
                       f"  --help: {help_text}")
        param = PARAM_DEFAULT.search(help_text)
        if not param:
            continue
        variable, value = param.groups()
        where = sorted({r for name in names for r in documented.get(name, [])})
        for number, row, default in where:
            if not mentions(default, value):
                yield (f"{names[0]}: {doc}:{number} gives the default as '{default}', but the "
                       f"parameter table's ({variable}) is {value}")
    for flag, where in documented.items():
        if flag not in accepted:
            for number, row, _ in where:
                yield f"{flag}: {doc}:{number} names it but hvdrun does not accept it\n  {row}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hvdrun", required=True)
    ap.add_argument("--doc", required=True)
    args = ap.parse_args()
    options = hvdrun_flags(args.hvdrun)
    rows = doc_rows(open(args.doc, encoding="utf-8").read(), args.doc)
    found = list(problems(options, rows, args.doc))
    for p in found:
        print(p)
    if found:
        print(f"{args.doc}: {len(found)} problems with its flag tables against "
              f"`hvdrun --print-flags`")
        return 1
    names = sum(len(n) for n, _ in options)
    print(f"{args.doc}: its flag tables name all {names} names of hvdrun's {len(options)} options, "
          "and no other")
    return 0


if __name__ == "__main__":
    sys.exit(main())
