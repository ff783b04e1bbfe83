"""hvd for PyTorch: Horovod's horovod.torch API on hvd's runtime.

    import hvd.torch as hvd
    hvd.init()
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)

Tensors live in host memory or on a CUDA device; CUDA tensors go GPU to GPU through NCCL when
every rank has a GPU of its own, else through host memory (cuda_built(), nccl_built()).
"""
from hvd import _basics
from hvd._basics import *  # noqa: F401,F403
from hvd._basics import __all__ as _basics_all
from hvd.torch.compression import Compression
from hvd.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                                 broadcast_parameters)
from hvd.torch.mpi_ops import (allgather, allgather_async, allreduce, allreduce_,
                               allreduce_async, allreduce_async_, alltoall, alltoall_async,
                               barrier, broadcast, broadcast_, broadcast_async,
                               broadcast_async_, grouped_allgather, grouped_allgather_async,
                               grouped_allreduce, grouped_allreduce_, grouped_allreduce_async,
                               grouped_allreduce_async_, grouped_reducescatter,
                               grouped_reducescatter_async, join, poll, reducescatter,
                               reducescatter_async, sparse_allreduce_async, synchronize)
from hvd.torch.optimizer import DistributedOptimizer
from hvd.torch.sync_batch_norm import SyncBatchNorm
from hvd.torch.threads import fit_intra_op_threads as _fit_intra_op_threads
from hvd.torch import elastic  # noqa: E402  (hvd.elastic.run, as horovod.torch)


def init(comm=None, process_sets=None):
    """hvd.init(), then torch's intra-op threads fitted to this rank's CPUs (threads.py)."""
    joining = not _basics.is_initialized()  # a second init() changes nothing
    _basics.init(comm, process_sets)
    if joining:
        _fit_intra_op_threads()


__all__ = list(_basics_all) + [
    "Compression", "DistributedOptimizer", "SyncBatchNorm", "allgather", "allgather_async",
    "allgather_object", "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
    "alltoall", "alltoall_async", "barrier", "broadcast", "broadcast_", "broadcast_async",
    "broadcast_async_", "broadcast_object", "broadcast_optimizer_state", "broadcast_parameters",
    "grouped_allgather", "grouped_allgather_async", "grouped_allreduce", "grouped_allreduce_",
    "grouped_allreduce_async", "grouped_allreduce_async_", "grouped_reducescatter",
    "grouped_reducescatter_async", "join", "poll", "reducescatter", "reducescatter_async",
    "sparse_allreduce_async", "synchronize",
]
