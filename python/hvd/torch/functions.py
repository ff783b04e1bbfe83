"""Model and optimizer state helpers: broadcast_parameters, broadcast_optimizer_state,
broadcast_object, allgather_object."""
from __future__ import annotations

import io
from collections.abc import Mapping

import torch

from hvd import _basics

from hvd._basics import global_process_set
from hvd.torch.mpi_ops import _c, broadcast_async, broadcast_async_, synchronize
from hvd.torch.optimizer import load_keeping_param_groups


def broadcast_parameters(params, root_rank, prefix="", process_set=global_process_set):
    """Overwrites every tensor of `params` (a state_dict, an iterable of (name, tensor) such
    as model.named_parameters(), or of tensors such as model.parameters(), named by position)
    with root_rank's values, in place."""
    if isinstance(params, Mapping):
        items = sorted(params.items())
    else:
        try:
            items = list(params)
        except TypeError:
            raise ValueError(f"broadcast_parameters: expected a state_dict, (name, tensor) "
                             f"pairs or tensors, got {type(params).__name__}") from None
    pending = []
    for index, item in enumerate(items):
        if isinstance(item, torch.Tensor):
            # model.parameters(): every rank lists them in the same order.
            item = (str(index), item)
        if not (isinstance(item, tuple) and len(item) == 2):
            raise ValueError("broadcast_parameters: expected tensors or (name, tensor) pairs, "
                             f"got {type(item).__name__}")
        name, p = item
        if p is None:
            continue
        if not isinstance(p, torch.Tensor):
            raise ValueError(f'broadcast_parameters: "{name}" is a {type(p).__name__}, not a '
                             "tensor")
        target = p.data if isinstance(p, torch.nn.Parameter) else p
        label = f"broadcast_parameters.{prefix}{name}"
        if target.is_contiguous():
            pending.append((None, broadcast_async_(target, root_rank, label, process_set)))
        else:
            # A channels_last model's weights, or a view: the strides may differ between
            # ranks, so the root's values travel in logical order and are copied back.
            pending.append((target, broadcast_async(target, root_rank, label, process_set)))
    for target, handle in pending:
        result = synchronize(handle)
        if target is not None:
            target.copy_(result)


def broadcast_optimizer_state(optimizer, root_rank, model=None,
                              process_set=global_process_set):
    """Makes every rank's optimizer state (per-parameter state such as momentum and Adam's
    moments, and the param groups' hyperparameters such as lr) equal to root_rank's, also when
    the other ranks have no state yet (root restored a checkpoint)."""
    del model  # accepted for Horovod's signature; the optimizer knows its parameters
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("broadcast_optimizer_state: LBFGS keeps state that cannot be "
                         "broadcast; broadcast the model's parameters instead")
    me = _basics.rank()  # root_rank is a global rank, as in Horovod
    payload = None
    if me == root_rank:
        buffer = io.BytesIO()
        torch.save(optimizer.state_dict(), buffer)
        payload = buffer.getvalue()
    payload = _c.broadcast_object(payload, root_rank, "optimizer_state", process_set)
    if me != root_rank:
        state = torch.load(io.BytesIO(payload), weights_only=False)
        load_keeping_param_groups(optimizer, lambda: optimizer.load_state_dict(state))


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns root_rank's `obj` on every rank. Objects travel pickled, and unpickling runs code
    the sender chose: use it between the trusted ranks of one job only."""
    return _c.broadcast_object(obj, root_rank, name, process_set)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every rank's `obj`, in rank order (pickled: trusted peers only)."""
    return _c.allgather_object(obj, name, process_set)
