"""Integer handles for asynchronous operations, as Horovod's API hands them out: each maps to
the core's handle and to the step that turns the core's result into the frontend's.

hvd.shutdown() empties the table (drop_all): a handle from before it then fails, naming its
operation, instead of reaching a result of a runtime that is gone."""
from __future__ import annotations

import itertools
import threading
from typing import Any, Callable, Dict, Tuple

from hvd import _core


_lock = threading.Lock()
_pending: Dict[int, Tuple[Any, Callable, bool]] = {}
# The handles shutdown() dropped, with the operation each was for (a short string each).
_dropped: Dict[int, str] = {}
_ids = itertools.count(1)


def register(core_handle, finish: Callable, as_numpy: bool = False) -> int:
    """`finish(outputs, received_splits, value)` makes the value synchronize() returns; outputs
    are NumPy arrays with `as_numpy`, DLPack producers (hvd._core.Buffer) otherwise."""
    with _lock:
        handle = next(_ids)
        _pending[handle] = (core_handle, finish, as_numpy)
    return handle


def drop_all():
    """hvd.shutdown(): forgets every outstanding handle. Call it after the core's shutdown, which
    has finished or failed their operations, so dropping them waits for nothing."""
    global _pending
    with _lock:
        dropped, _pending = _pending, {}
        for handle, (core_handle, _, _) in dropped.items():
            _dropped[handle] = core_handle.description
    dropped.clear()  # outside the lock: a core handle's destructor may release the GIL


def _lookup(handle: int, caller: str) -> Tuple[Any, Callable, bool]:
    with _lock:
        entry = _pending.get(handle)
        dropped = _dropped.get(handle) if entry is None else None
    if dropped is not None:
        raise _core.HorovodInternalError(
            f"{caller}({handle!r}): {dropped}: hvd.shutdown() was called before this handle was "
            "synchronized, and its result is gone; synchronize handles before shutting down")
    if entry is None:
        raise ValueError(f"handle {handle!r} is unknown: it was never returned by an *_async "
                         "call, or synchronize() already consumed it")
    return entry


def poll(handle: int) -> bool:
    """True when the operation has finished; synchronize() then returns without blocking."""
    return _lookup(handle, "poll")[0].poll()


def synchronize(handle: int):
    """Waits for the operation and returns its result; raises HorovodInternalError naming the
    operation if it failed."""
    core_handle, finish, as_numpy = _lookup(handle, "synchronize")
    try:
        outputs, splits, value = core_handle.wait(as_numpy=as_numpy)
    finally:
        with _lock:
            _pending.pop(handle, None)
    return finish(outputs, splits, value)
