"""horovod.tensorflow on hvd: the same names, backed by hvd.tensorflow."""
from hvd.tensorflow import *  # noqa: F401,F403
from hvd.tensorflow import __all__  # noqa: F401
from horovod.tensorflow import elastic  # noqa: F401  (hvd.elastic.run, TensorFlowKerasState)
