"""hvd for Keras 3: horovod.tensorflow.keras's API (DistributedOptimizer, callbacks, load_model)
on hvd's runtime, for Keras on the TensorFlow backend.

    import hvd.tensorflow.keras as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01 * hvd.size()))
    model.compile(optimizer=opt, loss=...)
    model.fit(x, y, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                               hvd.callbacks.MetricAverageCallback()],
              verbose=1 if hvd.rank() == 0 else 0)

The collectives here take values (arrays, tensors, numbers) and return, as Horovod's Keras
module does, a tf.Tensor when TensorFlow runs eagerly and the evaluated NumPy array inside a
tf.keras 2 graph (its Keras session runs it).
"""
from __future__ import annotations

import keras
import tensorflow as tf

from hvd._basics import *  # noqa: F401,F403
from hvd._basics import __all__ as _basics_all
from hvd._basics import Average, global_process_set
from hvd.tensorflow import init  # noqa: F401 (fits TensorFlow's threads)
from hvd.tensorflow import mpi_ops as _ops
from hvd.tensorflow.compression import Compression
from hvd.tensorflow.keras import callbacks, elastic  # noqa: F401
from hvd.tensorflow.keras.optimizer import DistributedOptimizer, PartialDistributedOptimizer
from hvd.tensorflow.mpi_ops import allgather_object, barrier, broadcast_object
from hvd.tensorflow.v1 import broadcast_global_variables


def _value(x):
    if tf.executing_eagerly():
        return x
    session = getattr(getattr(tf.compat.v1.keras, "backend", None), "get_session", None)
    return session().run(x) if session is not None else x


def join(device=-1) -> int:
    """This rank has no more batches; returns the last rank to join (see hvd.tensorflow.join)."""
    return int(_ops.join(device))


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0,
              op=None, compression=Compression.none, process_set=global_process_set):
    """The value (array, tensor or number) reduced over the ranks (default op: Average)."""
    return _value(_ops.allreduce(value, average=average, name=name, op=op,
                                 prescale_factor=prescale_factor,
                                 postscale_factor=postscale_factor, compression=compression,
                                 process_set=process_set))


def allgather(value, name=None, process_set=global_process_set):
    """Every rank's value concatenated along the first dimension."""
    return _value(_ops.allgather(value, name=name, process_set=process_set))


def broadcast(value, root_rank, name=None, process_set=global_process_set):
    """root_rank's value on every rank."""
    return _value(_ops.broadcast(value, root_rank, name=name, process_set=process_set))


def reducescatter(value, name=None, op=Average, process_set=global_process_set):
    """The value reduced over the ranks, this rank's part of the first dimension."""
    return _value(_ops.reducescatter(value, name=name, op=op, process_set=process_set))


def load_model(filepath, custom_optimizers=None, custom_objects=None,
               compression=Compression.none, **distributed_optimizer_args):
    """keras.models.load_model, with the model's optimizer (and its restored state) wrapped in
    DistributedOptimizer: resume training from a checkpoint rank 0 wrote, on every rank."""
    objects = dict(custom_objects or {})
    for cls in custom_optimizers or []:
        objects[cls.__name__] = cls
    model = keras.models.load_model(filepath, custom_objects=objects or None)
    restored = getattr(model, "optimizer", None)
    if restored is not None:
        wrapped = DistributedOptimizer(restored, compression=compression,
                                       **distributed_optimizer_args)
        if callbacks.optimizer_built(restored):
            callbacks.build_optimizer(wrapped, model.trainable_variables)
            for mine, theirs in zip(callbacks.optimizer_variables(wrapped),
                                    callbacks.optimizer_variables(restored)):
                mine.assign(theirs)
        model.optimizer = wrapped
    return model


__all__ = list(_basics_all) + [
    "Compression", "DistributedOptimizer", "PartialDistributedOptimizer", "allgather",
    "allgather_object", "allreduce",
    "barrier", "broadcast", "broadcast_global_variables", "broadcast_object", "callbacks",
    "join", "load_model", "reducescatter",
]
