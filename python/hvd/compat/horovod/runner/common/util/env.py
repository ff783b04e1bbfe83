"""horovod.runner.common.util.env on hvd: the rank and size the launcher gave this process."""
from hvd._horovod_support import get_env_rank_and_size  # noqa: F401
