"""horovod.tensorflow.keras on hvd: the same names, backed by hvd.tensorflow.keras."""
from hvd.tensorflow.keras import *  # noqa: F401,F403
from hvd.tensorflow.keras import __all__  # noqa: F401
