"""The engine's framework pattern through the Horovod API: hvd against Horovod itself.

Each step submits the allreduces (average, float32) of 100 tensors with allreduce_async_,
last layer first, then synchronizes them all: `hvd-bench engine`'s pattern and its two
lists (ResNet-50-like, 4 KiB to 4 MiB; small, 4 to 64 KiB). The script is written against
`horovod.torch`, so the same code runs on both libraries: hvd through `hvdrun
--horovod-compat` (hvd's compatibility package), Horovod through its own `horovodrun --gloo`.
It also times one 4-byte allreduce (`allreduce_`) as a Python caller sees it. Fusion off is
HOROVOD_FUSION_THRESHOLD=0 for both (hvd reads Horovod's names of its knobs). Every
configuration runs in fresh processes; rounds rotate their order; medians are reported.

    python bench/engine_vs_horovod.py --rounds 4 --json bench/results/engine_vs_horovod.json

Horovod comes from --horovod-python (default: the virtualenv bench/install_horovod.sh makes).
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

from torch_scaling import BUILD, HOROVOD_PYTHON, json_records  # this directory

# hvd on its default transport (shared memory between ranks of one host) and on TCP, the only
# transport Horovod's Gloo has.
LIBRARIES = ("hvd", "hvd-tcp", "horovod")
CONFIGS = tuple((lib, fused) for lib in LIBRARIES for fused in (True, False))


def resnet_like_sizes():
    """bench/hvd_bench/engine_bench.cc's resnetLikeSizes(): bottleneck blocks' 1x1, 3x3 and
    1x1 convolutions with their norm vectors, clamped to 4 KiB..4 MiB, the first 100."""
    sizes = []
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        w = width
        for _ in range(blocks):
            for elements in (4 * w * w, w, w, w * w * 9, w, w, w * 4 * w, 4 * w, 4 * w):
                sizes.append(min(max(elements * 4, 4 << 10), 4 << 20))
    return sizes[:100]


def small_sizes():
    return [(4 << 10) << (i % 5) for i in range(100)]


LISTS = {"resnet-like": resnet_like_sizes(), "small": small_sizes()}


def worker(args):
    import torch
    import horovod
    import horovod.torch as hvd
    torch.set_num_threads(1)
    hvd.init()
    result = {"library": "hvd" if "compat" in horovod.__file__ else "horovod",
              "transport": ("gloo" if "compat" not in horovod.__file__
                            else os.environ.get("HVD_TRANSPORT", "default")),
              "horovod_module": horovod.__file__, "ranks": hvd.size(),
              "fusion": os.environ.get("HOROVOD_FUSION_THRESHOLD") != "0", "lists": {}}
    for list_name, sizes in LISTS.items():
        tensors = [torch.ones(b // 4) for b in sizes]
        step_ms = []
        for step in range(args.warmup + args.steps):
            if step == args.warmup:
                hvd.barrier()
            t0 = time.perf_counter()
            handles = [hvd.allreduce_async_(tensors[k], name=f"{list_name}.{k}", op=hvd.Average)
                       for k in reversed(range(len(tensors)))]
            for h in handles:
                hvd.synchronize(h)
            if step >= args.warmup:
                step_ms.append(1000 * (time.perf_counter() - t0))
        if any(float(t[0]) != 1.0 for t in tensors):
            raise SystemExit(f"{list_name}: the average of ones is not one")
        result["lists"][list_name] = {"step_ms_median": statistics.median(step_ms),
                                      "bytes": sum(sizes), "step_ms": step_ms}
    x = torch.ones(1)
    us = []
    for i in range(args.latency_iters // 10 + args.latency_iters):
        t0 = time.perf_counter()
        hvd.allreduce_(x, name="latency", op=hvd.Average)
        if i >= args.latency_iters // 10:
            us.append(1e6 * (time.perf_counter() - t0))
    us.sort()
    result["latency_us_median"] = statistics.median(us)
    result["latency_us_p90"] = us[int(0.9 * (len(us) - 1))]
    if hvd.rank() == 0:
        print(json.dumps(result), flush=True)
    hvd.shutdown()


def command(library, fused, args):
    script = [__file__, "--worker", "--steps", str(args.steps), "--warmup", str(args.warmup),
              "--latency-iters", str(args.latency_iters)]
    env = dict(os.environ)
    env.pop("HOROVOD_FUSION_THRESHOLD", None)
    if not fused:
        env["HOROVOD_FUSION_THRESHOLD"] = "0"
    if library.startswith("hvd"):
        transport = ["--transport", "tcp"] if library == "hvd-tcp" else []
        return [str(BUILD / "apps" / "hvdrun"), "-np", str(args.ranks), "--horovod-compat",
                *transport, sys.executable, *script], env
    python = pathlib.Path(args.horovod_python)
    return [str(python.parent / "horovodrun"), "--gloo", "-np", str(args.ranks),
            "-H", f"localhost:{args.ranks}", str(python), *script], env


def run(library, fused, args):
    cmd, env = command(library, fused, args)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    records = json_records(p.stdout)
    if p.returncode != 0 or len(records) != 1:
        raise SystemExit(f"{library} fusion {'on' if fused else 'off'}: exit code "
                         f"{p.returncode}, {len(records)} result lines\n{p.stdout[-3000:]}"
                         f"\n{p.stderr[-3000:]}")
    if records[0]["library"] != library.split("-")[0]:
        raise SystemExit(f"{library}: the job imported {records[0]['horovod_module']}")
    return records[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--latency-iters", type=int, default=2000)
    ap.add_argument("--horovod-python", default=str(HOROVOD_PYTHON),
                    help="a Python that imports Horovod (horovodrun next to it)")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--json", help="write the rounds and medians here")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if not pathlib.Path(args.horovod_python).exists():
        raise SystemExit(f"--horovod-python {args.horovod_python}: not found; "
                         "bench/install_horovod.sh builds Horovod into that virtualenv")

    rounds = []
    for r in range(args.rounds):
        order = CONFIGS[r % len(CONFIGS):] + CONFIGS[:r % len(CONFIGS)]
        row = {f"{lib}-{'fused' if fused else 'unfused'}": run(lib, fused, args)
               for lib, fused in order}
        rounds.append(row)
        print(f"round {r + 1}: " + ", ".join(
            f"{k} " + "/".join(f"{v['lists'][n]['step_ms_median']:.2f}" for n in LISTS)
            + f" ms, {v['latency_us_median']:.1f} us" for k, v in sorted(row.items())),
            flush=True)

    def med(key, list_name=None):
        return statistics.median(
            row[key]["lists"][list_name]["step_ms_median"] if list_name
            else row[key]["latency_us_median"] for row in rounds)

    summary = {k: {n: med(k, n) for n in LISTS} | {"latency_us": med(k)} for k in rounds[0]}
    print(f"\n{args.ranks} ranks, medians of {args.rounds} rounds: ms per step of 100 "
          "allreduces, and how many times Horovod's time (same list, same fusion) each is\n")
    labels = {"hvd": "hvd (shared memory)", "hvd-tcp": "hvd (TCP)", "horovod": "Horovod (Gloo, TCP)"}
    print("| library | list | fusion on | fusion off | fusion speed-up | on, Horovod / this "
          "| off, Horovod / this |")
    print("|---|---|---|---|---|---|---|")
    for lib in LIBRARIES:
        for n in LISTS:
            on, off = summary[f"{lib}-fused"][n], summary[f"{lib}-unfused"][n]
            ref_on, ref_off = summary["horovod-fused"][n], summary["horovod-unfused"][n]
            print(f"| {labels[lib]} | {n} ({sum(LISTS[n]) / 2**20:.1f} MiB) | {on:.2f} "
                  f"| {off:.2f} | {off / on:.2f}x | {ref_on / on:.2f}x | {ref_off / off:.2f}x |")
    print("\n| library | 4-byte allreduce_, us (fusion on) | Horovod / this |\n|---|---|---|")
    for lib in LIBRARIES:
        us = summary[f"{lib}-fused"]["latency_us"]
        print(f"| {labels[lib]} | {us:.1f} | {summary['horovod-fused']['latency_us'] / us:.1f}x |")
    if args.json:
        pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"benchmark": "engine_vs_horovod", "ranks": args.ranks,
                       "steps": args.steps, "warmup": args.warmup,
                       "latency_iters": args.latency_iters, "medians": summary,
                       "rounds": rounds}, f, indent=2)


if __name__ == "__main__":
    main()
