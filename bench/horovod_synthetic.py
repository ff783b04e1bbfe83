"""Horovod's own synthetic benchmark, unmodified, on hvd and on Horovod: the number Horovod's
users quote. Runs `examples/pytorch/pytorch_synthetic_benchmark.py` (or, with --framework
tensorflow2, `examples/tensorflow2/tensorflow2_synthetic_benchmark.py`) from a Horovod source tree
(not part of this repository, nor of Horovod's PyPI sdist: give a checkout or an extracted copy
with --examples) under `hvdrun --horovod-compat` and under Horovod's `horovodrun --gloo` (the
virtualenv bench/install_horovod.sh builds), the same ranks, arguments and environment, each
configuration in fresh processes, rounds rotating their order. Reports the script's own
"Total img/sec" line, medians over rounds, and hvd / Horovod per model.

The PyTorch script imports torchvision's models: --torchvision names a directory holding
torchvision (`pip install --no-deps --target DIR torchvision`), put on both jobs' PYTHONPATH so
neither virtualenv changes. TensorFlow 2.15 (Keras 2): --python ~/.cache/hvd/venv-tf215/bin/python
--horovod-python ~/.cache/hvd/horovod-venv-tf215/bin/python (bench/install_horovod.sh says how).

    python bench/horovod_synthetic.py --examples HOROVOD/examples --models resnet18,resnet50 \\
        --torchvision ~/.cache/hvd/torchvision --json bench/results/horovod_synthetic.json
"""
import argparse
import json
import os
import pathlib
import platform
import re
import statistics
import subprocess
import sys
import time

from torch_scaling import BUILD, HOROVOD_PYTHON  # this directory

TOTAL = re.compile(r"Total img/sec on (\d+) CPU\(s\): ([0-9.]+) \+-([0-9.]+)")
LIBRARIES = ("hvd", "horovod")


SCRIPTS = {"pytorch": "pytorch/pytorch_synthetic_benchmark.py",
           "tensorflow2": "tensorflow2/tensorflow2_synthetic_benchmark.py"}
MODELS = {"pytorch": "resnet18,resnet50", "tensorflow2": "MobileNetV2,ResNet50"}


def command(library, model, args):
    script = [str(pathlib.Path(args.examples) / SCRIPTS[args.framework]), "--no-cuda", "--model", model, "--batch-size", str(args.batch_size),
              "--num-warmup-batches", str(args.warmup_batches),
              "--num-batches-per-iter", str(args.batches_per_iter),
              "--num-iters", str(args.iters)]
    if library == "hvd":
        return [str(BUILD / "apps" / "hvdrun"), "-np", str(args.ranks), "--horovod-compat",
                args.python, *script]
    python = pathlib.Path(args.horovod_python)
    return [str(python.parent / "horovodrun"), "--gloo", "-np", str(args.ranks), "-H",
            f"localhost:{args.ranks}", str(python), *script]


def run(library, model, args):
    env = dict(os.environ)
    # The same for both: torch's intra-op threads, TensorFlow's pools.
    for name in ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        env[name] = str(args.threads)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.torchvision:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [args.torchvision,
                                                          env.get("PYTHONPATH")]))
    start = time.monotonic()
    p = subprocess.run(command(library, model, args), env=env, capture_output=True, text=True,
                       timeout=args.timeout)
    found = TOTAL.search(p.stdout)
    if p.returncode != 0 or not found:
        raise SystemExit(f"{library} {model}: exit code {p.returncode}, no 'Total img/sec' line"
                         f"\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return {"img_per_s": float(found.group(2)), "conf": float(found.group(3)),
            "ranks": int(found.group(1)), "wall_s": round(time.monotonic() - start, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", required=True, help="Horovod's examples directory")
    ap.add_argument("--framework", choices=sorted(SCRIPTS), default="pytorch")
    ap.add_argument("--models", help="comma separated (default: resnet18,resnet50 for PyTorch, "
                                     "MobileNetV2,ResNet50 for TensorFlow)")
    ap.add_argument("--python", default=sys.executable, help="the Python hvd's ranks run")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS of every rank")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--warmup-batches", type=int, default=2)
    ap.add_argument("--batches-per-iter", type=int, default=2)
    ap.add_argument("--iters", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--torchvision", help="a directory with torchvision, for PYTHONPATH")
    ap.add_argument("--horovod-python", default=str(HOROVOD_PYTHON))
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--json", help="write the rounds and medians here")
    args = ap.parse_args()
    if not (pathlib.Path(args.examples) / SCRIPTS[args.framework]).exists():
        raise SystemExit(f"--examples {args.examples}: no {SCRIPTS[args.framework]}")
    if not pathlib.Path(args.horovod_python).exists():
        raise SystemExit(f"--horovod-python {args.horovod_python}: not found; "
                         "bench/install_horovod.sh builds Horovod into that virtualenv")
    models = (args.models or MODELS[args.framework]).split(",")
    configs = [(lib, m) for m in models for lib in LIBRARIES]
    rounds = []
    for r in range(args.rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        row = {f"{lib}/{m}": run(lib, m, args) for lib, m in order}
        rounds.append(row)
        print(f"round {r + 1}: " + ", ".join(f"{k} {v['img_per_s']:.1f}"
                                             for k, v in sorted(row.items())), flush=True)
    summary = {}
    print(f"\n{args.ranks} ranks x {args.threads} thread(s), batch {args.batch_size}, CPU; "
          f"Total img/sec, medians of {args.rounds} rounds\n")
    print("| model | hvd | Horovod 0.28.1 | hvd / Horovod | per round |\n|---|---:|---:|---:|---|")
    for m in models:
        h = [row[f"hvd/{m}"]["img_per_s"] for row in rounds]
        o = [row[f"horovod/{m}"]["img_per_s"] for row in rounds]
        summary[m] = {"hvd": statistics.median(h), "horovod": statistics.median(o),
                      "ratio": statistics.median(h) / statistics.median(o)}
        per_round = ", ".join(f"{a / b:.3f}" for a, b in zip(h, o))
        print(f"| {m} | {summary[m]['hvd']:.1f} | {summary[m]['horovod']:.1f} | "
              f"{summary[m]['ratio']:.3f}x | {per_round} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "bench/horovod_synthetic.py",
                       "script": f"examples/{SCRIPTS[args.framework]} (Horovod)",
                       "machine": platform.node(), "cpus": os.cpu_count(),
                       "args": {k: v for k, v in vars(args).items() if k != "horovod_python"},
                       "rounds": rounds, "medians": summary}, f, indent=2)


if __name__ == "__main__":
    main()
