"""horovod.tensorflow.keras.callbacks for Keras 3."""
from __future__ import annotations

import keras
import tensorflow as tf

from hvd import _basics
from hvd._basics import global_process_set
from hvd.tensorflow import mpi_ops as _ops


def optimizer_built(optimizer) -> bool:
    """Whether the optimizer has its slots: Keras 3's `built`, tf.keras 2's `_built`; a legacy
    tf.keras OptimizerV2 has no flag, and no variables before its first update."""
    if hasattr(optimizer, "_create_all_weights"):
        return bool(optimizer_variables(optimizer))
    return bool(getattr(optimizer, "built", getattr(optimizer, "_built", False)))


def build_optimizer(optimizer, variables):
    """Creates the optimizer's slots for `variables` unless it has them."""
    if hasattr(optimizer, "_create_all_weights"):  # legacy: creates the missing ones only
        optimizer._create_all_weights(variables)
    elif not optimizer_built(optimizer):
        optimizer.build(variables)


def optimizer_variables(optimizer):
    """The optimizer's variables (a property in Keras 3, a method of legacy optimizers)."""
    variables = optimizer.variables
    return list(variables() if callable(variables) else variables)


def training_variables(model, optimizer):
    """The model's variables and the optimizer's, the optimizer built first: Keras creates its
    slots at the first update, and building them now lets the root's values (a resumed Adam's
    moments) reach every rank before it. Empty while the model is not built."""
    if optimizer is not None and model.trainable_variables:
        build_optimizer(optimizer, model.trainable_variables)
    variables = list(model.variables)
    if optimizer is not None:
        variables += optimizer_variables(optimizer)
    return variables


def _float(value):
    """A learning rate (variable, tensor or number) as a float, in Keras 3 and tf.keras 2."""
    return float(tf.convert_to_tensor(value).numpy())


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Starts every rank from root_rank's model and optimizer state (random initialisation, or a
    checkpoint only the root loaded). When every rank's model is built at the start of
    training, the broadcast runs then; a model that creates its weights at its first call (a
    Sequential without an input shape, a subclassed model) is broadcast at the end of the first
    batch, as Horovod does, once its weights and the optimizer's slots exist. Variables that
    appear in the first batch although the model was built are broadcast then too."""

    def __init__(self, root_rank, device="", process_set=global_process_set,
                 local_variables=None):
        super().__init__()
        del device
        self.root_rank = root_rank
        self.process_set = process_set
        self.local_variables = list(local_variables or [])
        self.broadcast_done = False
        self._broadcast_ids = set()

    def _variables(self):
        local = {id(v) for v in self.local_variables}
        return [v for v in training_variables(self.model, getattr(self.model, "optimizer", None))
                if id(v) not in local]

    def _broadcast(self, variables):
        _ops.broadcast_variables(variables, self.root_rank, process_set=self.process_set)
        self._broadcast_ids = {id(v) for v in variables}

    def on_train_begin(self, logs=None):
        if self.broadcast_done or not self.process_set.included():
            return
        # Every rank must take the same branch: one whose model a checkpoint built while the
        # others' are not yet built waits with them for the first batch.
        built = bool(self.model.built and self.model.trainable_variables)
        if self._on_every_rank(built, _basics.Min, "built"):
            self._broadcast(self._variables())
        else:
            # The replica check of a DistributedOptimizer waits for this broadcast too.
            optimizer = getattr(self.model, "optimizer", None)
            # tf.keras 2's LossScaleOptimizer holds the distributed optimizer inside.
            for opt in (optimizer, getattr(optimizer, "inner_optimizer", None)):
                if opt is not None:
                    opt._hvd_broadcast_after_first_update = True

    def on_train_batch_end(self, batch, logs=None):
        if self.broadcast_done or not self.process_set.included():
            return
        self.broadcast_done = True
        variables = self._variables()
        new = any(id(v) not in self._broadcast_ids for v in variables)
        if self._on_every_rank(new, _basics.Max, "new_variables"):
            self._broadcast(variables)

    def _on_every_rank(self, flag, op, what) -> bool:
        """`flag` combined over the ranks (Min: all, Max: any), so that all take one branch."""
        combined = _ops.allreduce(tf.constant([int(flag)], tf.int32), op=op,
                                  name=f"BroadcastGlobalVariablesCallback.{what}",
                                  process_set=self.process_set)
        return bool(int(combined.numpy()[0]))


class MetricAverageCallback(keras.callbacks.Callback):
    """Replaces each epoch's metrics (training and validation) by their average over the ranks,
    so what rank 0 prints and what later callbacks see describe the whole job."""

    def __init__(self, device="", process_set=global_process_set):
        super().__init__()
        del device
        self.process_set = process_set

    def on_epoch_end(self, epoch, logs=None):
        if not logs:
            return
        names = sorted(k for k, v in logs.items() if _is_number(v))
        if not names:
            return
        values = tf.constant([float(logs[k]) for k in names], dtype=tf.float64)
        averaged = _ops.allreduce(values, op=_basics.Average,
                                  name=f"MetricAverageCallback.{','.join(names)}",
                                  process_set=self.process_set).numpy()
        for k, v in zip(names, averaged):
            logs[k] = float(v)


def _is_number(v):
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the learning rate to initial_lr * multiplier(epoch) from start_epoch until end_epoch
    (multiplier a number or a function of the epoch). With staircase the rate changes at epoch
    boundaries, otherwise every batch with a fractional epoch. momentum_correction is accepted
    for Horovod's signature: Keras 3 compiles the momentum into the train step as a constant,
    so it cannot be scaled for one batch."""

    def __init__(self, initial_lr, multiplier, start_epoch=0, end_epoch=None, staircase=True,
                 momentum_correction=True, steps_per_epoch=None):
        super().__init__()
        del momentum_correction
        if initial_lr is None or float(initial_lr) <= 0:
            raise ValueError(f"LearningRateScheduleCallback: initial_lr must be positive, got "
                             f"{initial_lr!r}")
        self.initial_lr = float(initial_lr)
        self.multiplier = multiplier if callable(multiplier) else (lambda _: multiplier)
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = 0

    def _in_range(self, epoch):
        return epoch >= self.start_epoch and (self.end_epoch is None or epoch < self.end_epoch)

    def _set(self, epoch):
        optimizer = self.model.optimizer
        if callable(getattr(optimizer, "_learning_rate", None)) or isinstance(
                getattr(optimizer, "_hyper", {}).get("learning_rate"),
                keras.optimizers.schedules.LearningRateSchedule):  # a schedule, or a function
            raise ValueError(f"{type(self).__name__}: the optimizer's learning rate is a "
                             "schedule; use a number with this callback")
        optimizer.learning_rate = self.initial_lr * self.multiplier(epoch)

    def on_train_begin(self, logs=None):
        if self.steps_per_epoch is None:
            self.steps_per_epoch = (self.params or {}).get("steps")
        if not self.staircase and not self.steps_per_epoch:
            raise ValueError(f"{type(self).__name__}: staircase=False needs steps_per_epoch "
                             "(fit could not tell the number of steps)")

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch
        if self.staircase and self._in_range(epoch):
            self._set(epoch)

    def on_train_batch_begin(self, batch, logs=None):
        if not self.staircase and self._in_range(self.current_epoch):
            self._set(self.current_epoch + batch / self.steps_per_epoch)

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["learning_rate"] = _float(self.model.optimizer.learning_rate)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Goya et al.'s warmup, as Horovod's: the rate grows from initial_lr / size to initial_lr
    over warmup_epochs, every batch (initial_lr is the rate already scaled by size)."""

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True,
                 steps_per_epoch=None, verbose=0):
        size = _basics.size()

        def multiplier(epoch):
            return 1.0 / size * (epoch * (size - 1) / warmup_epochs + 1)

        super().__init__(initial_lr, multiplier, start_epoch=0, end_epoch=warmup_epochs,
                         staircase=False, momentum_correction=momentum_correction,
                         steps_per_epoch=steps_per_epoch)
        self.warmup_epochs = warmup_epochs
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.warmup_epochs - 1:
            # The last batch ran at a rate just below the target: land on it exactly.
            self.model.optimizer.learning_rate = self.initial_lr
        super().on_epoch_end(epoch, logs)
        if epoch == self.warmup_epochs - 1 and self.verbose > 0 and _basics.rank() == 0:
            print(f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to "
                  f"{_float(self.model.optimizer.learning_rate):g}.")
