"""Elastic training, framework-independent: Horovod's State, ObjectState and the run loop.

In a job hvdrun started with --min-np/--max-np/--host-discovery-script, workers may fail and
hosts may join while training runs. hvdrun forms a new *round* of the job each time (a new set
of ranks); the training function, wrapped by ``run``, goes on in it:

* a collective that fails because a peer died raises HorovodInternalError: the state goes back
  to its last ``commit()``, the worker leaves the broken round and joins the next one;
* ``commit()`` also asks whether hvdrun has formed a newer round (hosts were added or removed)
  and then raises HostsUpdatedInterrupt on every rank at once, so all of them move together;
* at the start of every round the state of rank 0 (the oldest worker still in the job) is
  broadcast, so workers that just joined start where the others are;
* with ``--elastic-commit-dir DIR`` (HVD_ELASTIC_COMMIT_DIR) rank 0 also writes each commit to
  DIR/hvd-elastic-commit.pkl, and ``run`` starts from that file when it exists: the training
  survives losing every worker, and a new run of the job resumes.
"""
from __future__ import annotations

import copy
import functools
import os
import pickle
import sys
from typing import Callable, List

import numpy as np

from hvd import _basics, _core
from hvd._basics import HorovodInternalError, HostsUpdatedInterrupt

__all__ = ["ObjectState", "State", "run_fn"]


class State:
    """What a training function must keep across rounds. Subclasses say how to ``save`` (keep a
    copy), ``restore`` (go back to the copy) and ``sync`` (take rank 0's)."""

    def __init__(self):
        self._reset_callbacks: List[Callable[[], None]] = []

    def register_reset_callbacks(self, callbacks):
        """Functions called after every change of round (e.g. to rescale the learning rate by
        the new ``hvd.size()``)."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp=None, update_res=None):
        """Horovod's notification hook; hvd learns of new rounds in check_host_updates."""

    def commit(self):
        """Saves the state (rank 0 also to the commit directory, if any), then raises
        HostsUpdatedInterrupt (on every rank) when hvdrun has formed a newer round. Call it every
        few batches: a failure loses the work since."""
        self.save()
        _write_commit(self)
        self.check_host_updates()

    def check_host_updates(self):
        """Raises HostsUpdatedInterrupt on every rank when hvdrun has formed a newer round than
        the one this job runs in. The ranks agree through an allreduce of the newest round each
        of them saw, so none moves on alone."""
        mine = _core.elastic_round()
        if mine < 0:
            return  # not an elastic job
        seen = np.array([_core.elastic_newest_round()], dtype=np.int64)
        handle = _core.enqueue(_core.OP_TYPES["allreduce"], "hvd.elastic.check_host_updates",
                               [seen], [seen], reduce_op=_basics.Max)
        handle.wait()
        if int(seen[0]) > mine:
            raise HostsUpdatedInterrupt(f"hvdrun formed round {int(seen[0])}; this job runs in "
                                        f"round {mine}", skip_sync=False)

    def save(self):
        raise NotImplementedError(f"{type(self).__name__} does not say how to save its state")

    def restore(self):
        raise NotImplementedError(f"{type(self).__name__} does not say how to restore its state")

    def sync(self):
        raise NotImplementedError(f"{type(self).__name__} does not say how to sync its state")

    def reset(self):
        """Horovod's hook for subclasses that keep per-round objects."""

    def committed(self):
        """What the last ``save`` kept, picklable: what the commit directory holds."""
        raise NotImplementedError(f"{type(self).__name__} cannot be written to a commit "
                                  "directory: it does not say what its commit holds")

    def load_committed(self, committed):
        """Makes ``committed`` (from ``committed()``) the last commit, and restores it."""
        raise NotImplementedError(f"{type(self).__name__} cannot be read from a commit "
                                  "directory: it does not say what its commit holds")


class ObjectState(State):
    """Plain Python attributes (epoch, batch, anything picklable), kept across rounds:
    ``state = ObjectState(bcast_object, get_rank, epoch=0, batch=0)``; ``state.epoch``."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        super().__init__()
        self._bcast_object = bcast_object
        self._get_rank = get_rank
        self._saved_state = kwargs
        self._set_attrs()

    def save(self):
        self._saved_state = {name: copy.deepcopy(getattr(self, name))
                             for name in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self.save()
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for name, value in self._saved_state.items():
            setattr(self, name, copy.deepcopy(value))

    def committed(self):
        return {"attributes": self._saved_state}

    def load_committed(self, committed):
        self._saved_state = dict(committed["attributes"])
        self.restore()


COMMIT_FILE = "hvd-elastic-commit.pkl"


def _commit_dir():
    return _core.elastic_commit_dir() if _core.is_initialized() else ""


def _write_commit(state):
    """Rank 0 writes the state's last commit to the commit directory, replacing the previous
    one only once the new one is complete."""
    directory = _commit_dir()
    if not directory or _basics.rank() != 0:
        return
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, COMMIT_FILE)
    partial = f"{path}.{os.getpid()}.partial"
    try:
        with open(partial, "wb") as f:
            pickle.dump(state.committed(), f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)
    except BaseException:
        try:
            os.unlink(partial)
        except OSError:
            pass
        raise


def _read_commit(state):
    """On rank 0, makes the commit directory's commit the state's (the first sync then gives
    it to every rank). Says so on stderr: the training does not start where the script
    begins."""
    directory = _commit_dir()
    if not directory or _basics.rank() != 0:
        return
    path = os.path.join(directory, COMMIT_FILE)
    if not os.path.exists(path):
        return
    with open(path, "rb") as f:
        state.load_committed(pickle.load(f))
    print(f"hvd: elastic: resuming from the commit in {path}", file=sys.stderr, flush=True)


def _rejoin(reset):
    """Leaves the current round and joins the next; an init that fails (a peer of the new round
    died before it formed) waits for the round after it."""
    while True:
        reset()
        if _basics.is_initialized():
            return


def run_fn(func, reset):
    """Wraps ``func(state, ...)`` so that it goes on through changes of round; ``reset`` leaves
    the current round and joins the next (shutdown, then init)."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        skip_sync = False
        _read_commit(state)
        while True:
            try:
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError:
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                skip_sync = e.skip_sync
            _rejoin(reset)
            state.on_reset()

    return wrapper


def reset_runtime(init, shutdown):
    """The reset of run_fn for a frontend: shutdown (at once after a failure: the broken round's
    engine has stopped), then init, which waits for hvdrun's next round. An init that fails with
    HorovodInternalError leaves hvd uninitialised, and _rejoin tries the next round."""

    def reset():
        shutdown()
        try:
            init()
        except HorovodInternalError as e:
            _core.log_warn("elastic", f"joining the next round failed ({e}); waiting for the "
                                      "round after it")

    return reset
