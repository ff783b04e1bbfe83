"""For test_hvdrun_failures.py: every rank allreduces 64 MiB in a loop; rank 1 stops itself
(SIGSTOP) after 1 s, in the middle of a transfer. The others print "rank R failed after S s:
ERROR" when their allreduce fails, and exit 3."""
import os, signal, sys, threading, time
import numpy as np
import hvd, hvd.numpy as hn
hvd.init()
if hvd.rank() == 1:
    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGSTOP)).start()
x = np.ones(16 << 20, dtype=np.float32)
start = time.monotonic()
try:
    while True:
        hn.allreduce(x, name="big")
except Exception as e:
    print(f"rank {hvd.rank()} failed after {time.monotonic()-start:.1f} s: {e}", flush=True)
    sys.exit(3)
