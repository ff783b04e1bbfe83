"""horovod.torch on hvd: the same names, backed by hvd.torch, with Horovod's gradient scaling
for allgather, broadcast and reducescatter and its zero gradients after
broadcast_optimizer_state (hvd/torch/horovod_semantics.py)."""
from hvd.torch import *  # noqa: F401,F403
from hvd.torch import __all__  # noqa: F401
from hvd.torch.horovod_semantics import (allgather, broadcast,  # noqa: F401
                                         broadcast_optimizer_state, grouped_allgather,
                                         grouped_reducescatter, reducescatter)
from horovod.torch import elastic  # noqa: F401  (hvd.elastic.run, hvd.elastic.TorchState)
# Horovod's package imports its submodules, so scripts may reach them as attributes
# (hvd.compression.Compression, hvd.mpi_ops.Sum).
from horovod.torch import (compression, functions, mpi_ops, optimizer,  # noqa: F401,E402
                           sync_batch_norm)
