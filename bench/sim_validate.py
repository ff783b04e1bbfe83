#!/usr/bin/env python3
"""The simulator against measured runs on this machine.

Calibrates the network model on 2 ranks (hvd-bench calibrate), measures each allreduce
algorithm for real (hvdrun ... hvd-bench, HVD_ALLREDUCE_ALGORITHM forced) at each world size on
this host, simulates the same sizes with the calibrated model (hvd-bench simulate), and prints
simulated / measured per size. Rounds interleave the real runs; the median of the rounds is
compared.

    bench/sim_validate.py --ranks 2 4 --transport shm --json bench/results/sim_validate_shm.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(REPO, "build", "apps")
ALGORITHMS = ["recursive_doubling", "ring", "rabenseifner"]


def run(cmd, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env, timeout=600)


def measured(ranks, algorithm, transport, args, path):
    run([os.path.join(BUILD, "hvdrun"), "-np", str(ranks), "--transport", transport,
         "-x", f"HVD_ALLREDUCE_ALGORITHM={algorithm}",
         os.path.join(BUILD, "hvd-bench"), "-b", args.min_bytes, "-e", args.max_bytes,
         "-f", "4", "-w", "5", "-n", "20", "-c", "0", "--json", path])
    with open(path) as f:
        return {row["size"]: row["in_place"]["time_us"] for row in json.load(f)["rows"]}


def simulated(ranks, model, args, path):
    run([os.path.join(BUILD, "hvd-bench"), "simulate", str(ranks), "--ranks-per-host",
         str(ranks), "--model", model, "--algorithms", ",".join(ALGORITHMS),
         "-b", args.min_bytes, "-e", args.max_bytes, "-f", "4", "--json", path])
    with open(path) as f:
        return {row["bytes"]: row["simulated_us"] for row in json.load(f)["rows"]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    p.add_argument("--transport", default="shm", choices=["shm", "tcp"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--min-bytes", default="4")
    p.add_argument("--max-bytes", default="16M")
    p.add_argument("--json")
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="hvd-sim-validate-")
    model = os.path.join(tmp, "model.json")
    run([os.path.join(BUILD, "hvdrun"), "-np", "2", "--transport", args.transport,
         os.path.join(BUILD, "hvd-bench"), "calibrate", "--save", model])
    with open(model) as f:
        calibrated = json.load(f)
    result = {"benchmark": "simulator against measured", "date": time.strftime("%Y-%m-%d"),
              "transport": args.transport, "model": calibrated, "worlds": []}
    for ranks in args.ranks:
        rounds = {a: [] for a in ALGORITHMS}
        for r in range(args.rounds):
            order = ALGORITHMS[r % 3:] + ALGORITHMS[:r % 3]
            for a in order:
                rounds[a].append(measured(ranks, a, args.transport, args,
                                          os.path.join(tmp, f"{ranks}_{a}_{r}.json")))
        sim = simulated(ranks, model, args, os.path.join(tmp, f"sim_{ranks}.json"))
        rows = []
        for size in sorted(sim):
            row = {"bytes": size}
            for a in ALGORITHMS:
                real = statistics.median(run_[size] for run_ in rounds[a])
                row[a] = {"measured_us": real, "simulated_us": sim[size][a],
                          "ratio": sim[size][a] / real}
            rows.append(row)
        result["worlds"].append({"ranks": ranks, "rows": rows})
        print(f"\n{ranks} ranks on one host over {args.transport}: simulated / measured (us)")
        print("| size | " + " | ".join(ALGORITHMS) + " |")
        print("|---|" + "---|" * len(ALGORITHMS))
        for row in rows:
            cells = [f"{row[a]['simulated_us']:.1f} / {row[a]['measured_us']:.1f} = "
                     f"{row[a]['ratio']:.2f}" for a in ALGORITHMS]
            print(f"| {row['bytes']} | " + " | ".join(cells) + " |")
        worst = max(abs(row[a]["ratio"] - 1) for row in rows for a in ALGORITHMS)
        print(f"worst error {worst:.0%}")
    print(f"\ncalibrated model: {json.dumps(calibrated)}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
