"""horovod.torch.functions on hvd."""
import torch

from hvd._basics import global_process_set
from hvd.torch import functions as _hvd
from hvd.torch.functions import (allgather_object, broadcast_object,  # noqa: F401
                                 broadcast_parameters)


def broadcast_optimizer_state(optimizer, root_rank, model=None, process_set=global_process_set):
    """hvd's broadcast_optimizer_state, then Horovod's side effect that scripts and tests read:
    Horovod makes the state with a step on zero gradients, so every parameter that requires
    a gradient and had none is left with a zero .grad."""
    _hvd.broadcast_optimizer_state(optimizer, root_rank, model, process_set)
    with torch.no_grad():
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad and p.grad is None:
                    p.grad = torch.zeros_like(p)
