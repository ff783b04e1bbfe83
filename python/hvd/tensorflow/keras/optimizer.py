"""DistributedOptimizer for Keras 3 optimizers: the gradients are reduced over the ranks right
before the optimizer clips and applies them.

The hook is Keras's _clip_gradients, which every Keras 3 optimizer calls exactly once per
update, after its own gradient accumulation (gradient_accumulation_steps) and loss-scale
unscaling and before clipping, weight decay and the update: so backward_passes_per_step maps onto
Keras's accumulation, and clipnorm clips the reduced gradients, as in Horovod. It runs inside
Keras's compiled train step (as a tf.py_function) or eagerly (run_eagerly=True).

A LossScaleOptimizer (mixed_float16) is the exception: it checks the gradients for inf and NaN
before its inner optimizer sees them, and skips the update if it finds any. Checked per rank,
one rank would skip while the others reduce, and the job would stall; so there the still-scaled
gradients are reduced in the LossScaleOptimizer's apply, before the check, and every rank sees
the same gradients and takes the same branch.
"""
from __future__ import annotations

import zlib

import keras

from hvd._basics import Average, global_process_set
from hvd.tensorflow import replicas
from hvd.tensorflow.compression import Compression
from hvd.tensorflow.gradient_tape import (LocalSources, local_layer_variables,
                                          reduce_gradients_of, reduce_options)


_UNSET = object()


class _Reducing:
    _hvd_guard = _UNSET  # the replica check's, made at the first reduction

    def _hvd_reduce(self, grads, variables):
        # Named by what every rank agrees on: Keras's own names (adam_1, dense_3/kernel) count
        # the objects each process happened to create, so they differ between ranks that built
        # their models differently (one loaded a checkpoint). The shapes tell two optimizers of
        # one job (a GAN's) apart.
        signature = repr([(tuple(v.shape), str(v.dtype)) for v in variables])
        if self._hvd_guard is _UNSET:
            self._hvd_guard = replicas.make_guard("DistributedOptimizer",
                                                  self._hvd_options.process_set)
        replicas.check_before_reduction(self._hvd_guard,
                                        [v for v in variables if v not in self._hvd_local])
        return reduce_gradients_of(grads, variables, self._hvd_local, self._hvd_scale_local,
                                   self._hvd_options,
                                   f"DistributedOptimizer.{zlib.crc32(signature.encode()):08x}")

    def register_local_var(self, var):
        """This variable's gradient stays this rank's own, not reduced (Horovod's local
        variables; see scale_local_gradients)."""
        self._hvd_local.add(var)


class _DistributedOptimizerMixin(_Reducing):
    def _clip_gradients(self, grads):
        return super()._clip_gradients(self._hvd_reduce(list(grads),
                                                        self._trainable_variables))


class _DistributedLossScaleMixin(_Reducing):
    def apply(self, grads, trainable_variables=None):
        variables = (list(trainable_variables) if trainable_variables is not None
                     else self.inner_optimizer._trainable_variables)
        return super().apply(self._hvd_reduce(list(grads), variables), trainable_variables)


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False,
                         gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                         average_aggregated_gradients=False, num_groups=0, groups=None,
                         process_set=global_process_set, scale_local_gradients=True):
    """A new optimizer of the same class and configuration as `optimizer` whose updates use the
    gradients averaged (op) over the ranks. backward_passes_per_step=N accumulates N batches
    locally (Keras's gradient_accumulation_steps) and reduces once per update; their sum, as
    Horovod, unless average_aggregated_gradients. device_dense, device_sparse, num_groups and
    groups are accepted for Horovod's signature (every gradient travels in one fused group)."""
    del device_dense, device_sparse
    what = "DistributedOptimizer"
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise ValueError(f"{what}: expected a keras.optimizers.Optimizer instance, got "
                         f"{type(optimizer).__name__} {optimizer!r}")
    if keras.backend.backend() != "tensorflow":
        raise ValueError(f"{what}: Keras backend {keras.backend.backend()!r} is not supported: "
                         "set KERAS_BACKEND=tensorflow (with PyTorch, use hvd.torch)")
    if not hasattr(optimizer, "_clip_gradients"):
        raise RuntimeError(f"{what}: this Keras ({keras.__version__}) has no "
                           "Optimizer._clip_gradients, where hvd reduces the gradients")
    options = reduce_options(what, op, compression, sparse_as_dense, gradient_predivide_factor,
                             num_groups, groups, process_set)
    if not isinstance(backward_passes_per_step, int) or backward_passes_per_step < 1:
        raise ValueError(f"{what}: backward_passes_per_step must be a positive integer, got "
                         f"{backward_passes_per_step!r}")
    loss_scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    if not loss_scaled and keras.config.dtype_policy().name == "mixed_float16":
        # compile() would wrap this optimizer in a LossScaleOptimizer whose check runs before
        # the reduction (see above): wrap it here, and compile() leaves it as it is.
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        loss_scaled = True
    if loss_scaled and backward_passes_per_step > 1:
        raise ValueError(f"{what}: backward_passes_per_step > 1 with a LossScaleOptimizer "
                         "(mixed_float16) is not supported")
    config = optimizer.get_config()
    if name is not None:
        config["name"] = name
    if backward_passes_per_step > 1:
        if config.get("gradient_accumulation_steps"):
            raise ValueError(f"{what}: the optimizer already accumulates gradients "
                             f"(gradient_accumulation_steps="
                             f"{config['gradient_accumulation_steps']}); leave "
                             "backward_passes_per_step at 1")
        config["gradient_accumulation_steps"] = backward_passes_per_step
        if not average_aggregated_gradients:
            # Horovod sums the accumulated gradients; Keras averages them.
            options = options._replace(prescale=float(backward_passes_per_step))
    base = optimizer.__class__
    # The class keeps the optimizer's name and module, so a model saved with it loads as the
    # plain Keras optimizer (hvd.tensorflow.keras.load_model wraps it again).
    mixin = _DistributedLossScaleMixin if loss_scaled else _DistributedOptimizerMixin
    cls = type(base.__name__, (mixin, base),
               {"__module__": base.__module__, "__qualname__": base.__qualname__})
    distributed = cls.from_config(config)
    distributed._hvd_options = options
    distributed._hvd_local = LocalSources()
    distributed._hvd_scale_local = bool(scale_local_gradients)
    return distributed


def PartialDistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                compression=Compression.none, sparse_as_dense=False,
                                gradient_predivide_factor=1.0, op=Average, groups=None,
                                process_set=global_process_set, local_layers=None,
                                scale_local_gradients=True):
    """DistributedOptimizer whose `local_layers` (Keras layers) keep their gradients local."""
    distributed = DistributedOptimizer(optimizer, name, device_dense, device_sparse, compression,
                                       sparse_as_dense, gradient_predivide_factor, op,
                                       groups=groups, process_set=process_set,
                                       scale_local_gradients=scale_local_gradients)
    for v in local_layer_variables("PartialDistributedOptimizer", local_layers):
        distributed.register_local_var(v)
    return distributed
