"""hvd.tensorflow.keras.DistributedOptimizer on tf.keras 2 optimizers (TensorFlow 2.15): each
gradient is reduced once, where Horovod reduces it (compute_gradients, get_gradients, so
model.fit's minimize) or, for a custom loop's tape gradients, where apply_gradients aggregates."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
if int(keras.__version__.split(".")[0]) >= 3:
    pytest.skip("tf.keras 2 optimizers (TensorFlow 2.15)", allow_module_level=True)

import hvd  # noqa: E402
import hvd.tensorflow.keras as hk  # noqa: E402
import tf_helpers  # noqa: E402,F401  (thread settings, before any op runs)


def total():
    return float(sum(r + 1 for r in range(hvd.size())))  # the Sum of every rank's rank+1


@pytest.mark.parametrize("legacy", [False, True], ids=["optimizer", "legacy"])
def test_minimize_reduces_once(legacy):
    sgd = keras.optimizers.legacy.SGD(1.0) if legacy else keras.optimizers.SGD(1.0)
    opt = hk.DistributedOptimizer(sgd, op=hk.Sum)
    v = tf.Variable([0.0])
    opt.minimize(lambda: -v * float(hvd.rank() + 1), [v])
    np.testing.assert_array_equal(v.numpy(), [total()])  # once: twice would be size * total


def test_compute_gradients_returns_reduced_gradients_that_apply_does_not_reduce_again():
    opt = hk.DistributedOptimizer(keras.optimizers.SGD(1.0), op=hk.Sum)
    v = tf.Variable([0.0])
    pairs = opt.compute_gradients(lambda: -v * float(hvd.rank() + 1), [v])
    np.testing.assert_array_equal(pairs[0][0].numpy(), [-total()])
    opt.apply_gradients(pairs)
    np.testing.assert_array_equal(v.numpy(), [total()])
    # A custom loop's own tape gradients: reduced where they are applied.
    with tf.GradientTape() as tape:
        loss = -v * float(hvd.rank() + 1)
    opt.apply_gradients(zip(tape.gradient(loss, [v]), [v]))
    np.testing.assert_array_equal(v.numpy(), [2 * total()])


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "tf.function"])
@pytest.mark.parametrize("average", [False, True], ids=["sum", "average"])
def test_backward_passes_per_step_updates_every_nth_pass_with_the_reduced_sum(average, graph):
    opt = hk.DistributedOptimizer(keras.optimizers.SGD(1.0), backward_passes_per_step=2,
                                  average_aggregated_gradients=average)
    v = tf.Variable([0.0])

    def step():
        opt.minimize(lambda: -v * float(hvd.rank() + 1), [v])

    step = tf.function(step) if graph else step
    mean = total() / hvd.size()  # each pass's gradient, averaged over the ranks (op=Average)
    for k in range(1, 6):
        step()
        expected = (k // 2) * mean * (1 if average else 2)
        np.testing.assert_allclose(v.numpy(), [expected], rtol=1e-6)
        assert int(opt.iterations.numpy()) == k  # the passes between updates count too
        assert int(opt._agg_helper.counter.numpy()) == k % 2
