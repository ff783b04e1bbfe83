"""horovod.tensorflow.mpi_ops on hvd (the collectives, topology queries and reduce ops)."""
from hvd.tensorflow import *  # noqa: F401,F403
from hvd.tensorflow import __all__  # noqa: F401
