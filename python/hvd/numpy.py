"""hvd's collectives on NumPy arrays: the functions of hvd.torch, for non-PyTorch users and for
tests. Functions without a trailing underscore return new arrays; with one they work in place
(the array must be C-contiguous and writable). *_async functions return a handle for poll()
and synchronize()."""
from __future__ import annotations

import numpy as _np

from hvd._basics import *  # noqa: F401,F403 (init, rank, ProcessSet, Average, ...)
from hvd import elastic  # noqa: F401 (hvd.numpy.elastic, as hvd.torch.elastic)
from hvd._basics import global_process_set
from hvd._frontend import ArrayAdapter, Collectives
from hvd._handles import poll, synchronize


class _NumpyAdapter(ArrayAdapter):
    name = "numpy.ndarray"
    outputs_as_numpy = True

    def is_array(self, x):
        return isinstance(x, _np.ndarray)

    def dtype_name(self, x):
        return x.dtype.name

    def contiguous(self, x):
        # Not ascontiguousarray, which makes a 0-d array 1-d. DLPack carries native byte order
        # only, so a big-endian array is converted like a strided one.
        return _np.asarray(x, dtype=x.dtype.newbyteorder("="), order="C")

    def inplace_problem(self, x):
        if not x.dtype.isnative:
            return (f"an array of non-native byte order ({x.dtype.str}); convert it first "
                    "(x.astype(x.dtype.newbyteorder('='))) or use the out-of-place function")
        return None

    contiguous_hint = "numpy.ascontiguousarray(x)"

    def is_contiguous(self, x):
        return x.flags.c_contiguous

    def is_writable(self, x):
        return x.flags.writeable

    def empty_like(self, x):
        return _np.empty_like(x, order="C")

    def from_buffer(self, buffer):
        return buffer

    def scaled(self, x, factor):
        return _np.multiply(x, factor).astype(x.dtype, copy=False)

    def scale_(self, x, factor):
        _np.multiply(x, factor, out=x, casting="unsafe")
        return x

    def int64_array(self, values):
        return _np.array(list(values), dtype=_np.int64)

    def bytes_array(self, data):
        return _np.frombuffer(bytearray(data), dtype=_np.uint8)

    def to_bytes(self, x):
        return x.tobytes()


_c = Collectives(_NumpyAdapter())


def allreduce_async(array, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set, average=None):
    return _c.allreduce_async(array, op, name, prescale_factor, postscale_factor, process_set,
                              average=average)


def allreduce_async_(array, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set, average=None):
    return _c.allreduce_async(array, op, name, prescale_factor, postscale_factor, process_set,
                              inplace=True, average=average)


def allreduce(array, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set, average=None):
    """Reduces `array` over the process set (default op: Average) into a new array."""
    return synchronize(allreduce_async(array, op, name, prescale_factor, postscale_factor,
                                       process_set, average))


def allreduce_(array, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set, average=None):
    return synchronize(allreduce_async_(array, op, name, prescale_factor, postscale_factor,
                                        process_set, average))


def grouped_allreduce_async(arrays, op=None, name=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    return _c.grouped_allreduce_async(arrays, op, name, prescale_factor, postscale_factor,
                                      process_set)


def grouped_allreduce_async_(arrays, op=None, name=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    return _c.grouped_allreduce_async(arrays, op, name, prescale_factor, postscale_factor,
                                      process_set, inplace=True)


def grouped_allreduce(arrays, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    return synchronize(grouped_allreduce_async(arrays, op, name, prescale_factor,
                                               postscale_factor, process_set))


def grouped_allreduce_(arrays, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(arrays, op, name, prescale_factor,
                                                postscale_factor, process_set))


def allgather_async(array, name=None, process_set=global_process_set):
    return _c.allgather_async(array, name, process_set)


def allgather(array, name=None, process_set=global_process_set):
    """Concatenates every rank's array along the first dimension (which may differ)."""
    return synchronize(allgather_async(array, name, process_set))


def grouped_allgather_async(arrays, name=None, process_set=global_process_set):
    return _c.grouped_allgather_async(arrays, name, process_set)


def grouped_allgather(arrays, name=None, process_set=global_process_set):
    return synchronize(grouped_allgather_async(arrays, name, process_set))


def broadcast_async(array, root_rank, name=None, process_set=global_process_set):
    return _c.broadcast_async(array, root_rank, name, process_set)


def broadcast_async_(array, root_rank, name=None, process_set=global_process_set):
    return _c.broadcast_async(array, root_rank, name, process_set, inplace=True)


def broadcast(array, root_rank, name=None, process_set=global_process_set):
    """Returns `root_rank`'s array (a rank within the process set) on every rank."""
    return synchronize(broadcast_async(array, root_rank, name, process_set))


def broadcast_(array, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(array, root_rank, name, process_set))


def alltoall_async(array, splits=None, name=None, process_set=global_process_set):
    return _c.alltoall_async(array, splits, name, process_set)


def alltoall(array, splits=None, name=None, process_set=global_process_set):
    """Sends splits[j] rows to rank j (equal parts without splits). Returns the received rows,
    and with splits given also the rows received from each rank."""
    return synchronize(alltoall_async(array, splits, name, process_set))


def reducescatter_async(array, name=None, op=None, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    return _c.reducescatter_async(array, op, name, process_set, prescale_factor,
                                  postscale_factor)


def reducescatter(array, name=None, op=None, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Reduces (Average or Sum) and gives each rank its part of the first dimension."""
    return synchronize(reducescatter_async(array, name, op, process_set, prescale_factor,
                                           postscale_factor))


def grouped_reducescatter_async(arrays, name=None, op=None, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    return _c.grouped_reducescatter_async(arrays, op, name, process_set, prescale_factor,
                                          postscale_factor)


def grouped_reducescatter(arrays, name=None, op=None, process_set=global_process_set,
                          prescale_factor=1.0, postscale_factor=1.0):
    return synchronize(grouped_reducescatter_async(arrays, name, op, process_set,
                                                   prescale_factor, postscale_factor))


def barrier(process_set=global_process_set):
    _c.barrier(process_set)


def join(device=-1):
    return _c.join(device)


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Pickles obj on root_rank and unpickles it everywhere else. Unpickling runs code the
    sender chose: use it between trusted peers only (the ranks of one job)."""
    return _c.broadcast_object(obj, root_rank, name, process_set)


def allgather_object(obj, name=None, process_set=global_process_set):
    """Every rank's obj, in rank order (pickled: trusted peers only)."""
    return _c.allgather_object(obj, name, process_set)
