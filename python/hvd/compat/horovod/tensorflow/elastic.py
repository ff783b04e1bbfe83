"""horovod.tensorflow.elastic on hvd: the same names, backed by hvd.tensorflow.elastic."""
from hvd.tensorflow.elastic import *  # noqa: F401,F403
from hvd.tensorflow.elastic import __all__  # noqa: F401
