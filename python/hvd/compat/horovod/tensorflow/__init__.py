"""horovod.tensorflow on hvd: the same names, backed by hvd.tensorflow."""
from hvd.tensorflow import *  # noqa: F401,F403
from hvd.tensorflow import __all__  # noqa: F401


def __getattr__(name):
    if name == "elastic":
        from hvd.compat.horovod.torch._unsupported import ELASTIC_MESSAGE
        raise AttributeError(ELASTIC_MESSAGE)
    raise AttributeError(f"module 'horovod.tensorflow' has no attribute '{name}'")
