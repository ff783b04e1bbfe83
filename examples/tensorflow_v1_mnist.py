"""Horovod's TF1 recipe, unchanged, on hvd: a graph with placeholders, a tf.compat.v1.train
optimizer wrapped in DistributedOptimizer, BroadcastGlobalVariablesHook, and a
MonitoredTrainingSession whose checkpoints rank 0 alone writes.

    hvdrun -np 2 --horovod-compat python examples/tensorflow_v1_mnist.py
    hvdrun -np 4 --horovod-compat python examples/tensorflow_v1_mnist.py --checkpoint-dir ckpt

Written as Horovod's tensorflow_mnist.py is (`import horovod.tensorflow as hvd`), on TensorFlow
2's tf.compat.v1 (graph mode). It trains a two-layer perceptron on scikit-learn's bundled 8x8
digits, so it runs offline. Each rank trains on its own shard for `--steps // size` steps with a
learning rate scaled by the number of ranks; the hook starts every rank from rank 0's variables
(freshly initialised, or restored from rank 0's checkpoint directory by a rerun).
"""
import argparse
import os
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import horovod.tensorflow as hvd  # noqa: E402

v1 = tf.compat.v1


def load_digits():
    """((x_train, y_train), (x_test, y_test)): 64 features in [0, 1], integer labels."""
    from sklearn.datasets import load_digits as digits_of_sklearn
    digits = digits_of_sklearn()
    order = np.random.RandomState(0).permutation(len(digits.target))
    cut = int(0.8 * len(order))
    x, y = (digits.data / 16.0).astype("float32")[order], digits.target[order]
    return (x[:cut], y[:cut]), (x[cut:], y[cut:])


def dense(inputs, units, name):
    kernel = v1.get_variable(f"{name}/kernel", [inputs.shape[1], units],
                             initializer=v1.glorot_uniform_initializer())
    bias = v1.get_variable(f"{name}/bias", [units], initializer=v1.zeros_initializer())
    return tf.matmul(inputs, kernel) + bias


class FinalReport(v1.train.SessionRunHook):
    """At the end of training (end() may still run ops): the test accuracy on rank 0, and with
    --print-weights-digest every rank's checksum of its weights, which must agree."""

    def __init__(self, accuracy, feed, print_digest):
        self.accuracy, self.feed, self.print_digest = accuracy, feed, print_digest

    def end(self, session):
        if self.print_digest:
            weights = session.run(v1.trainable_variables())
            digest = zlib.crc32(b"".join(w.tobytes() for w in weights))
            print(f"rank {hvd.rank()}: weights digest {digest:08x}")
        if hvd.rank() == 0:
            print(f"test accuracy: {100 * session.run(self.accuracy, self.feed):.2f}%")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=600, help="over all ranks")
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.001, help="single-process rate")
    parser.add_argument("--checkpoint-dir", help="rank 0 writes (and resumes from) checkpoints")
    parser.add_argument("--print-weights-digest", action="store_true")
    args = parser.parse_args()

    hvd.init()
    v1.disable_eager_execution()
    (x_train, y_train), (x_test, y_test) = load_digits()
    x_train, y_train = x_train[hvd.rank()::hvd.size()], y_train[hvd.rank()::hvd.size()]

    images = v1.placeholder(tf.float32, [None, 64], name="images")
    labels = v1.placeholder(tf.int64, [None], name="labels")
    logits = dense(tf.nn.relu(dense(images, 128, "hidden")), 10, "output")
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32))

    global_step = v1.train.get_or_create_global_step()
    # The rate grows with the number of ranks (the combined batch does).
    opt = hvd.DistributedOptimizer(v1.train.AdamOptimizer(args.lr * hvd.size()))
    train_op = opt.minimize(loss, global_step=global_step)

    hooks = [
        # Every rank starts from rank 0's variables (random, or restored by rank 0).
        hvd.BroadcastGlobalVariablesHook(0),
        # Each rank runs its share of the steps.
        v1.train.StopAtStepHook(last_step=args.steps // hvd.size()),
        FinalReport(accuracy, {images: x_test, labels: y_test}, args.print_weights_digest),
    ]
    # Only rank 0 writes checkpoints, so the others cannot corrupt them.
    checkpoint_dir = args.checkpoint_dir if hvd.rank() == 0 else None
    rng = np.random.RandomState(hvd.rank())
    with v1.train.MonitoredTrainingSession(checkpoint_dir=checkpoint_dir, hooks=hooks,
                                           save_summaries_steps=None) as session:
        while not session.should_stop():
            batch = rng.randint(0, len(x_train), args.batch_size)
            session.run(train_op, feed_dict={images: x_train[batch], labels: y_train[batch]})


if __name__ == "__main__":
    main()
