"""Sizing torch's intra-op thread pool to the CPUs of one rank.

torch sizes its pool from the CPUs the process may use when it is imported, before hvd.init()
binds each rank to its share. Two ranks on a 2-core host then run two OpenMP threads each on
one core, and OpenMP's spinning waits make them take turns: Horovod's synthetic ResNet-18
benchmark, unchanged, took 4.5 s per step instead of 2.1 s. torchrun sets OMP_NUM_THREADS=1
for the same reason; hvd uses the rank's real share, so a rank with 8 cores keeps 8 threads.
"""
import torch

from hvd import _core


def fit_intra_op_threads() -> None:
    """Lowers torch's thread count to this rank's CPU share, unless OMP_NUM_THREADS chose it.
    A torch.set_num_threads() call after hvd.init() still wins."""
    share = _core.compute_threads()  # 0: OMP_NUM_THREADS is set
    current = torch.get_num_threads()
    if share and current > share:
        torch.set_num_threads(share)
        _core.log_info("torch", f"torch intra-op threads {current} -> {share}, this rank's "
                                f"share of the CPUs (set OMP_NUM_THREADS to choose)")
