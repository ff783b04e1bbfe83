"""What DistributedOptimizer costs a rank per training step, against the optimizer it wraps.

In each rank, two copies of one model train side by side: one through hvd's
DistributedOptimizer, one through the plain torch optimizer, their steps alternated so that
the machine's load moves both alike. Reports the median step time of each and their ratio.
With one rank (`hvdrun -np 1`, a script run on one GPU) the ratio is what the wrapper costs a
job that has nothing to average; with more ranks it includes the gradient exchange.

    hvdrun -np 1 python bench/optimizer_overhead.py --json out.json

The models are torch_scaling.py's: by default its many-small-gradients stack (150
Linear(64, 64) layers, 300 parameter tensors, batch 8), where a per-gradient cost shows most.
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F

import hvd.torch as hvd
from torch_scaling import MODELS, make_net  # this directory: the same models as the scaling run


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="mlp")
    ap.add_argument("--batch", type=int, help="per rank (default 8 for mlp, 128 for mnist)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--json", help="rank 0 writes the step times and medians here")
    args = ap.parse_args()
    batch = args.batch or (8 if args.model == "mlp" else 128)
    shape = (64,) if args.model == "mlp" else (1, 28, 28)

    torch.set_num_threads(1)
    hvd.init()
    torch.manual_seed(0)
    wrapped_model = make_net(args.model)
    plain_model = make_net(args.model)
    plain_model.load_state_dict(wrapped_model.state_dict())
    wrapped = hvd.DistributedOptimizer(torch.optim.SGD(wrapped_model.parameters(), lr=1e-3),
                                       named_parameters=wrapped_model.named_parameters())
    plain = torch.optim.SGD(plain_model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(hvd.rank())
    x = torch.randn(batch, *shape, generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)

    def step(model, optimizer):
        start = time.perf_counter()
        optimizer.zero_grad()
        F.nll_loss(model(x), y).backward()
        optimizer.step()
        return time.perf_counter() - start

    times = {"hvd": [], "plain": []}
    hvd.barrier()
    for i in range(args.warmup + args.steps):
        t_hvd, t_plain = step(wrapped_model, wrapped), step(plain_model, plain)
        if i >= args.warmup:
            times["hvd"].append(t_hvd)
            times["plain"].append(t_plain)
    medians = {k: statistics.median(v) for k, v in times.items()}
    record = {"ranks": hvd.size(), "model": MODELS[args.model], "batch": batch,
              "steps": args.steps,
              "hvd_step_ms": 1000 * medians["hvd"], "plain_step_ms": 1000 * medians["plain"],
              "ratio": medians["hvd"] / medians["plain"],
              "hvd_steps_ms": [1000 * t for t in times["hvd"]],
              "plain_steps_ms": [1000 * t for t in times["plain"]]}
    if hvd.rank() == 0:
        print(f"{hvd.size()} rank(s): DistributedOptimizer step {record['hvd_step_ms']:.2f} ms, "
              f"plain {record['plain_step_ms']:.2f} ms, ratio {record['ratio']:.3f}", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(record, f, indent=1)
    hvd.shutdown()


if __name__ == "__main__":
    main()
