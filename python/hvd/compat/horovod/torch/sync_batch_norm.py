"""horovod.torch.sync_batch_norm on hvd."""
from hvd.torch.sync_batch_norm import SyncBatchNorm  # noqa: F401
