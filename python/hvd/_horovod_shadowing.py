"""Imported once, by the `horovod` compatibility package's __init__ (hvd/compat/horovod) and by
nothing else: when that package shadows a Horovod installed further down sys.path, it says so
out loud (a RuntimeWarning pointing at the script's import) rather than silently.

`shadowed` is the shadowed Horovod's __init__.py, or None.
"""
import importlib.machinery
import os
import sys
import warnings


def _real_horovod():
    # the folder holding the compatibility package (what --horovod-compat put on the path),
    # found from the package being imported
    compat = getattr(sys.modules.get("horovod"), "__file__", None)
    if compat is None:  # not imported by the compatibility package: nothing to tell
        return None
    here = os.path.dirname(os.path.dirname(os.path.abspath(compat)))
    others = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("horovod", others)
    return spec.origin if spec and spec.origin else None


shadowed = _real_horovod()
if shadowed:
    # 1 this module, 2 horovod/__init__.py, 3 the script's import (importlib's
    # frames do not count)
    warnings.warn(f"horovod: hvd's compatibility package is in use (--horovod-compat / "
                  f"HVD_HOROVOD_COMPAT=1) and shadows the Horovod installed at {shadowed}",
                  RuntimeWarning, stacklevel=3)
