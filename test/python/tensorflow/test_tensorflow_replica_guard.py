"""The replica check (HVD_CHECK_REPLICAS) through TensorFlow's training loops: Keras's fit with
DistributedOptimizer (Sequential without an input shape and a subclassed model, both built by
their first batch) and a tf.function loop with DistributedGradientTape. Without a broadcast the
check fails naming the first variable, as each Keras version names it; with the recipe's
broadcast (the Keras callback, or broadcast_variables after the first step) it passes; a
rank-local source is not compared; and the Keras callback alone, the check off, gives every rank
the same weights. What a failing check does to a job: one job in test/e2e/test_replica_guard.py."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

import hvd  # noqa: E402
import hvd.tensorflow as htf  # noqa: E402
import hvd.tensorflow.keras as hk  # noqa: E402
from hvd import _replicas  # noqa: E402
from replica_messages import mismatch  # noqa: E402  (test/python)
from tf_helpers import assert_same_on_all_ranks  # noqa: E402  (this directory)

OFF, FIRST = -1, 0  # HVD_CHECK_REPLICAS=off and first as the runtime reads them; N: every:N
KERAS2 = keras.__version__.startswith("2.")


@pytest.fixture(autouse=True)
def several_ranks():
    if hvd.size() == 1:
        pytest.skip("the check compares ranks")


def data(rank, n=64):
    rng = np.random.default_rng(100 + rank)
    x = rng.normal(size=(n, 8)).astype("float32")
    return x, ((x[:, 0] > 0).astype("int64") + (x[:, 1] > 0))


def keras_model(kind):
    """Built by its first batch (no input shape), as in the TF2 tutorials; named, so that the
    variables' names do not depend on the models built before it in this process."""
    if kind == "subclassed":
        class Net(keras.Model):
            def __init__(self):
                super().__init__(name="net")
                self.hidden = keras.layers.Dense(16, activation="relu", name="hidden")
                self.drop = keras.layers.Dropout(0.1)
                self.out = keras.layers.Dense(3, name="head")

            def call(self, x, training=False):
                return self.out(self.drop(self.hidden(x), training=training))
        return Net()
    return keras.Sequential([keras.layers.Dense(16, activation="relu", name="hidden"),
                             keras.layers.Dropout(0.1), keras.layers.Dense(3, name="head")],
                            name="seq")


def fit(kind, differ=False, broadcast=False):
    keras.utils.set_random_seed(hvd.rank() + 1 if differ else 1)
    model = keras_model(kind)
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.Adam(0.01)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    callbacks = [hk.callbacks.BroadcastGlobalVariablesCallback(0)] if broadcast else []
    x, y = data(hvd.rank())
    model.fit(x, y, batch_size=16, epochs=2, callbacks=callbacks, verbose=0)
    return np.concatenate([v.numpy().ravel() for v in model.trainable_variables])


KINDS = pytest.mark.parametrize("kind", ["sequential", "subclassed"])


@KINDS
def test_keras_callback_broadcasts_models_built_by_their_first_batch(kind, check_replicas):
    check_replicas(OFF)  # the callback's own doing
    assert_same_on_all_ranks(fit(kind, differ=True, broadcast=True), "weights")


@KINDS
def test_keras_without_the_broadcast_fails_naming_the_first_variable(kind, check_replicas):
    # The starting weights are compared before the first update, and the fit fails when they
    # are still apart before the second.
    check_replicas(FIRST)
    variable = {("sequential", False): "seq/hidden/kernel",
                ("subclassed", False): "net/hidden/kernel",
                ("sequential", True): "hidden/kernel:0",  # tf.keras 2's names
                ("subclassed", True): "net/hidden/kernel:0"}[kind, KERAS2]
    with pytest.raises(Exception, match=mismatch(list(range(1, hvd.size())), variable,
                                                 update=1, confirmed=True)):
        fit(kind, differ=True)


def test_keras_with_the_callback_passes_the_check(check_replicas):
    check_replicas(3)
    assert_same_on_all_ranks(fit("sequential", differ=True, broadcast=True), "weights")


def tape_loop(differ=False, broadcast=False, local_differ=False, steps=8):
    """A tf.function step with DistributedGradientTape; `broadcast`: Horovod's TF2 recipe, the
    variables broadcast after the first step; `local_differ`: a rank-local variable (Horovod's
    local sources), different on every rank on purpose."""
    tf.random.set_seed(hvd.rank() + 1 if differ else 1)
    w = tf.Variable(tf.random.normal([8, 3]), name="w")
    b = tf.Variable(tf.zeros([3]), name="b")
    local = tf.Variable(tf.fill([3], float(hvd.rank())), name="rank_local_scale")
    opt = keras.optimizers.SGD(0.1)
    x, y = data(hvd.rank())

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = tf.matmul(x, w) + b + (local if local_differ else 0.0)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        tape = htf.DistributedGradientTape(tape)
        sources = [w, b, local] if local_differ else [w, b]
        if local_differ:
            tape.register_local_source(local)
        grads = tape.gradient(loss, sources)
        opt.apply_gradients(zip(grads, sources))

    for i in range(steps):
        step(x, y)
        if i == 0 and broadcast:
            htf.broadcast_variables([w, b], root_rank=0)
            htf.broadcast_variables(opt.variables, root_rank=0)
    return np.concatenate([w.numpy().ravel(), b.numpy()])


def test_tape_loop_that_never_broadcasts_fails(check_replicas):
    check_replicas(FIRST)
    with pytest.raises(Exception, match=mismatch(list(range(1, hvd.size())), "w:0", update=2,
                                                 what="DistributedGradientTape",
                                                 confirmed=True)):
        tape_loop(differ=True)


def test_tape_loop_broadcasting_after_the_first_step_passes(check_replicas):
    check_replicas(2)
    assert_same_on_all_ranks(tape_loop(differ=True, broadcast=True), "weights")


def test_rank_local_sources_are_not_compared(check_replicas):
    check_replicas(1)
    assert_same_on_all_ranks(tape_loop(local_differ=True), "weights")
