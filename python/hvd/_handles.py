"""Integer handles for asynchronous operations, as Horovod's API hands them out: each maps to
the core's handle and to the step that turns the core's result into the frontend's."""
from __future__ import annotations

import itertools
import threading
from typing import Any, Callable, Dict, Tuple


_lock = threading.Lock()
_pending: Dict[int, Tuple[Any, Callable, bool]] = {}
_ids = itertools.count(1)


def register(core_handle, finish: Callable, as_numpy: bool = False) -> int:
    """`finish(outputs, received_splits, value)` makes the value synchronize() returns; outputs
    are NumPy arrays with `as_numpy`, DLPack producers (hvd._core.Buffer) otherwise."""
    with _lock:
        handle = next(_ids)
        _pending[handle] = (core_handle, finish, as_numpy)
    return handle


def _lookup(handle: int) -> Tuple[Any, Callable, bool]:
    with _lock:
        entry = _pending.get(handle)
    if entry is None:
        raise ValueError(f"handle {handle!r} is unknown: it was never returned by an *_async "
                         "call, or synchronize() already consumed it")
    return entry


def poll(handle: int) -> bool:
    """True when the operation has finished; synchronize() then returns without blocking."""
    return _lookup(handle)[0].poll()


def synchronize(handle: int):
    """Waits for the operation and returns its result; raises HorovodInternalError naming the
    operation if it failed."""
    core_handle, finish, as_numpy = _lookup(handle)
    try:
        outputs, splits, value = core_handle.wait(as_numpy=as_numpy)
    finally:
        with _lock:
            _pending.pop(handle, None)
    return finish(outputs, splits, value)
