"""The replica check (hvd._replicas) for TensorFlow's gradient reductions: Keras's
DistributedOptimizer, DistributedGradientTape and the TF1 DistributedOptimizer call
check_before_reduction() with the variables whose gradients they reduce, before reducing them.
The check of "after update k" runs there, at the (k+1)-th reduction. Where the recipe
broadcasts before training (the TF1 hook, the Keras callback with a built model, or no
broadcast at all) the first check is of the starting weights, before the first reduction; where
it broadcasts after the first update (a custom loop's `if first_batch: broadcast_variables`, the
Keras callback for a model built by its first batch) the first check comes after that update.

Inside a graph (tf.function, a TF1 session) the count of reductions is kept by a py_function
that runs every step, and the comparison by another that runs only when the first says so;
both are ordered among the graph's collectives, as every collective is (mpi_ops._chained).
"""
from __future__ import annotations

import weakref
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from hvd import _core, _replicas
from hvd.tensorflow import mpi_ops

FIX = ("broadcast them from rank 0 (hvd.broadcast_variables(model.variables, root_rank=0) "
       "after the first step or before training, the Keras callback "
       "hvd.callbacks.BroadcastGlobalVariablesCallback(0), or in TF1 "
       "hvd.BroadcastGlobalVariablesHook(0)), and let DistributedGradientTape or "
       "DistributedOptimizer reduce every gradient")


def make_guard(what: str, process_set, first: int) -> Optional[_replicas.Guard]:
    """The guard for one reduction site, or None when there is nothing to compare (the check
    is off, one rank, or this rank is outside the process set). `first`: the updates before
    the first check (0: the starting weights, before the first reduction)."""
    guard = _replicas.Guard(what, process_set, FIX, before_update=True, first=first)
    alone = process_set.size() == 1 and _core.elastic_round() < 0
    if not guard.enabled or alone or not process_set.included():
        return None
    return guard


def _name(v) -> str:
    return getattr(v, "path", None) or getattr(v, "name", None) or "variable"


def _compare(guard: _replicas.Guard, names, shapes, dtypes, values) -> None:
    counts = [int(np.prod(s)) for s in shapes]
    guard.check(_replicas.summarise([v.numpy() for v in values]), counts, names, shapes, dtypes)


def check_before_reduction(guard: Optional[_replicas.Guard], variables: Sequence,
                           updates_done=None) -> None:
    """Compares `variables` across the ranks when the check is due. `updates_done`: the
    updates done so far, as a tensor or variable the ranks keep equal (a Keras optimizer's
    iterations), or None to count the calls here. Eagerly it runs now; in a graph it adds the
    ops that do it at every run of the graph (a py_function counting calls, or with
    `updates_done` only TensorFlow ops until the check is due)."""
    if guard is None:
        return
    variables = list(variables)
    names = [_name(v) for v in variables]
    shapes = [tuple(v.shape) for v in variables]
    dtypes = [tf.as_dtype(v.dtype).name for v in variables]
    if tf.executing_eagerly():
        if updates_done is None:
            run = guard.tick()
        else:
            guard.at(int(updates_done))
            run = guard.due_now()
        if run:
            _compare(guard, names, shapes, dtypes, [tf.convert_to_tensor(v) for v in variables])
        return

    def compare(done, *values):
        # One return: autograph converts this body when the graph is a tf.function.
        counted = int(done) >= 0
        if counted:
            guard.at(int(done))
        run = not counted or guard.due_now()  # False: the repeat's slot, no repeat pending
        if run:
            _compare(guard, names, shapes, dtypes, values)
        return tf.constant(run)

    def build():
        if updates_done is None:
            due = tf.py_function(guard.tick, [], tf.bool, name="hvd_check_replicas_due")
            due.set_shape([])
            done = tf.constant(-1, tf.int64)
        else:
            done = tf.cast(tf.convert_to_tensor(updates_done), tf.int64)
            # The first check's repeat (Guard._confirm_at) is Python state the ranks set alike:
            # its slot, one update later, is entered and compare() decides.
            due = tf.logical_or(tf.equal(done, guard.first), tf.equal(done, guard.first + 1))
            if guard.every > 0:
                due = tf.logical_or(due, tf.logical_and(tf.greater(done, 0),
                                                        tf.equal(done % guard.every, 0)))
        return tf.cond(due,
                       lambda: tf.py_function(
                           compare, [done] + [tf.convert_to_tensor(v) for v in variables],
                           tf.bool, name="hvd_check_replicas"),
                       lambda: tf.constant(False))

    mpi_ops._chained(build)


class TapeGuards:
    """DistributedGradientTape is made anew every step: the guard of a set of sources outlives
    the tape, keyed by the sources' identities. An id is reused once its object is freed, so
    each guard also holds weak references to its sources: a key whose sources are gone (a new
    model built where the last one was freed) gets a new guard, not the old one's count."""

    def __init__(self, limit: int = 64):
        self._guards: Dict[Tuple[int, ...], Tuple[list, Optional[_replicas.Guard]]] = {}
        self._limit = limit

    def get(self, sources: Sequence, process_set) -> Optional[_replicas.Guard]:
        key = (process_set.process_set_id,) + tuple(id(s) for s in sources)
        held = self._guards.get(key)
        if held is not None and all(ref() is s for ref, s in zip(held[0], sources)):
            return held[1]
        if len(self._guards) >= self._limit:  # sources that come and go: start over
            self._guards.clear()
        # Horovod's TF2 recipe broadcasts after the first step: check after it.
        guard = make_guard("DistributedGradientTape", process_set, first=1)
        self._guards[key] = ([_reference(s) for s in sources], guard)
        return guard


def _reference(source):
    """A weak reference where the object allows one, else a strong one (kept as a callable)."""
    try:
        return weakref.ref(source)
    except TypeError:
        return lambda: source


tape_guards = TapeGuards()
