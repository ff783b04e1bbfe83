"""hvd for TensorFlow 2: horovod.tensorflow's API on hvd's runtime, with no TensorFlow op
compiled (tensors travel through DLPack; see mpi_ops.py).

    import hvd.tensorflow as hvd
    hvd.init()
    with tf.GradientTape() as tape:
        loss = ...
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)
    ...
    if first_batch:
        hvd.broadcast_variables(model.variables, root_rank=0)

Keras users: hvd.tensorflow.keras (DistributedOptimizer and callbacks).
"""
import tensorflow as _tf

from hvd import _basics, _core
from hvd._basics import *  # noqa: F401,F403
from hvd._basics import __all__ as _basics_all
from hvd._basics import Average, global_process_set
from hvd._handles import poll, synchronize  # noqa: F401
from hvd.tensorflow import elastic  # noqa: F401  (hvd.elastic.run, as horovod.tensorflow)
from hvd.tensorflow.compression import Compression
from hvd.tensorflow.gradient_tape import DistributedGradientTape, PartialDistributedGradientTape
from hvd.tensorflow.v1 import BroadcastGlobalVariablesHook, broadcast_global_variables
# hvd.OperationRejectedError as TensorFlow's FailedPreconditionError too (see errors.py).
from hvd.tensorflow.errors import OperationRejectedError  # noqa: F811
from hvd.tensorflow.mpi_ops import (allgather, allgather_object, allreduce, alltoall, barrier,
                                    broadcast, broadcast_, broadcast_object,
                                    broadcast_variables, grouped_allgather, grouped_allreduce,
                                    grouped_reducescatter, join, local_rank_op, local_size_op,
                                    process_set_included_op, rank_op, reducescatter, size_op)


def __getattr__(name):
    # The layer needs Keras, imported only when a script asks for it.
    if name == "SyncBatchNormalization":
        from hvd.tensorflow.sync_batch_norm import SyncBatchNormalization
        return SyncBatchNormalization
    raise AttributeError(f"module 'hvd.tensorflow' has no attribute {name!r}")


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="",
                         device_sparse="", compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """horovod.tensorflow.DistributedOptimizer: reduces the gradients over the ranks before the
    wrapped optimizer applies them. A tf.compat.v1.train.Optimizer (TF1 graphs, sessions,
    Estimator) gets hvd.tensorflow.v1's wrapper; a Keras optimizer hvd.tensorflow.keras's (the
    same arguments; use_locking is TF1's)."""
    from hvd.tensorflow import v1
    args = dict(name=name, device_dense=device_dense, device_sparse=device_sparse,
                compression=compression, sparse_as_dense=sparse_as_dense,
                backward_passes_per_step=backward_passes_per_step, op=op,
                gradient_predivide_factor=gradient_predivide_factor,
                average_aggregated_gradients=average_aggregated_gradients,
                num_groups=num_groups, groups=groups, process_set=process_set,
                scale_local_gradients=scale_local_gradients)
    if v1.is_v1_optimizer(optimizer):
        return v1.DistributedOptimizer(optimizer, use_locking=use_locking, **args)
    try:
        import keras
    except ImportError:
        keras = None
    legacy = getattr(keras.optimizers, "legacy", None) if keras is not None else None
    types = (keras.optimizers.Optimizer,) if keras is not None else ()
    if legacy is not None and hasattr(legacy, "Optimizer"):  # tf.keras 2's OptimizerV2
        types += (legacy.Optimizer,)
    if keras is None or not isinstance(optimizer, types):
        raise ValueError("DistributedOptimizer: expected a tf.compat.v1.train.Optimizer or a "
                         f"Keras optimizer, got {type(optimizer).__name__} {optimizer!r}")
    from hvd.tensorflow.keras.optimizer import DistributedOptimizer as _keras_optimizer
    return _keras_optimizer(optimizer, **args)


def init(comm=None, process_sets=None):
    """hvd.init(), then TensorFlow's thread pools fitted to this rank's CPUs when TensorFlow has
    not started yet (it sizes them from every CPU of the host, which ranks sharing the host
    would oversubscribe; OMP_NUM_THREADS or an earlier tf.config.threading call wins)."""
    joining = not _basics.is_initialized()
    _basics.init(comm, process_sets)
    if not joining:
        return
    share = _core.compute_threads()  # 0: OMP_NUM_THREADS chose
    threading = _tf.config.threading
    if not share or threading.get_intra_op_parallelism_threads():
        return
    try:
        threading.set_intra_op_parallelism_threads(share)
        threading.set_inter_op_parallelism_threads(max(2, share))
        _core.log_info("tensorflow", f"TensorFlow intra-op threads: {share}, this rank's share "
                                     "of the CPUs (set OMP_NUM_THREADS to choose)")
    except RuntimeError:
        _core.log_info("tensorflow", "TensorFlow started before hvd.init(): its thread pools "
                                     "keep their sizes")


__all__ = list(_basics_all) + [
    "BroadcastGlobalVariablesHook", "Compression", "DistributedGradientTape", "DistributedOptimizer",
    "PartialDistributedGradientTape", "SyncBatchNormalization", "allgather", "allgather_object", "allreduce",
    "alltoall", "barrier", "broadcast", "broadcast_", "broadcast_global_variables",
    "broadcast_object",
    "broadcast_variables", "grouped_allgather", "grouped_allreduce", "grouped_reducescatter",
    "join", "local_rank_op", "local_size_op", "poll", "process_set_included_op", "rank_op",
    "reducescatter", "size_op", "synchronize",
]
