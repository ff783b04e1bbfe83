"""hvd.tensorflow and hvd.tensorflow.keras against NumPy and single-process references, eagerly
and inside tf.function."""
import os

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
KERAS2 = int(keras.__version__.split(".")[0]) < 3

import hvd  # noqa: E402
import hvd.tensorflow as htf  # noqa: E402
import hvd.tensorflow.keras as hk  # noqa: E402
from tf_helpers import assert_same_on_all_ranks, flat_weights, modes, run  # noqa: E402,E501


DTYPES = ["uint8", "int8", "uint16", "int16", "int32", "int64", "float16", "bfloat16",
          "float32", "float64"]


def value(r, shape, dtype):
    """Rank r's small closed-form values (exact in every dtype, sums included), as a NumPy
    array and as a tensor of `dtype`."""
    v = (np.arange(int(np.prod(shape))) % 5 + r + 1).reshape(shape).astype("float32")
    return v, tf.cast(tf.constant(v), dtype)


# -- collectives --------------------------------------------------------------------------------
@modes()
@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_every_op(dtype, graph):
    n, r = hvd.size(), hvd.rank()
    per_rank = [value(q, (3, 5), dtype)[0] for q in range(n)]
    _, x = value(r, (3, 5), dtype)
    ops = {"sum": (htf.Sum, np.sum), "min": (htf.Min, np.min), "max": (htf.Max, np.max)}
    if dtype.startswith("float") or dtype == "bfloat16":
        ops["average"] = (htf.Average, np.mean)
    for key, (op, ref) in ops.items():
        out = run(lambda t: htf.allreduce(t, op=op, name=f"ar.{dtype}.{key}.{graph}"), graph, x)
        assert out.dtype == x.dtype and out.shape == x.shape
        expected = tf.cast(tf.constant(ref(np.stack(per_rank), axis=0)), dtype)
        np.testing.assert_allclose(tf.cast(out, tf.float64).numpy(),
                                   tf.cast(expected, tf.float64).numpy(), err_msg=key,
                                   rtol=1e-2 if dtype in ("float16", "bfloat16") else 1e-6)


@modes()
def test_allreduce_scale_factors_and_bool(graph):
    n = hvd.size()
    x = tf.ones([4], tf.float64) * (hvd.rank() + 1)
    out = run(lambda t: htf.allreduce(t, op=htf.Sum, prescale_factor=0.5, postscale_factor=3.0),
              graph, x)
    np.testing.assert_allclose(out.numpy(), 1.5 * n * (n + 1) / 2)
    flags = tf.constant([hvd.rank() == 0, True])
    out = run(lambda t: htf.allreduce(t, op=htf.Min), graph, flags)
    assert out.numpy().tolist() == [n == 1, True]


@pytest.mark.size_dependent
@modes()
@pytest.mark.parametrize("dtype", DTYPES + ["bool"])
def test_allgather_with_different_first_dimensions(dtype, graph):
    n, r = hvd.size(), hvd.rank()
    x = tf.cast(tf.fill([r + 1, 2, 3], r + 1), dtype)
    out = run(lambda t: htf.allgather(t, name=f"ag.{dtype}"), graph, x)
    expected = np.concatenate([np.full((q + 1, 2, 3), q + 1) for q in range(n)])
    np.testing.assert_array_equal(tf.cast(out, tf.float64).numpy(),
                                  expected.astype(bool if dtype == "bool" else np.float64))


@pytest.mark.size_dependent
@modes()
def test_broadcast_from_every_root(graph):
    for root in range(hvd.size()):
        x = tf.constant([[1.5, 2.5]], tf.float32) * (hvd.rank() + 1)
        out = run(lambda t: htf.broadcast(t, root, name=f"bc.{root}"), graph, x)
        np.testing.assert_array_equal(out.numpy(), [[1.5 * (root + 1), 2.5 * (root + 1)]])


@pytest.mark.size_dependent
@modes()
def test_alltoall_with_and_without_splits(graph):
    n, r = hvd.size(), hvd.rank()
    splits = [q + 1 for q in range(n)]  # rank q receives q + 1 rows from everyone
    x = tf.constant([[10 * r + q] for q in range(n) for _ in range(q + 1)], tf.int64)
    out, received = run(lambda t: htf.alltoall(t, splits=splits, name="a2a.splits"), graph, x)
    assert received.dtype == tf.int32 and received.numpy().tolist() == [r + 1] * n
    assert out.numpy().ravel().tolist() == [10 * q + r for q in range(n) for _ in range(r + 1)]
    equal = tf.range(2 * n, dtype=tf.float32) + 100 * r
    # without splits, the output alone (as horovod.tensorflow and horovod.torch)
    out = run(lambda t: htf.alltoall(t, name="a2a.equal"), graph, equal)
    assert out.numpy().tolist() == [100 * q + 2 * r + k for q in range(n) for k in range(2)]


@pytest.mark.size_dependent
@modes()
def test_reducescatter_sum_and_average(graph):
    n, r = hvd.size(), hvd.rank()
    x = tf.reshape(tf.range(2 * n * 3, dtype=tf.float32), [2 * n, 3]) + r
    total = sum(np.arange(2 * n * 3, dtype=np.float32).reshape(2 * n, 3) + q for q in range(n))
    out = run(lambda t: htf.reducescatter(t, op=htf.Sum, name="rs.sum"), graph, x)
    np.testing.assert_allclose(out.numpy(), total[2 * r:2 * r + 2])
    out = run(lambda t: htf.reducescatter(t, name="rs.avg"), graph, x)
    np.testing.assert_allclose(out.numpy(), total[2 * r:2 * r + 2] / n)


@pytest.mark.size_dependent
@modes()
def test_grouped_collectives(graph):
    n, r = hvd.size(), hvd.rank()
    a = tf.fill([3], float(r + 1))
    b = tf.fill([2, 2], r + 1)

    def fn(a, b):
        return (htf.grouped_allreduce([a, b], op=htf.Sum, name="grouped.ar"),
                htf.grouped_allgather([a, b], name="grouped.ag"),
                htf.grouped_reducescatter([tf.tile(a[:1], [n]), tf.fill([n], 2.0)],
                                          op=htf.Sum, name="grouped.rs"))

    summed, gathered, scattered = run(fn, graph, a, b)
    s = n * (n + 1) / 2
    np.testing.assert_array_equal(summed[0].numpy(), [s] * 3)
    np.testing.assert_array_equal(summed[1].numpy(), [[s] * 2] * 2)
    assert gathered[0].shape == [3 * n] and gathered[1].shape == [2 * n, 2]
    np.testing.assert_array_equal(scattered[0].numpy(), [s])
    np.testing.assert_array_equal(scattered[1].numpy(), [2.0 * n])


def test_zero_element_and_scalar_tensors():
    assert htf.allreduce(tf.zeros([0, 4])).shape == [0, 4]
    assert float(htf.allreduce(tf.constant(2.0), op=htf.Sum)) == 2.0 * hvd.size()
    assert htf.allgather(tf.zeros([0, 2], tf.int32)).shape == [0, 2]


def test_results_are_aligned_for_tensorflow_kernels():
    # The core's outputs become TensorFlow tensors without a copy; TensorFlow's CPU kernels
    # abort the process on memory that is not 64-byte aligned.
    for rows in (1, 3, 1000, 70001):
        g = htf.allgather(tf.ones([rows], tf.float32), name=f"aligned.{rows}")
        assert float(tf.reduce_sum(g * 2.0)) == 2.0 * rows * hvd.size()
        a = htf.allreduce(tf.ones([rows, 3]), op=htf.Sum, name=f"aligned.ar.{rows}")
        assert float(tf.reduce_sum(tf.matmul(a, tf.ones([3, 1])))) == 3.0 * rows * hvd.size()


def test_variables_and_keras_variables_are_accepted():
    v = tf.Variable([1.0, 2.0])
    np.testing.assert_array_equal(htf.allreduce(v, op=htf.Max).numpy(), [1.0, 2.0])
    kv = keras.backend.variable([3.0]) if KERAS2 else keras.Variable([3.0])
    np.testing.assert_array_equal(htf.allreduce(kv, op=htf.Min).numpy(), [3.0])


@modes()
def test_many_independent_collectives_in_one_graph_run_in_program_order(graph):
    # TensorFlow may start independent ops in any order; hvd chains its collectives so that
    # every rank runs them as written (else different ranks would pair different ones).
    xs = [tf.fill([k + 1], float(hvd.rank() + k)) for k in range(24)]

    def fn(*ts):
        return [htf.allreduce(t, op=htf.Sum) for t in ts]

    outs = run(fn, graph, *xs)
    n = hvd.size()
    for k, o in enumerate(outs):
        np.testing.assert_array_equal(o.numpy(), [n * k + n * (n - 1) / 2] * (k + 1))


@pytest.mark.size_dependent
def test_unsupported_dtypes_and_values_name_the_tensor():
    with pytest.raises(ValueError, match='allreduce "strings".*unsupported dtype string'):
        htf.allreduce(tf.constant(["a"]), name="strings")
    with pytest.raises(ValueError, match="unsupported dtype complex64"):
        htf.allgather(tf.constant([1j], tf.complex64))
    with pytest.raises(ValueError, match="expected a tf.Tensor"):
        htf.allreduce(object())
    if hvd.size() & (hvd.size() - 1) == 0:
        np.testing.assert_array_equal(htf.allreduce(tf.ones([2]), op=htf.Adasum).numpy(),
                                      np.ones(2))
    else:
        with pytest.raises(ValueError, match="adasum needs a power-of-two number of ranks"):
            htf.allreduce(tf.ones([1]), op=htf.Adasum)


@pytest.mark.size_dependent
@modes()
def test_join_lets_the_rank_with_more_data_train_alone(graph):
    last = hvd.size() - 1
    w = tf.Variable([1.0, 2.0])

    def extra_step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * 3.0)
        return htf.DistributedGradientTape(tape, op=htf.Sum).gradient(loss, [w])[0]

    if hvd.rank() == last:
        # The ranks that joined count as zeros.
        assert run(extra_step, graph).numpy().tolist() == [3.0, 3.0]
    last_to_join = htf.join()
    assert last_to_join.dtype == tf.int32 and int(last_to_join) == last


# -- DistributedGradientTape ----------------------------------------------------------------------
def make_model(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="tanh"),
                             keras.layers.Dense(3)])


def batch(rank, step, rows=4):
    rng = np.random.default_rng(1000 * step + rank)
    return (rng.normal(size=(rows, 6)).astype("float32"),
            rng.integers(0, 3, size=(rows,)).astype("int64"))


def combined(step, rows=4):
    xs, ys = zip(*[batch(q, step, rows) for q in range(hvd.size())])
    return np.concatenate(xs), np.concatenate(ys)


LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@modes()
@pytest.mark.parametrize("compression", ["none", "fp16"])
def test_distributed_gradient_tape_matches_single_process_training(graph, compression):
    model = make_model(seed=hvd.rank())  # different on purpose: the broadcast must fix it
    htf.broadcast_variables(model.variables, root_rank=0)
    reference = make_model(seed=0)
    opt, ref_opt = keras.optimizers.SGD(0.1), keras.optimizers.SGD(0.1)
    comp = getattr(htf.Compression, compression)

    def step(m, o, x, y, distributed):
        with tf.GradientTape() as tape:
            loss = LOSS(y, m(x))
        if distributed:
            tape = htf.DistributedGradientTape(tape, compression=comp)
        o.apply_gradients(zip(tape.gradient(loss, m.trainable_variables),
                              m.trainable_variables))

    dist_step = tf.function(lambda x, y: step(model, opt, x, y, True)) if graph else \
        (lambda x, y: step(model, opt, x, y, True))
    for s in range(4):
        dist_step(*batch(hvd.rank(), s))
        step(reference, ref_opt, *combined(s), distributed=False)
    assert_same_on_all_ranks(flat_weights(model), "weights")
    tol = 1e-5 if compression == "none" else 2e-3
    np.testing.assert_allclose(flat_weights(model), flat_weights(reference), atol=tol)


def test_distributed_gradient_tape_options_and_sparse_gradients():
    n, r = hvd.size(), hvd.rank()
    emb = tf.Variable(tf.zeros([5, 2]))
    ids = tf.constant([r % 5, 4])
    for sparse_as_dense in (False, True):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.gather(emb, ids)) * (r + 1)
        tape = htf.DistributedGradientTape(tape, sparse_as_dense=sparse_as_dense,
                                           gradient_predivide_factor=2.0)
        g = tape.gradient(loss, emb)
        assert isinstance(g, tf.IndexedSlices) != sparse_as_dense
        dense = tf.convert_to_tensor(g).numpy()
        expected = np.zeros((5, 2))
        for q in range(n):
            expected[q % 5] += (q + 1) / n
            expected[4] += (q + 1) / n
        np.testing.assert_allclose(dense, expected, rtol=1e-6)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(emb) * (r + 1)
    unused = tf.Variable(1.0)
    g = htf.DistributedGradientTape(tape, op=htf.Sum).gradient(loss, {"emb": emb,
                                                                      "unused": unused})
    np.testing.assert_allclose(g["emb"].numpy(), np.full((5, 2), n * (n + 1) / 2))
    assert g["unused"] is None
    with pytest.raises(ValueError, match="gradient_predivide_factor needs op=Average"):
        htf.DistributedGradientTape(tf.GradientTape(), op=htf.Sum,
                                    gradient_predivide_factor=2.0)
    with pytest.raises(ValueError, match="expected a tf.GradientTape"):
        htf.DistributedGradientTape(object())


def test_horovod_tf2_recipe_broadcasts_inside_the_first_compiled_step():
    # Horovod's tensorflow2_mnist.py: the broadcast happens inside tf.function, after the
    # first update, when the optimizer's slots exist.
    model = make_model(seed=20 + hvd.rank())
    opt = keras.optimizers.Adam(0.01)

    @tf.function
    def training_step(x, y, first_batch):
        with tf.GradientTape() as tape:
            loss = LOSS(y, model(x, training=True))
        tape = htf.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        if first_batch:
            htf.broadcast_variables(model.variables, root_rank=0)
            htf.broadcast_variables(opt.variables, root_rank=0)
        return loss

    for step in range(3):
        training_step(*batch(hvd.rank(), step), step == 0)
    assert_same_on_all_ranks(flat_weights(model), "weights")
    assert_same_on_all_ranks(np.concatenate([v.numpy().ravel() for v in opt.variables]),
                             "optimizer state")


def test_broadcast_variables_objects_and_topology_ops():
    v = tf.Variable(tf.fill([3], float(hvd.rank())))
    w = tf.Variable(hvd.rank(), dtype=tf.int64)
    htf.broadcast_variables([v, w], root_rank=hvd.size() - 1)
    assert v.numpy().tolist() == [hvd.size() - 1.0] * 3 and int(w.numpy()) == hvd.size() - 1
    assert htf.broadcast_object({"from": hvd.rank()}, root_rank=0) == {"from": 0}
    assert htf.allgather_object(("r", hvd.rank())) == [("r", q) for q in range(hvd.size())]
    assert int(htf.size_op()) == hvd.size() and int(htf.rank_op()) == hvd.rank()
    with pytest.raises(RuntimeError, match="broadcast_variables"):
        htf.broadcast_global_variables(0)


# -- Keras ----------------------------------------------------------------------------------------
def keras_data(steps, rows=4):
    mine = [batch(hvd.rank(), s, rows) for s in range(steps)]
    every = [combined(s, rows) for s in range(steps)]
    cat = lambda parts, i: np.concatenate([p[i] for p in parts])  # noqa: E731
    return (cat(mine, 0), cat(mine, 1)), (cat(every, 0), cat(every, 1))


@pytest.mark.parametrize("run_eagerly", [False, True], ids=["compiled", "eager"])
def test_keras_fit_with_distributed_optimizer_matches_single_process(run_eagerly):
    steps, rows = 6, 4
    (x, y), (cx, cy) = keras_data(steps, rows)
    model = make_model(seed=100 + hvd.rank())
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1, momentum=0.5)),
                  loss=LOSS, run_eagerly=run_eagerly)
    history = model.fit(x, y, batch_size=rows, epochs=2, shuffle=False, verbose=0,
                        callbacks=[hk.callbacks.BroadcastGlobalVariablesCallback(0),
                                   hk.callbacks.MetricAverageCallback()])
    reference = make_model(seed=100)
    reference.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.5), loss=LOSS)
    ref_history = reference.fit(cx, cy, batch_size=rows * hvd.size(), epochs=2, shuffle=False,
                                verbose=0)
    assert_same_on_all_ranks(flat_weights(model), "weights")
    np.testing.assert_allclose(flat_weights(model), flat_weights(reference), atol=1e-5)
    # Averaged metrics: each rank's epoch loss is the mean of its batches, so their average is
    # the single process's mean over the combined batches.
    np.testing.assert_allclose(history.history["loss"], ref_history.history["loss"], rtol=1e-5)
    assert int(model.optimizer.iterations.numpy()) == 2 * steps


@pytest.mark.skipif(KERAS2, reason="needs Keras 3's gradient_accumulation_steps")
def test_keras_backward_passes_per_step_sums_or_averages_accumulated_gradients():
    steps, rows = 4, 2
    (x, y), (cx, cy) = keras_data(steps, rows)
    for average in (False, True):
        model = make_model(seed=7)
        opt = hk.DistributedOptimizer(keras.optimizers.SGD(0.05), backward_passes_per_step=2,
                                      average_aggregated_gradients=average)
        model.compile(optimizer=opt, loss=LOSS)
        model.fit(x, y, batch_size=rows, epochs=1, shuffle=False, verbose=0)
        reference = make_model(seed=7)
        # Two accumulated batches per update: one combined batch of both, whose mean gradient
        # is the average (or half the sum) of theirs.
        reference.compile(optimizer=keras.optimizers.SGD(0.05 if average else 0.1), loss=LOSS)
        rx = cx.reshape(steps // 2, 2, hvd.size(), rows, 6).transpose(0, 2, 1, 3, 4)
        ry = cy.reshape(steps // 2, 2, hvd.size(), rows).transpose(0, 2, 1, 3)
        reference.fit(rx.reshape(-1, 6), ry.reshape(-1), batch_size=2 * rows * hvd.size(),
                      epochs=1, shuffle=False, verbose=0)
        np.testing.assert_allclose(flat_weights(model), flat_weights(reference), atol=1e-5,
                                   err_msg=f"average_aggregated_gradients={average}")


def test_keras_learning_rate_warmup_and_schedule():
    (x, y), _ = keras_data(4)
    model = make_model(seed=1)
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss=LOSS)
    seen = []
    record = keras.callbacks.LambdaCallback(on_train_batch_begin=lambda b, logs: seen.append(
        float(model.optimizer.learning_rate.numpy())))
    model.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0, callbacks=[
        hk.callbacks.LearningRateWarmupCallback(0.4, warmup_epochs=2), record,
        hk.callbacks.LearningRateScheduleCallback(0.4, multiplier=0.5, start_epoch=2)])
    n = hvd.size()
    expected = [0.4 / n * ((e + b / 4) * (n - 1) / 2 + 1) for e in range(2) for b in range(4)]
    np.testing.assert_allclose(seen[:8], expected, rtol=1e-6)
    np.testing.assert_allclose(seen[8:], [0.2] * 4, rtol=1e-6)


def test_keras_checkpoint_on_rank_0_resumes_on_every_rank(tmp_path_factory):
    (x, y), _ = keras_data(4)
    model = make_model(seed=3)
    model.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.Adam(0.01)), loss=LOSS)
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0,
              callbacks=[hk.callbacks.BroadcastGlobalVariablesCallback(0)])
    path = htf.broadcast_object(str(tmp_path_factory.mktemp("ckpt") / "model.keras"))
    if hvd.rank() == 0:
        model.save(path)
    htf.barrier()
    if hvd.rank() == 0:
        restored = hk.load_model(path)
    else:
        restored = make_model(seed=99)  # fresh: the callback brings rank 0's state
        restored.compile(optimizer=hk.DistributedOptimizer(keras.optimizers.Adam(0.01)),
                         loss=LOSS)
    assert type(restored.optimizer).__name__ == "Adam"
    restored.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0,
                 callbacks=[hk.callbacks.BroadcastGlobalVariablesCallback(0)])
    assert_same_on_all_ranks(flat_weights(restored), "weights after resuming")
    assert int(restored.optimizer.iterations.numpy()) == 8


def test_horovod_tensorflow_distributed_optimizer_wraps_keras_optimizers():
    opt = htf.DistributedOptimizer(keras.optimizers.Adam(0.01), op=htf.Sum)
    assert isinstance(opt, keras.optimizers.Adam) and opt._hvd_options.op == htf.Sum
    # TF1's optimizers get the graph API's wrapper (test_tensorflow_v1.py), others an error.
    v1 = htf.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1))
    assert isinstance(v1, tf.compat.v1.train.Optimizer) and v1._options.op == htf.Average
    with pytest.raises(ValueError, match="expected a tf.compat.v1.train.Optimizer or a Keras "
                                         "optimizer, got str"):
        htf.DistributedOptimizer("adam")


def test_keras_value_functions_and_errors():
    n = hvd.size()
    # Eagerly a tf.Tensor, as horovod.tensorflow.keras returns.
    reduced = hk.allreduce(np.array([1.0, 2.0]), op=hk.Sum)
    assert isinstance(reduced, tf.Tensor) and reduced.numpy().tolist() == [n, 2.0 * n]
    assert hk.allgather(np.array([hvd.rank()])).numpy().tolist() == list(range(n))
    assert hk.broadcast(np.array([hvd.rank()]), 0).numpy().tolist() == [0]
    with pytest.raises(ValueError, match="expected a keras.optimizers.Optimizer"):
        hk.DistributedOptimizer("sgd")
    with pytest.raises(ValueError, match="with a LossScaleOptimizer"):
        hk.DistributedOptimizer(keras.mixed_precision.LossScaleOptimizer(keras.optimizers.SGD()),
                                backward_passes_per_step=2)
    with pytest.raises(ValueError, match="backward_passes_per_step must be a positive"):
        hk.DistributedOptimizer(keras.optimizers.SGD(), backward_passes_per_step=0)


def fit_where_the_last_rank_overflows(optimizer):
    """A model trained with `optimizer` under mixed_float16 where the last rank's second batch
    overflows; its weights, which must be finite and the same on every rank."""
    steps, rows = 4, 4
    (x, y), _ = keras_data(steps, rows)
    if hvd.rank() == hvd.size() - 1:
        x[rows:2 * rows] = np.inf  # the second batch of the last rank overflows
    model = make_model(seed=5)
    model.compile(optimizer=optimizer, loss=LOSS)
    model.fit(x, y, batch_size=rows, epochs=1, shuffle=False, verbose=0,
              callbacks=[hk.callbacks.BroadcastGlobalVariablesCallback(0)])
    weights = flat_weights(model).astype(np.float32)
    assert np.isfinite(weights).all()
    assert_same_on_all_ranks(weights, "weights")
    return model


def assert_one_step_skipped_everywhere(scale):
    # One skipped step on every rank: the scale halved once, the same everywhere.
    assert_same_on_all_ranks(np.array([scale]), "loss scale")
    assert scale == 32768.0 / 2


@pytest.mark.skipif(KERAS2, reason="Keras 3 API; see the _keras2 variant")
def test_keras_mixed_float16_reduces_before_the_loss_scale_check():
    # A LossScaleOptimizer skips a step whose gradients hold inf or NaN. If each rank checked
    # its own gradients, the rank with an inf would skip while the other waited in its
    # reduction; hvd reduces first, so every rank skips together.
    keras.config.set_dtype_policy("mixed_float16")
    try:
        opt = hk.DistributedOptimizer(keras.optimizers.SGD(0.1))
        assert isinstance(opt, keras.optimizers.LossScaleOptimizer)
        model = fit_where_the_last_rank_overflows(opt)
        assert model.optimizer is opt  # compile() did not wrap it a second time
        assert_one_step_skipped_everywhere(float(opt.dynamic_scale.numpy()))
    finally:
        keras.config.set_dtype_policy("float32")


@pytest.mark.skipif(not KERAS2, reason="tf.keras 2")
@pytest.mark.parametrize("legacy", [False, True], ids=["optimizer", "legacy"])
def test_keras2_mixed_float16_reduces_before_the_loss_scale_check(legacy):
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        sgd = keras.optimizers.legacy.SGD(0.1) if legacy else keras.optimizers.SGD(0.1)
        model = fit_where_the_last_rank_overflows(hk.DistributedOptimizer(sgd))
        assert isinstance(model.optimizer, keras.mixed_precision.LossScaleOptimizer)
        assert_one_step_skipped_everywhere(float(model.optimizer.loss_scale.numpy()))
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_compat_modules_name_the_same_functions():
    compat = os.path.join(os.path.dirname(hvd.__file__), "compat")
    import importlib
    import sys
    sys.path.insert(0, compat)
    try:
        for module, ours in (("horovod.tensorflow", htf), ("horovod.tensorflow.keras", hk),
                             ("horovod.keras", hk)):
            m = importlib.import_module(module)
            assert m.allreduce is ours.allreduce and m.init is ours.init
        cb = importlib.import_module("horovod.tensorflow.keras.callbacks")
        assert cb.MetricAverageCallback is hk.callbacks.MetricAverageCallback
    finally:
        sys.path.remove(compat)
        for name in [m for m in sys.modules if m == "horovod" or m.startswith("horovod.")]:
            del sys.modules[name]
