"""A rank's call of the user's function, as data: what hvd.run's workers send back to the
driver, hvd.spark.run's rank processes write for their task, and hvd.ray's actors return. A
failure is its traceback, with whether it was hvd's HorovodInternalError (mostly the
consequence of another rank's failure) and when it happened, so that the report can name the
rank whose own error it was (hvd/_ranks.py: first_failure)."""
import os
import pickle
import time
import traceback
from typing import NamedTuple


class CallOutcome(NamedTuple):
    ok: bool
    value: object         # the return value, or the traceback text
    peer_failure: bool    # the error was hvd's HorovodInternalError
    finished: float       # time.time() when the call ended


def call(func, args=(), kwargs=None) -> CallOutcome:
    try:
        return CallOutcome(True, func(*args, **(kwargs or {})), False, time.time())
    except BaseException as e:  # noqa: B036  (SystemExit and KeyboardInterrupt fail it too)
        peer = any(c.__name__ == "HorovodInternalError" for c in type(e).__mro__)
        return CallOutcome(False, traceback.format_exc(), peer, time.time())


def dumps(outcome: CallOutcome) -> bytes:
    """The outcome pickled (cloudpickle); a result that cannot be pickled becomes a failure
    that says so, naming the rank."""
    import cloudpickle
    try:
        return cloudpickle.dumps(tuple(outcome))
    except Exception as e:  # noqa: BLE001  (whatever the result's pickling raises)
        failure = CallOutcome(False, f"rank {os.environ.get('HVD_RANK')}'s result cannot be "
                                     f"pickled: {e!r}", False, outcome.finished)
        return pickle.dumps(tuple(failure))


def loads(data: bytes) -> CallOutcome:
    import cloudpickle
    return CallOutcome(*cloudpickle.loads(data))


def exit_if_failed(outcome: CallOutcome) -> None:
    """A rank whose function raised exits at once, as a crashed rank would: a clean shutdown
    would wait for peers that wait for it in a collective."""
    if outcome.ok:
        return
    import sys
    sys.stdout.flush()
    sys.stderr.write(outcome.value)
    sys.stderr.flush()
    os._exit(1)
