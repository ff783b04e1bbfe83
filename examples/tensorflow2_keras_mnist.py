"""Horovod's TF2 Keras tutorial, unchanged, on hvd: a Sequential model declared without an input
shape (its weights appear at the first batch), or with --subclassed a subclassed model, trained
by model.fit with Horovod's callbacks.

    hvdrun -np 2 --horovod-compat python examples/tensorflow2_keras_mnist.py
    hvdrun -np 3 --horovod-compat python examples/tensorflow2_keras_mnist.py --subclassed

Written as Horovod's tensorflow2_keras_mnist.py is (`import horovod.tensorflow.keras as hvd`).
Such a model has no weights when training starts, so BroadcastGlobalVariablesCallback(0)
broadcasts rank 0's at the end of the first batch, once they exist; hvd's replica check then
confirms, before the second update, that every rank holds the same weights (a job that forgot
the callback fails there, naming the ranks and the variable). Trains offline on scikit-learn's
bundled 8x8 digits.
"""
import argparse
import os
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import horovod.tensorflow.keras as hvd  # noqa: E402

keras = tf.keras


def load_digits():
    from sklearn.datasets import load_digits as digits_of_sklearn
    digits = digits_of_sklearn()
    order = np.random.RandomState(0).permutation(len(digits.target))
    cut = int(0.8 * len(order))
    x, y = (digits.images[..., None] / 16.0).astype("float32")[order], digits.target[order]
    return (x[:cut], y[:cut]), (x[cut:], y[cut:])


def sequential_model():
    return keras.Sequential([
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Dropout(0.25),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ])


class SubclassedModel(keras.Model):
    def __init__(self):
        super().__init__()
        self.conv = keras.layers.Conv2D(32, 3, activation="relu")
        self.pool = keras.layers.MaxPooling2D(2)
        self.flatten = keras.layers.Flatten()
        self.hidden = keras.layers.Dense(64, activation="relu")
        self.dropout = keras.layers.Dropout(0.25)
        self.out = keras.layers.Dense(10)

    def call(self, x, training=False):
        x = self.flatten(self.pool(self.conv(x)))
        return self.out(self.dropout(self.hidden(x), training=training))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subclassed", action="store_true")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.001, help="single-process rate")
    parser.add_argument("--print-weights-digest", action="store_true")
    args = parser.parse_args()

    hvd.init()
    (x_train, y_train), (x_test, y_test) = load_digits()
    x_train, y_train = x_train[hvd.rank()::hvd.size()], y_train[hvd.rank()::hvd.size()]

    model = SubclassedModel() if args.subclassed else sequential_model()
    opt = hvd.DistributedOptimizer(keras.optimizers.Adam(args.lr * hvd.size()))
    model.compile(optimizer=opt,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
    ]
    model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
              callbacks=callbacks, verbose=2 if hvd.rank() == 0 else 0)
    _, accuracy = model.evaluate(x_test, y_test, verbose=0)
    if args.print_weights_digest:
        digest = zlib.crc32(b"".join(np.asarray(w).tobytes() for w in model.get_weights()))
        print(f"rank {hvd.rank()}: weights digest {digest:08x}")
    if hvd.rank() == 0:
        print(f"test accuracy: {100 * accuracy:.2f}%")


if __name__ == "__main__":
    main()
