"""horovod.torch.functions on hvd (broadcast_optimizer_state leaves Horovod's zero gradients:
hvd/torch/horovod_semantics.py)."""
from hvd._basics import global_process_set  # noqa: F401
from hvd.torch.functions import (allgather_object, broadcast_object,  # noqa: F401
                                 broadcast_parameters)
from hvd.torch.horovod_semantics import broadcast_optimizer_state  # noqa: F401
