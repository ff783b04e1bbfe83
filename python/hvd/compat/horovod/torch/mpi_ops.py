"""horovod.torch.mpi_ops on hvd: Horovod's module holds the collectives, the topology queries
and the reduce ops, and scripts import them from here (`from horovod.torch.mpi_ops import
synchronize, Sum`).

hvd.torch's collectives differentiate the sum of every rank's loss exactly. Horovod's scale
some gradients otherwise, and a script written for Horovod trains with Horovod's numbers, so
here allgather and broadcast average the gradient over the ranks (as if each rank's loss were
divided by their number) and reducescatter's gathered gradient is multiplied by the number of
ranks, as Horovod 0.28's torch and TensorFlow modules do. The forward results are hvd.torch's.
"""
import torch

from hvd.torch import *  # noqa: F401,F403
from hvd.torch import __all__  # noqa: F401
from hvd.torch import global_process_set
from hvd.torch import mpi_ops as _hvd
from hvd._basics import Adasum, Average, HorovodInternalError
from hvd.torch.compression import Compression


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
    return _hvd.allgather(_scaled(tensor, 1.0 / process_set.size()), name, process_set)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    factor = 1.0 / process_set.size()
    return _hvd.grouped_allgather([_scaled(t, factor) for t in tensors], name, process_set)


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    return _hvd.broadcast(_scaled(tensor, 1.0 / process_set.size()), root_rank, name,
                          process_set)


def _no_adasum(op, what):
    # Horovod refuses Adasum for reducescatter from its engine, as an internal error; scripts
    # and tests catch that (hvd.torch says ValueError).
    if op == Adasum:
        raise HorovodInternalError(f"{what}: reducescatter supports op=Sum and op=Average only, "
                                   "not Adasum")


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    _no_adasum(op, "reducescatter")
    return _hvd.reducescatter(_scaled(tensor, process_set.size()), name, compression, op,
                              process_set, prescale_factor, postscale_factor)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    _no_adasum(op, "grouped_reducescatter")
    n = process_set.size()
    return _hvd.grouped_reducescatter([_scaled(t, n) for t in tensors], name, compression, op,
                                      process_set, prescale_factor, postscale_factor)
