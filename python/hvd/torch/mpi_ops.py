"""hvd's collectives on PyTorch tensors (host memory, or CUDA memory through NCCL), with
Horovod's names and signatures, and autograd support for allreduce, grouped_allreduce,
allgather, broadcast, alltoall and reducescatter.

Gradients are the exact gradients of the sum of every rank's loss: allreduce's backward is an
allreduce of the gradient with the same op and scale factors; allgather's sums the gradient over
ranks and keeps this rank's rows; broadcast's sums it on the root (zero elsewhere); alltoall's
sends each gradient row back where it came from; reducescatter's gathers the gradient parts.
"""
from __future__ import annotations

import numpy as _np
import torch
from torch.utils.dlpack import to_dlpack as _to_dlpack
from torch.autograd.graph import increment_version as _increment_version

from hvd import _basics
from hvd._basics import Average, Sum, global_process_set
from hvd._frontend import ArrayAdapter, Collectives
from hvd._gradients import check_differentiable as _check_differentiable
from hvd._gradients import grad_name as _grad_name
from hvd._handles import poll, synchronize  # noqa: F401 (re-exported)
from hvd.torch.compression import Compression


_DTYPE_NAMES = {}  # torch.dtype -> the core's name for it ("float32")


class _TorchAdapter(ArrayAdapter):
    name = "torch.Tensor"

    def is_array(self, x):
        return isinstance(x, torch.Tensor)

    def unsupported(self, x):
        if x.is_nested:
            return ("nested tensors are not supported; reduce their components (x.unbind()) "
                    "or a padded tensor (x.to_padded_tensor(0))")
        if x.layout is not torch.strided:
            return (f"{x.layout} tensors are not supported; use "
                    "DistributedOptimizer(sparse_as_dense=True) or .to_dense()")
        if not (x.is_cpu or x.is_cuda):
            return (f"tensor on device {x.device}: hvd reduces tensors in host memory or on "
                    "CUDA devices")
        return None

    def dtype_name(self, x):
        name = _DTYPE_NAMES.get(x.dtype)
        if name is None:
            name = _DTYPE_NAMES[x.dtype] = str(x.dtype).removeprefix("torch.")
        return name

    def exported(self, x):
        # A DLPack capsule straight from torch's C++: Tensor.__dlpack__ runs Python checks the
        # frontend has made already, and costs 4 us where this costs 0.5 (per tensor, per step).
        return _to_dlpack(x.detach() if x.requires_grad else x)

    def stream_of(self, x):
        # The collective waits for the work queued so far on the tensor's current stream.
        if x.is_cuda:
            return torch.cuda.current_stream(x.device).cuda_stream
        return 0

    def contiguous(self, x):
        # A lazy negation (torch's negative bit, e.g. .imag of a conjugate) is materialised:
        # DLPack would carry the stored values without their sign. The common case (a plain
        # contiguous tensor) returns it at once: the three calls cost a small allreduce 0.5 us.
        if not x.requires_grad and x.is_contiguous() and not x.is_neg():
            return x
        return x.detach().resolve_neg().contiguous()

    def mark_written(self, x):
        # The core writes through DLPack, which torch's autograd cannot see: without this, a
        # tensor saved for backward and then reduced in place would silently give wrong
        # gradients instead of torch's "modified by an inplace operation" error.
        _increment_version(x)

    def inplace_problem(self, x):
        if x.is_neg():
            return ("a tensor with torch's negative bit set (a lazy negation view); call "
                    ".resolve_neg() first or use the out-of-place function")
        return None

    def is_contiguous(self, x):
        return x.is_contiguous()

    def empty_like(self, x):
        # `x` is contiguous (contiguous() made it so), and torch's default preserve_format then
        # gives the same strides, without the keyword's cost.
        return torch.empty_like(x)

    def from_buffer(self, buffer):
        return torch.from_dlpack(buffer)

    def scaled(self, x, factor):
        return (x.detach() * factor).to(x.dtype).contiguous()

    def scale_(self, x, factor):
        x.copy_((x * factor).to(x.dtype))
        return x

    def int64_array(self, values):
        return torch.tensor(list(values), dtype=torch.int64)

    def splits_array(self, values):
        return torch.tensor(list(values), dtype=torch.int32)  # horovod.torch's dtype

    def bytes_array(self, data):
        return torch.from_numpy(_np.frombuffer(bytearray(data), dtype=_np.uint8))

    def to_bytes(self, x):
        return x.cpu().numpy().tobytes()


_c = Collectives(_TorchAdapter())


def _needs_grad(*tensors):
    return torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                           for t in tensors)


# -- allreduce ----------------------------------------------------------------------------------
class _AllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, op, name, prescale, postscale, process_set):
        ctx.args = (op, name, prescale, postscale, process_set)
        return synchronize(_c.allreduce_async(tensor, op, name, prescale, postscale,
                                              process_set))

    @staticmethod
    def backward(ctx, grad):
        op, name, prescale, postscale, process_set = ctx.args
        _check_differentiable(op, "allreduce backward")
        return (synchronize(_c.allreduce_async(grad, op, _grad_name(name), prescale, postscale,
                                               process_set)),
                None, None, None, None, None)


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Starts an allreduce into a new tensor (default op: Average); returns a handle."""
    return _c.allreduce_async(tensor, op, name, prescale_factor, postscale_factor, process_set,
                              average=average)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Starts an in-place allreduce; the tensor must be contiguous."""
    return _c.allreduce_async(tensor, op, name, prescale_factor, postscale_factor, process_set,
                              inplace=True, average=average)


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces `tensor` over the ranks of the process set and returns the result (a new tensor).
    Differentiable for Sum and Average."""
    op = Collectives._op(op, average, f'allreduce "{name}"' if name else "allreduce")
    compressed, cctx = compression.compress(tensor)
    if _needs_grad(compressed):
        out = _AllreduceFn.apply(compressed, op, name, prescale_factor, postscale_factor,
                                 process_set)
    else:
        out = _c.allreduce(compressed, op, name, prescale_factor, postscale_factor,
                           process_set)
    return compression.decompress(out, cctx)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """In-place allreduce; returns `tensor`."""
    return _c.allreduce(tensor, op, name, prescale_factor, postscale_factor, process_set,
                        inplace=True, average=average)


class _GroupedAllreduceFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, name, prescale, postscale, process_set, *tensors):
        ctx.args = (op, name, prescale, postscale, process_set)
        return tuple(synchronize(_c.grouped_allreduce_async(
            tensors, op, name, prescale, postscale, process_set)))

    @staticmethod
    def backward(ctx, *grads):
        op, name, prescale, postscale, process_set = ctx.args
        _check_differentiable(op, "grouped_allreduce backward")
        grads = synchronize(_c.grouped_allreduce_async(grads, op, _grad_name(name), prescale,
                                                       postscale, process_set))
        return (None, None, None, None, None, *grads)


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    return _c.grouped_allreduce_async(tensors, op, name, prescale_factor, postscale_factor,
                                      process_set, average=average)


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    return _c.grouped_allreduce_async(tensors, op, name, prescale_factor, postscale_factor,
                                      process_set, inplace=True, average=average)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Reduces several tensors as one operation (fused); returns the results in order."""
    op = Collectives._op(op, average, "grouped_allreduce")
    pairs = [compression.compress(t) for t in tensors]
    compressed = [p[0] for p in pairs]
    if _needs_grad(*compressed):
        outs = _GroupedAllreduceFn.apply(op, name, prescale_factor, postscale_factor,
                                         process_set, *compressed)
    else:
        outs = synchronize(grouped_allreduce_async(compressed, None, name, op, prescale_factor,
                                                   postscale_factor, process_set))
    return [compression.decompress(o, c) for o, (_, c) in zip(outs, pairs)]


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


# -- allgather ----------------------------------------------------------------------------------
class _AllgatherFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        rows = torch.tensor([tensor.shape[0] if tensor.dim() else 1], dtype=torch.int64)
        all_rows = synchronize(_c.allgather_async(rows, f"{name}.rows" if name else None,
                                                  process_set))
        me = process_set.rank()
        ctx.offset = int(all_rows[:me].sum())
        ctx.rows = int(all_rows[me])
        ctx.args = (name, process_set)
        return synchronize(_c.allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        name, process_set = ctx.args
        summed = synchronize(_c.allreduce_async(grad, Sum, _grad_name(name), 1.0, 1.0,
                                                process_set))
        return summed.narrow(0, ctx.offset, ctx.rows), None, None


def allgather_async(tensor, name=None, process_set=global_process_set):
    return _c.allgather_async(tensor, name, process_set)


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's tensor along the first dimension (which may differ per rank).
    Differentiable."""
    if _needs_grad(tensor):
        return _AllgatherFn.apply(tensor, name, process_set)
    return synchronize(allgather_async(tensor, name, process_set))


class _SparsePending:
    """A sparse tensor summed or averaged over the ranks as an allgather of its values and of
    its indices (Horovod's method): duplicates of one index are added when the result is
    coalesced. wait() (or a call, as Horovod's handle) waits and returns the result."""

    def __init__(self, tensor, name, op, process_set):
        tensor = tensor.coalesce()
        self.size = tensor.size()
        self.op = op
        self.process_set = process_set
        self.values = allgather_async(tensor._values(), f"{name}.values", process_set)
        self.indices = allgather_async(tensor._indices().t().contiguous(), f"{name}.indices",
                                       process_set)

    def wait(self):
        values = synchronize(self.values)
        indices = synchronize(self.indices)
        if self.op == Average:
            values = values / self.process_set.size()
        return torch.sparse_coo_tensor(indices.t(), values, self.size,
                                       check_invariants=False).coalesce()

    __call__ = wait


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Horovod's sparse allreduce: starts it and returns a callable that waits for the result,
    a coalesced sparse tensor. op is Sum or Average (a sparse Min or Max is not an allgather)."""
    if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.sparse_coo:
        raise ValueError(f'sparse_allreduce_async "{name}": takes a torch.sparse_coo tensor, '
                         f"not {getattr(tensor, 'layout', type(tensor).__name__)} (use allreduce "
                         "for dense tensors)")
    if op not in (Average, Sum):
        raise ValueError(f'sparse_allreduce_async "{name}": op must be hvd.Average or hvd.Sum')
    return _SparsePending(tensor, name, op, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    return _c.grouped_allgather_async(tensors, name, process_set)


class _GroupedAllgatherFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        rows = torch.tensor([t.shape[0] if t.dim() else 1 for t in tensors], dtype=torch.int64)
        all_rows = synchronize(_c.allgather_async(rows, f"{name}.rows" if name else None,
                                                  process_set)).view(process_set.size(), -1)
        me = process_set.rank()
        ctx.offsets = all_rows[:me].sum(0).tolist()
        ctx.rows = all_rows[me].tolist()
        ctx.args = (name, process_set)
        return tuple(synchronize(_c.grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grads):
        name, process_set = ctx.args
        summed = synchronize(_c.grouped_allreduce_async([g.contiguous() for g in grads], Sum,
                                                        _grad_name(name), 1.0, 1.0,
                                                        process_set))
        return (None, None, *(s.narrow(0, offset, rows)
                              for s, offset, rows in zip(summed, ctx.offsets, ctx.rows)))


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """allgather of several tensors as one operation. Differentiable."""
    if _needs_grad(*tensors):
        return list(_GroupedAllgatherFn.apply(name, process_set, *tensors))
    return synchronize(grouped_allgather_async(tensors, name, process_set))


# -- broadcast ----------------------------------------------------------------------------------
class _BroadcastFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.args = (root_rank, name, process_set)
        return synchronize(_c.broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad):
        root_rank, name, process_set = ctx.args
        summed = synchronize(_c.allreduce_async(grad, Sum, _grad_name(name), 1.0, 1.0,
                                                process_set))
        if _basics.rank() != root_rank:  # root_rank is a global rank
            summed.zero_()
        return summed, None, None, None


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    return _c.broadcast_async(tensor, root_rank, name, process_set)


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    return _c.broadcast_async(tensor, root_rank, name, process_set, inplace=True)


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns root_rank's tensor (root_rank counts within the process set). Differentiable."""
    if _needs_grad(tensor):
        return _BroadcastFn.apply(tensor, root_rank, name, process_set)
    return synchronize(broadcast_async(tensor, root_rank, name, process_set))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


# -- alltoall -----------------------------------------------------------------------------------
class _AlltoallFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        out, received = synchronize(_c.alltoall_async(
            tensor, splits if splits is not None else _equal_splits(tensor, process_set), name,
            process_set))
        ctx.args = (received, name, process_set)
        ctx.mark_non_differentiable(received)
        return out, received

    @staticmethod
    def backward(ctx, grad, _received_grad):
        received, name, process_set = ctx.args
        back, _ = synchronize(_c.alltoall_async(grad.contiguous(), received, _grad_name(name),
                                                process_set))
        return back, None, None, None


def _equal_splits(tensor, process_set):
    n = process_set.size()
    rows = tensor.shape[0] if tensor.dim() else 0
    if rows % n:
        raise ValueError(f"alltoall: first dimension {rows} does not divide by the process set's "
                         f"size {n}; pass splits")
    return [rows // n] * n


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    return _c.alltoall_async(tensor, splits, name, process_set)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends splits[j] rows to rank j (equal parts without splits). Returns the received rows,
    and with splits given also a tensor of the rows received from each rank. Differentiable."""
    if _needs_grad(tensor):
        out, received = _AlltoallFn.apply(tensor, splits, name, process_set)
        return out if splits is None else (out, received)
    return synchronize(alltoall_async(tensor, splits, name, process_set))


# -- reducescatter ------------------------------------------------------------------------------
class _ReducescatterFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, op, name, process_set, prescale, postscale):
        ctx.args = (op, name, process_set, prescale, postscale)
        return synchronize(_c.reducescatter_async(tensor, op, name, process_set, prescale,
                                                  postscale))

    @staticmethod
    def backward(ctx, grad):
        _, name, process_set, _, _ = ctx.args
        gathered = synchronize(_c.allgather_async(grad.contiguous(), _grad_name(name),
                                                  process_set))
        return _reducescatter_grad(gathered, *ctx.args), None, None, None, None, None


def _reducescatter_grad(gathered, op, name, process_set, prescale, postscale):
    """The gradient of a reducescatter's input: every rank's output gradient, gathered, times
    the factors the forward applied."""
    scale = prescale * postscale / (process_set.size() if op == Average else 1)
    return gathered * scale if scale != 1.0 else gathered


class _GroupedReducescatterFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, op, name, process_set, prescale, postscale, *tensors):
        ctx.args = (op, name, process_set, prescale, postscale)
        return tuple(synchronize(_c.grouped_reducescatter_async(
            list(tensors), op, name, process_set, prescale, postscale)))

    @staticmethod
    def backward(ctx, *grads):
        _, name, process_set, _, _ = ctx.args
        gathered = synchronize(_c.grouped_allgather_async([g.contiguous() for g in grads],
                                                          _grad_name(name), process_set))
        return (None,) * 5 + tuple(_reducescatter_grad(g, *ctx.args) for g in gathered)


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    return _c.reducescatter_async(tensor, op, name, process_set, prescale_factor,
                                  postscale_factor)


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces (Average or Sum) and returns this rank's part of the first dimension (the first
    parts one row larger when it does not divide). Differentiable."""
    compressed, cctx = compression.compress(tensor)
    if _needs_grad(compressed):
        out = _ReducescatterFn.apply(compressed, op, name, process_set, prescale_factor,
                                     postscale_factor)
    else:
        out = synchronize(reducescatter_async(compressed, name, op, process_set,
                                              prescale_factor, postscale_factor))
    return compression.decompress(out, cctx)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    return _c.grouped_reducescatter_async(tensors, op, name, process_set, prescale_factor,
                                          postscale_factor)


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter of several tensors as one operation. Differentiable."""
    pairs = [compression.compress(t) for t in tensors]
    compressed = [p[0] for p in pairs]
    if _needs_grad(*compressed):
        outs = _GroupedReducescatterFn.apply(op, name, process_set, prescale_factor,
                                             postscale_factor, *compressed)
    else:
        outs = synchronize(grouped_reducescatter_async(compressed, name, op, process_set,
                                                       prescale_factor, postscale_factor))
    return [compression.decompress(o, c) for o, (_, c) in zip(outs, pairs)]


# -- synchronisation ----------------------------------------------------------------------------
def barrier(process_set=global_process_set):
    """Returns when every rank of the process set has called it."""
    _c.barrier(process_set)


def join(device=-1) -> int:
    """This rank has no more batches: until every rank joined, the others' allreduces count it
    as zeros. Returns the last rank to join."""
    return _c.join(device)
