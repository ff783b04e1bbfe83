"""SyncBatchNormalization: Keras's BatchNormalization with training-mode statistics taken over
every rank's batch (horovod.tensorflow's layer).

Each rank sums its inputs, their squares and their count per channel; one allreduce (Sum) adds
the ranks' sums, which weights each rank by its batch, so ranks with unequal batches give the
statistics of the concatenated batch (Horovod averages the ranks' moments, the same for equal
batches). The allreduce is differentiable, so the input gradient includes what the other ranks'
losses owe this rank's inputs. Inference uses the moving statistics, as BatchNormalization."""
import keras
import tensorflow as tf

from hvd._basics import Sum, global_process_set
from hvd.tensorflow.mpi_ops import allreduce

_KERAS2 = int(keras.__version__.split(".")[0]) < 3


class SyncBatchNormalization(keras.layers.BatchNormalization):
    def __init__(self, *args, process_set=global_process_set, **kwargs):
        if kwargs.get("synchronized"):
            raise ValueError("SyncBatchNormalization: synchronized=True is tf.distribute's "
                             "synchronisation; this layer synchronises through hvd already")
        if _KERAS2:
            # tf.keras 2's fused kernel computes the moments itself, without _moments.
            if kwargs.get("fused"):
                raise ValueError("SyncBatchNormalization: fused=True cannot synchronise")
            kwargs["fused"] = False
        super().__init__(*args, **kwargs)
        self._hvd_process_set = process_set

    if _KERAS2:
        def _calculate_mean_and_var(self, inputs, reduction_axes, keep_dims, mask=None):
            return self._hvd_moments(inputs, mask, list(reduction_axes), keep_dims)
    else:
        def _moments(self, inputs, mask):
            return self._hvd_moments(inputs, mask, list(self._reduction_axes))

    def _hvd_moments(self, inputs, mask, axes, keepdims=False):
        x = inputs
        if x.dtype in (tf.float16, tf.bfloat16):
            x = tf.cast(x, tf.float32)  # sums of squares over a batch overflow float16
        weights = tf.ones_like(x) if mask is None else tf.broadcast_to(
            tf.cast(mask, x.dtype)[..., None], tf.shape(x))
        local = tf.stack([tf.reduce_sum(weights * x, axes, keepdims),
                          tf.reduce_sum(weights * x * x, axes, keepdims),
                          tf.reduce_sum(weights, axes, keepdims)])
        total = allreduce(local, op=Sum, process_set=self._hvd_process_set)
        count = tf.maximum(total[2], 1.0)
        mean = total[0] / count
        variance = tf.maximum(total[1] / count - mean * mean, 0.0)
        return tf.cast(mean, inputs.dtype), tf.cast(variance, inputs.dtype)
