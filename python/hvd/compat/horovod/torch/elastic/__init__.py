"""horovod.torch.elastic on hvd: the same names, backed by hvd.torch.elastic."""
from hvd.torch.elastic import *  # noqa: F401,F403
from hvd.torch.elastic import __all__  # noqa: F401
