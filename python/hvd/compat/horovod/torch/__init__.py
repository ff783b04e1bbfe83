"""horovod.torch on hvd: the same names, backed by hvd.torch."""
from hvd.torch import *  # noqa: F401,F403
from hvd.torch import __all__  # noqa: F401


def __getattr__(name):
    # `hvd.elastic.run` in a Horovod script: say what is missing (AttributeError keeps
    # hasattr(hvd, "elastic") False).
    if name == "elastic":
        from hvd.compat.horovod.torch._unsupported import ELASTIC_MESSAGE
        raise AttributeError(ELASTIC_MESSAGE)
    raise AttributeError(f"module 'horovod.torch' has no attribute '{name}'")
