"""horovod.torch.optimizer on hvd."""
from hvd.torch.optimizer import DistributedOptimizer  # noqa: F401
