"""horovod.common.util on hvd: the helpers Horovod's scripts and tests import from it."""
import contextlib
import os

from hvd._basics import (cuda_built, ddl_built, gloo_built, gloo_enabled, mpi_built,  # noqa: F401
                         mpi_enabled, nccl_built, rocm_built)


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
