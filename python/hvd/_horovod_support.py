"""Small helpers that Horovod's scripts and its own test suites import from the horovod package
(horovod.common.util, horovod.runner..., horovod.tensorflow.util and .mpi_ops' `_basics`).

hvd itself does not use them; the `horovod` compatibility package (hvd/compat/horovod) only
re-exports them under Horovod's module names. None of them touches a collective or a gradient:
the differences in what collectives compute are in hvd/torch/horovod_semantics.py and
hvd/tensorflow/horovod_semantics.py. Nothing here imports a framework at import time.
"""
import contextlib
import os
import threading

from hvd import _core

# horovod: the Horovod API level the compatibility package follows, and how a script can tell
# that it runs on hvd.
HOROVOD_API_VERSION = "0.28.1+hvd"
IS_HVD_COMPAT = True


# horovod.common.util

@contextlib.contextmanager
def env(**variables):
    """Sets environment variables (those given as None are left alone) for the duration of the
    block, then puts back what was there before."""
    variables = {k: v for k, v in variables.items() if v is not None}
    before = {k: os.environ.get(k) for k in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def is_version_greater_equal_than(ver, target):
    """Whether version string `ver` is at least `target` ("major.minor.patch")."""
    from packaging import version
    if not isinstance(ver, str) or not isinstance(target, str):
        raise ValueError(f"is_version_greater_equal_than takes two strings, got "
                         f"{type(ver).__name__} and {type(target).__name__}")
    if len(target.split(".")) != 3:
        raise ValueError(f"the target version must read major.minor.patch, got {target!r}")
    return version.parse(ver) >= version.parse(target)


# horovod.runner.common.util.env

# The variables of horovodrun (and hvdrun, which sets the HOROVOD_ ones too), Open MPI and
# MPICH/PMI, in the order Horovod reads them.
_RANK_AND_SIZE = [("HOROVOD_RANK", "HOROVOD_SIZE"),
                  ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"), ("PMI_RANK", "PMI_SIZE")]


def get_env_rank_and_size():
    """(rank, size) from the first launcher's pair of variables that is set; (0, 1) when none
    is. Raises RuntimeError when only one of a pair is set."""
    for rank_name, size_name in _RANK_AND_SIZE:
        rank, size = os.environ.get(rank_name), os.environ.get(size_name)
        if rank is not None and size is not None:
            return int(rank), int(size)
        if rank is not None or size is not None:
            raise RuntimeError(f"cannot tell this process's rank and size: {rank_name} and "
                               f"{size_name} must be set together")
    return 0, 1


# horovod.runner.util.threads

def in_thread(target, args=(), name=None, daemon=True, silent=False):
    """Starts target(*args) on a new thread and returns the thread. `silent` drops the
    exception the target raises; `args` must be a tuple, as in Horovod."""
    if not isinstance(args, tuple):
        raise ValueError(f"args must be a tuple, not {type(args).__name__} (for one argument "
                         f"use (arg,))")
    run = target
    if silent:
        def run(*a):
            try:
                target(*a)
            except Exception:  # noqa: BLE001 - what `silent` asks for
                pass
    thread = threading.Thread(target=run, args=args, name=name, daemon=daemon)
    thread.start()
    return thread


# horovod.tensorflow.util

def _executing_eagerly():
    """Whether TensorFlow runs eagerly here (False inside a tf.function or a v1 graph)."""
    import tensorflow as tf
    return tf.executing_eagerly()


def vars_to_refs(variables):
    """Hashable references to variables (for sets and dict keys)."""
    if isinstance(variables, list):
        return [vars_to_refs(v) for v in variables]
    return variables.ref()


def refs_to_vars(refs):
    """The variables behind vars_to_refs' references."""
    if isinstance(refs, list):
        return [refs_to_vars(r) for r in refs]
    return refs.deref()


# horovod.tensorflow.mpi_ops._basics

class _Basics:
    """horovod.tensorflow.mpi_ops._basics: the one internal query scripts and tests use."""

    @staticmethod
    def _get_process_set_ids_and_ranks():
        """{process set id: its global ranks} for every registered process set."""
        return {i: list(_core.process_set_ranks(i)) for i in _core.process_set_ids()}


_basics = _Basics()
