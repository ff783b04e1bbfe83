"""Horovod 0.28's gradient conventions where they differ from hvd.tensorflow's, for
`import horovod.tensorflow`.

hvd.tensorflow never uses this module; the `horovod` compatibility package (hvd/compat/horovod,
put on the path by `hvdrun --horovod-compat`) re-exports these names in place of
hvd.tensorflow's, so that a script written for Horovod trains with the numbers it had on
Horovod. The forward results are hvd.tensorflow's; only the gradients differ, as in
hvd/torch/horovod_semantics.py:

hvd.tensorflow's collectives differentiate the sum of every rank's loss exactly. Horovod's
gradient functions average the gradient of `allgather`, `grouped_allgather` and `broadcast` over
the ranks of the process set (as if each rank's loss were divided by their number) and multiply
the gathered gradient of `reducescatter` and `grouped_reducescatter` by the number of ranks.
Here each floating input passes through a tf.custom_gradient identity whose gradient is
multiplied by 1/N or N before hvd.tensorflow's collective. (allreduce and alltoall
differentiate alike in both, and are hvd.tensorflow's own.)

test/e2e/test_horovod_conformance.py compares these with Horovod itself where it is installed.
"""
import tensorflow as tf

from hvd._basics import Average, global_process_set
from hvd.tensorflow import mpi_ops as _ops
from hvd.tensorflow.compression import Compression

__all__ = ["allgather", "broadcast", "grouped_allgather", "grouped_reducescatter",
           "reducescatter"]


def _scaled(tensor, factor):
    """`tensor` in the forward pass; its gradient times `factor` in the backward pass."""
    tensor = tf.convert_to_tensor(tensor)
    if factor == 1 or not tensor.dtype.is_floating:
        return tensor

    @tf.custom_gradient
    def identity(x):
        return tf.identity(x), lambda dy: dy * tf.constant(factor, dtype=dy.dtype)

    return identity(tensor)


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """hvd.tensorflow.allgather; its gradient averaged over the ranks, as Horovod's."""
    return _ops.allgather(_scaled(tensor, 1.0 / process_set.size()), name, ignore_name_scope,
                          process_set)


def grouped_allgather(tensors, name=None, ignore_name_scope=False,
                      process_set=global_process_set):
    """hvd.tensorflow.grouped_allgather; its gradients averaged over the ranks, as Horovod's."""
    factor = 1.0 / process_set.size()
    return _ops.grouped_allgather([_scaled(t, factor) for t in tensors], name,
                                  ignore_name_scope, process_set)


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """hvd.tensorflow.broadcast; its gradient averaged over the ranks, as Horovod's."""
    return _ops.broadcast(_scaled(tensor, 1.0 / process_set.size()), root_rank, name,
                          ignore_name_scope, process_set)


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average, name=None,
                  ignore_name_scope=False, process_set=global_process_set, prescale_factor=1.0,
                  postscale_factor=1.0):
    """hvd.tensorflow.reducescatter; its gradient times the number of ranks, as Horovod's."""
    return _ops.reducescatter(_scaled(tensor, process_set.size()), device_dense, compression,
                              op, name, ignore_name_scope, process_set, prescale_factor,
                              postscale_factor)


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none, op=Average,
                          name=None, ignore_name_scope=False, process_set=global_process_set,
                          prescale_factor=1.0, postscale_factor=1.0):
    """hvd.tensorflow.grouped_reducescatter; its gradients times the number of ranks, as
    Horovod's."""
    n = process_set.size()
    return _ops.grouped_reducescatter([_scaled(t, n) for t in tensors], device_dense,
                                      compression, op, name, ignore_name_scope, process_set,
                                      prescale_factor, postscale_factor)
