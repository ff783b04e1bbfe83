"""horovod.tensorflow.keras on hvd: the same names, backed by hvd.tensorflow.keras."""
from hvd.tensorflow.keras import *  # noqa: F401,F403
from hvd.tensorflow.keras import __all__  # noqa: F401
from horovod.tensorflow.keras import elastic  # noqa: F401,E402  (hvd.elastic.KerasState)
