"""Where a 4-byte allreduce from Python spends its time (issue: small messages at the floor).

Run under hvdrun with 2 ranks; each rank times, in rounds that alternate the variants so that
the machine's load moves them alike, the median of N calls of:
  - hvd.torch.allreduce of a 1-element tensor (out of place: the frontend allocates the output),
  - hvd.torch.allreduce_ (in place),
  - hvd.torch.allreduce_async and synchronize (out of place, through the integer handle table
    the blocking calls skip),
  - the core's enqueue and wait on a NumPy array, in place (no frontend),
  - the core's enqueue alone (the binding's conversion, checks and submission),
and rank 0 writes their medians as JSON; `hvd-bench engine` gives the engine's own latency (C++,
no Python) to subtract.

    hvdrun -np 2 python bench/python_latency.py --json out.json
"""
import argparse
import json
import statistics
import time

import numpy as np
import torch

import hvd.torch as hvd
from hvd import _core

ALLREDUCE, SUM = _core.OP_TYPES["allreduce"], _core.REDUCE_OPS["sum"]


def timed(call, n):
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=1000, help="calls per variant and round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="rank 0 writes the medians here")
    args = ap.parse_args()
    torch.set_num_threads(1)
    hvd.init()
    tensor = torch.ones(1)
    array = np.ones(1, np.float32)

    def enqueue_alone():
        start = time.perf_counter()
        handle = _core.enqueue(ALLREDUCE, "core.enqueue", [array], [array], SUM)
        elapsed = time.perf_counter() - start
        handle.wait()
        return elapsed

    variants = {
        "hvd.torch.allreduce (out of place)": lambda: hvd.allreduce(tensor, name="w"),
        "hvd.torch.allreduce_ (in place)": lambda: hvd.allreduce_(tensor, name="w_"),
        "allreduce_async + synchronize (out of place)": lambda: hvd.synchronize(
            hvd.allreduce_async(tensor, name="wa")),
        "core enqueue + wait, NumPy, in place": lambda: _core.enqueue(
            ALLREDUCE, "core", [array], [array], SUM).wait(),
    }
    samples = {name: [] for name in [*variants, "core enqueue alone"]}
    for name, call in variants.items():  # warm-up: the response cache learns each name
        timed(call, 200)
    for r in range(args.rounds):
        order = list(variants.items())
        if r % 2:
            order.reverse()
        for name, call in order:
            samples[name] += timed(call, args.iters)
        samples["core enqueue alone"] += [enqueue_alone() for _ in range(args.iters)]
    medians = {name: statistics.median(s) * 1e6 for name, s in samples.items()}
    if hvd.rank() == 0:
        for name, us in medians.items():
            print(f"{name:40s} {us:7.2f} us")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"benchmark": "bench/python_latency.py", "ranks": hvd.size(),
                           "iters_per_round": args.iters, "rounds": args.rounds,
                           "median_us": medians, "engine_stats": _core.stats()}, f, indent=2)
    hvd.shutdown()


if __name__ == "__main__":
    main()
