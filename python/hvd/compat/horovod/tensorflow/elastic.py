"""horovod.tensorflow.elastic is not provided yet: importing it says so instead of failing with
a bare ModuleNotFoundError that reads like a broken installation."""
from hvd.compat.horovod.torch._unsupported import ELASTIC_MESSAGE

raise ImportError(ELASTIC_MESSAGE)
