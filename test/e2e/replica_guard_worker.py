"""A small training job for test_replica_guard.py, in the flavour argv[1] names:

  torch      hvd.torch DistributedOptimizer, a custom loop
  keras-seq  Keras 3 Sequential without an input shape, model.fit
  keras-sub  a subclassed Keras model, model.fit
  tape       a TensorFlow custom loop with DistributedGradientTape (tf.function)

Flags: --differ initialises each rank differently (seeded by rank); --broadcast gives every
rank rank 0's weights the way the framework's Horovod recipe does; --perturb K makes rank 1's
weights drift after update K; --local-differ (tape) keeps a rank-local variable that differs on
purpose. Prints "WEIGHTS <crc32 of the trainable weights>" on success.
"""
import argparse
import zlib

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument("flavour", choices=["torch", "keras-seq", "keras-sub", "tape"])
parser.add_argument("--differ", action="store_true")
parser.add_argument("--broadcast", action="store_true")
parser.add_argument("--perturb", type=int, default=0)
parser.add_argument("--local-differ", action="store_true")
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
    if args.broadcast:
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        hvd.broadcast_optimizer_state(opt, root_rank=0)
    x, y = map(torch.from_numpy, data(hvd.rank()))
    for step in range(1, args.steps + 1):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if args.perturb and step >= args.perturb and hvd.rank() == 1:
            with torch.no_grad():
                model[2].bias.add_(0.5)  # a rank that forgot something: its model drifts
    report([p.detach().numpy() for p in model.parameters()])


def keras_model(keras):
    if args.flavour == "keras-sub":
        class Net(keras.Model):
            def __init__(self):
                super().__init__()
                self.hidden = keras.layers.Dense(16, activation="relu")
                self.drop = keras.layers.Dropout(0.1)
                self.out = keras.layers.Dense(3)

            def call(self, x, training=False):
                return self.out(self.drop(self.hidden(x), training=training))
        return Net()
    # The TF2 tutorials' style: no input shape, so the weights appear at the first batch.
    return keras.Sequential([keras.layers.Dense(16, activation="relu"),
                             keras.layers.Dropout(0.1), keras.layers.Dense(3)])


def run_keras():
    import keras
    import hvd.tensorflow.keras as hvd
    hvd.init()
    keras.utils.set_random_seed(hvd.rank() + 1 if args.differ else 1)
    model = keras_model(keras)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0)] if args.broadcast else []
    x, y = data(hvd.rank())
    model.fit(x, y, batch_size=16, epochs=2, callbacks=callbacks, verbose=0)
    report([v.numpy() for v in model.trainable_variables])


def run_tape():
    import tensorflow as tf
    import hvd.tensorflow as hvd
    hvd.init()
    tf.random.set_seed(hvd.rank() + 1 if args.differ else 1)
    w = tf.Variable(tf.random.normal([8, 3]), name="w")
    b = tf.Variable(tf.zeros([3]), name="b")
    # A per-rank variable (Horovod's local sources): different on every rank on purpose.
    local = tf.Variable(tf.fill([3], float(hvd.rank())), name="rank_local_scale")
    opt = tf.keras.optimizers.SGD(0.1)
    x, y = data(hvd.rank())

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = tf.matmul(x, w) + b + (local if args.local_differ else 0.0)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        tape = hvd.DistributedGradientTape(tape)
        sources = [w, b, local] if args.local_differ else [w, b]
        if args.local_differ:
            tape.register_local_source(local)
        grads = tape.gradient(loss, sources)
        opt.apply_gradients(zip(grads, sources))

    for i in range(args.steps):
        step(x, y)
        if i == 0 and args.broadcast:  # Horovod's TF2 recipe: after the first step
            hvd.broadcast_variables([w, b], root_rank=0)
            hvd.broadcast_variables(opt.variables, root_rank=0)
    report([w.numpy(), b.numpy()])


{"torch": run_torch, "keras-seq": run_keras, "keras-sub": run_keras, "tape": run_tape}[
    args.flavour]()
