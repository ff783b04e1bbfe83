"""Elastic training for Keras 3, as horovod.tensorflow.keras.elastic: KerasState and the
callbacks that keep it up to date during model.fit.

    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    callbacks = [hvd.elastic.CommitStateCallback(state, batches_per_commit=10),
                 hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.UpdateEpochStateCallback(state)]

    @hvd.elastic.run
    def train(state):
        model.fit(x, y, initial_epoch=state.epoch, epochs=epochs, callbacks=callbacks)
"""
from __future__ import annotations

import keras

from hvd._elastic import ObjectState, State
from hvd.tensorflow.elastic import TensorFlowKerasState, run

__all__ = ["CommitStateCallback", "KerasState", "ObjectState", "State",
           "UpdateBatchStateCallback", "UpdateEpochStateCallback", "run"]


class KerasState(TensorFlowKerasState):
    """TensorFlowKerasState for a compiled Keras model (its optimizer by default)."""


class CommitStateCallback(keras.callbacks.Callback):
    """Commits the state every `batches_per_commit` batches and at the end of every epoch.

    Every rank must commit at the same batches: a commit is a collective, so a rank that
    commits while another trains on waits for it forever. The count therefore restarts with
    every `fit` (after a reset, old and new workers alike count from zero), and is reset before
    committing, since the commit that learns of a new round raises."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        if batches_per_commit < 1:
            raise ValueError(f"CommitStateCallback: batches_per_commit={batches_per_commit}; "
                             "it must be at least 1")
        self.state = state
        self.batches_per_commit = batches_per_commit
        self.batches_remaining = batches_per_commit

    def on_train_begin(self, logs=None):
        self.batches_remaining = self.batches_per_commit

    def on_train_batch_end(self, batch, logs=None):
        self.batches_remaining -= 1
        if self.batches_remaining == 0:
            self.batches_remaining = self.batches_per_commit
            self.state.commit()

    def on_epoch_end(self, epoch, logs=None):
        self.batches_remaining = self.batches_per_commit
        self.state.commit()


class UpdateBatchStateCallback(keras.callbacks.Callback):
    """Keeps `state.batch` at the number of batches done in the current epoch (0 between
    epochs). Place it before CommitStateCallback."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_train_batch_end(self, batch, logs=None):
        self.state.batch = batch + 1

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(keras.callbacks.Callback):
    """Keeps `state.epoch` at the next epoch to run, for model.fit(initial_epoch=state.epoch).
    Place it before CommitStateCallback."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = epoch + 1
