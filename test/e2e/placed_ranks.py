"""What the cluster tests run on every rank, and how they read it back: each rank writes one
line "PLACED rank size local_rank local_size cross_rank cross_size hostname KEY value", where
value is the sum of rank + 1 over the job (PLACEMENT) or a checksum of the trained weights
(train_digest.py). One write per line: launchers that forward output in chunks (MPICH's Hydra)
then never split it."""
import pathlib
import re
from typing import NamedTuple

from conftest import REPO

EXAMPLE = REPO / "examples" / "pytorch_mnist.py"
TRAIN_DIGEST = pathlib.Path(__file__).parent / "train_digest.py"
PLACEMENT = ("import socket, sys, numpy as np, hvd.numpy as h; h.init(); "
             "s = h.allreduce(np.array([h.rank() + 1.0]), op=h.Sum)[0]; "
             "sys.stdout.write(' '.join(map(str, ['PLACED', h.rank(), h.size(), h.local_rank(), "
             "h.local_size(), h.cross_rank(), h.cross_size(), socket.gethostname(), 'SUM', s])) "
             "+ '\\n'); sys.stdout.flush(); h.shutdown()")


class Placed(NamedTuple):
    where: tuple  # (size, local_rank, local_size, cross_rank, cross_size, hostname)
    value: str    # the sum, or the weights' checksum


def placements(stdout):
    """rank -> Placed, from the PLACED lines of the job's output (hvdrun's prefixes or not)."""
    out = {}
    for line in stdout.splitlines():
        line = re.sub(r"^\[\d+\]<stdout>:", "", line)
        if line.startswith("PLACED "):
            fields = line.split()[1:]
            out[int(fields[0])] = Placed(tuple(int(f) for f in fields[1:6]) + (fields[6],),
                                         fields[8])
    return out


def layout(placed):
    """rank -> where it ran."""
    return {rank: p.where for rank, p in placed.items()}


def values(placed):
    """The distinct values the ranks reported."""
    return {p.value for p in placed.values()}
