"""The collectives, written once for any array type. A frontend (hvd.numpy, hvd.torch) gives an
`ArrayAdapter` that says how to make an array contiguous, allocate an output like an input, and
wrap an output the engine allocated (hvd._core.Buffer, a DLPack producer); everything else -
argument checks, naming, handles, scale factors - is here."""
from __future__ import annotations

import pickle
from typing import Any, List, Optional, Sequence

import numpy as _np

from hvd import _basics, _core, _handles

_ALLREDUCE = _core.OP_TYPES["allreduce"]
_ALLGATHER = _core.OP_TYPES["allgather"]
_BROADCAST = _core.OP_TYPES["broadcast"]
_ALLTOALL = _core.OP_TYPES["alltoall"]
_REDUCESCATTER = _core.OP_TYPES["reducescatter"]
_BARRIER = _core.OP_TYPES["barrier"]
_JOIN = _core.OP_TYPES["join"]


class ArrayAdapter:
    """What the collectives need to know about one array type."""

    name = "array"
    outputs_as_numpy = False  # engine-allocated outputs arrive as NumPy arrays, not Buffers
    # synchronize() of an alltoall returns (output, received_splits) even without splits (the
    # TensorFlow frontend's gradient needs them); otherwise the output alone, as Horovod.
    alltoall_always_returns_splits = False

    def is_array(self, x) -> bool:
        raise NotImplementedError

    def unsupported(self, x) -> Optional[str]:
        """Why the collectives cannot take this array (a layout, a device), or None."""
        return None

    def dtype_name(self, x) -> str:
        """The array's element type in the core's spelling (float32, bool, ...)."""
        raise NotImplementedError

    def exported(self, x):
        """The object handed to the core (must support DLPack)."""
        return x

    def stream_of(self, x) -> int:
        """The CUDA stream (cudaStream_t as an int) the array's pending work is queued on; the
        collective waits for it. 0 for host arrays (and the legacy default stream)."""
        return 0

    def contiguous(self, x):
        raise NotImplementedError

    def is_contiguous(self, x) -> bool:
        raise NotImplementedError

    # How a user makes an array contiguous, for the error that asks them to.
    contiguous_hint = "x.contiguous()"

    def is_writable(self, x) -> bool:
        return True

    def mark_written(self, x) -> None:
        """Records that an in-place collective writes `x` (torch: its autograd version)."""

    def inplace_problem(self, x) -> Optional[str]:
        """Why the array cannot be written in place although contiguous and writable (NumPy's
        non-native byte order), or None. Out of place, contiguous() converts such arrays."""
        return None

    def empty_like(self, x):
        raise NotImplementedError

    def from_buffer(self, buffer):
        """The frontend's array for an output the engine allocated."""
        raise NotImplementedError

    def scaled(self, x, factor: float):
        """A new array x * factor, same dtype."""
        raise NotImplementedError

    def scale_(self, x, factor: float):
        """x * factor, written into x where arrays are mutable; returns the scaled array."""
        raise NotImplementedError

    def output(self, x):
        """The frontend's array for an output empty_like() made (TensorFlow: a Buffer)."""
        return x

    def splits_array(self, values: Sequence[int]):
        """alltoall's received splits."""
        return self.int64_array(values)

    def int64_array(self, values: Sequence[int]):
        raise NotImplementedError

    def bytes_array(self, data: bytes):
        raise NotImplementedError

    def to_bytes(self, x) -> bytes:
        raise NotImplementedError


def _label(op: str, name: Optional[str]) -> str:
    if name is not None and not isinstance(name, str):
        # Most often an argument given by position to the wrong parameter.
        raise ValueError(f"{op}: name must be a string, got {type(name).__name__} {name!r} "
                         "(pass op, root_rank and process_set by keyword)")
    return f'{op} "{name}"' if name else op


class Collectives:
    def __init__(self, adapter: ArrayAdapter):
        self.a = adapter

    def _register(self, core_handle, finish) -> int:
        return _handles.register(core_handle, finish, self.a.outputs_as_numpy)

    # -- argument helpers --------------------------------------------------------------------
    def _stream(self, tensors) -> int:
        return self.a.stream_of(tensors[0]) if tensors else 0

    def _check(self, x, what: str):
        if not self.a.is_array(x):
            raise ValueError(f"{what}: expected a {self.a.name}, got {type(x).__name__}")
        reason = self.a.unsupported(x)
        if reason:
            raise ValueError(f"{what}: {reason}")
        # Checked here, not only in the core: an array DLPack cannot carry (numpy's object or
        # longdouble arrays) would otherwise reach nanobind and fail as a TypeError.
        dtype = self.a.dtype_name(x)
        if dtype not in _core.DTYPES:
            raise ValueError(f"{what}: unsupported dtype {dtype} (hvd supports "
                             f"{', '.join(_core.DTYPES)})")

    def _inplace_target(self, x, what: str):
        self._check(x, what)
        if not self.a.is_contiguous(x):
            raise ValueError(f"{what}: in-place operation on a non-contiguous {self.a.name} "
                             f"(shape {tuple(x.shape)}); make it contiguous first "
                             f"({self.a.contiguous_hint}) or use the out-of-place function")
        if not self.a.is_writable(x):
            raise ValueError(f"{what}: in-place operation on a read-only {self.a.name} "
                             f"(shape {tuple(x.shape)}); pass a writable copy or use the "
                             "out-of-place function")
        problem = self.a.inplace_problem(x)
        if problem:
            raise ValueError(f"{what}: in-place operation on {problem}")
        self.a.mark_written(x)
        return x

    @staticmethod
    def _op(op, average, what: str) -> int:
        if average is not None:
            if op is not None:
                raise ValueError(f"{what}: pass op or the deprecated average, not both")
            op = _basics.Average if average else _basics.Sum
        if op is None:
            op = _basics.Average
        return _basics.check_reduce_op(op, what)

    def _targets(self, tensors, inplace: bool, what: str):
        """(inputs, outputs) of allreduce and broadcast: the tensors themselves in place,
        otherwise contiguous inputs and fresh outputs."""
        if inplace:
            inputs = [self._inplace_target(t, what) for t in tensors]
            return inputs, inputs
        for t in tensors:
            self._check(t, what)
        inputs = [self.a.contiguous(t) for t in tensors]
        return inputs, [self.a.empty_like(t) for t in inputs]

    def _exported_outputs(self, outputs, inplace: bool) -> list:
        # In place the core gets no outputs and writes the inputs: one DLPack export, not two.
        return [] if inplace else [self.a.exported(t) for t in outputs]

    # -- allreduce ---------------------------------------------------------------------------
    def grouped_allreduce_async(self, tensors, op=None, name=None, prescale_factor=1.0,
                                postscale_factor=1.0, process_set=None, inplace=False,
                                average=None) -> int:
        return self._allreduce_async(list(tensors), op, name, prescale_factor,
                                     postscale_factor, process_set, inplace, average,
                                     grouped=True)

    def allreduce_async(self, tensor, op=None, name=None, prescale_factor=1.0,
                        postscale_factor=1.0, process_set=None, inplace=False,
                        average=None) -> int:
        return self._allreduce_async([tensor], op, name, prescale_factor, postscale_factor,
                                     process_set, inplace, average, grouped=False)

    def allreduce(self, tensor, op=None, name=None, prescale_factor=1.0, postscale_factor=1.0,
                  process_set=None, inplace=False, average=None):
        """allreduce_async and synchronize in one, for the blocking calls: their handle is never
        seen by the caller, so it skips the integer handle table (two locked dict updates, a
        tenth of a small allreduce's time from Python)."""
        core_handle, finish = self._allreduce_submit([tensor], op, name, prescale_factor,
                                                     postscale_factor, process_set, inplace,
                                                     average, grouped=False)
        return finish(*core_handle.wait(as_numpy=self.a.outputs_as_numpy))

    def _allreduce_async(self, tensors, op, name, prescale_factor, postscale_factor,
                         process_set, inplace, average, grouped: bool) -> int:
        return self._register(*self._allreduce_submit(tensors, op, name, prescale_factor,
                                                      postscale_factor, process_set, inplace,
                                                      average, grouped))

    def _allreduce_submit(self, tensors, op, name, prescale_factor, postscale_factor,
                          process_set, inplace, average, grouped: bool):
        """The core's handle and the step that makes the frontend's result from its outputs."""
        what = _label(("grouped_allreduce" if grouped else "allreduce") + ("_" if inplace else ""),
                      name)
        op = self._op(op, average, what)
        inputs, outputs = self._targets(tensors, inplace, what)
        h = _core.enqueue(_ALLREDUCE, name or "", [self.a.exported(t) for t in inputs],
                          self._exported_outputs(outputs, inplace), reduce_op=op,
                          prescale=float(prescale_factor), postscale=float(postscale_factor),
                          process_set=_basics.process_set_id(process_set),
                          stream=self._stream(inputs))
        return h, lambda *_: ([self.a.output(t) for t in outputs] if grouped
                              else self.a.output(outputs[0]))

    def enqueue_inplace_allreduce(self, tensors, op: int, name: str, prescale: float,
                                  postscale: float, process_set_id: int):
        """The core's handle of an in-place (grouped when several tensors) allreduce whose
        arguments the caller has checked once for all steps (DistributedOptimizer: a validated
        op, a name, contiguous gradients of this frontend's type). The core still refuses a
        dtype, layout or device it cannot take, naming the tensor; this path only skips the
        frontend's friendlier checks, which cost more than the enqueue itself when paid for
        every gradient of every step."""
        exported = [self.a.exported(t) for t in tensors]
        return _core.enqueue(_ALLREDUCE, name, exported, [], op, 0, prescale, postscale,
                             process_set_id, [], [], self.a.stream_of(tensors[0]))

    # -- allgather ---------------------------------------------------------------------------
    def grouped_allgather_async(self, tensors, name=None, process_set=None) -> int:
        return self._allgather_async(list(tensors), name, process_set, grouped=True)

    def allgather_async(self, tensor, name=None, process_set=None) -> int:
        return self._allgather_async([tensor], name, process_set, grouped=False)

    def _allgather_async(self, tensors, name, process_set, grouped: bool) -> int:
        what = _label("grouped_allgather" if grouped else "allgather", name)
        for t in tensors:
            self._check(t, what)
        inputs = [self.a.contiguous(t) for t in tensors]
        h = _core.enqueue(_ALLGATHER, name or "", [self.a.exported(t) for t in inputs], [],
                          process_set=_basics.process_set_id(process_set),
                          stream=self._stream(inputs))

        def finish(outs, *_):
            results = [self.a.from_buffer(b) for b in outs]
            return results if grouped else results[0]

        return self._register(h, finish)

    # -- broadcast ---------------------------------------------------------------------------
    def broadcast_async(self, tensor, root_rank, name=None, process_set=None,
                        inplace=False) -> int:
        what = _label("broadcast_" if inplace else "broadcast", name)
        inputs, outputs = self._targets([tensor], inplace, what)
        h = _core.enqueue(_BROADCAST, name or "", [self.a.exported(inputs[0])],
                          self._exported_outputs(outputs, inplace), root=int(root_rank),
                          process_set=_basics.process_set_id(process_set),
                          stream=self._stream(inputs))
        return self._register(h, lambda *_: self.a.output(outputs[0]))

    # -- alltoall ----------------------------------------------------------------------------
    def alltoall_async(self, tensor, splits=None, name=None, process_set=None) -> int:
        """synchronize() returns (output, received_splits) when splits were given, else the
        output alone (as horovod.torch; see alltoall_always_returns_splits)."""
        what = _label("alltoall", name)
        self._check(tensor, what)
        inp = self.a.contiguous(tensor)
        split_list = [] if splits is None else [int(s) for s in _as_int_list(splits, what)]
        h = _core.enqueue(_ALLTOALL, name or "", [self.a.exported(inp)], [], splits=split_list,
                          process_set=_basics.process_set_id(process_set),
                          stream=self._stream([inp]))

        def finish(outs, received, _):
            out = self.a.from_buffer(outs[0])
            if splits is None and not self.a.alltoall_always_returns_splits:
                return out
            return out, self.a.splits_array(received[0])

        return self._register(h, finish)

    # -- reducescatter -----------------------------------------------------------------------
    def grouped_reducescatter_async(self, tensors, op=None, name=None, process_set=None,
                                    prescale_factor=1.0, postscale_factor=1.0) -> int:
        return self._reducescatter_async(list(tensors), op, name, process_set, prescale_factor,
                                         postscale_factor, grouped=True)

    def reducescatter_async(self, tensor, op=None, name=None, process_set=None,
                            prescale_factor=1.0, postscale_factor=1.0) -> int:
        return self._reducescatter_async([tensor], op, name, process_set, prescale_factor,
                                         postscale_factor, grouped=False)

    def _reducescatter_async(self, tensors, op, name, process_set, prescale_factor,
                             postscale_factor, grouped: bool) -> int:
        what = _label("grouped_reducescatter" if grouped else "reducescatter", name)
        op = self._op(op, None, what)
        if op not in (_basics.Sum, _basics.Average):
            raise ValueError(f"{what}: reducescatter supports op=Sum and op=Average only")
        for t in tensors:
            self._check(t, what)
        # The core's reducescatter has no scale factors: they are applied here.
        inputs = [self.a.scaled(t, prescale_factor) if prescale_factor != 1.0
                  else self.a.contiguous(t) for t in tensors]
        h = _core.enqueue(_REDUCESCATTER, name or "", [self.a.exported(t) for t in inputs], [],
                          reduce_op=op, process_set=_basics.process_set_id(process_set),
                          stream=self._stream(inputs))

        def finish(outs, *_):
            results = [self.a.from_buffer(b) for b in outs]
            if postscale_factor != 1.0:
                results = [self.a.scale_(r, postscale_factor) for r in results]
            return results if grouped else results[0]

        return self._register(h, finish)

    # -- synchronisation ---------------------------------------------------------------------
    def barrier(self, process_set=None):
        h = _core.enqueue(_BARRIER, "", [], [], process_set=_basics.process_set_id(process_set))
        h.wait()

    def join(self, device=-1) -> int:
        """Tells the others this rank has no more batches; returns the last rank to join.
        Until every rank joined, allreduces of the others count this rank as zeros."""
        del device  # host tensors only in this build
        h = _core.enqueue(_JOIN, "", [], [])
        return h.wait()[2]

    # -- objects (pickled: for trusted peers only) -------------------------------------------
    def broadcast_object(self, obj: Any, root_rank: int = 0, name=None, process_set=None):
        name = name or type(obj).__name__
        me = _basics.rank()  # root_rank is a global rank, as in Horovod
        payload = pickle.dumps(obj) if me == root_rank else b""
        length = self.a.int64_array([len(payload)])
        length = _handles.synchronize(self.broadcast_async(
            length, root_rank, f"broadcast_object.{name}.size", process_set, inplace=True))
        n = int(_as_int_list(length, "broadcast_object")[0])
        data = self.a.bytes_array(payload if me == root_rank else bytes(n))
        data = _handles.synchronize(self.broadcast_async(
            data, root_rank, f"broadcast_object.{name}.data", process_set, inplace=True))
        return obj if me == root_rank else pickle.loads(self.a.to_bytes(data))

    def allgather_object(self, obj: Any, name=None, process_set=None) -> List[Any]:
        name = name or type(obj).__name__
        payload = pickle.dumps(obj)
        sizes = _handles.synchronize(self.allgather_async(
            self.a.int64_array([len(payload)]), f"allgather_object.{name}.sizes", process_set))
        data = _handles.synchronize(self.allgather_async(
            self.a.bytes_array(payload), f"allgather_object.{name}.data", process_set))
        blob = self.a.to_bytes(data)
        out, offset = [], 0
        for n in _as_int_list(sizes, "allgather_object"):
            out.append(pickle.loads(blob[offset:offset + n]))
            offset += n
        return out


def _as_int_list(values, what: str) -> List[int]:
    """The integers of a list, array or tensor. Floats are refused, also integral ones, as
    Horovod refuses them: a float tensor made with `empty` holds different garbage on every
    rank, and ranks that disagree on the splits would wait on each other."""
    try:
        if hasattr(values, "tolist"):
            values = values.tolist()
        values = list(values)
    except TypeError:
        raise ValueError(f"{what}: splits must be a sequence of integers, got {values!r}") \
            from None
    if any(isinstance(v, bool) or not isinstance(v, (int, _np.integer)) for v in values):
        raise ValueError(f"{what}: splits must be integers (an integer tensor or list), got "
                         f"{values!r}")
    return [int(v) for v in values]
