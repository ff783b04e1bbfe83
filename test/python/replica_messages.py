"""The replica check's message (hvd._replicas.Guard), as the frontends' tests expect it."""
import re


def mismatch(ranks, variable, update=1, what="DistributedOptimizer", confirmed=False):
    """A regex for the ReplicaMismatchError of a check `after update <update>` (0: before the
    first) finding `ranks` apart from rank 0, first at `variable`. `confirmed`: the check of the
    update before found them apart too and this one confirmed it."""
    when = "before the first update" if update == 0 else f"after update {update}"
    if confirmed:
        before = "before the first update" if update == 1 else f"after update {update - 1}"
        when += f" (and {before}: no broadcast made them equal since)"
    who = (f"rank {ranks[0]} differs" if len(ranks) == 1 else
           f"ranks {', '.join(map(str, ranks))} differ")
    return re.escape(f"replica check of {what} {when}: the ranks hold different trainable "
                     f"weights: {who} from rank 0. The first variable that differs is "
                     f"{variable!r}")
