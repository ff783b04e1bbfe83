"""How hvd's collectives (hvd._frontend.Collectives) reach tf.Tensors: through DLPack, without a
copy, host memory only (tensors on a GPU are copied to the host first)."""
from __future__ import annotations

import functools

import numpy as _np
import tensorflow as tf

from hvd import _core
from hvd._frontend import ArrayAdapter


_to_dlpack = tf.experimental.dlpack.to_dlpack
_from_dlpack = tf.experimental.dlpack.from_dlpack


@functools.lru_cache(maxsize=None)
def _dlpack_takes_bool() -> bool:
    """TensorFlow before 2.16 exports bool tensors as DLPack uint8 and refuses DLPack bool.
    Asked at the first bool collective: probing at import would start TensorFlow's runtime
    before the user (or hvd.init) sizes its thread pools."""
    try:
        _from_dlpack(_core.empty("bool", [1]).__dlpack__())
        return True
    except tf.errors.InvalidArgumentError:  # Unsupported Type Codes: 6
        return False


def _on_host(x):
    # An eager tensor's device reads ".../device:CPU:0"; no DeviceSpec parse per tensor per step.
    return not x.device or "device:CPU:" in x.device


class TensorFlowAdapter(ArrayAdapter):
    name = "tf.Tensor"
    alltoall_always_returns_splits = True  # the gradient needs them; alltoall() drops them

    # The frontend hands the core eager tensors only (_tensor converts variables; in graphs
    # _run calls the collectives inside a py_function, on eager tensors).
    def is_array(self, x):
        return isinstance(x, tf.Tensor)

    def dtype_name(self, x):
        return x.dtype.name

    def exported(self, x):
        if isinstance(x, _core.Buffer):
            return x
        if x.dtype == tf.bool and not _dlpack_takes_bool():
            return x.numpy()  # a host tensor (contiguous()); NumPy exports DLPack bool
        return _to_dlpack(x)

    def contiguous(self, x):
        # TensorFlow's dense tensors are always row-major: only where they live matters.
        if not _on_host(x):
            with tf.device("/CPU:0"):
                x = tf.identity(x)
        return x

    def is_contiguous(self, x):
        return True

    def empty_like(self, x):
        # TensorFlow tensors are immutable: the core writes into memory of its own.
        return _core.empty(x.dtype.name, list(x.shape))

    def output(self, x):
        return self.from_buffer(x) if isinstance(x, _core.Buffer) else x

    def from_buffer(self, buffer):
        try:
            return _from_dlpack(buffer.__dlpack__())
        except tf.errors.InvalidArgumentError:
            if _dlpack_takes_bool():
                raise
            return tf.constant(_np.from_dlpack(buffer))  # bool: TensorFlow < 2.16 refuses it

    def scaled(self, x, factor):
        # As the core scales (and Horovod's CPU kernels): float16 and bfloat16 in float32 math,
        # other floats in their own precision, integers in float64, truncated back.
        if x.dtype in (tf.float16, tf.bfloat16):
            return tf.cast(tf.cast(x, tf.float32) * tf.constant(factor, tf.float32), x.dtype)
        if x.dtype.is_floating:
            return x * tf.constant(factor, dtype=x.dtype)
        return tf.cast(tf.cast(x, tf.float64) * factor, x.dtype)

    def scale_(self, x, factor):
        return self.scaled(x, factor)  # immutable: a new tensor

    def int64_array(self, values):
        return tf.constant(list(values), dtype=tf.int64)

    def splits_array(self, values):
        return tf.constant(list(values), dtype=tf.int32)  # horovod.tensorflow's dtype
