"""DistributedGradientTape: a tf.GradientTape whose gradient() averages (or sums) the gradients
over the ranks, as horovod.tensorflow's."""
from __future__ import annotations

import zlib
from typing import Any, NamedTuple

import tensorflow as tf

from hvd import _basics, _core
from hvd._basics import Average, ProcessSet, global_process_set
from hvd.tensorflow.compression import Compression
from hvd.tensorflow import replicas
from hvd.tensorflow.mpi_ops import _grouped_allreduce


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
    # The internal form: it scales tf.IndexedSlices too (the public one refuses, as Horovod's).
    reduced = _grouped_allreduce(tensors, op, o.compression, prescale, postscale, name,
                                 o.process_set)
    for i, g in zip(present, reduced):
        flat[i] = g
    return tf.nest.pack_sequence_as(grads, flat)


def reduction_name(prefix: str, variables) -> str:
    """A gradient reduction's name from what every rank agrees on, the variables' shapes and
    dtypes: frameworks' own names (adam_1, dense_3/kernel) count the objects each process
    happened to create, so they differ between ranks that built their models differently (one
    loaded a checkpoint). The shapes tell two optimizers of one job (a GAN's) apart."""
    signature = repr([(tuple(v.shape), str(v.dtype)) for v in variables])
    return f"{prefix}.{zlib.crc32(signature.encode()):08x}"


class LocalSources:
    """The sources (variables) whose gradients stay this rank's own, matched by identity (a
    Keras variable's == compares values). A plain object, so that a Keras optimizer holding one
    does not track its variables as the optimizer's own (and broadcast or save them as such)."""

    def __init__(self):
        self._by_id = {}

    def add(self, source):
        self._by_id[id(source)] = source

    def __contains__(self, source):
        return id(source) in self._by_id

    def __bool__(self):
        return bool(self._by_id)


def reduce_gradients_of(grads, sources, local: LocalSources, scale_local,
                        options: ReduceOptions, name: str):
    """reduce_gradients for the gradients of `sources`, except those of the sources in `local`,
    which stay this rank's own: Horovod's worker-local variables. Their
    gradients are divided by the number of ranks when `scale_local`, as Horovod's
    scale_local_gradients does (so that they match the averaged ones in scale)."""
    if not local:
        return reduce_gradients(grads, options, name)
    flat_grads = tf.nest.flatten(grads)
    is_local = [s in local for s in tf.nest.flatten(sources)]
    reduced = iter(reduce_gradients([g for g, mine in zip(flat_grads, is_local) if not mine],
                                    options, name))
    out = [(_divided_by_size(g, options.process_set) if scale_local else g) if mine
           else next(reduced) for g, mine in zip(flat_grads, is_local)]
    return tf.nest.pack_sequence_as(grads, out)


def _divided_by_size(grad, process_set):
    if grad is None:
        return None
    # An elastic job's graphs outlive the round they were traced in: ask for the size per step.
    size = (tf.py_function(lambda: float(process_set.size()), [], tf.float32)
            if _core.elastic_round() >= 0 else float(process_set.size()))
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values / tf.cast(size, grad.values.dtype), grad.indices,
                                grad.dense_shape)
    return grad / tf.cast(size, grad.dtype)


def local_layer_variables(what, local_layers):
    """The trainable variables of Horovod's `local_layers` argument (a layer or a list)."""
    import keras
    if local_layers is None:
        return []
    if isinstance(local_layers, keras.layers.Layer):
        local_layers = [local_layers]
    local_layers = list(local_layers)
    bad = [type(layer).__name__ for layer in local_layers
           if not isinstance(layer, keras.layers.Layer)]
    if bad:
        raise ValueError(f"{what}: local_layers must be Keras layers, got {', '.join(bad)}")
    return [v for layer in local_layers for v in layer.trainable_weights]


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
        shared = [s for s in tf.nest.flatten(sources) if s not in self._hvd_local]
        replicas.check_before_reduction(
            replicas.tape_guards.get(shared, self._hvd_options.process_set), shared)
        return reduce_gradients_of(grads, sources, self._hvd_local, self._hvd_scale_local,
                                   self._hvd_options, "DistributedGradientTape")

    def register_local_source(self, source):
        """This source's gradient stays this rank's own, not reduced (Horovod's local
        variables; see scale_local_gradients)."""
        self._hvd_local.add(source)

    def get_local_and_global_gradients(self, target, sources, output_gradients=None):
        """gradient(), split into ([(local source, gradient)], [(other source, gradient)])."""
        sources = tf.nest.flatten(sources)
        grads = self.gradient(target, sources, output_gradients)
        pairs = list(zip(sources, grads))
        return ([p for p in pairs if p[0] in self._hvd_local],
                [p for p in pairs if p[0] not in self._hvd_local])


def DistributedGradientTape(gradtape, device_dense="", device_sparse="",
                            compression=Compression.none, sparse_as_dense=False, op=Average,
                            gradient_predivide_factor=1.0, num_groups=0, groups=None,
                            process_set=global_process_set, scale_local_gradients=True):
    """Wraps a tf.GradientTape: gradient() returns the gradients averaged over the ranks (op),
    reduced as one fused operation, except those of sources registered with
    register_local_source(). device_dense and device_sparse are accepted for Horovod's
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
    tape._hvd_local = LocalSources()
    tape._hvd_scale_local = bool(scale_local_gradients)
    return tape


def PartialDistributedGradientTape(gradtape, device_dense="", device_sparse="",
                                   compression=Compression.none, sparse_as_dense=False,
                                   op=Average, gradient_predivide_factor=1.0, num_groups=0,
                                   groups=None, process_set=global_process_set,
                                   local_layers=None, scale_local_gradients=True):
    """DistributedGradientTape whose `local_layers` (Keras layers) keep their gradients local."""
    tape = DistributedGradientTape(gradtape, device_dense, device_sparse, compression,
                                   sparse_as_dense, op, gradient_predivide_factor, num_groups,
                                   groups, process_set, scale_local_gradients)
    for v in local_layer_variables("PartialDistributedGradientTape", local_layers):
        tape.register_local_source(v)
    return tape

