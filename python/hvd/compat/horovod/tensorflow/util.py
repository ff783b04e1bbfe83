"""horovod.tensorflow.util on hvd: the helpers Horovod's scripts and tests import from it."""
from hvd._horovod_support import _executing_eagerly, refs_to_vars, vars_to_refs  # noqa: F401
