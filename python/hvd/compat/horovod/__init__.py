"""hvd's stand-in for Horovod: `import horovod.torch as hvd` runs unchanged on hvd's runtime.

Put on sys.path only by `hvdrun --horovod-compat` or HVD_HOROVOD_COMPAT=1. If a real Horovod is
installed further down the path it is shadowed, and that is said out loud, never silently."""
import importlib.machinery
import os
import sys
import warnings

__version__ = "0.28.1+hvd"  # the Horovod API level this package follows
IS_HVD_COMPAT = True


def _real_horovod():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    others = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("horovod", others)
    return spec.origin if spec and spec.origin else None


_shadowed = _real_horovod()
if _shadowed:
    warnings.warn(f"horovod: hvd's compatibility package is in use (--horovod-compat / "
                  f"HVD_HOROVOD_COMPAT=1) and shadows the Horovod installed at {_shadowed}",
                  RuntimeWarning, stacklevel=2)
