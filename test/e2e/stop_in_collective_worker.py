"""For test_hvdrun_failures.py: rank 1 submits a 64 MiB allreduce and stops itself (SIGSTOP)
before the others submit theirs; the others wait until /proc shows it stopped, then submit, so
their transfer starts with a stopped peer every time (a timer that stops rank 1 at a random
moment can hit the gap between two operations). They print "rank R failed after S s: ERROR"
when their allreduce fails, and exit 3."""
import os, signal, sys, time
import numpy as np
import hvd, hvd.numpy as hn


def stopped(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")


hvd.init()
pids = hn.allgather(np.array([os.getpid()], dtype=np.int64), name="pids")
x = np.ones(16 << 20, dtype=np.float32)
if hvd.rank() == 1:
    handle = hn.allreduce_async(x, name="big")
    time.sleep(0.5)  # its request reaches the coordinator in milliseconds
    os.kill(os.getpid(), signal.SIGSTOP)
    hn.synchronize(handle)
    sys.exit("rank 1 should never finish")
deadline = time.monotonic() + 30
while not stopped(int(pids[1])):
    if time.monotonic() > deadline:
        sys.exit("rank 1 did not stop")
    time.sleep(0.05)
start = time.monotonic()
try:
    hn.allreduce(x, name="big")
    print("no error", hvd.rank())
except Exception as e:
    print(f"rank {hvd.rank()} failed after {time.monotonic()-start:.1f} s: {e}", flush=True)
    sys.exit(3)
