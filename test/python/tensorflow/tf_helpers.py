"""What the TensorFlow test files share: each test runs eagerly and inside tf.function; the
ranks' weights compared."""
import numpy as np
import pytest
import tensorflow as tf

import hvd.tensorflow as htf

# One thread per rank, chosen before TensorFlow starts (the ranks share two cores); every test
# file of this directory imports this module while pytest collects, before any op runs.
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(2)


def modes():
    return pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])


def run(fn, graph, *args):
    return tf.function(fn)(*args) if graph else fn(*args)


def flat_weights(model):
    return np.concatenate([v.numpy().ravel() for v in model.weights])


def assert_same_on_all_ranks(array, what):
    rows = htf.allgather(tf.constant(array)[None]).numpy()
    for q in range(1, rows.shape[0]):
        np.testing.assert_array_equal(rows[0], rows[q], err_msg=f"{what}: rank {q} differs")
