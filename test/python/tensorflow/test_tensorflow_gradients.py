"""Gradients through hvd.tensorflow's collectives (exact for the sum of every rank's loss), and
through the horovod.tensorflow compatibility package (scaled as Horovod 0.28 scales them, by
hvd/tensorflow/horovod_semantics.py)."""
import sys
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import hvd  # noqa: E402
import hvd.tensorflow as htf  # noqa: E402
from tf_helpers import modes, run  # noqa: E402  (this directory)

sys.path.insert(0, str(Path(hvd.__file__).parent / "compat"))  # what --horovod-compat does
import horovod.tensorflow as horovod_tf  # noqa: E402



@pytest.mark.size_dependent
@modes()
def test_gradients_of_the_collectives(graph):
    n, r = hvd.size(), hvd.rank()
    w = tf.Variable(tf.constant([1.0, 2.0]) * (r + 1))

    def grads():
        with tf.GradientTape(persistent=True) as tape:
            ar = tf.reduce_sum(htf.allreduce(w, op=htf.Sum, name="g.ar") * (r + 1))
            ag = tf.reduce_sum(htf.allgather(w[None, :], name="g.ag") ** 2)
            bc = tf.reduce_sum(htf.broadcast(w, 0, name="g.bc") * (r + 1))
            a2a = htf.alltoall(tf.tile(w, [n]), name="g.a2a")
            a2a = tf.reduce_sum(a2a * tf.cast(tf.range(2 * n), tf.float32))
            rs = tf.reduce_sum(htf.reducescatter(tf.tile(w, [n]), op=htf.Sum, name="g.rs"))
        return [tape.gradient(loss, w) for loss in (ar, ag, bc, a2a, rs)]

    g_ar, g_ag, g_bc, g_a2a, g_rs = [g.numpy() for g in run(grads, graph)]
    s = n * (n + 1) / 2
    # Each rank's gradient is that of the sum of every rank's loss.
    np.testing.assert_allclose(g_ar, [s, s])
    np.testing.assert_allclose(g_ag, 2 * n * np.array([1.0, 2.0]) * (r + 1))
    np.testing.assert_allclose(g_bc, [s, s] if r == 0 else [0, 0])
    # Rank r's rows of the tiled input went to rank q at position 2r..2r+1 of q's output.
    np.testing.assert_allclose(g_a2a, n * np.array([2 * r, 2 * r + 1]), rtol=1e-6)
    np.testing.assert_allclose(g_rs, [n, n])


@pytest.mark.size_dependent
@modes()
def test_grouped_reducescatter_gradient_of_float64_tensors_with_float32_output_gradients(graph):
    # Horovod's test_horovod_grouped_reducescatter_grad_cpu: the output gradient given for one
    # output is float32 and the others' are float64 zeros, so the gradient's grouped allgather
    # mixes dtypes; its outputs were sized for the first tensor's dtype and the heap corrupted.
    n = hvd.size()
    for dim in (1, 2, 3):
        vs = [tf.Variable(tf.fill([n * 4] * dim, tf.constant(float(i), tf.float64)))
              for i in range(5)]

        def grads():
            with tf.GradientTape(persistent=True) as tape:
                summed = htf.grouped_reducescatter(vs, op=htf.Sum, name=f"g.mixed{dim}")
            return [tape.gradient(s, v, tf.ones([4] + [n * 4] * (dim - 1)))
                    for s, v in zip(summed, vs)]

        for g in run(grads, graph):
            np.testing.assert_array_equal(np.asarray(g, np.float64), np.ones([n * 4] * dim))


@pytest.mark.size_dependent
@modes()
def test_gradients_of_the_grouped_collectives(graph):
    n, r = hvd.size(), hvd.rank()
    a = tf.Variable(tf.ones([r + 1]))
    b = tf.Variable(tf.ones([n, 2]))

    def grads():
        with tf.GradientTape(persistent=True) as tape:
            ga, gb = htf.grouped_allgather([a, b], name="g.gag")
            gathered = tf.reduce_sum(ga * tf.range(tf.size(ga), dtype=tf.float32)) + \
                tf.reduce_sum(gb)
            ya, yb = htf.grouped_reducescatter([tf.tile(a[:1], [2 * n]), b], op=htf.Sum,
                                               prescale_factor=0.5, name="g.grs")
            scattered = tf.reduce_sum(ya * (r + 1)) + tf.reduce_sum(yb)
        return [tape.gradient(gathered, [a, b]), tape.gradient(scattered, [a, b])]

    (g_ga, g_gb), (g_sa, g_sb) = [[g.numpy() for g in pair] for pair in run(grads, graph)]
    offset = r * (r + 1) // 2
    np.testing.assert_allclose(g_ga, n * np.arange(offset, offset + r + 1))
    np.testing.assert_allclose(g_gb, n * np.ones([n, 2]))
    # a[0] fed all 2n rows; part p went to rank p, halved, weighted p+1
    np.testing.assert_allclose(g_sa, [sum((p + 1) for p in range(n))] + [0.0] * r)
    np.testing.assert_allclose(g_sb, 0.5 * np.ones([n, 2]))


@modes()
def test_the_compat_package_scales_gradients_as_horovod(graph):
    n, r = hvd.size(), hvd.rank()
    w = tf.Variable(tf.constant([1.0, 2.0]) * (r + 1))

    def grads():
        with tf.GradientTape(persistent=True) as tape:
            ag = tf.reduce_sum(horovod_tf.allgather(w[None, :], name="c.ag") ** 2)
            (gag,) = horovod_tf.grouped_allgather([w], name="c.gag")
            gag = tf.reduce_sum(gag)
            bc = tf.reduce_sum(horovod_tf.broadcast(w, 0, name="c.bc") * (r + 1))
            rs = tf.reduce_sum(horovod_tf.reducescatter(tf.tile(w, [n]), op=horovod_tf.Sum,
                                                        name="c.rs"))
            (grs,) = horovod_tf.grouped_reducescatter([tf.tile(w, [n])], name="c.grs")
            grs = tf.reduce_sum(grs)
            ar = tf.reduce_sum(horovod_tf.allreduce(w, op=horovod_tf.Sum, name="c.ar"))
        return [tape.gradient(loss, w) for loss in (ag, gag, bc, rs, grs, ar)]

    g_ag, g_gag, g_bc, g_rs, g_grs, g_ar = [g.numpy() for g in run(grads, graph)]
    s = n * (n + 1) / 2
    # hvd.tensorflow's exact gradients (test_gradients_of_the_collectives) over n, or times n
    np.testing.assert_allclose(g_ag, 2 * np.array([1.0, 2.0]) * (r + 1))
    np.testing.assert_allclose(g_gag, [1.0, 1.0])
    np.testing.assert_allclose(g_bc, [s / n, s / n] if r == 0 else [0, 0])
    np.testing.assert_allclose(g_rs, [n * n, n * n])
    np.testing.assert_allclose(g_grs, [n, n])  # Average: exact 1 each, times n
    np.testing.assert_allclose(g_ar, [n, n])


def test_horovods_conventions_are_hvds_horovod_semantics_module():
    from hvd.tensorflow import horovod_semantics
    for name in horovod_semantics.__all__:
        assert getattr(horovod_tf, name) is getattr(horovod_semantics, name), name
        assert getattr(horovod_tf.mpi_ops, name) is getattr(horovod_semantics, name), name
        assert getattr(htf, name) is not getattr(horovod_semantics, name), name


def test_the_compat_packages_internal_queries_scripts_use():
    # horovod.tensorflow.mpi_ops._basics._get_process_set_ids_and_ranks() and
    # horovod.tensorflow.util._executing_eagerly, as Horovod's tests and some scripts call them.
    from horovod.tensorflow.util import _executing_eagerly
    assert _executing_eagerly() and horovod_tf._executing_eagerly()
    ps = hvd.add_process_set([0])
    try:
        table = horovod_tf.mpi_ops._basics._get_process_set_ids_and_ranks()
        assert table[0] == list(range(hvd.size())) and table[ps.process_set_id] == [0]
    finally:
        hvd.remove_process_set(ps)

