"""Horovod's Estimator recipe, unchanged, on hvd (TensorFlow <= 2.15: tf.estimator left
TensorFlow in 2.16): the model_fn wraps a tf.compat.v1.train optimizer in DistributedOptimizer,
train() gets BroadcastGlobalVariablesHook, and only rank 0 has a model_dir to write.

    hvdrun -np 2 --horovod-compat python examples/tensorflow_estimator_mnist.py

Written as Horovod's tensorflow_mnist_estimator.py is (`import horovod.tensorflow as hvd`). It
trains a two-layer perceptron on scikit-learn's bundled 8x8 digits, so it runs offline. The
other ranks train in a temporary directory of their own that is removed at the end, as
Horovod's recipe has them do, so they never write over rank 0's checkpoints.
"""
import argparse
import os
import shutil
import tempfile
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import horovod.tensorflow as hvd  # noqa: E402

v1 = tf.compat.v1


def load_digits():
    from sklearn.datasets import load_digits as digits_of_sklearn
    digits = digits_of_sklearn()
    order = np.random.RandomState(0).permutation(len(digits.target))
    cut = int(0.8 * len(order))
    x, y = (digits.data / 16.0).astype("float32")[order], digits.target[order].astype("int64")
    return (x[:cut], y[:cut]), (x[cut:], y[cut:])


def dense(inputs, units, name):
    kernel = v1.get_variable(f"{name}/kernel", [inputs.shape[1], units],
                             initializer=v1.glorot_uniform_initializer())
    bias = v1.get_variable(f"{name}/bias", [units], initializer=v1.zeros_initializer())
    return tf.matmul(inputs, kernel) + bias


def model_fn(features, labels, mode, params):
    logits = dense(tf.nn.relu(dense(features["x"], 128, "hidden")), 10, "output")
    predictions = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"classes": predictions})
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                         logits=logits))
    if mode == tf.estimator.ModeKeys.EVAL:
        accuracy = v1.metrics.accuracy(labels, predictions)
        return tf.estimator.EstimatorSpec(mode, loss=loss,
                                          eval_metric_ops={"accuracy": accuracy})
    # The rate grows with the number of ranks (the combined batch does).
    optimizer = hvd.DistributedOptimizer(
        v1.train.MomentumOptimizer(params["lr"] * hvd.size(), momentum=0.9))
    train_op = optimizer.minimize(loss, global_step=v1.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


class WeightsDigest(v1.train.SessionRunHook):
    """Prints this rank's checksum of its trainable weights at the end of training."""

    def end(self, session):
        weights = session.run(v1.trainable_variables())
        print(f"rank {hvd.rank()}: weights digest "
              f"{zlib.crc32(b''.join(w.tobytes() for w in weights)):08x}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=600, help="over all ranks")
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=0.01, help="single-process rate")
    parser.add_argument("--model-dir", help="rank 0's checkpoints (default: a temporary one)")
    parser.add_argument("--print-weights-digest", action="store_true")
    args = parser.parse_args()

    hvd.init()
    (x_train, y_train), (x_test, y_test) = load_digits()
    x_train, y_train = x_train[hvd.rank()::hvd.size()], y_train[hvd.rank()::hvd.size()]

    own_dir = hvd.rank() != 0 or not args.model_dir
    model_dir = tempfile.mkdtemp(prefix="hvd-estimator-") if own_dir else args.model_dir
    try:
        estimator = tf.estimator.Estimator(model_fn=model_fn, model_dir=model_dir,
                                           params={"lr": args.lr})
        train_input = v1.estimator.inputs.numpy_input_fn(
            x={"x": x_train}, y=y_train, batch_size=args.batch_size, num_epochs=None,
            shuffle=True)
        hooks = [hvd.BroadcastGlobalVariablesHook(0)]
        if args.print_weights_digest:
            hooks.append(WeightsDigest())
        estimator.train(input_fn=train_input, steps=args.steps // hvd.size(), hooks=hooks)
        if hvd.rank() == 0:
            eval_input = v1.estimator.inputs.numpy_input_fn(
                x={"x": x_test}, y=y_test, num_epochs=1, shuffle=False)
            accuracy = estimator.evaluate(input_fn=eval_input)["accuracy"]
            print(f"test accuracy: {100 * accuracy:.2f}%")
    finally:
        if own_dir:
            shutil.rmtree(model_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
