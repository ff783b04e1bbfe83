"""Where a data-parallel training step's time goes: forward, backward and the wait for the
gradients, per way of exchanging them, with the ways alternated in rounds.

Each run is one `hvdrun -np RANKS` job training torch_scaling.py's model (MNIST CNN, batch 128,
one thread per rank) one way; rank 0 times forward, backward, the exchange after backward and the
whole step, and reports their means (throughput follows them) and medians over the timed steps.
The ways:

- `lockstep`: no gradients exchanged, a barrier after backward (the ceiling);
- `hooks`: DistributedOptimizer with `gradient_overlap='on'`: each gradient's allreduce starts
  from its backward hook, so it runs during backward;
- `after`: one grouped allreduce of all gradients after backward (what `gradient_overlap='off'`
  amounts to);
- `default`: DistributedOptimizer as the job's settings make it (HVD_GRADIENT_OVERLAP=auto).

    python bench/step_phases.py --rounds 5 --json out.json

This is how docs/performance.md measured that overlapping backward with the allreduces cost
backward more than the allreduces take alone when every core already trains.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

from torch_scaling import json_records  # this directory: its models and output format

REPO = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(os.environ.get("HVD_BUILD_DIR", REPO / "build"))
WAYS = ("lockstep", "hooks", "after", "default")
PHASES = ("step_ms", "forward_ms", "backward_ms", "exchange_ms")


def worker(args):
    import torch
    import torch.nn.functional as F

    import hvd.torch as hvd
    from torch_scaling import make_net
    torch.set_num_threads(1)
    torch.manual_seed(0)
    hvd.init()
    net = make_net(args.model)
    hvd.broadcast_parameters(net.state_dict(), root_rank=0)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    if args.worker in ("hooks", "default"):
        optimizer = hvd.DistributedOptimizer(
            optimizer, named_parameters=net.named_parameters(),
            gradient_overlap="on" if args.worker == "hooks" else None)
    params = list(net.parameters())
    g = torch.Generator().manual_seed(hvd.rank())
    shape = (1, 28, 28) if args.model == "mnist" else (64,)
    data = torch.randn(args.batch, *shape, generator=g)
    target = torch.randint(0, 10, (args.batch,), generator=g)
    samples = {p: [] for p in PHASES}
    hvd.barrier()
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        optimizer.zero_grad()
        loss = F.nll_loss(net(data), target)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        if args.worker == "after":
            hvd.grouped_allreduce_([p.grad for p in params], op=hvd.Average, name="gradients")
        elif args.worker == "lockstep":
            hvd.barrier()
        else:
            optimizer.synchronize()  # the wait step() would do; then step() must not repeat it
        t3 = time.perf_counter()
        if args.worker in ("hooks", "default"):
            with optimizer.skip_synchronize():
                optimizer.step()
        else:
            optimizer.step()
        t4 = time.perf_counter()
        if i >= args.warmup:
            for name, value in zip(PHASES, (t4 - t0, t1 - t0, t2 - t1, t3 - t2)):
                samples[name].append(1000 * value)
    if hvd.rank() == 0:
        # Means and medians both: throughput follows the mean, and the two differ where a
        # way has occasional slow steps.
        print(json.dumps({"way": args.worker,
                          **{p: statistics.mean(v) for p, v in samples.items()},
                          **{f"median_{p}": statistics.median(v) for p, v in samples.items()}}),
              flush=True)
    hvd.shutdown()


def run_way(way, args):
    cmd = [str(BUILD / "apps" / "hvdrun"), "-np", str(args.ranks),
           "--malloc-retain-mb", str(args.malloc_retain_mb), sys.executable, __file__,
           "--worker", way, "--model", args.model, "--batch", str(args.batch),
           "--steps", str(args.steps), "--warmup", str(args.warmup)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if out.returncode != 0:
        raise SystemExit(f"{way}: hvdrun exited with {out.returncode}:\n{out.stderr[-3000:]}")
    records = json_records(out.stdout)
    if records:
        return records[0]
    raise SystemExit(f"{way}: no result line in:\n{out.stdout[-3000:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", choices=WAYS, help=argparse.SUPPRESS)
    ap.add_argument("--ways", default=",".join(WAYS))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--model", choices=["mnist", "mlp"], default="mnist")
    ap.add_argument("--batch", type=int, help="per rank (default 128 for mnist, 8 for mlp)")
    ap.add_argument("--malloc-retain-mb", type=int, default=256)
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--json", help="write the rounds and medians here")
    args = ap.parse_args()
    if args.batch is None:
        args.batch = 128 if args.model == "mnist" else 8
    if args.worker:
        return worker(args)
    ways = [w for w in args.ways.split(",") if w]
    unknown = [w for w in ways if w not in WAYS]
    if unknown:
        ap.error(f"--ways: unknown {','.join(unknown)} (choose from {','.join(WAYS)})")
    rounds = []
    for i in range(args.rounds):
        row = {w: run_way(w, args) for w in ways}
        rounds.append(row)
        print(f"round {i + 1}: " + ", ".join(f"{w} {r['step_ms']:.1f} ms" for w, r in row.items()),
              flush=True)
    keys = list(PHASES) + [f"median_{p}" for p in PHASES]
    medians = {w: {k: statistics.median(r[w][k] for r in rounds) for k in keys} for w in ways}
    print("\n| way | step ms, mean | forward | backward | exchange | step ms, median step |")
    print("|---|---:|---:|---:|---:|---:|")
    for w in ways:
        m = medians[w]
        print(f"| {w} | {m['step_ms']:.2f} | {m['forward_ms']:.2f} | {m['backward_ms']:.2f} "
              f"| {m['exchange_ms']:.2f} | {m['median_step_ms']:.2f} |")
    print("(means over each run's steps, medians over the rounds; the last column: the median "
          "step of each run)")
    if args.json:
        pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"benchmark": "step_phases", "model": args.model, "batch": args.batch,
                       "ranks": args.ranks, "steps": args.steps, "warmup": args.warmup,
                       "malloc_retain_mb": args.malloc_retain_mb, "rounds": rounds,
                       "medians": medians}, f, indent=2)


if __name__ == "__main__":
    main()
