"""horovod.torch.functions on hvd."""
from hvd.torch.functions import (allgather_object, broadcast_object,  # noqa: F401
                                 broadcast_optimizer_state, broadcast_parameters)
