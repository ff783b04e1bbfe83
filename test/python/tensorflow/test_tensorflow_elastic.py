"""Elastic training's TensorFlow states (TensorFlowKerasState, KerasState, TensorFlowState) and
hvd.tensorflow.elastic.run, in a fixed job: sync, commit, restore and a failed round."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")

import hvd  # noqa: E402
import hvd.tensorflow as htf  # noqa: E402
import hvd.tensorflow.keras as hk  # noqa: E402
from tf_helpers import assert_same_on_all_ranks, flat_weights  # noqa: E402  (this directory)


def test_keras_state_restores_and_syncs_the_model_and_optimizer():
    keras.utils.set_random_seed(hvd.rank())  # every rank starts elsewhere; sync takes rank 0's
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    opt = hk.DistributedOptimizer(keras.optimizers.Adam(0.1))
    model.compile(optimizer=opt, loss="mse", jit_compile=False)
    state = hk.elastic.KerasState(model, epoch=hvd.rank())
    state.sync()
    assert state.epoch == 0
    assert_same_on_all_ranks(flat_weights(model), "synced weights")
    x, y = np.ones((4, 3), np.float32), np.zeros((4, 2), np.float32)
    model.fit(x, y, epochs=1, verbose=0)
    state.epoch = 1
    state.commit()  # a fixed job: no newer round, nothing raised
    committed = flat_weights(model)
    committed_slots = [v.numpy().copy() for v in opt.variables]
    model.fit(x, y, epochs=2, verbose=0)
    state.epoch = 3
    assert not np.array_equal(flat_weights(model), committed)
    state.restore()
    assert state.epoch == 1
    np.testing.assert_array_equal(flat_weights(model), committed)
    for v, saved in zip(opt.variables, committed_slots):
        np.testing.assert_array_equal(v.numpy(), saved)


def test_a_keras_states_commit_goes_through_pickle_and_back():
    import pickle
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.Adam(0.1), loss="mse", jit_compile=False)
    x, y = np.ones((4, 3), np.float32), np.zeros((4, 2), np.float32)
    model.fit(x, y, epochs=1, verbose=0)
    state = hk.elastic.KerasState(model, epoch=1)
    state.commit()
    on_disk = pickle.dumps(state.committed())
    committed = flat_weights(model)
    model.fit(x, y, epochs=2, verbose=0)
    state.epoch = 3
    state.save()
    state.load_committed(pickle.loads(on_disk))
    assert state.epoch == 1
    np.testing.assert_array_equal(flat_weights(model), committed)


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "v1-session"])
def test_tensorflow_state_syncs_restores_and_commits_variables(graph):
    # horovod.tensorflow.elastic.TensorFlowState: a list of variables and attributes.
    v = 1.0 if hvd.rank() == 0 else 2.0
    start = [np.full((2, 2), v), np.full(2, v)]
    other = [np.array([[1.0, 2.0], [3.0, 4.0]]), np.zeros(2)]

    def check(read, assign, state, variables):
        state.sync()
        for w in read(variables):  # rank 0's values and attributes everywhere
            np.testing.assert_array_equal(w, np.ones_like(w))
        assert (state.batch, state.epoch) == (20, 10)
        assign(variables, other)
        state.batch, state.epoch = 21, 11
        state.restore()
        for w in read(variables):
            np.testing.assert_array_equal(w, np.ones_like(w))
        assert (state.batch, state.epoch) == (20, 10)
        assign(variables, other)
        state.batch, state.epoch = 21, 11
        state.commit()
        state.restore()
        for w, o in zip(read(variables), other):
            np.testing.assert_array_equal(w, o)
        assert (state.batch, state.epoch) == (21, 11)

    if not graph:
        variables = [tf.Variable(a) for a in start]
        state = htf.elastic.TensorFlowState(variables, batch=20 + hvd.rank(),
                                            epoch=10 + hvd.rank())
        check(lambda vs: [x.numpy() for x in vs],
              lambda vs, values: [x.assign(a) for x, a in zip(vs, values)], state, variables)
        return
    with tf.Graph().as_default():
        variables = [tf.compat.v1.Variable(a) for a in start]
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            state = htf.elastic.TensorFlowState(variables, session=sess, batch=20 + hvd.rank(),
                                                epoch=10 + hvd.rank())
            check(lambda vs: sess.run(vs),
                  lambda vs, values: [x.load(a, sess) for x, a in zip(vs, values)], state,
                  variables)


def test_keras_state_needs_a_built_model():
    model = keras.Sequential([keras.layers.Dense(2)])  # no input shape: no variables yet
    with pytest.raises(ValueError, match="the model has no variables yet"):
        hk.elastic.KerasState(model, optimizer=keras.optimizers.SGD())


def test_elastic_run_takes_a_collective_failure_inside_tf_function_for_a_horovod_error():
    # The failure reaches Python as TensorFlow's UnknownError; the run loop must restore the
    # state and reset (here, every rank shuts down and initialises again: one round).
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    state = htf.elastic.TensorFlowKerasState(model, optimizer=keras.optimizers.SGD(), calls=0)
    failing = tf.function(lambda t: htf.allreduce(t, name="elastic.mismatch"))

    attempts = []

    @htf.elastic.run
    def train(state):
        attempts.append(state.calls)
        state.calls += 1
        if len(attempts) == 1:
            # float32 on one rank, float64 on the others: every rank's collective fails.
            dtype = tf.float32 if hvd.rank() == 0 else tf.float64
            failing(tf.ones([2], dtype=dtype))
        return state.calls

    # The second attempt starts from the restored state (calls=0), not from the failed one.
    assert train(state) == 1
    assert attempts == [0, 0]
    assert hvd.is_initialized()


def test_commit_callback_counts_batches_anew_after_a_commit_that_raised():
    # The commit that learns of a new round raises; the workers then start fit again, the new
    # ones counting from zero. Every rank must commit at the same batches after that (a commit
    # is a collective): a counter left at 0 by the raise never committed again, while new
    # workers committed at their third batch, and the job hung.
    class Interrupted(Exception):
        pass

    class State:
        commits = 0

        def commit(self):
            self.commits += 1
            if self.commits == 2:
                raise Interrupted()

    state = State()
    callback = hk.elastic.CommitStateCallback(state, batches_per_commit=3)
    callback.on_train_begin()
    committed_at = []
    with pytest.raises(Interrupted):
        for batch in range(8):
            before = state.commits
            callback.on_train_batch_end(batch)
            if state.commits > before:
                committed_at.append(("first fit", batch))
    callback.on_train_begin()  # fit again, after the reset
    for batch in range(8):
        before = state.commits
        callback.on_train_batch_end(batch)
        if state.commits > before:
            committed_at.append(("second fit", batch))
    assert committed_at == [("first fit", 2), ("second fit", 2), ("second fit", 5)]
