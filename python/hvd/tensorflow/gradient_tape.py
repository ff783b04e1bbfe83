"""DistributedGradientTape: a tf.GradientTape whose gradient() averages (or sums) the gradients
over the ranks, as horovod.tensorflow's."""
from __future__ import annotations

from typing import Any, NamedTuple

import tensorflow as tf

from hvd import _basics, _core
from hvd._basics import Average, ProcessSet, global_process_set
from hvd.tensorflow.compression import Compression
from hvd.tensorflow.mpi_ops import grouped_allreduce


class ReduceOptions(NamedTuple):
    """How DistributedGradientTape and the Keras DistributedOptimizer reduce gradients."""
    op: int
    compression: Any
    sparse_as_dense: bool
    gradient_predivide_factor: float
    process_set: ProcessSet
    prescale: float = 1.0  # Keras's accumulated gradients: summed as Horovod, not averaged


def reduce_gradients(grads, options: ReduceOptions, name: str):
    """The gradients (any nesting, None kept) reduced over the process set as one grouped
    allreduce, which the engine fuses; tf.IndexedSlices are gathered unless sparse_as_dense."""
    flat = tf.nest.flatten(grads, expand_composites=False)
    present = [i for i, g in enumerate(flat) if g is not None]
    o = options
    # A graph keeps what its tracing saw, and an elastic job's graphs outlive the round they
    # were traced in: with one worker they must still reduce, and nothing may depend on the
    # size at tracing time.
    if not present or (o.process_set.size() == 1 and o.gradient_predivide_factor == 1.0
                       and o.prescale == 1.0 and _core.elastic_round() < 0):
        return grads  # nothing to reduce: skip the py_function a graph would run per step
    tensors = [tf.convert_to_tensor(flat[i])
               if o.sparse_as_dense and isinstance(flat[i], tf.IndexedSlices) else flat[i]
               for i in present]
    op, prescale, postscale = o.op, o.prescale, 1.0
    if o.gradient_predivide_factor != 1.0:
        # Horovod's split of the average: divide by f before the sum and by size/f after, which
        # keeps float16 sums of many ranks in range. The engine's Average divides by the size
        # of the step's round; the factor f goes back on after.
        prescale /= o.gradient_predivide_factor
        postscale = o.gradient_predivide_factor
    reduced = grouped_allreduce(tensors, op=op, compression=o.compression,
                                prescale_factor=prescale, postscale_factor=postscale,
                                name=name, process_set=o.process_set)
    for i, g in zip(present, reduced):
        flat[i] = g
    return tf.nest.pack_sequence_as(grads, flat)


def reduce_options(what, op, compression, sparse_as_dense, gradient_predivide_factor,
                   num_groups, groups, process_set, prescale=1.0) -> ReduceOptions:
    """Horovod's reduction arguments, checked."""
    op = _basics.check_reduce_op(op, what)
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError(f"{what}: gradient_predivide_factor needs op=Average")
    if gradient_predivide_factor <= 0:
        raise ValueError(f"{what}: gradient_predivide_factor must be positive, got "
                         f"{gradient_predivide_factor}")
    # Horovod splits the gradients into fusion groups; hvd sends them all as one grouped
    # allreduce, which the engine fuses up to its threshold, so the groups change nothing.
    if not isinstance(num_groups, int) or num_groups < 0:
        raise ValueError(f"{what}: num_groups must be a non-negative integer, got "
                         f"{num_groups!r}")
    if groups is not None and not isinstance(groups, (int, list, tuple)):
        raise ValueError(f"{what}: groups must be an integer or a list of lists of variables")
    return ReduceOptions(op, compression, bool(sparse_as_dense), float(gradient_predivide_factor),
                         process_set, prescale)


class _DistributedGradientTape:
    """Mixed into the user's tape class; the tape's own state is copied in."""

    def gradient(self, target, sources, output_gradients=None,
                 unconnected_gradients=tf.UnconnectedGradients.NONE):
        grads = super().gradient(target, sources, output_gradients, unconnected_gradients)
        return reduce_gradients(grads, self._hvd_options, "DistributedGradientTape")


def DistributedGradientTape(gradtape, device_dense="", device_sparse="",
                            compression=Compression.none, sparse_as_dense=False, op=Average,
                            gradient_predivide_factor=1.0, num_groups=0, groups=None,
                            process_set=global_process_set):
    """Wraps a tf.GradientTape: gradient() returns the gradients averaged over the ranks (op),
    reduced as one fused operation. device_dense and device_sparse are accepted for Horovod's
    signature; num_groups and groups too (every gradient already travels in one group)."""
    del device_dense, device_sparse
    if not isinstance(gradtape, tf.GradientTape):
        raise ValueError("DistributedGradientTape: expected a tf.GradientTape, got "
                         f"{type(gradtape).__name__}")
    options = reduce_options("DistributedGradientTape", op, compression, sparse_as_dense,
                             gradient_predivide_factor, num_groups, groups, process_set)
    cls = type(gradtape.__class__.__name__, (_DistributedGradientTape, gradtape.__class__), {})
    tape = cls.__new__(cls)
    tape.__dict__.update(gradtape.__dict__)
    tape._hvd_options = options
    return tape

