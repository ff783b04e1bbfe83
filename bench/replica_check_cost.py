"""What the replica check (HVD_CHECK_REPLICAS) costs a training job.

Two measurements, on 2 local ranks, written to one JSON file:

1. Per step, inside one job (`--worker`): copies of one model train side by side, their steps
   alternated so that the machine's load moves them alike: one with the check off, one checking
   after every update (every:1), and for Keras one with the default (`first`, whose graph still
   counts updates every step). The medians' differences are what one check costs and what the
   per-step counting costs; `every:N` then adds (check / N + counting) to a step.
2. End to end: the MNIST examples (examples/pytorch_mnist.py, examples/keras_mnist.py) run with
   HVD_CHECK_REPLICAS=off and with the default `first`, rounds interleaved; the medians' ratio
   is what the first-update check adds to a whole run.

    python bench/replica_check_cost.py --json bench/results/replica_check_cost.json
"""
import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
HVDRUN = pathlib.Path(os.environ.get("HVD_BUILD_DIR", REPO / "build")) / "apps" / "hvdrun"


# -- inside the job -------------------------------------------------------------------------------
def torch_steps(model_name, steps, warmup):
    import torch
    import torch.nn.functional as F

    import hvd.torch as hvd
    from hvd import _replicas
    from torch_scaling import make_net  # this directory
    torch.set_num_threads(1)
    hvd.init()
    torch.manual_seed(0)
    models = {"off": make_net(model_name), "every:1": make_net(model_name)}
    models["every:1"].load_state_dict(models["off"].state_dict())
    optimizers = {}
    for kind, model in models.items():
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1e-3),
                                       named_parameters=model.named_parameters())
        opt._replica_guard = None if kind == "off" else _replicas.Guard(
            "DistributedOptimizer", hvd.global_process_set, "", every=1)
        optimizers[kind] = opt
    shape = (64,) if model_name == "mlp" else (1, 28, 28)
    batch = 8 if model_name == "mlp" else 64
    g = torch.Generator().manual_seed(hvd.rank())
    x, y = torch.randn(batch, *shape, generator=g), torch.randint(0, 10, (batch,), generator=g)

    def step(kind):
        start = time.perf_counter()
        optimizers[kind].zero_grad()
        F.nll_loss(models[kind](x), y).backward()
        optimizers[kind].step()
        return time.perf_counter() - start

    return alternate(hvd, list(models), step, steps, warmup)


def keras_steps(steps, warmup):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np

    import hvd.tensorflow.keras as hvd
    from hvd import _replicas
    sys.path.insert(0, str(REPO / "examples"))
    from keras_mnist import build_model
    hvd.init()
    keras.utils.set_random_seed(1)
    kinds = ["off", "first", "every:1"]
    models = {}
    for kind in kinds:
        model = build_model()
        opt = hvd.DistributedOptimizer(keras.optimizers.Adam(1e-3))
        if kind == "off":
            opt._hvd_guard = None
        elif kind == "every:1":
            opt._hvd_guard = _replicas.Guard("DistributedOptimizer", hvd.global_process_set, "",
                                             every=1, before_update=True)
        model.compile(optimizer=opt,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        models[kind] = model
    weights = models["off"].get_weights()
    for model in models.values():
        model.set_weights(weights)
    rng = np.random.default_rng(hvd.rank())
    x = rng.random((64, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, 64)

    def step(kind):
        start = time.perf_counter()
        models[kind].train_on_batch(x, y)
        return time.perf_counter() - start

    return alternate(hvd, kinds, step, steps, warmup)


def alternate(hvd, kinds, step, steps, warmup):
    times = {k: [] for k in kinds}
    hvd.barrier()
    for i in range(warmup + steps):
        for kind in (kinds if i % 2 == 0 else list(reversed(kinds))):
            t = step(kind)
            if i >= warmup:
                times[kind].append(t)
    return {k: 1000 * statistics.median(v) for k, v in times.items()}, hvd


def worker(args):
    if args.worker == "keras":
        medians, hvd = keras_steps(args.steps, args.warmup)
    else:
        medians, hvd = torch_steps(args.worker.split(":")[1], args.steps, args.warmup)
    if hvd.rank() == 0:
        print("RESULT " + json.dumps(medians), flush=True)


# -- the driver -----------------------------------------------------------------------------------
def run(command, env=None, timeout=900):
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    start = time.perf_counter()
    r = subprocess.run([str(HVDRUN), "-np", "2", *command], capture_output=True, text=True,
                       env=environment, timeout=timeout, cwd=REPO)
    took = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, command))} failed:\n{r.stderr[-3000:]}")
    return r.stdout, took


def per_step(kind, steps, warmup):
    out, _ = run([sys.executable, __file__, "--worker", kind, "--steps", str(steps),
                  "--warmup", str(warmup)])
    line = next(l for l in out.splitlines() if "RESULT " in l)
    return json.loads(line.split("RESULT ", 1)[1])


def end_to_end(example, args, rounds):
    times = {"off": [], "first": []}
    for _ in range(rounds):
        for setting in times:
            _, took = run([sys.executable, REPO / "examples" / example, *args],
                          env={"HVD_CHECK_REPLICAS": setting})
            times[setting].append(took)
    medians = {k: statistics.median(v) for k, v in times.items()}
    return {"example": example, "args": args, "seconds_per_round": times,
            "median_seconds": medians, "first_over_off": medians["first"] / medians["off"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5, help="end-to-end rounds per setting")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if args.worker:
        return worker(args)

    record = {"benchmark": "replica_check_cost", "ranks": 2, "machine": platform.node(),
              "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"), "per_step_ms": {}}
    for kind in ("torch:mnist", "torch:mlp", "keras"):
        medians = per_step(kind, args.steps, args.warmup)
        check = medians["every:1"] - medians.get("first", medians["off"])
        counting = medians["first"] - medians["off"] if "first" in medians else 0.0
        record["per_step_ms"][kind] = {
            "medians": medians, "check_ms": check, "counting_ms": counting,
            "every_100_overhead": (check / 100 + counting) / medians["off"]}
        print(f"{kind}: step {medians['off']:.2f} ms off, one check {check:.2f} ms, counting "
              f"{counting:.3f} ms/step -> every:100 adds "
              f"{100 * record['per_step_ms'][kind]['every_100_overhead']:.2f}%", flush=True)
    record["end_to_end"] = [
        end_to_end("pytorch_mnist.py", ["--epochs", "3"], args.rounds),
        end_to_end("keras_mnist.py", ["--epochs", "2"], args.rounds),
    ]
    for e in record["end_to_end"]:
        print(f"{e['example']}: off {e['median_seconds']['off']:.2f} s, first "
              f"{e['median_seconds']['first']:.2f} s (ratio {e['first_over_off']:.3f})",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
