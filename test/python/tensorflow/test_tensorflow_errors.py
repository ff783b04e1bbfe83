"""How hvd.tensorflow fails, in the error types Horovod's scripts catch: every rank learns of a
collective the ranks disagree on (tf.errors.FailedPreconditionError, hvd.OperationRejectedError)
and the job goes on; bad arguments are tf.errors.InvalidArgumentError; what tf.IndexedSlices
cannot do is NotImplementedError. And the timeline names operations as Horovod's does."""
import json
import os

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import hvd  # noqa: E402
import hvd.tensorflow as htf  # noqa: E402
import tf_helpers  # noqa: E402,F401  (thread settings, before any op runs)


def needs_two_ranks():
    if hvd.size() == 1:
        pytest.skip("needs two ranks")


def test_a_shape_mismatch_fails_every_rank_as_failed_precondition_and_the_job_goes_on():
    needs_two_ranks()
    x = tf.ones([hvd.rank() + 2])
    with pytest.raises(tf.errors.FailedPreconditionError, match="shape mismatch") as caught:
        htf.allreduce(x, name="mismatched")
    e = caught.value
    assert isinstance(e, hvd.OperationRejectedError) and isinstance(e, hvd.HorovodInternalError)
    assert isinstance(e, htf.OperationRejectedError)
    assert 'allreduce "mismatched"' in str(e) and "rank {0} [2]" in str(e), str(e)
    # Rejected on every rank alike: the engine still serves the next collective.
    np.testing.assert_array_equal(htf.allreduce(tf.ones([3]), op=htf.Sum).numpy(),
                                  np.full(3, hvd.size()))


def test_a_dtype_mismatch_inside_a_v1_session_or_a_tf_function_is_failed_precondition_too():
    needs_two_ranks()
    dtype = tf.float32 if hvd.rank() == 0 else tf.float64
    with tf.Graph().as_default():
        out = htf.allreduce(tf.ones([2], dtype), name="session.mismatch")
        with tf.compat.v1.Session() as sess:
            with pytest.raises(htf.OperationRejectedError,
                               match='allreduce "session.mismatch": dtype mismatch'):
                sess.run(out)
    with pytest.raises(tf.errors.FailedPreconditionError, match="function.mismatch"):
        tf.function(lambda: htf.allreduce(tf.ones([2], dtype), name="function.mismatch"))()
    # Other errors keep their types.
    for error, raised in ((RuntimeError, tf.errors.UnknownError),
                          (ValueError, tf.errors.InvalidArgumentError)):
        def fails(x):
            raise error("not hvd's")

        with pytest.raises(raised, match="not hvd's") as caught:
            tf.function(lambda: tf.py_function(fails, [tf.ones([1])], [tf.float32]))()
        assert not isinstance(caught.value, hvd.HorovodInternalError)
    assert htf.allreduce(tf.constant([1.0]), op=htf.Sum).numpy()[0] == hvd.size()


def test_a_rejection_inside_a_keras_layer_keeps_its_type_when_keras_adds_its_context():
    # Keras re-raises an OpError from a layer's call as e.__class__(node_def, op, message,
    # code), to name the layer and its arguments: hvd's types must take TensorFlow's arguments.
    needs_two_ranks()
    keras = pytest.importorskip("keras")

    class Reducing(keras.layers.Layer):
        def call(self, x):
            return htf.allreduce(x, name="layer.mismatch")

    with pytest.raises(htf.OperationRejectedError, match='allreduce "layer.mismatch"') as caught:
        Reducing(name="reducing")(tf.ones([hvd.rank() + 2]))
    assert isinstance(caught.value, hvd.OperationRejectedError)
    assert "Reducing" in str(caught.value), str(caught.value)  # Keras names the layer
    e = htf.OperationRejectedError(None, None, "m", caught.value.error_code)
    assert e.message == "m" and e.error_code == caught.value.error_code
    with pytest.raises(tf.errors.InvalidArgumentError, match="splits"):
        class Exchanging(keras.layers.Layer):
            def call(self, x):
                return htf.alltoall(x, splits=tf.constant([5] * hvd.size()))

        Exchanging()(tf.ones([3]))
    assert htf.allreduce(tf.constant([1.0]), op=htf.Sum).numpy()[0] == hvd.size()


def test_broadcast_roots_that_differ_are_rejected_on_every_rank():
    needs_two_ranks()
    with pytest.raises(tf.errors.FailedPreconditionError, match="root"):
        htf.broadcast(tf.ones([2]), root_rank=hvd.rank(), name="two.roots")


@pytest.mark.size_dependent
def test_alltoall_splits_that_do_not_add_up_are_invalid_arguments():
    needs_two_ranks()
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        htf.alltoall(tf.ones([hvd.size() + 1]), name="uneven")  # no splits: equal parts
    assert isinstance(caught.value, ValueError)
    with pytest.raises(tf.errors.InvalidArgumentError, match="splits"):
        htf.alltoall(tf.ones([hvd.size() - 1]), splits=tf.ones([hvd.size()], tf.int32),
                     name="too.few.rows")
    with pytest.raises(ValueError, match="splits must be integers"):
        htf.alltoall(tf.ones([hvd.size()]), splits=tf.ones([hvd.size()]))


def slices(dtype=tf.float32):
    return tf.IndexedSlices(tf.ones([1, 3], dtype), tf.constant([hvd.rank()]),
                            dense_shape=tf.constant([hvd.size(), 3]))


def test_indexed_slices_refuse_other_ops_and_scale_factors_as_not_implemented():
    for op in (htf.Min, htf.Max, htf.Product, htf.Adasum):
        with pytest.raises(NotImplementedError, match="tf.IndexedSlices"):
            htf.allreduce(slices(), op=op)
        with pytest.raises(NotImplementedError, match="tf.IndexedSlices"):
            htf.grouped_allreduce([tf.ones([2]), slices()], op=op)
    for scale in ({"prescale_factor": 0.5}, {"postscale_factor": 2.0}):
        with pytest.raises(NotImplementedError, match="postscale_factor"):
            htf.allreduce(slices(), op=htf.Sum, **scale)


def test_an_average_of_integer_slices_divides_into_floats_as_horovod():
    out = htf.allreduce(slices(tf.int32), op=htf.Average)
    assert out.values.dtype == tf.float64  # TensorFlow's true division of int32
    np.testing.assert_array_equal(out.values.numpy(), np.full((hvd.size(), 3), 1 / hvd.size()))
    np.testing.assert_array_equal(out.indices.numpy(), np.arange(hvd.size()))


def test_the_timeline_names_tensors_and_phases_as_horovod(tmp_path):
    path = str(tmp_path / f"timeline.{os.environ.get('HVD_JOB_ID', 'single')}.json")
    path = htf.broadcast_object(path, 0)
    hvd.start_timeline(path)
    htf.allreduce(tf.ones([4]), name="test_allreduce")
    htf.allgather(tf.ones([1, 2]), name="gathered")
    hvd.stop_timeline()
    if hvd.rank() == 0:
        events = json.load(open(path))
        rows = {e["args"]["name"] for e in events if e.get("ph") == "M"}
        assert {"allreduce.test_allreduce", "allgather.gathered"} <= rows, rows
        phases = {e["name"] for e in events if e.get("ph") == "X"}
        assert {"NEGOTIATE_ALLREDUCE", "NEGOTIATE_ALLGATHER", "ALLGATHER"} <= phases, phases
        # A small allreduce runs on the coordinator: "ALLREDUCE (on the coordinator)".
        assert any(p.startswith("ALLREDUCE") for p in phases), phases
    htf.barrier()
