"""hvd.tensorflow's TF1 graph API in tf.compat.v1 sessions: DistributedOptimizer over
tf.compat.v1.train optimizers, broadcast_global_variables, BroadcastGlobalVariablesHook with
MonitoredTrainingSession, and the replica check there. Each test builds its own graph."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import hvd  # noqa: E402
import hvd.tensorflow as htf  # noqa: E402
from hvd._replicas import ReplicaMismatchError  # noqa: E402

v1 = tf.compat.v1


def graph_session(fn):
    """Runs fn(session) in a fresh graph and session."""
    with tf.Graph().as_default() as graph:
        result = fn(graph)
    return result


def ranks_mean(f):
    return np.mean([f(r) for r in range(hvd.size())], axis=0)


def linear_problem():
    """A weight w (3,) starting at [1, 2, 3] on every rank and rank r's loss
    sum((r + 1) * w * x_r) with x_r = [r, 1, 2], whose gradient is (r + 1) * x_r."""
    w = v1.get_variable("w", initializer=tf.constant([1.0, 2.0, 3.0]))
    r = hvd.rank()
    loss = tf.reduce_sum((r + 1.0) * w * tf.constant([float(r), 1.0, 2.0]))
    grad_of = lambda q: (q + 1.0) * np.array([q, 1.0, 2.0])  # noqa: E731
    return w, loss, grad_of


@pytest.mark.parametrize("how", ["minimize", "compute_apply"])
def test_distributed_optimizer_applies_the_averaged_gradient(how):
    def body(graph):
        w, loss, grad_of = linear_problem()
        opt = htf.DistributedOptimizer(v1.train.GradientDescentOptimizer(0.1))
        if how == "minimize":
            train = opt.minimize(loss)
        else:
            train = opt.apply_gradients(opt.compute_gradients(loss))
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(train)
            got = sess.run(w)
        np.testing.assert_allclose(got, np.array([1.0, 2.0, 3.0]) - 0.1 * ranks_mean(grad_of),
                                   rtol=1e-6)
    graph_session(body)


def test_op_sum_and_predivide_factor():
    def body(graph):
        w, loss, grad_of = linear_problem()
        summed = htf.DistributedOptimizer(v1.train.GradientDescentOptimizer(1.0), op=hvd.Sum,
                                          name="summing")
        grads = dict((v.name, g) for g, v in summed.compute_gradients(loss))
        averaged = htf.DistributedOptimizer(v1.train.GradientDescentOptimizer(1.0),
                                            gradient_predivide_factor=2.0)
        grads_avg = dict((v.name, g) for g, v in averaged.compute_gradients(loss))
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            total, mean = sess.run([grads["w:0"], grads_avg["w:0"]])
        want = sum(grad_of(q) for q in range(hvd.size()))
        np.testing.assert_allclose(total, want, rtol=1e-6)
        np.testing.assert_allclose(mean, want / hvd.size(), rtol=1e-6)
    graph_session(body)


@pytest.mark.parametrize("sparse_as_dense", [False, True])
def test_embedding_gradients_are_gathered_or_densified(sparse_as_dense):
    def body(graph):
        table = v1.get_variable("table", initializer=tf.zeros([4, 2]))
        row = hvd.rank() % 4
        loss = tf.reduce_sum(tf.nn.embedding_lookup(table, tf.constant([row])) * (hvd.rank() + 1))
        opt = htf.DistributedOptimizer(v1.train.GradientDescentOptimizer(1.0),
                                       sparse_as_dense=sparse_as_dense)
        (grad, _), = opt.compute_gradients(loss)
        assert isinstance(grad, tf.IndexedSlices) != sparse_as_dense
        train = opt.apply_gradients([(grad, table)])
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(train)
            got = sess.run(table)
        want = np.zeros([4, 2])
        for q in range(hvd.size()):
            want[q % 4] -= (q + 1) / hvd.size()
        np.testing.assert_allclose(got, want, rtol=1e-6)
    graph_session(body)


@pytest.mark.parametrize("average", [False, True])
def test_backward_passes_per_step_updates_every_second_pass(average):
    def body(graph):
        w, loss, grad_of = linear_problem()
        step = v1.train.get_or_create_global_step()
        opt = htf.DistributedOptimizer(v1.train.GradientDescentOptimizer(0.1),
                                       backward_passes_per_step=2,
                                       average_aggregated_gradients=average)
        train = opt.minimize(loss, global_step=step)
        with v1.Session() as sess:
            sess.run([v1.global_variables_initializer(), v1.local_variables_initializer()])
            sess.run(train)
            after_one = sess.run(w)
            sess.run(train)
            after_two, steps = sess.run([w, step])
        start = np.array([1.0, 2.0, 3.0])
        np.testing.assert_allclose(after_one, start)  # accumulated, not applied
        passes = 1 if average else 2
        np.testing.assert_allclose(after_two, start - 0.1 * passes * ranks_mean(grad_of),
                                   rtol=1e-6)
        assert steps == 2  # the global step counts passes
    graph_session(body)


def test_broadcast_global_variables_assigns_the_roots_values():
    def body(graph):
        a = v1.get_variable("a", initializer=tf.fill([3], float(hvd.rank())))
        b = v1.get_variable("b", initializer=tf.constant(hvd.rank(), tf.int64))
        root = hvd.size() - 1
        bcast = htf.broadcast_global_variables(root)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(bcast)
            assert sess.run(a).tolist() == [float(root)] * 3 and sess.run(b) == root
    graph_session(body)


def test_hook_built_after_the_training_step_needs_no_feed(tmp_path):
    # MonitoredTrainingSession calls the hook's begin() after the training step (with its
    # placeholders and gradient allreduce) is built; the broadcast must not depend on them.
    def body(graph):
        v1.set_random_seed(hvd.rank() + 1)  # rank-dependent initialisation, on purpose
        x = v1.placeholder(tf.float32, [None, 4])
        w = v1.get_variable("w", [4, 1])
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        step = v1.train.get_or_create_global_step()
        train = htf.DistributedOptimizer(v1.train.AdamOptimizer(0.01)).minimize(
            loss, global_step=step)
        averaged_loss = htf.allreduce(loss, name="v1_test.loss")  # built after the step
        hooks = [htf.BroadcastGlobalVariablesHook(0), v1.train.StopAtStepHook(last_step=5)]
        directory = str(tmp_path) if hvd.rank() == 0 else None
        rng = np.random.default_rng(hvd.rank())
        with v1.train.MonitoredTrainingSession(checkpoint_dir=directory, hooks=hooks,
                                               save_summaries_steps=None) as sess:
            while not sess.should_stop():
                weights = sess.run(w)  # before the step: the session stops after the last one
                sess.run([train, averaged_loss],
                         feed_dict={x: rng.normal(size=(8, 4)).astype("float32")})
        every = htf.allgather_object(weights.tobytes())
        assert all(e == every[0] for e in every)
        if hvd.rank() == 0:
            assert any(p.name.startswith("model.ckpt") for p in tmp_path.iterdir())
    graph_session(body)


def test_replica_check_fails_a_session_that_never_broadcast():
    def body(graph):
        w = v1.get_variable("unsynced", initializer=tf.fill([2], float(hvd.rank())))
        loss = tf.reduce_sum(w * w)
        train = htf.DistributedOptimizer(v1.train.GradientDescentOptimizer(0.1)).minimize(loss)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            if hvd.size() == 1:
                sess.run(train)
                return
            # The starting weights are compared before the first reduction (the hook
            # broadcasts before the first step); still apart before the second, they fail.
            sess.run(train)
            with pytest.raises(tf.errors.OpError, match=r"after update 1 \(and before the "
                                                        "first update: .*(rank 1 "
                                                        "differs|ranks 1, 2 differ).*"
                                                        "'unsynced:0'"):
                sess.run(train)
    graph_session(body)


def test_eager_code_gets_a_clear_error_for_graph_only_calls():
    with pytest.raises(RuntimeError, match="needs graph mode"):
        htf.broadcast_global_variables(0)
    with pytest.raises(ValueError, match="tf.compat.v1.train.Optimizer or a Keras optimizer"):
        htf.DistributedOptimizer(object())
    assert ReplicaMismatchError.__mro__[1] is RuntimeError


def test_broadcast_gradient_in_a_session_runs_its_allreduce_on_every_rank():
    # The gradient's allreduce must run on the ranks whose gradient is zero too: a zeros_like
    # of a static shape used to let the session prune it there, and the root waited for them.
    n, r = hvd.size(), hvd.rank()

    def body(graph):
        x = tf.constant([1.0, 2.0]) * (r + 1)
        y = htf.broadcast(x, 0, name="v1.bc")
        grad = tf.gradients(tf.reduce_sum(y * (r + 1)), x)[0]
        with v1.Session() as sess:
            return sess.run(grad)

    got = graph_session(body)
    s = n * (n + 1) / 2
    np.testing.assert_allclose(got, [s, s] if r == 0 else [0.0, 0.0])
