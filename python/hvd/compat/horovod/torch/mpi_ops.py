"""horovod.torch.mpi_ops on hvd: Horovod's module holds the collectives, the topology queries
and the reduce ops, and scripts import them from here (`from horovod.torch.mpi_ops import
synchronize, Sum`)."""
from hvd.torch import *  # noqa: F401,F403
from hvd.torch import __all__  # noqa: F401
