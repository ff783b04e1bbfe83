"""Scaling of data-parallel training: hvd's DistributedOptimizer against PyTorch
DistributedDataParallel over gloo, measured in one run on this machine.

Trains the MNIST example's CNN (examples/pytorch_mnist.py: 1.2 M parameters, 4.8 MB of
gradients per step) on random 28x28 input, batch 128 per rank, one thread per rank. Reports
samples/s for one process and for N ranks of each peer, and the scaling efficiency
(N-rank samples/s / (N x one-process samples/s)), and the same for a "lockstep" run that trains
without gradient traffic but meets at a barrier every step: the ceiling for any synchronous
library on this machine. Rounds alternate the configurations, and
medians are reported, because the machine is shared and noisy.

    python bench/torch_scaling.py --ranks 2 --rounds 5 --steps 40 --json bench/results/torch_scaling.json

`--model mlp` trains instead a stack of 150 Linear(64, 64) layers (300 parameter tensors, 2.5 MB
of gradients) on batch 8: each step is short and has many small gradients, so it measures what
each gradient costs the library per step rather than bandwidth.

`--malloc-retain-mb 256` runs every configuration with malloc keeping freed memory for reuse
(HVD_MALLOC_RETAIN_MB), which removes the kernel time CPU training otherwise spends re-faulting
its activations each step.
"""
import argparse
import csv
import importlib.util
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
# "lockstep" trains without exchanging gradients but meets at a barrier every step: the
# efficiency no synchronous data-parallel library can beat on this machine (unequal cores,
# per-step jitter: each step lasts as long as the slower rank's).
# "hvd" runs on hvd's default transport (shared memory between ranks of one host), "hvd-tcp"
# with --transport tcp, "hvd-overlap" with --gradient-overlap on (every allreduce started from
# its backward hook, whatever auto decides), "hvd-autotune" with hvdrun --autotune (timed after
# the tuning's steps, which run as warm-up, as long for every configuration; --kinds adds it).
# "horovod" runs the same training on Horovod itself (horovodrun --gloo, Horovod's defaults;
# --kinds adds it; bench/install_horovod.sh builds it).
KINDS = ("single", "hvd", "hvd-overlap", "hvd-tcp", "ddp", "lockstep")
ALL_KINDS = KINDS + ("hvd-autotune", "horovod")
# A short tuning, so that a benchmark run can afford it: 1 warm-up and 12 search samples of 5
# steps each (Horovod's defaults take 230 steps).
AUTOTUNE_FLAGS = ["--autotune", "--autotune-warmup-samples", "1",
                  "--autotune-steps-per-sample", "5", "--autotune-bayes-opt-max-samples", "12"]
AUTOTUNE_STEPS = (1 + 12) * 5 + 1
BUILD = pathlib.Path(os.environ.get("HVD_BUILD_DIR", REPO / "build"))
# Where bench/install_horovod.sh puts Horovod: a Python that imports it, horovodrun beside it.
HOROVOD_PYTHON = pathlib.Path.home() / ".cache" / "hvd" / "horovod-venv" / "bin" / "python"


def load_net():
    spec = importlib.util.spec_from_file_location("pytorch_mnist",
                                                  REPO / "examples" / "pytorch_mnist.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Net


MODELS = {
    "mnist": "examples/pytorch_mnist.py Net",
    "mlp": "150 x Linear(64, 64), 300 parameter tensors",
}


def make_net(model):
    import torch
    if model == "mnist":
        return load_net()()
    return torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(150)],
                               torch.nn.LogSoftmax(dim=1))


def train(model, optimizer, steps, warmup, batch, after_step=None, shape=(1, 28, 28)):
    import torch
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(0)
    data = torch.randn(batch, *shape, generator=g)
    target = torch.randint(0, 10, (batch,), generator=g)
    model.train()
    for i in range(warmup + steps):
        if i == warmup:
            start = time.perf_counter()
            cpu_start = time.process_time()
        optimizer.zero_grad()
        F.nll_loss(model(data), target).backward()
        optimizer.step()
        if after_step:
            after_step()
    # Wall time, and the CPU time of every thread of this process (the library's included).
    return time.perf_counter() - start, time.process_time() - cpu_start


def worker(args):
    import torch
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = make_net(args.model)
    shape = (1, 28, 28) if args.model == "mnist" else (64,)
    if args.worker == "single":
        size, rank = 1, 0
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        elapsed, cpu = train(net, optimizer, args.steps, args.warmup, args.batch, shape=shape)
    elif args.worker == "lockstep":
        # The ceiling any synchronous data-parallel library can reach here: the ranks train
        # alone (no gradient traffic) but meet once per step, as synchronous SGD makes them.
        import hvd.torch as hvd
        hvd.init()
        size, rank = hvd.size(), hvd.rank()
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        hvd.barrier()
        elapsed, cpu = train(net, optimizer, args.steps, args.warmup, args.batch, hvd.barrier,
                             shape)
        elapsed = hvd.allreduce(torch.tensor(elapsed), op=hvd.Max).item()
        cpu = hvd.allreduce(torch.tensor(cpu), op=hvd.Average).item()
    elif args.worker in ("hvd", "horovod"):
        # The same code on both libraries: Horovod's API is hvd's.
        import importlib
        hvd = importlib.import_module(f"{args.worker}.torch")
        hvd.init()
        size, rank = hvd.size(), hvd.rank()
        hvd.broadcast_parameters(net.state_dict(), root_rank=0)
        optimizer = hvd.DistributedOptimizer(
            torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9),
            named_parameters=net.named_parameters())
        hvd.barrier()
        elapsed, cpu = train(net, optimizer, args.steps, args.warmup, args.batch, shape=shape)
        elapsed = hvd.allreduce(torch.tensor(elapsed), op=hvd.Max).item()
        cpu = hvd.allreduce(torch.tensor(cpu), op=hvd.Average).item()
    else:  # ddp
        import torch.distributed as dist
        dist.init_process_group("gloo")
        size, rank = dist.get_world_size(), dist.get_rank()
        model = torch.nn.parallel.DistributedDataParallel(net)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        dist.barrier()
        elapsed, cpu = train(model, optimizer, args.steps, args.warmup, args.batch, shape=shape)
        t = torch.tensor(elapsed)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        elapsed = t.item()
        t = torch.tensor(cpu)
        dist.all_reduce(t)
        cpu = t.item() / size
        dist.destroy_process_group()
    if rank == 0:
        rate = args.steps * args.batch * size / elapsed
        print(json.dumps({"peer": args.worker, "ranks": size, "samples_per_s": rate,
                          "step_ms": 1000 * elapsed / args.steps,
                          "cpu_ms_per_step": 1000 * cpu / args.steps}), flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def json_records(output):
    """The JSON objects a job printed a line each, with or without hvdrun's "[rank]<stdout>:"
    prefix."""
    records = []
    for line in output.splitlines():
        text = line.split(":", 1)[1] if line.startswith("[") else line
        if text.startswith("{"):
            records.append(json.loads(text))
    return records


class RunFailed(Exception):
    """A configuration's processes did not end with one result line."""


def run_config(kind, args):
    """Runs one configuration to completion; returns rank 0's JSON record."""
    cmd = [sys.executable, __file__, "--worker", "hvd" if kind.startswith("hvd") else kind,
           "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--batch", str(args.batch), "--model", args.model]
    env = dict(os.environ)
    retain = []
    if args.malloc_retain_mb:
        # The same malloc setting for every configuration: hvd's workers through the
        # launcher's flag, the others through glibc's own variables, which mean the same.
        retain = ["--malloc-retain-mb", str(args.malloc_retain_mb)]
        if kind in ("single", "ddp", "horovod"):
            threshold = str(args.malloc_retain_mb << 20)
            env.update(MALLOC_MMAP_THRESHOLD_=threshold, MALLOC_TRIM_THRESHOLD_=threshold)
    log = None
    if kind == "single":
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)]
    elif kind in ("hvd", "hvd-tcp", "hvd-overlap", "hvd-autotune", "lockstep"):
        flags = {"hvd-tcp": ["--transport", "tcp"], "hvd-overlap": ["--gradient-overlap", "on"],
                 "hvd-autotune": AUTOTUNE_FLAGS}.get(kind, [])
        if kind == "hvd-autotune":
            fd, log = tempfile.mkstemp(suffix=".csv", prefix="hvd_autotune_")
            os.close(fd)
            flags = flags + ["--autotune-log-file", log]
        procs = [subprocess.Popen([str(BUILD / "apps" / "hvdrun"), "-np", str(args.ranks),
                                   *flags, *retain, *cmd],
                                  stdout=subprocess.PIPE, text=True, env=env)]
    elif kind == "horovod":
        python = pathlib.Path(args.horovod_python)
        # The MNIST example that defines the model imports hvd.torch (its Net does not use
        # it); `horovod` stays Horovod's (hvd's own horovod package is under hvd/compat).
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(BUILD / "python"), env.get("PYTHONPATH")]))
        procs = [subprocess.Popen([str(python.parent / "horovodrun"), "--gloo", "-np",
                                   str(args.ranks), "-H", f"localhost:{args.ranks}",
                                   str(python), *cmd[1:]],
                                  stdout=subprocess.PIPE, text=True, env=env)]
    else:
        port = free_port()
        procs = []
        for r in range(args.ranks):
            e = dict(env, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r),
                     WORLD_SIZE=str(args.ranks), LOCAL_RANK=str(r))
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=e))
    records = []
    for p in procs:
        out, _ = p.communicate(timeout=args.timeout)
        if p.returncode != 0:
            for q in procs:  # the others may wait for the failed one
                if q.poll() is None:
                    q.kill()
                    q.wait()
            raise RunFailed(f"{kind}: exited with {p.returncode}")
        records += json_records(out)
    if len(records) != 1:
        raise RunFailed(f"{kind}: expected one result line, got {records}")
    if log:
        with open(log) as f:
            rows = list(csv.DictReader(f))
        os.unlink(log)
        chosen = [row for row in rows if row["phase"] == "chosen"]
        if not chosen:
            raise RunFailed(f"{kind}: the tuning did not finish within the warm-up: {rows}")
        records[0]["autotune_chosen"] = {
            "fusion_threshold_bytes": int(chosen[-1]["fusion_threshold_bytes"]),
            "cycle_time_ms": float(chosen[-1]["cycle_time_ms"])}
    return records[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", choices=["single", "hvd", "horovod", "ddp", "lockstep"],
                        help=argparse.SUPPRESS)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=None,
                        help="per rank (default 128 for mnist, 8 for mlp)")
    parser.add_argument("--model", choices=sorted(MODELS), default="mnist")
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--json", help="write the rounds and medians here")
    parser.add_argument("--malloc-retain-mb", type=int, default=0,
                        help="run every configuration with malloc keeping this many MB of "
                             "freed memory (hvdrun --malloc-retain-mb; glibc's MALLOC_*_ "
                             "variables for the others); 0: glibc's defaults")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"configurations to run, of {','.join(ALL_KINDS)} "
                             "(single is always run: efficiency is against it)")
    parser.add_argument("--horovod-python", default=str(HOROVOD_PYTHON),
                        help="for --kinds horovod: a Python that imports Horovod (horovodrun "
                             "beside it)")
    args = parser.parse_args()
    if args.batch is None:
        args.batch = 128 if args.model == "mnist" else 8
    if args.worker:
        return worker(args)

    kinds = ["single"] + [k for k in args.kinds.split(",") if k and k != "single"]
    unknown = [k for k in kinds if k not in ALL_KINDS]
    if unknown:
        parser.error(f"--kinds: unknown {','.join(unknown)} (choose from {','.join(ALL_KINDS)})")
    if "horovod" in kinds and not pathlib.Path(args.horovod_python).exists():
        parser.error(f"--kinds horovod: --horovod-python {args.horovod_python} not found "
                     "(bench/install_horovod.sh builds Horovod there)")
    if "hvd-autotune" in kinds:
        # The tuning runs within the warm-up; every configuration gets the same warm-up, so
        # that the comparison does not depend on what a longer warm-up does.
        args.warmup += AUTOTUNE_STEPS
    rounds, failures = [], []

    def measured(kind, round_number):
        # A crash of a run (torch's gloo has aborted at exit now and then) costs one retry, and
        # is recorded; a second one ends the benchmark.
        try:
            return run_config(kind, args)
        except RunFailed as e:
            failures.append(f"round {round_number}: {e}")
            print(f"round {round_number}: {e}; running it again", flush=True)
            try:
                return run_config(kind, args)
            except RunFailed as again:
                raise SystemExit(f"round {round_number}: {again} (twice)")

    for i in range(args.rounds):
        row = {kind: measured(kind, i + 1) for kind in kinds}
        rounds.append(row)
        print(f"round {i + 1}: " + ", ".join(
            f"{k} {v['samples_per_s']:.1f} samples/s ({v['step_ms']:.1f} ms/step, "
            f"cpu {v['cpu_ms_per_step']:.1f})" for k, v in row.items()), flush=True)
    median = {k: statistics.median(r[k]["samples_per_s"] for r in rounds)
              for k in kinds}
    cpu = {k: statistics.median(r[k]["cpu_ms_per_step"] for r in rounds) for k in kinds}
    efficiency = {k: median[k] / (args.ranks * median["single"]) for k in kinds[1:]}
    per_round = [{k: r[k]["samples_per_s"] / (args.ranks * r["single"]["samples_per_s"])
                  for k in kinds[1:]} for r in rounds]
    print(f"\n| peer | ranks | samples/s (median of {args.rounds}) | scaling efficiency "
          "| CPU ms per step and rank |")
    print("|---|---|---|---|---|")
    print(f"| one process | 1 | {median['single']:.1f} | - | {cpu['single']:.1f} |")
    for k, label in (("hvd", "hvd DistributedOptimizer"),
                     ("hvd-overlap", "hvd DistributedOptimizer, --gradient-overlap on"),
                     ("hvd-tcp", "hvd DistributedOptimizer, --transport tcp"),
                     ("hvd-autotune", "hvd DistributedOptimizer, --autotune (after tuning)"),
                     ("horovod", "Horovod 0.28 DistributedOptimizer (Gloo)"),
                     ("ddp", "torch DDP (gloo)"),
                     ("lockstep", "lockstep: no gradients, one barrier per step (ceiling)")):
        if k in median:
            print(f"| {label} | {args.ranks} | {median[k]:.1f} | {100 * efficiency[k]:.1f}% "
                  f"| {cpu[k]:.1f} |")
    print()
    for a, b, what in (("hvd", "ddp", "hvd / DDP throughput"),
                       ("hvd", "horovod", "hvd / Horovod throughput"),
                       ("hvd", "hvd-overlap", "hvd / hvd --gradient-overlap on throughput"),
                       ("hvd", "hvd-tcp", "hvd / hvd-tcp throughput"),
                       ("hvd-autotune", "hvd", "hvd --autotune / hvd throughput"),
                       ("hvd", "lockstep", "hvd / lockstep throughput (share of the ceiling)")):
        if a in median and b in median:
            # The same ratio within each round too: the configurations of one round ran
            # minutes apart, so its pairs share the machine's mood.
            paired = [r[a]["samples_per_s"] / r[b]["samples_per_s"] for r in rounds]
            print(f"{what}: {median[a] / median[b]:.3f}x (per round: "
                  f"{', '.join(f'{x:.3f}' for x in paired)})")
    for i, r in enumerate(rounds):
        if "hvd-autotune" in r:
            print(f"round {i + 1}: autotune chose {r['hvd-autotune']['autotune_chosen']}")
    if args.json:
        pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"benchmark": "torch_scaling", "model": MODELS[args.model],
                       "batch_per_rank": args.batch, "ranks": args.ranks, "steps": args.steps,
                       "warmup": args.warmup, "threads_per_rank": 1,
                       "malloc_retain_mb": args.malloc_retain_mb, "rounds": rounds,
                       "median_samples_per_s": median, "median_efficiency": efficiency,
                       "median_cpu_ms_per_step": cpu,
                       "efficiency_per_round": per_round, "failed_runs": failures}, f,
                      indent=2)


if __name__ == "__main__":
    main()
