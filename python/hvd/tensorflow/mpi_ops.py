"""hvd's collectives on TensorFlow tensors, with horovod.tensorflow's names and signatures, in
eager code and inside tf.function, and differentiable (tf.GradientTape) where Horovod's are.

No TensorFlow op is compiled: tensors reach the core through DLPack without a copy, and results
come back the same way (64-byte aligned, as TensorFlow's CPU kernels require). Inside a
tf.function each collective runs as a tf.py_function, and each one is ordered after the
previous collective of the same graph, so every rank runs them in program order: TensorFlow
would otherwise be free to start independent ops in any order, which could pair different
collectives on different ranks. XLA (jit_compile=True) cannot compile a py_function.

Tensors on a GPU are copied to host memory first (TensorFlow does not say which stream
produced a tensor, so the core could not wait for it); the results are host tensors, which
TensorFlow copies to the GPU when a GPU op reads them.

Gradients are those of the sum of every rank's loss, as in hvd.torch: allreduce's backward is
an allreduce of the gradient; allgather's sums the gradient and keeps this rank's rows;
broadcast's sums it on the root (zero elsewhere); alltoall's sends each row back; reducescatter's
gathers the parts.
"""
from __future__ import annotations

import contextlib
from typing import Callable, List, Sequence

import tensorflow as tf

from hvd import _basics, _core
from hvd import numpy as _hvd_numpy
from hvd._basics import Average, Sum, global_process_set
from hvd._frontend import Collectives, _label
from hvd._gradients import check_differentiable as _check_differentiable
from hvd._gradients import grad_name as _grad_name
from hvd._handles import synchronize
from hvd.tensorflow.adapter import TensorFlowAdapter
from hvd.tensorflow.compression import Compression
from hvd.tensorflow.errors import UnsupportedForIndexedSlices, raise_rejections_by_type, tf_errors

_c = Collectives(TensorFlowAdapter())
raise_rejections_by_type()  # a graph's rejections as OperationRejectedError (errors.py)


# -- running a collective eagerly or inside a graph --------------------------------------------
def _run(eager_fn: Callable[..., List[tf.Tensor]], inputs: Sequence[tf.Tensor],
         out_dtypes: Sequence[tf.DType], out_shapes: Sequence[tf.TensorShape],
         what: str, process_set=None) -> List[tf.Tensor]:
    """eager_fn(*inputs) -> list of tensors. Eagerly it just runs; in a graph it becomes one
    py_function, ordered after the graph's previous collective (see the module's docstring),
    whose outputs get the static shapes a py_function cannot infer."""
    if tf.executing_eagerly():
        return list(tf_errors(eager_fn)(*inputs))
    # A process set that does not exist cannot become one later: refused while the graph is
    # built, as Horovod does, not each time it runs.
    set_id = _basics.process_set_id(process_set)
    if set_id not in _core.process_set_ids():
        raise ValueError(f"{what}: process set {set_id} does not exist")

    def build():
        outs = tf.py_function(tf_errors(eager_fn), list(inputs), list(out_dtypes),
                              name=f"hvd_{what.split()[0]}")
        return list(outs) if isinstance(outs, (list, tuple)) else [outs]

    outs = _chained(build)
    for o, shape in zip(outs, out_shapes):
        o.set_shape(shape)
    return outs


def _chained(build):
    """build()'s ops (a tensor or a list of them, the first standing for the collective),
    ordered after the graph's previous collective and recorded as its latest."""
    graph = tf.compat.v1.get_default_graph()
    previous = getattr(graph, "_hvd_last_collective", None)
    with tf.control_dependencies([previous] if previous is not None else []):
        out = build()
    first = out[0] if isinstance(out, (list, tuple)) else out
    if first is not None:
        graph._hvd_last_collective = first.op
    return out


@contextlib.contextmanager
def separate_chain():
    """Collectives built inside are ordered among themselves only, not after the graph's
    earlier ones, and later ones are not ordered after them: for ops that a TF1 session runs
    on their own (a hook's broadcast), which must not depend on the training step's ops (its
    placeholders would then need feeding). Every rank must build the same ops inside."""
    graph = tf.compat.v1.get_default_graph()
    saved = getattr(graph, "_hvd_last_collective", None)
    graph._hvd_last_collective = None
    try:
        yield
    finally:
        graph._hvd_last_collective = saved


def _rows_vary(shape: tf.TensorShape) -> tf.TensorShape:
    """The shape of a result whose first dimension depends on the other ranks' tensors."""
    if shape.rank is None:
        return shape
    return tf.TensorShape([None]).concatenate(shape[1:] if shape.rank else [])


def _tensor(x, what: str):
    if isinstance(x, tf.IndexedSlices):
        return x
    try:
        return tf.convert_to_tensor(x)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what}: expected a tf.Tensor (or a value convertible to one), got "
                         f"{type(x).__name__}: {e}") from None


def _differentiable(x) -> bool:
    return x.dtype.is_floating


# -- allreduce ----------------------------------------------------------------------------------
def _grouped_allreduce_raw(tensors, op, name, prescale, postscale, process_set):
    what = _label("grouped_allreduce" if len(tensors) > 1 else "allreduce", name)

    def eager(*ts):
        return synchronize(_c.grouped_allreduce_async(ts, op, name, prescale, postscale,
                                                      process_set))

    return _run(eager, tensors, [t.dtype for t in tensors], [t.shape for t in tensors], what,
                process_set)


def _grouped_allreduce_diff(tensors, op, name, prescale, postscale, process_set):
    if not any(_differentiable(t) for t in tensors):
        return _grouped_allreduce_raw(tensors, op, name, prescale, postscale, process_set)

    @tf.custom_gradient
    def fn(*ts):
        outs = _grouped_allreduce_raw(list(ts), op, name, prescale, postscale, process_set)

        def grad(*dys):
            _check_differentiable(op, _label("allreduce backward", name))
            dys = [tf.zeros_like(t) if d is None else d for d, t in zip(dys, ts)]
            return _grouped_allreduce_raw(dys, op, _grad_name(name), prescale, postscale,
                                          process_set)

        return outs, grad

    out = fn(*tensors)
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _sparse_allreduce(slices: tf.IndexedSlices, op, name, process_set, scale=1.0):
    """Horovod's sparse allreduce: an allgather of values and of indices; duplicate indices add
    up where the slices are applied. `scale`: the product of the scale factors (the gradient
    reduction's; the public functions refuse them, as Horovod's do)."""
    if op not in (Average, Sum):
        raise UnsupportedForIndexedSlices(
            f"{_label('allreduce', name)}: tf.IndexedSlices reduce with op=Sum or op=Average "
            "only (or pass sparse_as_dense=True)")
    values = allgather(slices.values, name=f"{name}.values" if name else None,
                       process_set=process_set)
    indices = allgather(slices.indices, name=f"{name}.indices" if name else None,
                        process_set=process_set)
    if op == Average:
        # As Horovod: integer values become floating-point means (TensorFlow's true division).
        values = values / tf.cast(process_set.size(), values.dtype)
    if scale != 1.0:
        values = values * tf.constant(scale, dtype=values.dtype)
    return tf.IndexedSlices(values, indices, dense_shape=slices.dense_shape)


def _refuse_scaled_slices(tensors, prescale_factor, postscale_factor, what):
    if (prescale_factor != 1.0 or postscale_factor != 1.0) and any(
            isinstance(t, tf.IndexedSlices) for t in tensors):
        raise UnsupportedForIndexedSlices(
            f"{what}: prescale_factor and postscale_factor do not apply to tf.IndexedSlices "
            "(or pass sparse_as_dense=True)")


def allreduce(tensor, average=None, device_dense="", device_sparse="",
              compression=Compression.none, op=None, prescale_factor=1.0, postscale_factor=1.0,
              name=None, process_set=global_process_set, ignore_name_scope=False):
    """Reduces `tensor` over the ranks of the process set (default op: Average) into a new
    tensor; tf.IndexedSlices are gathered (Sum or Average). Differentiable for Sum and Average.
    device_dense, device_sparse and ignore_name_scope are accepted for Horovod's signature."""
    del device_dense, device_sparse, ignore_name_scope
    what = _label("allreduce", name)
    op = Collectives._op(op, average, what)
    tensor = _tensor(tensor, what)
    _refuse_scaled_slices([tensor], prescale_factor, postscale_factor, what)
    if isinstance(tensor, tf.IndexedSlices):
        return _sparse_allreduce(tensor, op, name, process_set)
    compressed, ctx = compression.compress(tensor)
    out = _grouped_allreduce_diff([compressed], op, name, prescale_factor, postscale_factor,
                                  process_set)[0]
    return compression.decompress(out, ctx)


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="",
                      compression=Compression.none, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, name=None, process_set=global_process_set,
                      ignore_name_scope=False):
    """Reduces several tensors as one operation (fused); returns the results in order.
    tf.IndexedSlices among them are gathered as in allreduce()."""
    del device_dense, device_sparse, ignore_name_scope
    what = _label("grouped_allreduce", name)
    op = Collectives._op(op, average, what)
    tensors = [_tensor(t, what) for t in tensors]
    _refuse_scaled_slices(tensors, prescale_factor, postscale_factor, what)
    return _grouped_allreduce(tensors, op, compression, prescale_factor, postscale_factor, name,
                              process_set)


def _grouped_allreduce(tensors, op, compression, prescale_factor, postscale_factor, name,
                       process_set):
    """grouped_allreduce that also scales tf.IndexedSlices (the gradient reduction's)."""
    results = [None] * len(tensors)
    dense = [i for i, t in enumerate(tensors) if not isinstance(t, tf.IndexedSlices)]
    for i, t in enumerate(tensors):
        if isinstance(t, tf.IndexedSlices):
            results[i] = _sparse_allreduce(t, op, f"{name}.{i}" if name else None, process_set,
                                           prescale_factor * postscale_factor)
    if dense:
        pairs = [compression.compress(tensors[i]) for i in dense]
        outs = _grouped_allreduce_diff([p[0] for p in pairs], op, name, prescale_factor,
                                       postscale_factor, process_set)
        for i, o, (_, ctx) in zip(dense, outs, pairs):
            results[i] = compression.decompress(o, ctx)
    return results


# -- allgather ----------------------------------------------------------------------------------
def _grouped_allgather_raw(tensors, name, process_set):
    what = _label("grouped_allgather" if len(tensors) > 1 else "allgather", name)

    def eager(*ts):
        return synchronize(_c.grouped_allgather_async(ts, name, process_set))

    return _run(eager, tensors, [t.dtype for t in tensors],
                [_rows_vary(t.shape) for t in tensors], what, process_set)


def _allgather_raw(tensor, name, process_set):
    return _grouped_allgather_raw([tensor], name, process_set)[0]


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Concatenates every rank's tensor along the first dimension (which may differ per rank).
    Differentiable."""
    del ignore_name_scope
    tensor = _tensor(tensor, _label("allgather", name))
    if not _differentiable(tensor):
        return _allgather_raw(tensor, name, process_set)

    return _allgathered_with_gradient([tensor], name, process_set)[0]


def _allgathered_with_gradient(tensors, name, process_set):
    """allgather whose gradient sums each output's gradient over the ranks and keeps this
    rank's rows."""
    @tf.custom_gradient
    def fn(*xs):
        outs = _grouped_allgather_raw(list(xs), name, process_set)

        def grad(*dys):
            rows = [tf.shape(x, out_type=tf.int64)[:1] if x.shape.rank != 0 else
                    tf.constant([1], tf.int64) for x in xs]
            all_rows = _grouped_allgather_raw(rows, f"{name}.rows" if name else None,
                                              process_set)
            summed = _grouped_allreduce_raw(list(dys), Sum, _grad_name(name), 1.0, 1.0,
                                            process_set)
            me = process_set.rank()
            parts = []
            for x, n, total in zip(xs, all_rows, summed):
                offset = tf.reduce_sum(n[:me])
                parts.append(tf.reshape(total[offset:offset + n[me]], tf.shape(x)))
            return parts

        return outs, grad

    return fn(*tensors)


def grouped_allgather(tensors, name=None, ignore_name_scope=False,
                      process_set=global_process_set):
    """allgather of several tensors as one operation. Differentiable."""
    del ignore_name_scope
    what = _label("grouped_allgather", name)
    tensors = [_tensor(t, what) for t in tensors]
    if not any(_differentiable(t) for t in tensors):
        return _grouped_allgather_raw(tensors, name, process_set)
    return _allgathered_with_gradient(tensors, name, process_set)


# -- broadcast ----------------------------------------------------------------------------------
def _broadcast_raw(tensor, root_rank, name, process_set):
    def eager(t):
        return [synchronize(_c.broadcast_async(t, root_rank, name, process_set))]

    return _run(eager, [tensor], [tensor.dtype], [tensor.shape], _label("broadcast", name),
                process_set)[0]


def broadcast(tensor, root_rank, name=None, ignore_name_scope=False,
              process_set=global_process_set):
    """Returns root_rank's tensor (root_rank is a global rank, a member of the process set, as
    in Horovod). Differentiable."""
    del ignore_name_scope
    tensor = _tensor(tensor, _label("broadcast", name))
    if not _differentiable(tensor):
        return _broadcast_raw(tensor, root_rank, name, process_set)

    @tf.custom_gradient
    def fn(x):
        out = _broadcast_raw(x, root_rank, name, process_set)

        def grad(dy):
            summed = _grouped_allreduce_raw([dy], Sum, _grad_name(name), 1.0, 1.0,
                                            process_set)[0]
            if _basics.rank() == root_rank:
                return summed
            # A zero gradient that still depends on the allreduce: graph mode would prune an
            # allreduce nothing reads, and this rank would never submit it while the others wait.
            with tf.control_dependencies([summed]):
                return tf.zeros_like(dy)

        return out, grad

    return fn(tensor)


# -- alltoall -----------------------------------------------------------------------------------
def _alltoall_raw(tensor, splits, name, process_set):
    def eager(t, *s):
        split_list = s[0].numpy().tolist() if s else None
        out, received = synchronize(_c.alltoall_async(t, split_list, name, process_set))
        return [out, received]

    inputs = [tensor] + ([] if splits is None else [splits])
    out, received = _run(eager, inputs, [tensor.dtype, tf.int32],
                         [_rows_vary(tensor.shape), tf.TensorShape([process_set.size()])],
                         _label("alltoall", name), process_set)
    return out, received


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False,
             process_set=global_process_set):
    """Sends splits[j] rows to rank j (equal parts without splits) and returns the received
    rows, and with splits given also the rows received from each rank as an int32 tensor, as
    horovod.tensorflow. Differentiable."""
    del ignore_name_scope
    what = _label("alltoall", name)
    tensor = _tensor(tensor, what)
    if splits is not None:
        splits = _tensor(splits, what)
        if not splits.dtype.is_integer:  # garbage floats would differ per rank, silently
            raise ValueError(f"{what}: splits must be integers, got a {splits.dtype.name} "
                             "tensor")
        splits = tf.cast(splits, tf.int32)
    if not _differentiable(tensor):
        out, received = _alltoall_raw(tensor, splits, name, process_set)
        return (out, received) if splits is not None else out

    @tf.custom_gradient
    def fn(x):
        out, received = _alltoall_raw(x, splits, name, process_set)

        def grad(dy, _received_grad=None):
            back, _ = _alltoall_raw(dy, received, _grad_name(name), process_set)
            return tf.reshape(back, tf.shape(x))

        return (out, tf.stop_gradient(received)), grad

    out, received = fn(tensor)
    return (out, received) if splits is not None else out


# -- reducescatter ------------------------------------------------------------------------------
def _reducescatter_raw(tensors, op, name, process_set, prescale, postscale):
    what = _label("grouped_reducescatter" if len(tensors) > 1 else "reducescatter", name)

    def eager(*ts):
        return synchronize(_c.grouped_reducescatter_async(ts, op, name, process_set, prescale,
                                                          postscale))

    return _run(eager, tensors, [t.dtype for t in tensors],
                [_rows_vary(t.shape) for t in tensors], what, process_set)


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average, name=None,
                  ignore_name_scope=False, process_set=global_process_set, prescale_factor=1.0,
                  postscale_factor=1.0):
    """Reduces (Average or Sum) and returns this rank's part of the first dimension (the first
    parts one row larger when it does not divide). Differentiable."""
    del device_dense, ignore_name_scope
    what = _label("reducescatter", name)
    op = Collectives._op(op, None, what)
    compressed, ctx = compression.compress(_tensor(tensor, what))
    if not _differentiable(compressed):
        out = _reducescatter_raw([compressed], op, name, process_set, prescale_factor,
                                 postscale_factor)[0]
        return compression.decompress(out, ctx)

    out = _reducescattered_with_gradient([compressed], op, name, process_set, prescale_factor,
                                         postscale_factor)[0]
    return compression.decompress(out, ctx)


def _reducescattered_with_gradient(tensors, op, name, process_set, prescale, postscale):
    """reducescatter whose gradient gathers every rank's output gradient, times the factors
    the forward applied."""
    scale = prescale * postscale / (process_set.size() if op == Average else 1)

    @tf.custom_gradient
    def fn(*xs):
        outs = _reducescatter_raw(list(xs), op, name, process_set, prescale, postscale)

        def grad(*dys):
            gathered = _grouped_allgather_raw(list(dys), _grad_name(name), process_set)
            return [tf.reshape(g * tf.constant(scale, dtype=g.dtype) if scale != 1.0 else g,
                               tf.shape(x)) for g, x in zip(gathered, xs)]

        return outs, grad

    return fn(*tensors)


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none, op=Average,
                          name=None, ignore_name_scope=False, process_set=global_process_set,
                          prescale_factor=1.0, postscale_factor=1.0):
    """reducescatter of several tensors as one operation. Differentiable."""
    del device_dense, ignore_name_scope
    what = _label("grouped_reducescatter", name)
    op = Collectives._op(op, None, what)
    pairs = [compression.compress(_tensor(t, what)) for t in tensors]
    compressed = [p[0] for p in pairs]
    run = (_reducescattered_with_gradient if any(_differentiable(t) for t in compressed)
           else _reducescatter_raw)
    outs = run(compressed, op, name, process_set, prescale_factor, postscale_factor)
    return [compression.decompress(o, c) for o, (_, c) in zip(outs, pairs)]


# -- synchronisation and objects ----------------------------------------------------------------
def barrier(process_set=global_process_set):
    """Returns when every rank of the process set has called it."""
    _c.barrier(process_set)


def join(device=-1):
    """This rank has no more batches: until every rank joined, the others' allreduces count it
    as zeros. Returns the last rank to join, as an int32 tensor (horovod.tensorflow's)."""
    return tf.constant(_c.join(device), tf.int32)


def broadcast_object(obj, root_rank=0, session=None, name=None,
                     process_set=global_process_set):
    """Returns root_rank's `obj` on every rank. Objects travel pickled, and unpickling runs code
    the sender chose: use it between the trusted ranks of one job only."""
    del session  # TF1 sessions: hvd runs eagerly
    return _hvd_numpy.broadcast_object(obj, root_rank, name, process_set)


def allgather_object(obj, session=None, name=None, process_set=global_process_set):
    """Every rank's `obj`, in rank order (pickled: trusted peers only)."""
    del session
    return _hvd_numpy.allgather_object(obj, name, process_set)


def broadcast_variables(variables, root_rank, process_set=global_process_set, inplace=None):
    """Assigns root_rank's value to every variable (model.variables, optimizer.variables), all
    broadcasts in flight together."""
    del inplace  # variables are always assigned
    return _assign_broadcast(list(variables), root_rank, "broadcast_variables", process_set)


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """horovod.tensorflow's in-place broadcast: assigns root_rank's values to `variables` and
    returns their new values."""
    _label("broadcast_", name)  # checks the name
    variables = list(variables)
    done = _assign_broadcast(variables, root_rank, name or "broadcast_", process_set)
    with tf.control_dependencies([done] if done is not None else []):
        return [tf.identity(v) for v in variables]


def _assign_broadcast(variables, root_rank, label, process_set):
    """Broadcasts named label.0, label.1, ...: eagerly all in flight, then assigned; in a graph,
    the op that assigns them."""
    for v in variables:
        if not hasattr(v, "assign"):  # tf.Variable, keras.Variable
            raise ValueError(f"{label}: expected variables, got {type(v).__name__}")
    if not tf.executing_eagerly():
        return tf.group(*[v.assign(broadcast(v, root_rank, f"{label}.{i}",
                                             process_set=process_set))
                          for i, v in enumerate(variables)])
    handles = [_c.broadcast_async(_tensor(v, label), root_rank, f"{label}.{i}", process_set)
               for i, v in enumerate(variables)]
    for v, h in zip(variables, handles):
        v.assign(synchronize(h))
    return None


# -- graph-friendly topology queries (horovod.tensorflow's *_op functions) ----------------------
def size_op(process_set_id=0, name=None):
    return tf.constant(_basics.size() if process_set_id == 0 else
                       len(_core.process_set_ranks(process_set_id)), tf.int32, name=name)


def rank_op(name=None):
    return tf.constant(_basics.rank(), tf.int32, name=name)


def local_size_op(name=None):
    return tf.constant(_basics.local_size(), tf.int32, name=name)


def local_rank_op(name=None):
    return tf.constant(_basics.local_rank(), tf.int32, name=name)


def process_set_included_op(process_set_id=0, name=None):
    return tf.constant(process_set_id == 0 or _basics.rank() in
                       _core.process_set_ranks(process_set_id), tf.int32, name=name)

