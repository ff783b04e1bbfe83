"""Scaling of TensorFlow data-parallel training: hvd.tensorflow against TensorFlow's own
tf.distribute.MultiWorkerMirroredStrategy (gRPC collectives), in one run.

Trains examples/keras_mnist.py's CNN (1.2 M parameters, 4.8 MB of gradients per step) on random
28x28 input, batch 128 per rank, one TensorFlow thread per rank: a custom tf.function step with
hvd's DistributedGradientTape or inside the strategy (Keras 3's fit does not run under
MultiWorkerMirroredStrategy), and Keras's fit with hvd's DistributedOptimizer. It reports
samples/s for one process and for N ranks of each, the scaling efficiency (N-rank samples/s /
(N x one-process samples/s)), and a "lockstep" run that trains without gradient traffic but
meets at a barrier every step: the ceiling for any synchronous library here. Rounds alternate
the configurations and medians are reported (the machine is shared and noisy).

    python bench/keras_scaling.py --ranks 2 --rounds 3 --json bench/results/keras_scaling.json
"""
import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

from torch_scaling import BUILD, RunFailed, free_port, json_records

REPO = pathlib.Path(__file__).resolve().parents[1]
KINDS = ("single", "hvd", "mwms", "lockstep", "single-fit", "hvd-fit")
LABELS = {"single": "one process (custom loop)", "single-fit": "one process (Keras fit)",
          "hvd": "hvd DistributedGradientTape (custom loop)",
          "hvd-fit": "hvd DistributedOptimizer (Keras fit)",
          "mwms": "tf.distribute MultiWorkerMirrored (custom loop)",
          "lockstep": "lockstep: no gradients, one barrier per step (ceiling)"}


class _Timer:
    """Times the batches of a fit after the warm-up ones (the first traces the step)."""

    def __init__(self, warmup):
        self.warmup, self.start, self.end = warmup, None, None

    def callback(self, keras):
        timer = self

        class Callback(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                if batch + 1 == timer.warmup:
                    timer.start = time.perf_counter()
                timer.end = time.perf_counter()

        return Callback()


def worker(args):
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    import keras
    import numpy as np
    spec = importlib.util.spec_from_file_location("keras_mnist",
                                                  REPO / "examples" / "keras_mnist.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    size, rank, hvd = 1, 0, None
    if args.worker == "mwms":  # before any tensor: it configures TensorFlow's runtime
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        size = strategy.num_replicas_in_sync
        rank = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    else:
        strategy = tf.distribute.get_strategy()  # the default: no distribution
        if not args.worker.startswith("single"):
            import hvd.tensorflow as hvd_tf
            import hvd.tensorflow.keras as hvd
            hvd.init()
            size, rank = hvd.size(), hvd.rank()
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(args.batch, 28, 28, 1)).astype("float32"))
    y = tf.constant(rng.integers(0, 10, size=(args.batch,)))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with strategy.scope():
        model = example.build_model()
        optimizer = keras.optimizers.SGD(0.01, momentum=0.9)
    if args.worker.endswith("-fit"):
        # Keras's own compiled step, with the optimizer hvd wraps.
        callbacks = [] if hvd is None else [hvd.callbacks.BroadcastGlobalVariablesCallback(0)]
        model.compile(optimizer=optimizer if hvd is None else hvd.DistributedOptimizer(optimizer),
                      loss=loss_fn)
        timer = _Timer(args.warmup)
        model.fit(tf.data.Dataset.from_tensors((x, y)).repeat(),
                  steps_per_epoch=args.warmup + args.steps, epochs=1, verbose=0,
                  callbacks=callbacks + [timer.callback(keras)])
        elapsed = timer.end - timer.start
    else:
        def replica_step(x, y):
            with tf.GradientTape() as tape:
                # Summed over the replicas by MultiWorkerMirrored: each contributes 1/size.
                loss = loss_fn(y, model(x, training=True)) / strategy.num_replicas_in_sync
            if args.worker == "hvd":
                tape = hvd_tf.DistributedGradientTape(tape)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply(grads, model.trainable_variables)

        @tf.function
        def step():
            strategy.run(replica_step, args=(x, y))

        for i in range(args.warmup + args.steps):
            if i == args.warmup:
                start = time.perf_counter()
            step()
            if args.worker == "lockstep":
                hvd.barrier()
        elapsed = time.perf_counter() - start
    if hvd is not None:
        elapsed = float(hvd.allreduce(np.array([elapsed]), op=hvd.Max)[0])
    if rank == 0:
        rate = args.steps * args.batch * size / elapsed
        print(json.dumps({"peer": args.worker, "ranks": size, "samples_per_s": rate,
                          "step_ms": 1000 * elapsed / args.steps}), flush=True)


def run_config(kind, args):
    cmd = [sys.executable, __file__, "--worker", kind, "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--batch", str(args.batch)]
    if kind.startswith("single"):
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)]
    elif kind in ("hvd", "hvd-fit", "lockstep"):
        procs = [subprocess.Popen([str(BUILD / "apps" / "hvdrun"), "-np", str(args.ranks), *cmd],
                                  stdout=subprocess.PIPE, text=True)]
    else:
        workers = [f"127.0.0.1:{free_port()}" for _ in range(args.ranks)]
        procs = []
        for r in range(args.ranks):
            config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": r}}
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                                          env=dict(os.environ, TF_CONFIG=json.dumps(config))))
    records = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=args.timeout)
            if p.returncode != 0:
                raise RunFailed(f"{kind}: exited with {p.returncode}")
            records += json_records(out)
    finally:
        for q in procs:  # the others may wait for a failed one
            if q.poll() is None:
                q.kill()
                q.wait()
    if len(records) != 1:
        raise RunFailed(f"{kind}: expected one result line, got {records}")
    return records[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--batch", type=int, default=128, help="per rank")
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--json", help="write the rounds and medians here")
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    rounds = []
    for i in range(args.rounds):
        row = {kind: run_config(kind, args) for kind in KINDS}
        rounds.append(row)
        print(f"round {i + 1}: " + ", ".join(
            f"{k} {v['samples_per_s']:.1f} samples/s" for k, v in row.items()), flush=True)
    median = {k: statistics.median(r[k]["samples_per_s"] for r in rounds) for k in KINDS}
    # Each against one process running the same step: fit's against fit's.
    efficiency = {k: median[k] / (args.ranks * median["single-fit" if k.endswith("-fit")
                                                       else "single"])
                  for k in KINDS if not k.startswith("single")}
    print(f"\n| peer | ranks | samples/s (median of {args.rounds}) | scaling efficiency |")
    print("|---|---|---|---|")
    for k in KINDS:
        if k.startswith("single"):
            print(f"| {LABELS[k]} | 1 | {median[k]:.1f} | - |")
        else:
            print(f"| {LABELS[k]} | {args.ranks} | {median[k]:.1f} | "
                  f"{100 * efficiency[k]:.1f}% |")
    print(f"\nhvd / MultiWorkerMirrored throughput: {median['hvd'] / median['mwms']:.3f}x")
    print(f"hvd / lockstep (share of the ceiling): {median['hvd'] / median['lockstep']:.3f}")
    if args.json:
        pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"benchmark": "keras_scaling", "model": "examples/keras_mnist.py CNN",
                       "batch_per_rank": args.batch, "ranks": args.ranks, "steps": args.steps,
                       "warmup": args.warmup, "threads_per_rank": 1, "rounds": rounds,
                       "median_samples_per_s": median, "median_efficiency": efficiency}, f,
                      indent=2)


if __name__ == "__main__":
    main()
