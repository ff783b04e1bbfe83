"""backward_passes_per_step for tf.keras 2 optimizers (Keras 3 has gradient_accumulation_steps):
each backward pass adds its gradients to this rank's sums; every `steps`-th one reduces the sums
(divided by `steps` with average_aggregated_gradients) over the ranks, zeroes them, and lets the
update through. The other passes update nothing but count as iterations, as Horovod's Keras
aggregation helper does.

The sums live in variables, so that the counting works inside a compiled train step as well as
eagerly; `counter` is the passes since the last update (Horovod's tests read it).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import tensorflow as tf


class GradientAccumulation:
    def __init__(self, steps: int, average: bool, reduce: Callable):
        self.steps = steps
        self.average = average
        self._reduce = reduce  # (grads, variables) -> the gradients reduced over the ranks
        with tf.init_scope():
            self.counter = tf.Variable(0, dtype=tf.int32, trainable=False,
                                       name="hvd_backward_passes")
        self._sums: Dict[int, tf.Variable] = {}

    def _sum_for(self, variable, grad) -> tf.Variable:
        key = id(variable)
        if key not in self._sums:
            with tf.init_scope():  # outside a tf.function's graph and its branches
                self._sums[key] = tf.Variable(tf.zeros(variable.shape, grad.dtype),
                                              trainable=False, name="hvd_gradient_sum")
        return self._sums[key]

    def add(self, grads: List[Optional[tf.Tensor]], variables) -> List[Optional[tf.Tensor]]:
        """Adds one backward pass; returns the reduced gradients on the pass that completes a
        step (the sums so far on the others, which apply() does not apply)."""
        sums = []
        for g, v in zip(grads, variables):
            if g is None:
                sums.append(None)
                continue
            dense = tf.convert_to_tensor(g)  # tf.IndexedSlices add up densely
            total = self._sum_for(v, dense)
            total.assign_add(dense)
            sums.append(total)
        count = self.counter.assign_add(1)
        present = [i for i, s in enumerate(sums) if s is not None]

        def reduce_and_restart():
            values = [sums[i].read_value() for i in present]
            if self.average:
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
            out = reduce_and_restart() if int(count) >= self.steps else sums_so_far()
        else:
            out = tf.cond(tf.greater_equal(count, self.steps), reduce_and_restart, sums_so_far)
        result: List[Optional[tf.Tensor]] = [None] * len(sums)
        for i, x in zip(present, out):
            result[i] = x
        return result

    def apply(self, apply_update: Callable, iterations):
        """Runs apply_update() when the last add() completed a step, else counts the pass as
        an iteration."""
        def update():
            apply_update()
            return tf.constant(True)

        def skip():
            iterations.assign_add(1)
            return tf.constant(False)

        if tf.executing_eagerly():
            return update() if int(self.counter.numpy()) == 0 else skip()
        return tf.cond(tf.equal(self.counter, 0), update, skip)
