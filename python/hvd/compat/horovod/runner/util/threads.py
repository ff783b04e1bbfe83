"""horovod.runner.util.threads on hvd: running a function in the background."""
from hvd._horovod_support import in_thread  # noqa: F401
