"""horovod.torch on hvd: the same names, backed by hvd.torch (with Horovod's gradient scaling
for allgather, broadcast and reducescatter: mpi_ops.py)."""
from hvd.torch import *  # noqa: F401,F403
from hvd.torch import __all__  # noqa: F401
# Horovod's gradient scaling for these (see mpi_ops.py)
from horovod.torch.mpi_ops import (allgather, broadcast, grouped_allgather,  # noqa: F401
                                   grouped_reducescatter, reducescatter)
# Horovod's zero gradients left by its state-making step (see functions.py)
from horovod.torch.functions import broadcast_optimizer_state  # noqa: F401
from horovod.torch import elastic  # noqa: F401  (hvd.elastic.run, hvd.elastic.TorchState)
# Horovod's package imports its submodules, so scripts may reach them as attributes
# (hvd.compression.Compression, hvd.mpi_ops.Sum).
from horovod.torch import (compression, functions, mpi_ops, optimizer,  # noqa: F401,E402
                           sync_batch_norm)
