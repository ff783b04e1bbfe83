"""horovod.common.util on hvd: the helpers Horovod's scripts and tests import from it."""
from hvd._basics import (cuda_built, ddl_built, gloo_built, gloo_enabled, mpi_built,  # noqa: F401
                         mpi_enabled, nccl_built, rocm_built)
from hvd._horovod_support import env, is_version_greater_equal_than  # noqa: F401
