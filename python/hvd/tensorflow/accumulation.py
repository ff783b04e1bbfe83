"""backward_passes_per_step for TensorFlow optimizers (tf.keras 2's, and tf.compat.v1.train's;
Keras 3 has gradient_accumulation_steps), on the shared counting of hvd._accumulation: each
backward pass adds its gradients to this rank's sums; the pass that completes a step reduces the
sums (times BackwardPasses.scale) over the ranks, zeroes them, and lets the update through. The
other passes update nothing but count as iterations (Keras) or global steps (TF1), as Horovod's
aggregation helpers do.

The sums live in variables, so that the counting works inside a compiled train step or a TF1
graph as well as eagerly; `counter` is the passes since the last update (Horovod's tests read
it).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import tensorflow as tf

from hvd._accumulation import BackwardPasses


class GradientAccumulation:
    def __init__(self, passes: BackwardPasses, reduce: Callable, local_variables: bool = False):
        """`reduce(grads, variables)` returns the gradients reduced over the ranks.
        `local_variables`: the sums and the counter are TF1 local variables (initialised by
        tf.compat.v1.local_variables_initializer, left out of checkpoints), as Horovod's."""
        self.passes = passes
        self.steps = passes.steps
        self._reduce = reduce
        self._local = local_variables
        with tf.init_scope():
            self.counter = self._variable(tf.zeros([], tf.int32), "hvd_backward_passes")
        self._sums: Dict[int, tf.Variable] = {}
        self._ready = None  # in a graph: the last add()'s "this pass completes the step"

    def _variable(self, initial, name):
        if self._local:
            return tf.compat.v1.Variable(initial, trainable=False, name=name,
                                         collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])
        return tf.Variable(initial, trainable=False, name=name)

    def _sum_for(self, variable, grad) -> tf.Variable:
        key = id(variable)
        if key not in self._sums:
            with tf.init_scope():  # outside a tf.function's graph and its branches
                self._sums[key] = self._variable(tf.zeros(variable.shape, grad.dtype),
                                                 "hvd_gradient_sum")
        return self._sums[key]

    def add(self, grads: List[Optional[tf.Tensor]], variables) -> List[Optional[tf.Tensor]]:
        """Adds one backward pass; returns the reduced gradients on the pass that completes a
        step (the sums so far on the others, which apply() does not apply)."""
        sums, adds = [], []
        for g, v in zip(grads, variables):
            if g is None:
                sums.append(None)
                continue
            dense = tf.convert_to_tensor(g)  # tf.IndexedSlices add up densely
            total = self._sum_for(v, dense)
            adds.append(total.assign_add(dense))
            sums.append(total)
        # A TF1 graph orders only what it is told to (a tf.function orders stateful ops itself).
        with tf.control_dependencies(adds):
            count = self.counter.assign_add(1)
        present = [i for i, s in enumerate(sums) if s is not None]

        def reduce_and_restart():
            values = [sums[i].read_value() for i in present]
            if self.passes.average:
                values = [x / tf.cast(self.steps, x.dtype) for x in values]
            full = [None] * len(sums)
            for i, x in zip(present, values):
                full[i] = x
            reduced = self._reduce(full, variables)
            out = [reduced[i] for i in present]
            with tf.control_dependencies(out):
                restart = [sums[i].assign(tf.zeros_like(sums[i])) for i in present]
                restart.append(self.counter.assign(0))
            with tf.control_dependencies(restart):
                return [tf.identity(x) for x in out]

        def sums_so_far():
            return [sums[i].read_value() for i in present]

        if tf.executing_eagerly():
            out = reduce_and_restart() if self.passes.completes(int(count)) else sums_so_far()
            self._ready = None
        else:
            self._ready = self.passes.completes(count)
            out = tf.cond(self._ready, reduce_and_restart, sums_so_far)
        result: List[Optional[tf.Tensor]] = [None] * len(sums)
        for i, x in zip(present, out):
            result[i] = x
        return result

    def apply(self, apply_update: Callable, iterations):
        """Runs apply_update() when the last add() completed a step, else counts the pass in
        `iterations` (None: nowhere)."""
        def update():
            applied = apply_update()
            if isinstance(applied, (tf.Operation, tf.Tensor)) and not tf.executing_eagerly():
                with tf.control_dependencies([applied]):  # a TF1 graph runs the update first
                    return tf.constant(True)
            return tf.constant(True)

        def skip():
            if iterations is None:
                return tf.constant(False)
            counted = iterations.assign_add(1)
            if tf.executing_eagerly():
                return tf.constant(False)
            with tf.control_dependencies([counted]):
                return tf.constant(False)

        if tf.executing_eagerly():
            return update() if int(self.counter.numpy()) == 0 else skip()
        # The add() of this graph decided; another graph's (a Keras train step traced anew)
        # reads the counter, which that add() left at 0 after a step's last pass.
        ready = self._ready
        if ready is None or getattr(ready, "graph", None) is not tf.compat.v1.get_default_graph():
            ready = tf.equal(self.counter, 0)
        return tf.cond(ready, update, skip)
