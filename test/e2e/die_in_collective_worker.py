"""For test_hvdrun_failures.py: every rank allreduces 64 MiB in a loop (argv[1]: numpy, torch,
or tensorflow, the last inside a tf.function, so in graph mode); rank 1 raises signal argv[2]
on itself after 1 s, in the middle of a transfer. The others print "rank R failed after S s:
ERROR" when their allreduce fails, and exit 3."""
import os
import sys
import threading
import time

import numpy as np

framework, signal = sys.argv[1], int(sys.argv[2])
if framework == "numpy":
    import hvd.numpy as hvd_ops
    import hvd
    hvd.init()
    step = lambda x: hvd_ops.allreduce(x, name="big")  # noqa: E731
    x = np.ones(16 << 20, dtype=np.float32)
elif framework == "torch":
    import torch
    import hvd.torch as hvd
    hvd.init()
    step = lambda x: hvd.allreduce(x, name="big")  # noqa: E731
    x = torch.ones(16 << 20)
else:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    import hvd.tensorflow as hvd
    hvd.init()
    step = tf.function(lambda x: hvd.allreduce(x, name="big"))
    x = tf.ones([16 << 20])

if hvd.rank() == 1:
    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal)).start()
start = time.monotonic()
try:
    while True:
        step(x)
except Exception as e:  # noqa: BLE001 (the test reads what each framework raises)
    print(f"rank {hvd.rank()} failed after {time.monotonic() - start:.1f} s: "
          f"{type(e).__name__}: {e}", flush=True)
    sys.exit(3)
