"""Runs a PyTorch training script (argv[1:]) as `python script args`, and just before its
hvd.shutdown() prints one line per rank:
  PLACED rank size local_rank local_size cross_rank cross_size hostname WEIGHTS crc32
where the crc32 covers every parameter its DistributedOptimizer updated. Equal digests on all
ranks prove they trained as one job; the placement shows where the launcher put each rank."""
import runpy
import socket
import sys
import zlib

import hvd.torch as hvd

optimizers = []
make_optimizer = hvd.DistributedOptimizer
shutdown = hvd.shutdown


def recording_optimizer(*args, **kwargs):
    optimizers.append(make_optimizer(*args, **kwargs))
    return optimizers[-1]


def report_then_shutdown():
    weights = b"".join(p.detach().cpu().numpy().tobytes() for o in optimizers
                       for group in o.param_groups for p in group["params"])
    # One write: launchers that forward output in chunks (Hydra) do not split the line then.
    sys.stdout.write(" ".join(map(str, [
        "PLACED", hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), hvd.cross_rank(),
        hvd.cross_size(), socket.gethostname(), "WEIGHTS", zlib.crc32(weights)])) + "\n")
    sys.stdout.flush()
    shutdown()


hvd.DistributedOptimizer = recording_optimizer
hvd.shutdown = report_then_shutdown
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
