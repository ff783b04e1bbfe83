"""horovod.tensorflow's TF1 graph API: DistributedOptimizer for tf.compat.v1.train optimizers,
broadcast_global_variables and BroadcastGlobalVariablesHook, for graphs run by
tf.compat.v1.Session and MonitoredTrainingSession (and Estimator, on TensorFlow <= 2.15).

    opt = hvd.DistributedOptimizer(tf.compat.v1.train.AdamOptimizer(0.001 * hvd.size()))
    train_op = opt.minimize(loss, global_step=tf.compat.v1.train.get_or_create_global_step())
    hooks = [hvd.BroadcastGlobalVariablesHook(0),
             tf.compat.v1.train.StopAtStepHook(last_step=20000 // hvd.size())]
    with tf.compat.v1.train.MonitoredTrainingSession(
            checkpoint_dir=ckpt if hvd.rank() == 0 else None, hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op, feed_dict=...)

compute_gradients() reduces the wrapped optimizer's gradients (dense ones with one grouped
allreduce, tf.IndexedSlices gathered unless sparse_as_dense), so minimize() and
apply_gradients() apply the reduced ones.

A graph's collectives run in the order they were built (mpi_ops): each blocks one of the
session's threads until every rank joins it, and a session of a rank bound to one core has one
thread, so two collectives left unordered in one run could wait on each other across ranks. The
broadcast that BroadcastGlobalVariablesHook builds (after the training step, in begin()) and
runs on its own is the exception: it forms a chain of its own (mpi_ops.separate_chain), so it
never depends on the training step's ops and placeholders.
"""
from __future__ import annotations

import tensorflow as tf

from hvd._accumulation import BackwardPasses
from hvd._basics import Average, global_process_set
from hvd.tensorflow import mpi_ops, replicas
from hvd.tensorflow.accumulation import GradientAccumulation
from hvd.tensorflow.compression import Compression
from hvd.tensorflow.gradient_tape import (LocalSources, reduce_gradients_of, reduce_options,
                                          reduction_name)

_V1Optimizer = tf.compat.v1.train.Optimizer


def is_v1_optimizer(optimizer) -> bool:
    return isinstance(optimizer, _V1Optimizer)


class _DistributedOptimizer(_V1Optimizer):
    """Wraps a tf.compat.v1.train.Optimizer; see the module's docstring."""

    def __init__(self, optimizer, name, use_locking, options, backward_passes_per_step,
                 average_aggregated_gradients, scale_local_gradients):
        super().__init__(name=name or f"Distributed{type(optimizer).__name__}",
                         use_locking=use_locking)
        self._optimizer = optimizer
        self._options = options
        self._passes = BackwardPasses(backward_passes_per_step,
                                      bool(average_aggregated_gradients), "DistributedOptimizer")
        self._local = LocalSources()
        self._scale_local = bool(scale_local_gradients)
        # BroadcastGlobalVariablesHook broadcasts before the first step: check the start.
        self._guard = replicas.make_guard("DistributedOptimizer", options.process_set, first=0)
        self._accumulation = None  # backward_passes_per_step > 1: the latest call's

    def register_local_var(self, var):
        """This variable's gradient stays this rank's own (Horovod's local variables)."""
        self._local.add(var)

    def compute_gradients(self, *args, **kwargs):
        pairs = self._optimizer.compute_gradients(*args, **kwargs)
        grads = [g for g, _ in pairs]
        variables = [v for _, v in pairs]
        if self._passes.steps > 1:
            grads = self._accumulate(grads, variables)
        else:
            grads = self._reduce(grads, variables)
        return list(zip(grads, variables))

    def _reduce(self, grads, variables):
        replicas.check_before_reduction(self._guard,
                                        [v for v in variables if v not in self._local])
        return reduce_gradients_of(grads, variables, self._local, self._scale_local,
                                   self._options, reduction_name(self.get_name(), variables))

    def _accumulate(self, grads, variables):
        """Horovod's local aggregation (hvd.tensorflow.accumulation): each pass adds its
        gradients to local sums; every backward_passes_per_step-th pass reduces them (their
        mean with average_aggregated_gradients) and apply_gradients applies that, other passes
        apply nothing."""
        if tf.executing_eagerly():
            raise ValueError("DistributedOptimizer(backward_passes_per_step > 1) of a "
                             "tf.compat.v1.train optimizer needs a graph (a TF1 session)")
        # Sums and counter of their own per compute_gradients call (a GAN's two minimize
        # calls count apart); apply_gradients applies the latest's.
        self._accumulation = GradientAccumulation(self._passes, self._reduce,
                                                  local_variables=True)
        return self._accumulation.add(grads, variables)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        if self._accumulation is None:
            return self._optimizer.apply_gradients(grads_and_vars, global_step, name)
        grads_and_vars = list(grads_and_vars)
        # The global step counts backward passes, as Horovod's does, so that a StopAtStepHook
        # counts batches whether or not they ended with an update.
        return tf.group(self._accumulation.apply(
            lambda: self._optimizer.apply_gradients(grads_and_vars, global_step, name),
            global_step))

    # The wrapped optimizer owns the slots and hyper-parameters.
    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="",
                         device_sparse="", compression=Compression.none, sparse_as_dense=False,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """horovod.tensorflow.DistributedOptimizer for a tf.compat.v1.train.Optimizer."""
    del device_dense, device_sparse
    what = "DistributedOptimizer"
    options = reduce_options(what, op, compression, sparse_as_dense, gradient_predivide_factor,
                             num_groups, groups, process_set)
    BackwardPasses(backward_passes_per_step, what=what)  # checks it before anything is built
    return _DistributedOptimizer(optimizer, name, use_locking, options, backward_passes_per_step,
                                 average_aggregated_gradients, scale_local_gradients)


def broadcast_global_variables(root_rank, process_set=global_process_set):
    """The op that assigns root_rank's value to every global variable of the default graph
    (tf.compat.v1.global_variables()), for a TF1 session to run once after initialising them.
    Its collectives depend on nothing else in the graph (mpi_ops.separate_chain)."""
    if tf.executing_eagerly():
        raise RuntimeError("hvd.broadcast_global_variables() broadcasts TF1's global variable "
                           "collection and needs graph mode (a tf.compat.v1.Session); in eager "
                           "TensorFlow 2 use hvd.broadcast_variables(model.variables, "
                           "root_rank) (and the optimizer's variables), or the Keras "
                           "BroadcastGlobalVariablesCallback")
    variables = tf.compat.v1.global_variables()
    with mpi_ops.separate_chain():
        op = mpi_ops.broadcast_variables(variables, root_rank, process_set=process_set)
    return op if op is not None else tf.no_op(name="hvd_broadcast_no_variables")


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """A SessionRunHook that broadcasts root_rank's global variables to every rank once the
    session has created (initialised or restored) them: every rank starts from the same
    weights, and a checkpoint only the root restored reaches the others."""

    def __init__(self, root_rank, device="", process_set=global_process_set):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.process_set = process_set
        self.bcast_op = None

    def begin(self):
        graph = tf.compat.v1.get_default_graph()
        if self.bcast_op is None or self.bcast_op.graph is not graph:
            with tf.device(self.device):
                self.bcast_op = broadcast_global_variables(self.root_rank, self.process_set)

    def after_create_session(self, session, coord):
        session.run(self.bcast_op)
