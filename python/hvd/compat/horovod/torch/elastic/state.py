"""horovod.torch.elastic.state on hvd."""
from hvd._elastic import ObjectState, State  # noqa: F401
from hvd.torch.elastic.state import TorchState  # noqa: F401
