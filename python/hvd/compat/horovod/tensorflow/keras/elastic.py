"""horovod.tensorflow.keras.elastic on hvd: the same names, backed by hvd.tensorflow.keras.elastic."""
from hvd.tensorflow.keras.elastic import *  # noqa: F401,F403
from hvd.tensorflow.keras.elastic import __all__  # noqa: F401
