"""The smallest hvd program: every rank contributes its rank, all agree on the sum.

    hvdrun -np 4 python examples/numpy_allreduce.py
"""
import numpy as np

import hvd.numpy as hvd

hvd.init()
total = hvd.allreduce(np.array([hvd.rank()], dtype=np.int64), op=hvd.Sum)
print(f"rank {hvd.rank()}/{hvd.size()}: sum of ranks = {total[0]}")
hvd.shutdown()
