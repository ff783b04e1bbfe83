"""The frontends' shared gradient helpers: backward_passes_per_step's counting
(hvd._accumulation) and the gradient collectives' names and ops (hvd._gradients)."""
import pytest

from hvd import _basics
from hvd._accumulation import BackwardPasses
from hvd._gradients import check_differentiable, grad_name


@pytest.mark.parametrize("steps", [0, -1, 1.5, "2", True, None])
def test_backward_passes_per_step_must_be_a_positive_integer(steps):
    with pytest.raises(ValueError, match=r"Opt: backward_passes_per_step must be a positive "
                                         r"integer, got " + repr(steps).replace(".", r"\.")):
        BackwardPasses(steps, what="Opt")


def test_numpy_integers_count_as_integers():
    import numpy as np
    assert BackwardPasses(np.int64(3)).steps == 3


def test_the_sum_or_its_mean_is_reduced():
    assert BackwardPasses(4).scale == 1.0
    assert BackwardPasses(4, average=True).scale == 0.25
    assert not BackwardPasses(3).completes(2)
    assert BackwardPasses(3).completes(3)


def test_each_gradient_counts_its_own_passes_until_restart():
    passes = BackwardPasses(2)
    passes.restart(["w", "b"])
    assert not passes.arrive("w")
    assert not passes.step_done("w")
    assert passes.arrive("w")
    assert passes.step_done("w")
    assert not passes.step_done("b")  # its backward has not reached it yet
    passes.restart(["w", "b"])
    assert not passes.step_done("w")


def test_gradient_collectives_are_named_after_the_forward_one():
    assert grad_name("layer.weight") == "layer.weight.grad"
    assert grad_name(None) is None
    assert grad_name("") is None


def test_only_sum_and_average_have_gradients():
    check_differentiable(_basics.Sum, "allreduce")
    check_differentiable(_basics.Average, "allreduce")
    with pytest.raises(RuntimeError, match="allreduce: the gradient of op=.* is not defined"):
        check_differentiable(_basics.Max, "allreduce")
