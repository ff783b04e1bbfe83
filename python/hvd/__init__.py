"""hvd: data-parallel training runtime (in the class of Horovod).

This package holds what every frontend shares: joining the job (``init``), the topology
queries, process sets, build queries and the timeline. The collectives live in the frontends:
``hvd.torch`` for PyTorch tensors and ``hvd.numpy`` for NumPy arrays. Run scripts with
``hvdrun -np N python train.py``, or a function with ``hvd.run(train, np=N)``; without hvdrun
a process is a job of one rank.
"""
from hvd._basics import (
    Adasum,
    Average,
    HorovodInternalError,
    HostsUpdatedInterrupt,
    Max,
    Min,
    OperationRejectedError,
    ProcessSet,
    Product,
    Sum,
    add_process_set,
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    gloo_built,
    gloo_enabled,
    global_process_set,
    init,
    is_homogeneous,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rank,
    remove_process_set,
    rocm_built,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
)
from hvd._run import RunError, run

__version__ = "0.1.0"
