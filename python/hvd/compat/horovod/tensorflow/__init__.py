"""horovod.tensorflow on hvd: the same names, backed by hvd.tensorflow (with Horovod's gradient
scaling for allgather, broadcast and reducescatter: hvd/tensorflow/horovod_semantics.py)."""
from hvd.tensorflow import *  # noqa: F401,F403
from hvd.tensorflow import __all__  # noqa: F401
from hvd.tensorflow.horovod_semantics import (allgather, broadcast,  # noqa: F401
                                              grouped_allgather, grouped_reducescatter,
                                              reducescatter)
from horovod.tensorflow import elastic  # noqa: F401  (hvd.elastic.run, TensorFlowKerasState)
from horovod.tensorflow import mpi_ops  # noqa: F401  (hvd.mpi_ops._basics, as scripts use it)
from horovod.tensorflow.util import _executing_eagerly  # noqa: F401
