"""Worker-local variables (Horovod's PartialDistributedGradientTape, register_local_source,
PartialDistributedOptimizer, register_local_var): their gradients are not reduced, and are
divided by the number of ranks unless scale_local_gradients=False; and broadcast_."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

import hvd  # noqa: E402
import hvd.tensorflow as htf  # noqa: E402
import hvd.tensorflow.keras as hk  # noqa: E402
from tf_helpers import modes, run  # noqa: E402  (this directory)


def two_layers():
    keras.utils.set_random_seed(7)
    shared, local = keras.layers.Dense(3), keras.layers.Dense(2)
    model = keras.Sequential([keras.Input((4,)), shared, local])
    return model, shared, local


def batch():
    return tf.constant(np.arange(8, dtype="float32").reshape(2, 4) / 10 * (hvd.rank() + 1))


def local_gradients(model):
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(batch()) ** 2)
    return [g.numpy() for g in tape.gradient(loss, model.trainable_variables)]


def expected(model, local_vars, scale):
    """Averaged over the ranks for shared variables; this rank's own for local ones."""
    mine = local_gradients(model)
    n = hvd.size()
    ids = {id(v) for v in local_vars}
    return [(g / n if scale else g) if id(v) in ids
            else htf.allreduce(tf.constant(g), op=htf.Average, name=f"ref.{i}").numpy()
            for i, (v, g) in enumerate(zip(model.trainable_variables, mine))]


@modes()
@pytest.mark.parametrize("scale", [True, False])
def test_partial_tape_keeps_local_layer_gradients_local(graph, scale):
    model, _, local = two_layers()

    def grads():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(batch()) ** 2)
        tape = htf.PartialDistributedGradientTape(tape, local_layers=[local],
                                                  scale_local_gradients=scale)
        return tape.gradient(loss, model.trainable_variables)

    got = [g.numpy() for g in run(grads, graph)]
    for g, e in zip(got, expected(model, local.trainable_weights, scale)):
        np.testing.assert_allclose(g, e, rtol=1e-5)


def test_register_local_source_and_the_split_of_local_and_global_gradients():
    model, shared, local = two_layers()
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(batch()) ** 2)
    tape = htf.DistributedGradientTape(tape)
    tape.register_local_source(local.kernel)
    local_pairs, global_pairs = tape.get_local_and_global_gradients(
        loss, model.trainable_variables)
    assert [v is local.kernel for v, _ in local_pairs] == [True]
    assert len(global_pairs) == 3 and all(v is not local.kernel for v, _ in global_pairs)
    want = expected(model, [local.kernel], True)
    got = {id(v): g.numpy() for v, g in local_pairs + global_pairs}
    for v, e in zip(model.trainable_variables, want):
        np.testing.assert_allclose(got[id(v)], e, rtol=1e-5)


def test_partial_keras_optimizer_applies_local_gradients_locally():
    model, _, local = two_layers()
    before = [v.numpy() for v in model.trainable_variables]
    want = expected(model, local.trainable_weights, True)
    opt = hk.PartialDistributedOptimizer(keras.optimizers.SGD(1.0), local_layers=local)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(batch()) ** 2)
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                            model.trainable_variables))
    for b, v, e in zip(before, model.trainable_variables, want):
        np.testing.assert_allclose(b - v.numpy(), e, rtol=1e-5, atol=1e-7)
    # the local layer's weights are not the optimizer's (which callbacks broadcast and save)
    assert not {id(v) for v in opt.variables} & {id(v) for v in local.trainable_weights}


def test_local_layers_must_be_layers():
    with tf.GradientTape() as tape:
        pass
    with pytest.raises(ValueError, match="local_layers must be Keras layers, got str"):
        htf.PartialDistributedGradientTape(tape, local_layers=["dense"])
    with pytest.raises(ValueError, match="PartialDistributedOptimizer: local_layers"):
        hk.PartialDistributedOptimizer(keras.optimizers.SGD(0.1), local_layers=[3])


@modes()
def test_broadcast_in_place_assigns_and_returns_the_roots_values(graph):
    v = [tf.Variable([hvd.rank() + 1.0] * 2), tf.Variable(tf.fill([2, 2], hvd.rank()))]
    root = hvd.size() - 1
    out = run(lambda: htf.broadcast_(v, root, name="bcast_inplace"), graph)
    assert [x.numpy().tolist() for x in out] == [[root + 1.0] * 2, [[root] * 2] * 2]
    assert [x.numpy().tolist() for x in v] == [[root + 1.0] * 2, [[root] * 2] * 2]


def test_partial_keras_optimizer_in_fit_keeps_shared_layers_equal_and_local_ones_apart():
    model, shared, local = two_layers()
    model.compile(optimizer=hk.PartialDistributedOptimizer(keras.optimizers.SGD(0.1),
                                                           local_layers=[local]), loss="mse")
    model.fit(batch(), tf.ones([2, 2]), epochs=2, batch_size=2, verbose=0)
    gathered = [htf.allgather(tf.convert_to_tensor(v)[None], name=f"fit.{i}").numpy()
                for i, v in enumerate(model.trainable_variables)]
    local_ids = {id(v) for v in local.trainable_weights}
    for v, every_rank in zip(model.trainable_variables, gathered):
        same = all(np.allclose(every_rank[0], w) for w in every_rank[1:])
        assert same == (id(v) not in local_ids) or hvd.size() == 1, v.name


def rank_initialised_model():
    """A model whose weights are the rank (Horovod's partial-optimizer tests build these to
    see the shared gradients change when reduced)."""
    init = keras.initializers.Constant(hvd.rank())
    return keras.Sequential([keras.Input((4,)),
                             keras.layers.Dense(3, kernel_initializer=init, bias_initializer=init),
                             keras.layers.Dense(2, kernel_initializer=init, bias_initializer=init)])


def test_models_apart_whose_gradients_are_reduced_once_or_twice_pass_the_replica_check():
    # Each model's gradient is reduced twice by a new tape (the check of "after update 1" comes
    # at the second reduction and, finding the ranks apart, waits for one more), then freed.
    # A new model may reuse the freed variables' ids: it must get a new check, not the old
    # model's count (which would be due for its repeat, and fail).
    for _ in range(4):
        model = rank_initialised_model()
        for _ in range(2):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(batch()) ** 2)
            htf.DistributedGradientTape(tape).gradient(loss, model.trainable_variables)
        del model, tape


def test_a_keras_optimizer_reducing_once_for_models_apart_passes_the_replica_check():
    for _ in range(2):
        model = rank_initialised_model()
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(batch()) ** 2)
        opt = hk.PartialDistributedOptimizer(keras.optimizers.SGD(0.1),
                                             local_layers=model.layers[:1])
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                model.trainable_variables))


def test_a_keras_optimizer_stepping_twice_on_models_apart_fails_the_replica_check():
    model = rank_initialised_model()
    opt = hk.DistributedOptimizer(keras.optimizers.SGD(0.1))

    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(batch()) ** 2)
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                model.trainable_variables))
    step()
    if hvd.size() == 1:
        step()
        return
    with pytest.raises(RuntimeError, match=r"after update 1 \(and before the first update"):
        step()


def test_a_tape_guard_is_not_inherited_by_sources_that_reuse_freed_ids():
    from hvd.tensorflow import replicas

    class Source:
        pass

    guards = replicas.TapeGuards()
    first = Source()
    old = guards.get([first], htf.global_process_set)
    reused = id(first)
    if old is not None:
        old.tick()
    del first
    # CPython gives a freed object's memory to a later one of its size: usually the next, but
    # another thread's allocation may take it first (it did in CI). Keep allocating until one
    # lands there; the ones that do not stay alive, so each takes fresh memory.
    others = []
    second = Source()
    while id(second) != reused and len(others) < 1_000_000:
        others.append(second)
        second = Source()
    assert id(second) == reused  # the case this test is about
    del others
    new = guards.get([second], htf.global_process_set)
    assert new is not old or old is None
    assert guards.get([second], htf.global_process_set) is new  # kept while it lives
