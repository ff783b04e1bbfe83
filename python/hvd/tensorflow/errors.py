"""hvd.tensorflow's errors as TensorFlow's types, the ones Horovod's scripts catch: a rejected
collective is tf.errors.FailedPreconditionError (eagerly, and inside a v1 Session or a
tf.function call, see raise_rejections_by_type), a bad argument tf.errors.InvalidArgumentError,
and what tf.IndexedSlices cannot do NotImplementedError."""
from __future__ import annotations

import functools

import tensorflow as tf

from hvd import _core


class OperationRejectedError(tf.errors.FailedPreconditionError, _core.OperationRejectedError):
    """Every rank's collective was refused alike (the ranks disagreed on its shape, dtype, root
    or op; it needed a rank that has joined): tf.errors.FailedPreconditionError, as Horovod's
    kernels raise, and hvd.OperationRejectedError (a HorovodInternalError). Later collectives
    still run. Its arguments are TensorFlow's (node_def, op, message[, error_code]): Keras
    re-raises an OpError from a layer's call as e.__class__(node_def, op, message, code)."""

    def __init__(self, node_def, op, message, *args):
        tf.errors.FailedPreconditionError.__init__(self, node_def, op, message, *args)


# Inside a graph a collective is a py_function, whose errors TensorFlow reports as UnknownError
# (it keeps only ValueError, TypeError and NotImplementedError's codes) with the Python
# exception's "<type>: <message>" as text. Sessions and tf.function calls re-raise a rejection
# as OperationRejectedError, as Horovod's compiled kernels' FailedPreconditionError.
_REJECTED = f"{OperationRejectedError.__name__}: "


def _as_rejection(e):
    if isinstance(e, tf.errors.UnknownError) and _REJECTED in (e.message or ""):
        return OperationRejectedError(e.node_def, e.op, e.message)
    return e


def raise_rejections_by_type():
    """Wraps the two places where a graph's run raises: a v1 Session's run, and an eager call
    of a graph (tf.function). Where a TensorFlow version has neither, rejections stay
    UnknownError (their text still names them)."""
    from tensorflow.python.client import session as tf_session
    from tensorflow.python.eager import context as tf_context

    def typed(method):
        def run(*args, **kwargs):
            try:
                return method(*args, **kwargs)
            except tf.errors.UnknownError as e:
                rejection = _as_rejection(e)
                if rejection is e:
                    raise
                raise rejection from None

        run._hvd_wrapped = True
        return run

    for owner, name in ((tf_session.BaseSession, "_do_call"),
                        (tf_context.Context, "call_function")):
        method = getattr(owner, name, None)
        if method is not None and not getattr(method, "_hvd_wrapped", False):
            setattr(owner, name, typed(method))



class InvalidCollectiveArgument(tf.errors.InvalidArgumentError, ValueError):
    """This rank's arguments cannot make the collective (alltoall splits that do not add up):
    tf.errors.InvalidArgumentError, as Horovod's kernels raise, and ValueError. Its arguments
    are TensorFlow's, as OperationRejectedError's."""

    def __init__(self, node_def, op, message, *args):
        tf.errors.InvalidArgumentError.__init__(self, node_def, op, message, *args)


class UnsupportedForIndexedSlices(NotImplementedError, ValueError):
    """What tf.IndexedSlices cannot do (ops other than Sum and Average, scale factors), as
    Horovod raises it (NotImplementedError); a ValueError too, as hvd's refusals are."""


def tf_errors(eager_fn):
    """eager_fn raising TensorFlow's error types for hvd's: the ones Horovod's scripts catch."""
    @functools.wraps(eager_fn)
    def run(*args):
        try:
            return eager_fn(*args)
        except _core.OperationRejectedError as e:
            raise OperationRejectedError(None, None, str(e)) from None
        except ValueError as e:
            if isinstance(e, (tf.errors.OpError, NotImplementedError)):
                raise
            raise InvalidCollectiveArgument(None, None, str(e)) from None

    return run
