"""One rank of the conformance comparison for `horovod.tensorflow` (Horovod itself, or hvd's
compatibility package): eager TensorFlow 2 calls, their results recorded
(conformance_results.py). Every case is deterministic and the same on both libraries."""
import os
import sys

import numpy as np
import tensorflow as tf

import horovod.tensorflow as hvd
from conformance_results import Results  # this directory

tf.config.threading.set_intra_op_parallelism_threads(1)


def tf_values(x):
    if isinstance(x, tf.IndexedSlices):
        x = tf.convert_to_tensor(x)
    if hasattr(x, "assign") and hasattr(x, "numpy"):  # tf.Variable, keras.Variable
        x = tf.convert_to_tensor(x)
    if not isinstance(x, tf.Tensor):
        return None
    return x.dtype.name, x.shape.as_list(), tf.cast(x, tf.float64).numpy().flatten().tolist()


results = Results(tf_values)
record = results.record

WITH_SETS = os.environ.get("WITH_SETS") == "1"
process_sets = [hvd.ProcessSet([0, 2])] if WITH_SETS else None
hvd.init(process_sets=process_sets)
size, rank = hvd.size(), hvd.rank()


def ramp(shape, dtype, offset=0):
    n = int(np.prod(shape))
    return tf.cast(tf.reshape(tf.constant(np.arange(n) % 5 + rank + 1 + offset, tf.float64),
                              shape), dtype)


record("basics", lambda: [size, rank, hvd.local_size(), hvd.local_rank(), hvd.cross_size(),
                          hvd.cross_rank(), hvd.is_initialized()])
dtypes = {"float32": tf.float32, "float64": tf.float64, "float16": tf.float16,
          "int32": tf.int32, "int64": tf.int64}
results.record_allreduce_matrix(hvd, ramp, dtypes)
record("allreduce.scaled", lambda: hvd.allreduce(ramp((6,), tf.float32), op=hvd.Sum,
                                                 prescale_factor=0.5, postscale_factor=3.0))
record("allreduce.fp16_compression", lambda: hvd.allreduce(
    ramp((5,), tf.float32), compression=hvd.Compression.fp16))
record("allreduce.indexed_slices", lambda: hvd.allreduce(tf.IndexedSlices(
    ramp((2, 3), tf.float32), tf.constant([rank, 3]), tf.constant([5, 3])), op=hvd.Average))
record("grouped_allreduce", lambda: hvd.grouped_allreduce(
    [ramp((2,), tf.float32), ramp((3, 2), tf.float32, 1)], op=hvd.Average))
record("allgather.uneven_rows", lambda: hvd.allgather(ramp((rank + 1, 3), tf.float32)))
record("grouped_allgather", lambda: hvd.grouped_allgather(
    [ramp((rank + 1,), tf.float32), ramp((1, 2), tf.int32)]))
record("broadcast.root1", lambda: hvd.broadcast(ramp((2, 2), tf.float32), root_rank=1))
splits = [(rank + j) % 3 + 1 for j in range(size)]
record("alltoall.splits", lambda: hvd.alltoall(ramp((sum(splits), 2), tf.float32),
                                               splits=tf.constant(splits, tf.int32)))
record("alltoall.even", lambda: hvd.alltoall(ramp((2 * size, 2), tf.float32)))
record("reducescatter.sum.even", lambda: hvd.reducescatter(ramp((2 * size, 3), tf.float32),
                                                           op=hvd.Sum))
record("reducescatter.average.uneven", lambda: hvd.reducescatter(
    ramp((2 * size + 1, 2), tf.float32), op=hvd.Average))
record("grouped_reducescatter", lambda: hvd.grouped_reducescatter(
    [ramp((size, 2), tf.float32), ramp((size + 1,), tf.float32)], op=hvd.Sum))
record("broadcast_object", lambda: hvd.broadcast_object({"rank": rank}, root_rank=1))
record("allgather_object", lambda: hvd.allgather_object({"rank": rank}))


def broadcast_variables():
    v = [tf.Variable(ramp((2,), tf.float32)), tf.Variable(ramp((2, 2), tf.float64))]
    hvd.broadcast_variables(v, root_rank=1)
    return v


record("broadcast_variables", broadcast_variables)


def broadcast_inplace():
    v = [tf.Variable(ramp((3,), tf.float32))]
    out = hvd.broadcast_(v, root_rank=size - 1, name="bcast_")
    return [v, out]


record("broadcast_", broadcast_inplace)


def grad_of(collective, shape):
    x = tf.Variable(ramp(shape, tf.float32))
    with tf.GradientTape() as tape:
        y = collective(x)
        weights = tf.reshape(tf.range(tf.size(y), dtype=tf.float32), tf.shape(y)) + rank
        loss = tf.reduce_sum(y * weights)
    return [y, tape.gradient(loss, x)]


record("grad.allreduce.sum", lambda: grad_of(lambda x: hvd.allreduce(x, op=hvd.Sum), (3,)))
record("grad.allreduce.average", lambda: grad_of(lambda x: hvd.allreduce(x), (2, 2)))
record("grad.allgather", lambda: grad_of(hvd.allgather, (rank + 1, 2)))
record("grad.broadcast", lambda: grad_of(lambda x: hvd.broadcast(x, root_rank=1), (3,)))
record("grad.reducescatter.sum", lambda: grad_of(lambda x: hvd.reducescatter(x, op=hvd.Sum),
                                                 (2 * size, 2)))
record("grad.reducescatter.average", lambda: grad_of(
    lambda x: hvd.reducescatter(x, op=hvd.Average, prescale_factor=2.0), (size + 1, 2)))
record("grad.alltoall", lambda: grad_of(lambda x: hvd.alltoall(x)[0], (size, 2)))
record("grad.grouped_allgather", lambda: grad_of(
    lambda x: hvd.grouped_allgather([x])[0], (rank + 1, 2)))
record("grad.grouped_reducescatter", lambda: grad_of(
    lambda x: hvd.grouped_reducescatter([x], op=hvd.Sum)[0], (size, 2)))


def tape_training(steps=3, local=None, **kwargs):
    """Plain tf.Variables (Horovod 0.28's tape fails on Keras 3 variables: no .ref())."""
    w1 = tf.Variable(tf.reshape(tf.range(12, dtype=tf.float32), (4, 3)) / 20 - 0.2)
    w2 = tf.Variable(tf.reshape(tf.range(6, dtype=tf.float32), (3, 2)) / 10 - 0.25)
    b1, b2 = tf.Variable(tf.zeros(3)), tf.Variable(tf.fill([2], 0.1))
    variables = [w1, b1, w2, b2]
    for step in range(steps):
        with tf.GradientTape() as tape:
            hidden = tf.nn.relu(ramp((5, 4), tf.float32, step) / 10 @ w1 + b1)
            loss = tf.reduce_sum((hidden @ w2 + b2) ** 2)
        if local is not None:
            kwargs["scale_local_gradients"] = local
        tape = hvd.DistributedGradientTape(tape, **kwargs)
        if local is not None:
            tape.register_local_source(w2)
        for v, g in zip(variables, tape.gradient(loss, variables)):
            v.assign_sub(0.1 * g)
    return variables


record("tape.default", tape_training)
record("tape.sum", lambda: tape_training(op=hvd.Sum))
record("tape.fp16", lambda: tape_training(compression=hvd.Compression.fp16))
record("tape.predivide", lambda: tape_training(gradient_predivide_factor=2.0))
record("tape.local.scaled", lambda: tape_training(local=True))
record("tape.local.unscaled", lambda: tape_training(local=False))


def sparse_tape(sparse_as_dense):
    emb = tf.Variable(tf.reshape(tf.range(30, dtype=tf.float32), (10, 3)) / 10)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.gather(emb, [rank, 3, rank + 5]) ** 2)
    grad = hvd.DistributedGradientTape(tape, sparse_as_dense=sparse_as_dense).gradient(
        loss, [emb])[0]
    return tf.convert_to_tensor(grad)


record("tape.sparse", lambda: sparse_tape(False))
record("tape.sparse_as_dense", lambda: sparse_tape(True))


def sync_batch_norm():
    tf.keras.utils.set_random_seed(2)
    bn = hvd.SyncBatchNormalization(momentum=0.5)
    x = tf.Variable(ramp((4, 3), tf.float32) * (rank + 1))
    with tf.GradientTape() as tape:
        y = bn(x, training=True)
        loss = tf.reduce_sum(y * tf.reshape(tf.range(12, dtype=tf.float32), (4, 3)))
    return [y, tape.gradient(loss, x), bn.moving_mean, bn.moving_variance]


record("sync_batch_norm", sync_batch_norm)

if WITH_SETS and rank in (0, 2):
    record("process_set.allreduce", lambda: hvd.allreduce(
        ramp((3,), tf.float32), op=hvd.Sum, name="ps", process_set=process_sets[0]))


def uneven():
    outs = [hvd.allreduce(ramp((2,), tf.float32, k), op=hvd.Sum, name=f"join.{k}")
            for k in range(rank)]
    return outs + [hvd.join()]


# errors every rank sees: the exception's type is what scripts catch
record("error.shape_mismatch", lambda: hvd.allreduce(tf.ones([rank + 1]), name="err.shape"))
record("error.dtype_mismatch", lambda: hvd.allreduce(
    tf.ones([2], tf.float32 if rank == 0 else tf.float64), name="err.dtype"))
record("error.broadcast_root_mismatch", lambda: hvd.broadcast(
    tf.ones([2]), root_rank=rank, name="err.root"))
record("join", uneven)  # join returns when every rank joined (horovod.tensorflow has no barrier)

results.write(rank)
hvd.shutdown()
sys.exit(0)
