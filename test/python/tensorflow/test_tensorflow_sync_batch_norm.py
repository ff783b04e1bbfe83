"""hvd.tensorflow.SyncBatchNormalization against Keras's BatchNormalization on the
concatenation of every rank's batch (the ranks' batches of unequal size)."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

import hvd  # noqa: E402
import hvd.tensorflow as htf  # noqa: E402
from tf_helpers import modes, run  # noqa: E402  (this directory)


def rank_batch(r):
    rows = r + 2
    x = np.arange(rows * 2 * 3, dtype="float32").reshape(rows, 2, 3)
    return np.sin(x * (r + 1)) * (r + 1), np.cos(x + r)  # inputs, loss weights


@pytest.mark.size_dependent
@modes()
def test_matches_batch_norm_on_every_ranks_batch_with_its_gradient(graph):
    n, r = hvd.size(), hvd.rank()
    batches = [rank_batch(q) for q in range(n)]
    x_all = tf.constant(np.concatenate([b[0] for b in batches]))
    w_all = tf.constant(np.concatenate([b[1] for b in batches]))
    start = sum(q + 2 for q in range(r))
    mine = slice(start, start + r + 2)
    reference, sync = keras.layers.BatchNormalization(momentum=0.5), \
        htf.SyncBatchNormalization(momentum=0.5)
    x = tf.constant(batches[r][0])

    def step(layer, inputs, weights):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            y = layer(inputs, training=True)
            loss = tf.reduce_sum(y * weights)
        return y, tape.gradient(loss, inputs)

    y_ref, g_ref = step(reference, x_all, w_all)
    y, g = run(lambda: step(sync, x, tf.constant(batches[r][1])), graph)
    np.testing.assert_allclose(y.numpy(), y_ref.numpy()[mine], rtol=1e-4, atol=1e-5)
    # the gradient of the sum of every rank's loss, restricted to this rank's inputs
    np.testing.assert_allclose(g.numpy(), g_ref.numpy()[mine], rtol=1e-4, atol=1e-5)
    for a, b in ((sync.moving_mean, reference.moving_mean),
                 (sync.moving_variance, reference.moving_variance)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)
    # inference uses the moving statistics alone
    np.testing.assert_allclose(sync(x, training=False).numpy(),
                               reference(x, training=False).numpy(), rtol=1e-5, atol=1e-6)


def test_trains_in_a_keras_model_and_refuses_tf_distribute_synchronisation():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3),
                              htf.SyncBatchNormalization(), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x = np.arange(8 * 4, dtype="float32").reshape(8, 4) / 10 + hvd.rank()
    history = model.fit(x, np.ones([8, 1]), epochs=2, batch_size=4, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    with pytest.raises(ValueError, match="synchronized=True"):
        htf.SyncBatchNormalization(synchronized=True)
