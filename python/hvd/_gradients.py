"""What the frameworks' differentiable collectives (hvd.torch's autograd functions, hvd.tensorflow's
registered gradients) share: the name of a gradient's collective, and which reduce ops have a
gradient."""
from __future__ import annotations

from typing import Optional

from hvd import _basics


def grad_name(name: Optional[str]) -> Optional[str]:
    """The backward collective's name: the forward one's with ".grad"; unnamed stays unnamed."""
    return f"{name}.grad" if name else None


def check_differentiable(op, what: str) -> None:
    """Raises RuntimeError naming `what` for a reduce op without a gradient."""
    if op not in (_basics.Sum, _basics.Average):
        raise RuntimeError(f"{what}: the gradient of op={_basics._OP_NAMES.get(op, op)} is not "
                           "defined; only Sum and Average are differentiable")
