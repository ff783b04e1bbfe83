"""Horovod 0.28's conventions where they differ from hvd.torch's, for `import horovod.torch`.

hvd.torch never uses this module; the `horovod` compatibility package (hvd/compat/horovod,
put on the path by `hvdrun --horovod-compat`) re-exports these names in place of hvd.torch's,
so that a script written for Horovod trains with the numbers it had on Horovod. The forward
results are hvd.torch's; only these differ:

- Gradients. hvd.torch's collectives differentiate the sum of every rank's loss exactly.
  Horovod's gradient functions scale some of them otherwise: the gradient of `allgather`,
  `grouped_allgather` and `broadcast` is averaged over the ranks of the process set (as if each
  rank's loss were divided by their number), and the gathered gradient of `reducescatter` and
  `grouped_reducescatter` is multiplied by the number of ranks. Here each input passes through
  an identity whose backward multiplies the gradient by 1/N or N before hvd.torch's collective.
  (allreduce and alltoall differentiate alike in both, and are hvd.torch's own.)
- Adasum in reducescatter. hvd.torch refuses it with ValueError; Horovod's engine refuses it
  as HorovodInternalError, which scripts and Horovod's tests catch, so here it is that.
- broadcast_optimizer_state. Horovod makes a missing optimizer state with a step on zero
  gradients, so every parameter that requires a gradient and had none is left with a zero
  `.grad`, and scripts and Horovod's tests read that; hvd.torch's leaves `.grad` alone.

test/e2e/test_horovod_conformance.py compares these with Horovod itself where it is installed.
"""
import torch

from hvd._basics import Adasum, Average, HorovodInternalError, global_process_set
from hvd.torch import functions as _functions
from hvd.torch import mpi_ops as _ops
from hvd.torch.compression import Compression

__all__ = ["allgather", "broadcast", "broadcast_optimizer_state", "grouped_allgather",
           "grouped_reducescatter", "reducescatter"]


class _ScaleGrad(torch.autograd.Function):
    """Identity forward; backward multiplies the gradient by `factor`."""

    @staticmethod
    def forward(ctx, tensor, factor):
        ctx.factor = factor
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor, None


def _scaled(tensor, factor):
    if factor == 1 or not (torch.is_grad_enabled() and tensor.requires_grad):
        return tensor
    return _ScaleGrad.apply(tensor, factor)


def allgather(tensor, name=None, process_set=global_process_set):
    """hvd.torch.allgather; its gradient averaged over the ranks, as Horovod's."""
    return _ops.allgather(_scaled(tensor, 1.0 / process_set.size()), name, process_set)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """hvd.torch.grouped_allgather; its gradients averaged over the ranks, as Horovod's."""
    factor = 1.0 / process_set.size()
    return _ops.grouped_allgather([_scaled(t, factor) for t in tensors], name, process_set)


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """hvd.torch.broadcast; its gradient averaged over the ranks, as Horovod's."""
    return _ops.broadcast(_scaled(tensor, 1.0 / process_set.size()), root_rank, name,
                          process_set)


def _no_adasum(op, what):
    if op == Adasum:
        raise HorovodInternalError(f"{what}: reducescatter supports op=Sum and op=Average only, "
                                   "not Adasum")


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """hvd.torch.reducescatter; its gradient times the number of ranks and Adasum a
    HorovodInternalError, as Horovod's."""
    _no_adasum(op, "reducescatter")
    return _ops.reducescatter(_scaled(tensor, process_set.size()), name, compression, op,
                              process_set, prescale_factor, postscale_factor)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """hvd.torch.grouped_reducescatter; its gradients times the number of ranks and Adasum a
    HorovodInternalError, as Horovod's."""
    _no_adasum(op, "grouped_reducescatter")
    n = process_set.size()
    return _ops.grouped_reducescatter([_scaled(t, n) for t in tensors], name, compression, op,
                                      process_set, prescale_factor, postscale_factor)


def broadcast_optimizer_state(optimizer, root_rank, model=None, process_set=global_process_set):
    """hvd.torch.broadcast_optimizer_state, then Horovod's side effect: every parameter that
    requires a gradient and had none is left with a zero .grad."""
    _functions.broadcast_optimizer_state(optimizer, root_rank, model, process_set)
    with torch.no_grad():
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.requires_grad and p.grad is None:
                    p.grad = torch.zeros_like(p)
