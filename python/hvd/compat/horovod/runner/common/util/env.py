"""horovod.runner.common.util.env on hvd: the rank and size the launcher gave this process."""
import os

# The variables of horovodrun (and hvdrun, which sets the HOROVOD_ ones too), Open MPI and
# MPICH/PMI, in the order Horovod reads them.
_RANK_AND_SIZE = [("HOROVOD_RANK", "HOROVOD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                  ("PMI_RANK", "PMI_SIZE")]


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
