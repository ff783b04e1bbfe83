"""backward_passes_per_step (Horovod's local gradient aggregation), as every framework's
DistributedOptimizer counts it: each backward pass adds its gradient to this rank's sum, and the
pass that completes a step reduces the sum (times `scale`) over the ranks and starts the next
sum; the passes in between update nothing. PyTorch counts per gradient here (autograd adds into
`.grad` and calls a hook per pass); TensorFlow keeps the count in a variable
(hvd.tensorflow.accumulation, for Keras 2 and tf.compat.v1 optimizers), so that it counts inside
a compiled graph too, and asks `completes`.
"""
from __future__ import annotations

import numbers
from typing import Dict, Hashable, Iterable


class BackwardPasses:
    def __init__(self, steps, average: bool = False, what: str = "DistributedOptimizer"):
        if isinstance(steps, bool) or not isinstance(steps, numbers.Integral) or steps < 1:
            raise ValueError(f"{what}: backward_passes_per_step must be a positive integer, "
                             f"got {steps!r}")
        self.steps = int(steps)
        self.average = average  # average_aggregated_gradients: the sum's mean, not the sum
        self._remaining: Dict[Hashable, int] = {}

    @property
    def scale(self) -> float:
        """What the accumulated sum is multiplied by before it is reduced."""
        return 1.0 / self.steps if self.average else 1.0

    def completes(self, count):
        """Whether `count` passes since the last reduction complete a step (a Python int, or
        a TensorFlow tensor inside a graph)."""
        return count >= self.steps

    # -- per-gradient counting, for a framework that calls back once per gradient per pass --
    def restart(self, keys: Iterable[Hashable]) -> None:
        for key in keys:
            self._remaining[key] = self.steps

    def arrive(self, key: Hashable) -> bool:
        """Counts one pass of gradient `key`; True when it completes the step."""
        self._remaining[key] -= 1
        return self._remaining[key] <= 0

    def step_done(self, key: Hashable) -> bool:
        """Gradient `key` has had its step's last pass (another one before restart is one too
        many)."""
        return self._remaining[key] <= 0
