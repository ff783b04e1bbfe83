"""hvd.SyncBatchNorm against torch's BatchNorm2d (the same layer without synchronisation):
forward + backward of one layer per timed call, for ResNet-like activation shapes, one thread
per rank. Run it under hvdrun; rank 0 prints the medians and writes them as JSON.

    hvdrun -np 2 python bench/sync_batch_norm.py --rounds 3 --json bench/results/sync_bn.json

--reference FILE adds another SyncBatchNorm class (a module file defining SyncBatchNorm, e.g. an
older version taken with `git show REV:python/hvd/torch/sync_batch_norm.py > old.py`) to the
same rounds, for before/after comparisons.
"""
import argparse
import importlib.util
import json
import statistics
import time

import torch

import hvd.torch as hvd

SHAPES = [(8, 64, 56, 56), (8, 256, 14, 14), (32, 512, 7, 7)]


def load_reference(path):
    spec = importlib.util.spec_from_file_location("reference_sync_batch_norm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SyncBatchNorm


def time_layer(layer, x, iterations, warmup):
    times = []
    for i in range(warmup + iterations):
        hvd.barrier()  # every rank starts together, as in synchronous training
        start = time.perf_counter()
        layer(x).sum().backward()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--reference", help="a module file defining another SyncBatchNorm")
    parser.add_argument("--json", help="rank 0 writes the results here")
    args = parser.parse_args()
    hvd.init()
    torch.set_num_threads(1)
    torch.manual_seed(hvd.rank())
    layers = {"BatchNorm2d": torch.nn.BatchNorm2d, "hvd.SyncBatchNorm": hvd.SyncBatchNorm}
    if args.reference:
        layers["reference SyncBatchNorm"] = load_reference(args.reference)
    ms = {}
    for _ in range(args.rounds):
        for shape in SHAPES:
            x = torch.randn(*shape, requires_grad=True)
            for name, make in layers.items():
                t = time_layer(make(shape[1]), x, args.iterations, args.warmup)
                ms.setdefault(f"{'x'.join(map(str, shape))} {name}", []).append(t)
    if hvd.rank() != 0:
        return
    rows = []
    for shape in SHAPES:
        key = "x".join(map(str, shape))
        base = statistics.median(ms[f"{key} BatchNorm2d"])
        for name in layers:
            rounds = ms[f"{key} {name}"]
            median = statistics.median(rounds)
            rows.append({"shape": list(shape), "layer": name, "median_ms": median,
                         "rounds_ms": rounds, "vs_BatchNorm2d": median / base})
            print(f"{key:>14} {name:<24} {median:8.2f} ms  ({median / base:.2f}x BatchNorm2d)"
                  f"  rounds {' '.join(f'{t:.2f}' for t in rounds)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ranks": hvd.size(), "threads_per_rank": 1, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
