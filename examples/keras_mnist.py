"""Horovod's Keras recipe on hvd: train the classic MNIST CNN data-parallel with Keras 3 on
TensorFlow.

    hvdrun -np 2 python examples/keras_mnist.py
    hvdrun -np 4 python examples/keras_mnist.py --data mnist.npz --epochs 3

--data takes an MNIST .npz (x_train, y_train, x_test, y_test, as Keras ships it). Without it the
example uses scikit-learn's bundled handwritten digits (8x8, upscaled to 28x28), so it runs
offline. Every rank trains on its own shard; DistributedOptimizer averages the gradients each
step; the callbacks start every rank from rank 0's weights, warm the scaled learning rate up and
average the metrics; rank 0 alone writes checkpoints (Keras's ModelCheckpoint writes through a
temporary file and a rename) and a later run resumes from the newest.
"""
import argparse
import glob
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import hvd.tensorflow.keras as hvd  # noqa: E402


def build_model():
    """Two 3x3 convolutions, max-pool, dropout, a 128-unit dense layer: 1.2 M parameters."""
    return keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.Conv2D(64, 3, activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Dropout(0.25),
        keras.layers.Flatten(),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dropout(0.5),
        keras.layers.Dense(10),
    ])


def load_data(path):
    """((x_train, y_train), (x_test, y_test)): 28x28x1 float32 images in [0, 1], int labels."""
    if path:
        with np.load(path) as d:
            xtr, ytr, xte, yte = d["x_train"], d["y_train"], d["x_test"], d["y_test"]
        return ((xtr[..., None] / 255.0).astype("float32"), ytr), \
            ((xte[..., None] / 255.0).astype("float32"), yte)
    from sklearn.datasets import load_digits
    digits = load_digits()
    images = tf.image.resize(digits.images[..., None] / 16.0, (28, 28)).numpy()
    order = np.random.RandomState(0).permutation(len(digits.target))
    cut = int(0.8 * len(order))
    x, y = images.astype("float32")[order], digits.target[order]
    return (x[:cut], y[:cut]), (x[cut:], y[cut:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", help="MNIST .npz (default: scikit-learn's digits)")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.001, help="single-process rate")
    parser.add_argument("--checkpoint-dir", help="rank 0 writes checkpoint-EPOCH.keras here")
    args = parser.parse_args()

    hvd.init()
    (x_train, y_train), (x_test, y_test) = load_data(args.data)
    # Each rank its shard: a different part of the data per rank, one epoch over all of it.
    x_train, y_train = x_train[hvd.rank()::hvd.size()], y_train[hvd.rank()::hvd.size()]

    initial_epoch = 0
    latest = sorted(glob.glob(os.path.join(args.checkpoint_dir or "", "checkpoint-*.keras")),
                    key=lambda p: int(p.rsplit("-", 1)[1].split(".")[0]))
    if args.checkpoint_dir and latest:
        # Every rank loads the same file; BroadcastGlobalVariablesCallback then guarantees
        # equal starting points even if one rank had read a different one.
        model = hvd.load_model(latest[-1])
        initial_epoch = int(latest[-1].rsplit("-", 1)[1].split(".")[0])
        if hvd.rank() == 0:
            print(f"resuming from {latest[-1]}")
    else:
        model = build_model()
        # The rate grows with the number of ranks (the combined batch does).
        opt = hvd.DistributedOptimizer(keras.optimizers.Adam(args.lr * hvd.size()))
        model.compile(optimizer=opt,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])

    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=args.lr * hvd.size(),
                                                 warmup_epochs=1),
    ]
    if hvd.rank() == 0 and args.checkpoint_dir:
        os.makedirs(args.checkpoint_dir, exist_ok=True)
        callbacks.append(keras.callbacks.ModelCheckpoint(
            os.path.join(args.checkpoint_dir, "checkpoint-{epoch}.keras")))

    model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
              initial_epoch=initial_epoch, callbacks=callbacks,
              verbose=2 if hvd.rank() == 0 else 0)
    # Every rank evaluates its share of the test set; the average is the whole set's.
    part = slice(hvd.rank(), None, hvd.size())
    loss, accuracy = model.evaluate(x_test[part], y_test[part], verbose=0)
    loss, accuracy = np.asarray(hvd.allreduce(np.array([loss, accuracy]), name="test_metrics"))
    if hvd.rank() == 0:
        print(f"test loss {loss:.4f}, test accuracy: {100 * accuracy:.2f}%")


if __name__ == "__main__":
    main()
