"""For test_hvdrun_failures.py: after one allreduce, rank 1 stops itself (SIGSTOP) between
operations; the others print "rank R failed after S s: ERROR" when their next allreduce fails,
and exit 3."""
import os, signal, sys, time
import numpy as np
import hvd, hvd.numpy as hn
hvd.init()
x = np.ones(1024, dtype=np.float32)
hn.allreduce(x, name="warm")
if hvd.rank() == 1:
    os.kill(os.getpid(), signal.SIGSTOP)   # stopped between operations
start = time.monotonic()
try:
    hn.allreduce(x, name="next")
    print("no error", hvd.rank())
except Exception as e:
    print(f"rank {hvd.rank()} failed after {time.monotonic()-start:.1f} s: {e}", flush=True)
    sys.exit(3)
