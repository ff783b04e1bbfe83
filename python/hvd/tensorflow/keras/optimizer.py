"""DistributedOptimizer for Keras 3 (and tf.keras 2) optimizers: the gradients are reduced over the ranks right
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

import keras

from hvd._accumulation import BackwardPasses
from hvd._basics import Average, global_process_set
from hvd.tensorflow import replicas
from hvd.tensorflow.compression import Compression
from hvd.tensorflow.accumulation import GradientAccumulation
from hvd.tensorflow.gradient_tape import (LocalSources, local_layer_variables,
                                          reduce_gradients_of, reduce_options, reduction_name)


_UNSET = object()
# tf.keras 2 (TensorFlow <= 2.15): no _trainable_variables, no gradient_accumulation_steps;
# its documented hook for cross-replica aggregation is (_)aggregate_gradients.
KERAS2 = int(keras.__version__.split(".")[0]) < 3
_LossScaleOptimizer = (keras.mixed_precision.LossScaleOptimizer if KERAS2
                       else keras.optimizers.LossScaleOptimizer)
_OPTIMIZER_TYPES = ((keras.optimizers.Optimizer, keras.optimizers.legacy.Optimizer) if KERAS2
                    else (keras.optimizers.Optimizer,))


class _Reducing:
    _hvd_guard = _UNSET  # the replica check's, made at the first reduction

    def _hvd_reduce(self, grads, variables):
        if self._hvd_guard is _UNSET:
            # The starting weights, unless BroadcastGlobalVariablesCallback waits for the end
            # of the first batch (a model built by it): then after the first update.
            first = 1 if getattr(self, "_hvd_broadcast_after_first_update", False) else 0
            self._hvd_guard = replicas.make_guard("DistributedOptimizer",
                                                  self._hvd_options.process_set, first)
        replicas.check_before_reduction(self._hvd_guard,
                                        [v for v in variables if v not in self._hvd_local],
                                        self._hvd_updates_done())
        return reduce_gradients_of(grads, variables, self._hvd_local, self._hvd_scale_local,
                                   self._hvd_options,
                                   reduction_name("DistributedOptimizer", variables))

    def _hvd_updates_done(self):
        """The updates applied so far: Keras counts iterations per batch, and an optimizer
        that accumulates gradients (Keras 3's gradient_accumulation_steps) updates every
        steps-th one. A variable the ranks' broadcasts (and an elastic job's state) keep equal,
        so that every rank checks at the same update without counting in Python."""
        helper = getattr(self, "_agg_helper", None)
        steps = (getattr(self, "gradient_accumulation_steps", None)
                 or (helper.steps if helper is not None else 1))
        return self.iterations // steps if steps > 1 else self.iterations

    def register_local_var(self, var):
        """This variable's gradient stays this rank's own, not reduced (Horovod's local
        variables; see scale_local_gradients)."""
        self._hvd_local.add(var)


class _DistributedOptimizerMixin(_Reducing):
    def _clip_gradients(self, grads):
        return super()._clip_gradients(self._hvd_reduce(list(grads),
                                                        self._trainable_variables))


class _DistributedKeras2Mixin(_Reducing):
    """tf.keras 2 optimizers. Horovod's reduce where the gradients are computed (model.fit's
    minimize calls compute_gradients; get_gradients), and hvd also where apply_gradients
    aggregates them (a custom loop's tape gradients): each gradient is reduced once, by
    whichever of the two sees it first. LossScaleOptimizer calls its inner optimizer's
    aggregation before its inf/NaN check."""

    _hvd_reduced = ()  # the gradients compute_gradients or get_gradients returned, reduced
    _agg_helper = None  # backward_passes_per_step > 1: accumulation.GradientAccumulation

    def _hvd_reduce_or_add(self, grads, variables):
        if self._agg_helper is not None:
            return self._agg_helper.add(grads, variables)
        return self._hvd_reduce(grads, variables)

    def _hvd_pairs(self, grads_and_vars):
        grads_and_vars = list(grads_and_vars)
        variables = [v for _, v in grads_and_vars]
        return list(zip(self._hvd_reduce_or_add([g for g, _ in grads_and_vars], variables),
                        variables))

    def _hvd_remember(self, grads):
        self._hvd_reduced = [g for g in grads if g is not None]
        return grads

    def _hvd_reduced_already(self, grads_and_vars):
        """Whether these are the gradients compute_gradients or get_gradients reduced (asked
        before Keras's own aggregation, which may return new tensors)."""
        reduced = {id(g) for g in self._hvd_reduced}
        present = [g for g, _ in grads_and_vars if g is not None]
        self._hvd_remember([])
        return bool(present) and all(id(g) in reduced for g in present)

    def compute_gradients(self, loss, var_list, tape=None):
        return self._compute_gradients(loss, var_list, None, tape)

    def _compute_gradients(self, loss, var_list, grad_loss=None, tape=None):
        base = super()
        if hasattr(base, "_compute_gradients"):  # keras.optimizers.legacy (OptimizerV2)
            pairs = base._compute_gradients(loss, var_list, grad_loss, tape=tape)
        else:
            pairs = base.compute_gradients(loss, var_list, tape=tape)
        pairs = self._hvd_pairs(pairs)
        self._hvd_remember([g for g, _ in pairs])
        return pairs

    def get_gradients(self, loss, params):
        params = list(params)
        return self._hvd_remember(
            self._hvd_reduce_or_add(list(super().get_gradients(loss, params)), params))

    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        if self._agg_helper is None:
            return super().apply_gradients(grads_and_vars, *args, **kwargs)
        pairs = list(grads_and_vars)
        if not self._hvd_reduced_already(pairs):  # a custom loop's own tape gradients
            pairs = self._hvd_pairs(pairs)
        self._hvd_remember([g for g, _ in pairs])  # the update's aggregation leaves them be
        base = super()
        return self._agg_helper.apply(lambda: base.apply_gradients(pairs, *args, **kwargs),
                                      self.iterations)

    def aggregate_gradients(self, grads_and_vars):  # keras.optimizers.Optimizer (2.11+)
        grads_and_vars = list(grads_and_vars)
        reduced = self._hvd_reduced_already(grads_and_vars)
        aggregated = super().aggregate_gradients(grads_and_vars)
        return aggregated if reduced else self._hvd_pairs(aggregated)

    def _aggregate_gradients(self, grads_and_vars):  # keras.optimizers.legacy (OptimizerV2)
        grads_and_vars = list(grads_and_vars)
        reduced = self._hvd_reduced_already(grads_and_vars)
        aggregated = super()._aggregate_gradients(grads_and_vars)
        return aggregated if reduced else self._hvd_pairs(aggregated)


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
    if not isinstance(optimizer, _OPTIMIZER_TYPES):
        raise ValueError(f"{what}: expected a keras.optimizers.Optimizer instance, got "
                         f"{type(optimizer).__name__} {optimizer!r}")
    if keras.backend.backend() != "tensorflow":
        raise ValueError(f"{what}: Keras backend {keras.backend.backend()!r} is not supported: "
                         "set KERAS_BACKEND=tensorflow (with PyTorch, use hvd.torch)")
    if KERAS2 and isinstance(optimizer, _LossScaleOptimizer) and backward_passes_per_step > 1:
        raise ValueError(f"{what}: backward_passes_per_step > 1 with a LossScaleOptimizer "
                         "(mixed_float16) is not supported")
    if KERAS2 and isinstance(optimizer, _LossScaleOptimizer):
        # Its apply_gradients reduces through the inner optimizer's aggregation, before the
        # check: wrap the inner one.
        inner = DistributedOptimizer(
            optimizer.inner_optimizer, name, compression=compression,
            sparse_as_dense=sparse_as_dense, gradient_predivide_factor=gradient_predivide_factor,
            op=op, backward_passes_per_step=backward_passes_per_step,
            average_aggregated_gradients=average_aggregated_gradients, num_groups=num_groups,
            groups=groups, process_set=process_set, scale_local_gradients=scale_local_gradients)
        return _LossScaleOptimizer(inner, dynamic=optimizer.dynamic,
                                   initial_scale=optimizer.initial_scale,
                                   dynamic_growth_steps=optimizer.dynamic_growth_steps)
    if not KERAS2 and not hasattr(optimizer, "_clip_gradients"):
        raise RuntimeError(f"{what}: this Keras ({keras.__version__}) has no "
                           "Optimizer._clip_gradients, where hvd reduces the gradients")
    options = reduce_options(what, op, compression, sparse_as_dense, gradient_predivide_factor,
                             num_groups, groups, process_set)
    passes = BackwardPasses(backward_passes_per_step, bool(average_aggregated_gradients), what)
    loss_scaled = not KERAS2 and isinstance(optimizer, _LossScaleOptimizer)
    if (not KERAS2 and not loss_scaled
            and keras.config.dtype_policy().name == "mixed_float16"):
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
    if backward_passes_per_step > 1 and not KERAS2:
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
    mixin = (_DistributedKeras2Mixin if KERAS2 else
             _DistributedLossScaleMixin if loss_scaled else _DistributedOptimizerMixin)
    cls = type(base.__name__, (mixin, base),
               {"__module__": base.__module__, "__qualname__": base.__qualname__})
    distributed = cls.from_config(config)
    distributed._hvd_options = options
    distributed._hvd_local = LocalSources()
    distributed._hvd_scale_local = bool(scale_local_gradients)
    if KERAS2 and backward_passes_per_step > 1:
        distributed._agg_helper = GradientAccumulation(passes, distributed._hvd_reduce)
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
