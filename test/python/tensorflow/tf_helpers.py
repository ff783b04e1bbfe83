"""What the TensorFlow test files share: each test runs eagerly and inside tf.function."""
import pytest
import tensorflow as tf


def modes():
    return pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])


def run(fn, graph, *args):
    return tf.function(fn)(*args) if graph else fn(*args)
