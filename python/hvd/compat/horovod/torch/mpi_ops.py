"""horovod.torch.mpi_ops on hvd: Horovod's module holds the collectives, the topology queries
and the reduce ops, and scripts import them from here (`from horovod.torch.mpi_ops import
synchronize, Sum`).

hvd.torch's names, except allgather, broadcast and reducescatter (and their grouped forms),
whose gradients are scaled as Horovod 0.28's and whose reducescatter refuses Adasum as
Horovod's does: hvd/torch/horovod_semantics.py.
"""
from hvd.torch import *  # noqa: F401,F403
from hvd.torch import __all__  # noqa: F401
from hvd.torch.horovod_semantics import (allgather, broadcast, grouped_allgather,  # noqa: F401
                                         grouped_reducescatter, reducescatter)
