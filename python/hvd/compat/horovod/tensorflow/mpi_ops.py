"""horovod.tensorflow.mpi_ops on hvd (the collectives, topology queries and reduce ops).

As in horovod.torch (see its mpi_ops.py): allgather and broadcast average the gradient over the
ranks and reducescatter multiplies it by their number, as Horovod 0.28's gradient functions do;
hvd.tensorflow's own gradients are exact for the sum of every rank's loss.
"""
import tensorflow as tf

from hvd.tensorflow import *  # noqa: F401,F403
from hvd.tensorflow import __all__  # noqa: F401
from hvd.tensorflow import global_process_set
from hvd.tensorflow import mpi_ops as _hvd
from hvd.tensorflow.compression import Compression
from hvd import _core


class _Basics:
    """horovod.tensorflow.mpi_ops._basics: the one internal query scripts and tests use."""

    @staticmethod
    def _get_process_set_ids_and_ranks():
        """{process set id: its global ranks} for every registered process set."""
        return {i: list(_core.process_set_ranks(i)) for i in _core.process_set_ids()}


_basics = _Basics()


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
    return _hvd.allgather(_scaled(tensor, 1.0 / process_set.size()), name, ignore_name_scope,
                          process_set)


def grouped_allgather(tensors, name=None, ignore_name_scope=False,
                      process_set=global_process_set):
    factor = 1.0 / process_set.size()
    return _hvd.grouped_allgather([_scaled(t, factor) for t in tensors], name,
                                  ignore_name_scope, process_set)


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    return _hvd.broadcast(_scaled(tensor, 1.0 / process_set.size()), root_rank, name,
                          ignore_name_scope, process_set)


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average, name=None,
                  ignore_name_scope=False, process_set=global_process_set, prescale_factor=1.0,
                  postscale_factor=1.0):
    return _hvd.reducescatter(_scaled(tensor, process_set.size()), device_dense, compression,
                              op, name, ignore_name_scope, process_set, prescale_factor,
                              postscale_factor)


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none, op=Average,
                          name=None, ignore_name_scope=False, process_set=global_process_set,
                          prescale_factor=1.0, postscale_factor=1.0):
    n = process_set.size()
    return _hvd.grouped_reducescatter([_scaled(t, n) for t in tensors], device_dense,
                                      compression, op, name, ignore_name_scope, process_set,
                                      prescale_factor, postscale_factor)
