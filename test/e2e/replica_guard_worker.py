"""A small training job for test_replica_guard.py, in the flavour argv[1] names:

  torch      hvd.torch DistributedOptimizer, a custom loop
  keras-seq  Keras 3 Sequential without an input shape, model.fit

--differ initialises each rank differently (seeded by rank). Prints "WEIGHTS <crc32 of the
trainable weights>" on success.
"""
import argparse
import zlib

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("flavour", choices=["torch", "keras-seq"])
parser.add_argument("--differ", action="store_true")
parser.add_argument("--steps", type=int, default=8)
args = parser.parse_args()


def data(rank, n=64):
    rng = np.random.default_rng(100 + rank)
    x = rng.normal(size=(n, 8)).astype("float32")
    return x, ((x[:, 0] > 0).astype("int64") + (x[:, 1] > 0))


def report(arrays):
    print("WEIGHTS", zlib.crc32(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)))


def run_torch():
    import torch
    import hvd.torch as hvd
    hvd.init()
    torch.manual_seed(hvd.rank() if args.differ else 0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    opt = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters())
    x, y = map(torch.from_numpy, data(hvd.rank()))
    for _ in range(args.steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    report([p.detach().numpy() for p in model.parameters()])


def run_keras():
    import keras
    import hvd.tensorflow.keras as hvd
    hvd.init()
    keras.utils.set_random_seed(hvd.rank() + 1 if args.differ else 1)
    # The TF2 tutorials' style: no input shape, so the weights appear at the first batch.
    model = keras.Sequential([keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dropout(0.1), keras.layers.Dense(3)])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = data(hvd.rank())
    model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    report([v.numpy() for v in model.trainable_variables])


{"torch": run_torch, "keras-seq": run_keras}[args.flavour]()
