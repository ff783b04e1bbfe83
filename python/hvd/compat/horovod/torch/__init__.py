"""horovod.torch on hvd: the same names, backed by hvd.torch."""
from hvd.torch import *  # noqa: F401,F403
from hvd.torch import __all__  # noqa: F401
from horovod.torch import elastic  # noqa: F401  (hvd.elastic.run, hvd.elastic.TorchState)
