#!/usr/bin/env python3
"""Simulated allreduce or broadcast at scale: hvd-bench simulate for several world sizes on one
topology.

Runs the real algorithms on the simulated transport (virtual time) for each world size, writes
every row to one JSON file, prints the markdown tables docs/performance.md quotes (the cost
model's choice against the lower bound, and against the flat ring for allreduce or the size
threshold's pick for broadcast: the tree below 256 KiB, the chain from there) and draws time
against ranks per size (PNG, with matplotlib).

    bench/scale_sim.py --ranks 16 64 256 1024 4096 --ranks-per-host 8 \
        --json bench/results/scale_sim.json --plot docs/images/scale_sim.png
    bench/scale_sim.py --op broadcast --ranks 16 64 256 1024 4096 --ranks-per-host 8 \
        --json bench/results/scale_sim_broadcast.json
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def simulate(bench, ranks, args):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [bench, "simulate", str(ranks), "-o", args.op,
               "--ranks-per-host", str(args.ranks_per_host),
               "-b", args.min_bytes, "-e", args.max_bytes, "-f", str(args.step_factor),
               "--json", out.name]
        if args.model:
            cmd += ["--model", args.model]
        if args.op == "allreduce" and args.no_ring_from and ranks >= args.no_ring_from:
            cmd += ["--algorithms", "recursive_doubling,rabenseifner,hierarchical"]
        if args.op == "broadcast" and args.no_chain_from and ranks >= args.no_chain_from:
            cmd += ["--algorithms", "binomial_tree,scatter_allgather,hierarchical"]
        start = time.time()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        print(f"scale_sim: {ranks} ranks simulated in {time.time() - start:.0f} s", file=sys.stderr)
        with open(out.name) as f:
            return json.load(f)


def size_name(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}"
    return f"{n} B"


def reference(op, row):
    """(name, simulated us) of what the chosen algorithm is compared with: the flat ring for
    allreduce, the size threshold's pick (the rule within one host) for broadcast."""
    if op == "broadcast":
        name = "binomial_tree" if row["bytes"] < 256 * 1024 else "pipelined_chain"
        return "threshold", row["simulated_us"].get(name)  # None where the chain was left out
    return "ring", row["simulated_us"].get("ring")


def table(runs, op):
    """One markdown table: per size and ranks, the chosen algorithm's time against the bound
    and against the reference (the flat ring, or broadcast's size threshold)."""
    sizes = [row["bytes"] for row in runs[0]["rows"]]
    head = "| size | " + " | ".join(f"{r['ranks']} ranks" for r in runs) + " |"
    lines = [head, "|" + "---|" * (len(runs) + 1)]
    for i, size in enumerate(sizes):
        cells = []
        for run in runs:
            row = run["rows"][i]
            chosen = row["simulated_us"][row["chosen"]]
            name, ref = reference(op, row)
            faster = f", {name}/chosen {ref / chosen:.1f}x" if ref else ""
            mark = "" if row["chosen"] == row["fastest"] else f" (fastest: {row['fastest']})"
            cells.append(f"{chosen:.1f} us {row['chosen']}{mark}; {chosen / row['bound_us']:.2f}x "
                         f"bound{faster}")
        lines.append(f"| {size_name(size)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(runs, path, op):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [row["bytes"] for row in runs[0]["rows"]]
    ranks = [run["ranks"] for run in runs]
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, size in enumerate(sizes):
        times = [run["rows"][i]["simulated_us"][run["rows"][i]["chosen"]] for run in runs]
        ax.plot(ranks, times, marker="o", label=size_name(size))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("ranks")
    ax.set_ylabel(f"simulated {op} time (us), auto's algorithm")
    ax.set_title(f"hvd {op}, simulated, {runs[0]['model']['ranks_per_host']} ranks per host")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="size", fontsize=8)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--op", choices=["allreduce", "broadcast"], default="allreduce")
    p.add_argument("--ranks", type=int, nargs="+", default=[16, 64, 256, 1024, 4096])
    p.add_argument("--ranks-per-host", type=int, default=8)
    p.add_argument("--model", help="network model JSON (default: hvd's built-in model)")
    p.add_argument("--min-bytes", default="4")
    p.add_argument("--max-bytes", default="1G")
    p.add_argument("--step-factor", type=int, default=16)
    p.add_argument("--no-ring-from", type=int, default=4096,
                   help="leave the flat ring out from this many ranks on (0: never): its 2(N-1) "
                        "steps of N messages take about 25 min to simulate at 4,096 ranks")
    p.add_argument("--no-chain-from", type=int, default=4096,
                   help="broadcast: leave the flat chain out from this many ranks on (0: never): "
                        "at 4,096 ranks it is 8 million messages for 1 GiB, and from 1,024 ranks "
                        "up the other forms beat it at every size")
    p.add_argument("--bench", default=os.path.join(REPO, "build", "apps", "hvd-bench"))
    p.add_argument("--json", help="write every run here")
    p.add_argument("--plot", help="write the PNG here")
    p.add_argument("--from-json", help="only redraw the table and plot from this file")
    args = p.parse_args()
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        p.error(f"--plot needs matplotlib, which {sys.executable} lacks "
                "(scripts/setup.sh --bench installs it)")
    if args.from_json:
        with open(args.from_json) as f:
            saved = json.load(f)
        runs, args.op = saved["runs"], saved.get("op", "allreduce")
    else:
        runs = [simulate(args.bench, n, args) for n in args.ranks]
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"benchmark": f"simulated {args.op} at scale", "op": args.op,
                           "date": time.strftime("%Y-%m-%d"), "runs": runs}, f, indent=1)
    print(table(runs, args.op))
    if args.plot:
        plot(runs, args.plot, args.op)


if __name__ == "__main__":
    main()
