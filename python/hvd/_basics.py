"""Joining the job, topology, process sets, build queries: the framework-independent part of
the API, over the compiled core (hvd._core)."""
from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import Iterable, List, Optional, Sequence, Union

from hvd import _core, _handles

__all__ = [
    'Adasum',
    'Average',
    'HorovodInternalError',
    'HostsUpdatedInterrupt',
    'Max',
    'Min',
    'OperationRejectedError',
    'ProcessSet',
    'Product',
    'Sum',
    'add_process_set',
    'ccl_built',
    'cross_rank',
    'cross_size',
    'cuda_built',
    'ddl_built',
    'gloo_built',
    'gloo_enabled',
    'global_process_set',
    'init',
    'is_homogeneous',
    'is_initialized',
    'local_rank',
    'local_size',
    'mpi_built',
    'mpi_enabled',
    'mpi_threads_supported',
    'nccl_built',
    'rank',
    'remove_process_set',
    'rocm_built',
    'shutdown',
    'size',
    'start_timeline',
    'stop_timeline',
]

HorovodInternalError = _core.HorovodInternalError
# Raised alike on every rank when the ranks' operation could not run (they disagreed on it, it
# needed a joined rank); the job goes on. A HorovodInternalError.
OperationRejectedError = _core.OperationRejectedError


class HostsUpdatedInterrupt(RuntimeError):
    """Raised by an elastic job's ``state.commit()`` on every rank at once when hvdrun has formed
    a newer round (hosts joined or left); ``hvd.elastic.run`` catches it and moves the job to
    the new round. ``skip_sync``: the new round needs no broadcast of the state."""

    def __init__(self, message="", skip_sync=False):
        super().__init__(message)
        self.skip_sync = skip_sync


# Reduction operations, with Horovod's names. Adasum: allreduce only, float tensors in host
# memory, a power-of-two number of ranks (the engine says which rule a call broke).
Average = _core.REDUCE_OPS["average"]
Sum = _core.REDUCE_OPS["sum"]
Min = _core.REDUCE_OPS["min"]
Max = _core.REDUCE_OPS["max"]
Product = _core.REDUCE_OPS["product"]
Adasum = _core.REDUCE_OPS["adasum"]

_OP_NAMES = {Average: "Average", Sum: "Sum", Min: "Min", Max: "Max", Product: "Product",
             Adasum: "Adasum"}


def check_reduce_op(op, what: str) -> int:
    if op not in _OP_NAMES:
        raise ValueError(f"{what}: unknown reduce op {op!r}; use hvd.Average, hvd.Sum, "
                         "hvd.Min, hvd.Max, hvd.Product or hvd.Adasum")
    return op


class ProcessSet:
    """A subset of the job's ranks that runs collectives among themselves.

    Create it with the ranks before ``init(process_sets=[...])`` (static) or register it later
    with ``add_process_set`` (dynamic, collective: every rank must call it)."""

    def __init__(self, ranks: Iterable[int]):
        self.ranks: List[int] = sorted(int(r) for r in ranks)
        self.process_set_id: Optional[int] = None

    def _require_id(self) -> int:
        if self.process_set_id is None:
            raise ValueError(f"process set {self.ranks} is not registered: pass it to "
                             "hvd.init(process_sets=...) or hvd.add_process_set()")
        return self.process_set_id

    def size(self) -> int:
        self._require_id()
        return len(self.ranks)

    def rank(self) -> int:
        """This process's rank within the set, or -1 when it is not a member."""
        self._require_id()
        me = _core.rank()
        return self.ranks.index(me) if me in self.ranks else -1

    def included(self) -> bool:
        self._require_id()
        return _core.rank() in self.ranks

    def __repr__(self) -> str:
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0

_lock = threading.Lock()
_registered: dict = {}  # id -> ProcessSet
_homogeneous: Optional[bool] = None


def init(comm=None, process_sets: Optional[Sequence[Union[ProcessSet, Sequence[int]]]] = None):
    """Joins the job described by the HVD_* environment hvdrun sets (a single-rank job without
    it). A second call while initialised does nothing; after ``shutdown`` it joins anew."""
    global _homogeneous
    if comm is not None:
        raise ValueError("hvd.init(comm=...): hvd does not run on MPI communicators; use "
                         "process_sets to run collectives on a subset of ranks")
    with _lock:
        if _core.is_initialized():
            return
        sets = [p if isinstance(p, ProcessSet) else ProcessSet(p) for p in (process_sets or [])]
        _core.init([p.ranks for p in sets] if process_sets is not None else None)
        global_process_set.ranks = list(range(_core.size()))
        _registered.clear()
        _registered[0] = global_process_set
        static_ids = sorted(i for i in _core.process_set_ids() if i != 0)
        if process_sets is not None:
            if len(static_ids) != len(sets):
                raise HorovodInternalError(f"init: {len(sets)} process sets asked for, "
                                           f"{len(static_ids)} created")
            for ps, ps_id in zip(sets, static_ids):
                ps.process_set_id = ps_id
                _registered[ps_id] = ps
        else:  # sets from HVD_PROCESS_SETS
            for ps_id in static_ids:
                ps = ProcessSet(_core.process_set_ranks(ps_id))
                ps.process_set_id = ps_id
                _registered[ps_id] = ps
        # Every rank learns every host's rank count, so all give the same answer.
        import numpy as np
        local = np.array([_core.local_size()], dtype=np.int32)
        h = _core.enqueue(_core.OP_TYPES["allgather"], "hvd.init.local_sizes", [local], [])
        sizes = np.from_dlpack(h.wait()[0][0])
        _homogeneous = bool((sizes == sizes[0]).all())
        global _last_rank
        _last_rank = _core.rank()


# The rank of the last job this process joined, kept after shutdown: hvd.run's workers report
# their result under it (an elastic worker's rank changes between rounds).
_last_rank: Optional[int] = None


def last_rank() -> Optional[int]:
    return _last_rank


def shutdown():
    """Leaves the job (collective: waits for every rank). ``init`` may be called again. Handles
    of asynchronous operations not yet synchronized are dropped: synchronizing one later raises
    HorovodInternalError naming its operation."""
    with _lock:
        try:
            _core.shutdown()
        finally:
            _handles.drop_all()
        for ps in _registered.values():
            if ps is not global_process_set:
                ps.process_set_id = None
        _registered.clear()


# A script that never calls shutdown() still leaves the job in order (collectively, so ranks
# that finish first do not break their peers' links). A rank dying of an unhandled exception
# leaves at once instead: its peers' operations fail naming it, and hvdrun reports it first.
_dying_of_exception = False
_previous_excepthook = sys.excepthook


def _excepthook(kind, value, traceback):
    global _dying_of_exception
    _dying_of_exception = True
    _previous_excepthook(kind, value, traceback)


def _at_exit():
    if not _core.is_initialized():
        return
    if _dying_of_exception:
        # Exit now, before the peers notice the broken links and fail too: the launcher then
        # reports this rank, the root cause. Interpreter teardown is skipped; what it would
        # flush is flushed here.
        import logging
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(1)
    try:
        shutdown()
    except Exception as e:
        # An exception in an atexit function leaves the exit code 0: this rank's failure (it
        # left while its peers waited in join) must reach the launcher.
        print(f"hvd: shutdown failed: {e}", file=sys.stderr, flush=True)
        try:
            sys.stdout.flush()
        except Exception:
            pass
        os._exit(1)


sys.excepthook = _excepthook
atexit.register(_at_exit)


def is_initialized() -> bool:
    return _core.is_initialized()


def _query(fn):
    def query() -> int:
        if not _core.is_initialized():
            raise ValueError(f"hvd.{fn.__name__}() called before hvd.init()")
        return fn()

    query.__name__ = fn.__name__
    query.__doc__ = fn.__doc__
    return query


rank = _query(_core.rank)
size = _query(_core.size)
local_rank = _query(_core.local_rank)
local_size = _query(_core.local_size)
cross_rank = _query(_core.cross_rank)
cross_size = _query(_core.cross_size)


def is_homogeneous() -> bool:
    """True when every host runs the same number of ranks."""
    if not _core.is_initialized():
        raise ValueError("hvd.is_homogeneous() called before hvd.init()")
    return bool(_homogeneous)


def process_set_id(process_set: Optional[ProcessSet]) -> int:
    if process_set is None:
        return 0
    if not isinstance(process_set, ProcessSet):
        raise ValueError(f"process_set must be an hvd.ProcessSet, not {type(process_set).__name__}")
    return process_set._require_id()


def add_process_set(process_set: Union[ProcessSet, Sequence[int]]) -> ProcessSet:
    """Registers a process set on every rank (collective). Raises ValueError naming the reason
    for duplicate or out-of-range ranks."""
    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    if ps.process_set_id is not None:
        raise ValueError(f"{ps} is already registered")
    h = _core.enqueue(_core.OP_TYPES["add_process_set"], "", [], [], set_ranks=ps.ranks)
    ps.process_set_id = h.wait()[2]
    _registered[ps.process_set_id] = ps
    return ps


def remove_process_set(process_set: ProcessSet) -> bool:
    """Removes a dynamically added process set on every rank (collective). Returns False when
    it was not registered."""
    if process_set.process_set_id in (None, 0):
        return False
    ps_id = process_set.process_set_id
    h = _core.enqueue(_core.OP_TYPES["remove_process_set"], "", [], [], set_ranks=[ps_id])
    h.wait()
    process_set.process_set_id = None
    _registered.pop(ps_id, None)
    return True


def start_timeline(file_path: str, mark_cycles: bool = False):
    """Starts writing the Chrome-trace timeline (rank 0 writes it). `mark_cycles` adds a
    CYCLE_START mark for each list of work rank 0 dispatches."""
    _core.start_timeline(str(file_path), bool(mark_cycles))


def stop_timeline():
    _core.stop_timeline()


# Build queries, as Horovod names them. hvd's host collectives are its own TCP algorithms, not
# MPI or Gloo; GPU tensors go through NCCL when the build has it (hvd._core.build_info()).
def mpi_built() -> bool:
    return False


def mpi_enabled() -> bool:
    return False


def mpi_threads_supported() -> bool:
    return False


def gloo_built() -> bool:
    return False


def gloo_enabled() -> bool:
    return False


def nccl_built() -> int:
    """NCCL's version code (e.g. 22809 for 2.28.9) when built with NCCL, else 0."""
    return _core.build_info()["nccl_version_code"]


def ddl_built() -> bool:
    return False


def ccl_built() -> bool:
    return False


def cuda_built() -> bool:
    return bool(_core.build_info()["cuda"])


def rocm_built() -> bool:
    return False
