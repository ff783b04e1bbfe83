"""horovod.tensorflow.mpi_ops on hvd (the collectives, topology queries and reduce ops).

hvd.tensorflow's names, except allgather, broadcast and reducescatter (and their grouped
forms), whose gradients are scaled as Horovod 0.28's: hvd/tensorflow/horovod_semantics.py.
"""
from hvd.tensorflow import *  # noqa: F401,F403
from hvd.tensorflow import __all__  # noqa: F401
from hvd.tensorflow.horovod_semantics import (allgather, broadcast,  # noqa: F401
                                              grouped_allgather, grouped_reducescatter,
                                              reducescatter)
from hvd._horovod_support import _basics  # noqa: F401
