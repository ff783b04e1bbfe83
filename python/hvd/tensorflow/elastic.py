"""Elastic training for TensorFlow 2 and Keras, as horovod.tensorflow.elastic (hvd/_elastic.py
and docs/elastic.md describe the model):

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...                     # GradientTape steps, or model.fit(...) with the callbacks
            state.commit()

    state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=0)
    train(state)
"""
from __future__ import annotations

import functools

import tensorflow as tf

from hvd._basics import HorovodInternalError, rank
from hvd._elastic import ObjectState, State, reset_runtime, run_fn
from hvd.tensorflow.mpi_ops import broadcast_object, broadcast_variables

__all__ = ["ObjectState", "State", "TensorFlowKerasState", "TensorFlowState", "run"]


def _internal_errors_raised_as_such(func):
    """A collective inside a tf.function fails as a TensorFlow error (UnknownError) that carries
    the HorovodInternalError's text; the run loop must see the HorovodInternalError."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except tf.errors.OpError as e:
            if "HorovodInternalError" in str(e):
                raise HorovodInternalError(str(e)) from e
            raise

    return wrapper


def run(func):
    """Runs ``func(state, ...)`` through the job's rounds: after a failed round the state is
    restored to its last commit, and each round starts from rank 0's state."""
    from hvd.tensorflow import init, shutdown
    return run_fn(_internal_errors_raised_as_such(func), reset_runtime(init, shutdown))


class TensorFlowState(ObjectState):
    """A list of TensorFlow variables (default: every global variable of a TF1 graph) and plain
    attributes, kept across rounds, as horovod.tensorflow.elastic.TensorFlowState. Eagerly, the
    variables are read and assigned directly; in a TF1 graph, through `session` (default: the
    default session)."""

    def __init__(self, variables=None, session=None, **kwargs):
        self.variables = list(variables) if variables is not None else \
            tf.compat.v1.global_variables()
        self._eager = tf.executing_eagerly()
        self.session = session or (None if self._eager else tf.compat.v1.get_default_session())
        if not self._eager and self.session is None:
            raise ValueError("TensorFlowState in a TF1 graph needs a session: pass session=, or "
                             "make the state inside `with session.as_default():`")
        # In a graph the broadcast is an op built once and run by sync().
        self._broadcast = None if self._eager else broadcast_variables(self.variables, 0)
        self._saved_values = []
        super().__init__(bcast_object=broadcast_object, get_rank=rank, **kwargs)
        self._save_values()

    def _save_values(self):
        if self._eager:
            self._saved_values = [v.numpy().copy() for v in self.variables]
        else:
            self._saved_values = self.session.run(self.variables)

    def save(self):
        self._save_values()
        super().save()

    def restore(self):
        for v, value in zip(self.variables, self._saved_values):
            if self._eager:
                v.assign(value)
            else:
                v.load(value, self.session)
        super().restore()

    def sync(self):
        if self._eager:
            broadcast_variables(self.variables, root_rank=0)
        else:
            self.session.run(self._broadcast)
        self._save_values()
        super().sync()

    def committed(self):
        return {**super().committed(), "variables": self._saved_values}

    def load_committed(self, committed):
        self._saved_values = list(committed["variables"])
        super().load_committed(committed)


class TensorFlowKerasState(ObjectState):
    """A Keras model's and optimizer's variables (the optimizer: `optimizer`, else the model's
    compiled one) and plain attributes, kept across rounds. The model must be built (called once,
    or given an input shape) before the state is made. `backward_passes_per_step` is accepted
    from Horovod and changes nothing here."""

    def __init__(self, model, optimizer=None, backward_passes_per_step=1, **kwargs):
        del backward_passes_per_step
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
        self._saved_variables = None
        super().__init__(bcast_object=broadcast_object, get_rank=rank, **kwargs)
        self._save_variables()

    def _variables(self):
        from hvd.tensorflow.keras.callbacks import training_variables
        try:
            built = bool(self.model.variables)
        except ValueError:  # tf.keras 2: an unbuilt model has no `variables` to ask for
            built = False
        if not built:
            raise ValueError("TensorFlowKerasState: the model has no variables yet; build it "
                             "(call it once, or give its Input a shape) before making the state")
        return training_variables(self.model, self.optimizer)

    def _save_variables(self):
        self._saved_variables = [v.numpy().copy() for v in self._variables()]

    def save(self):
        self._save_variables()
        super().save()

    def restore(self):
        variables = self._variables()
        if len(variables) != len(self._saved_variables):
            raise HorovodInternalError(
                f"TensorFlowKerasState.restore: {len(variables)} variables now, "
                f"{len(self._saved_variables)} at the last commit")
        for v, saved in zip(variables, self._saved_variables):
            v.assign(saved)
        super().restore()

    def committed(self):
        return {**super().committed(), "variables": self._saved_variables}

    def load_committed(self, committed):
        self._saved_variables = list(committed["variables"])
        super().load_committed(committed)

    def sync(self):
        broadcast_variables(self._variables(), root_rank=0)
        self._save_variables()
        super().sync()
