"""hvd's stand-in for Horovod: `import horovod.torch as hvd` runs unchanged on hvd's runtime.

Put on sys.path only by `hvdrun --horovod-compat` or HVD_HOROVOD_COMPAT=1. If a real Horovod is
installed further down the path it is shadowed, and that is said out loud, never silently
(hvd/_horovod_shadowing.py).

This package only re-exports hvd's names under Horovod's module names (a test checks that every
file here holds nothing but imports, `__all__` and docstrings). Where Horovod's results differ
from hvd's, the Horovod versions live in hvd/torch/horovod_semantics.py and
hvd/tensorflow/horovod_semantics.py; the helpers Horovod's scripts and tests import in
hvd/_horovod_support.py.
"""
from hvd._horovod_shadowing import shadowed as _shadowed  # noqa: F401  (warns when it is set)
from hvd._horovod_support import HOROVOD_API_VERSION as __version__  # noqa: F401
from hvd._horovod_support import IS_HVD_COMPAT  # noqa: F401
from hvd._run import run  # noqa: F401  (horovod.run)
