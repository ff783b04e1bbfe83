"""horovod.common.elastic on hvd: the framework-independent elastic state and run loop."""
from hvd._elastic import ObjectState, State, run_fn  # noqa: F401
