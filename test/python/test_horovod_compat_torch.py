"""The horovod.torch compatibility package scales the gradients of allgather, broadcast and
reducescatter as Horovod 0.28 does (test/e2e/test_horovod_conformance.py compares against
Horovod itself where it is installed); hvd.torch's own stay exact (test_torch_ops.py)."""
import sys
from pathlib import Path

import torch

import hvd
import hvd.torch

sys.path.insert(0, str(Path(hvd.__file__).parent / "compat"))  # what --horovod-compat does
import horovod.torch as horovod  # noqa: E402


def test_the_compat_package_is_hvd():
    assert horovod.rank() == hvd.torch.rank() and horovod.allreduce is hvd.torch.allreduce
    assert getattr(sys.modules["horovod"], "IS_HVD_COMPAT", False)


def test_allgather_gradient_is_averaged_over_the_ranks():
    r, n = horovod.rank(), horovod.size()
    x = torch.ones(r + 1, 2, dtype=torch.float64, requires_grad=True)
    g = horovod.allgather(x, name="compat.gather")
    (g * torch.arange(g.shape[0], dtype=torch.float64).unsqueeze(1)).sum().backward()
    offset = r * (r + 1) // 2  # every rank weighted row k by k; the mean of n equal weights
    expected = torch.arange(offset, offset + r + 1, dtype=torch.float64)
    torch.testing.assert_close(x.grad, expected.unsqueeze(1).expand(r + 1, 2))


def test_grouped_allgather_gradient_is_averaged_over_the_ranks():
    r = horovod.rank()
    a = torch.ones(r + 1, dtype=torch.float64, requires_grad=True)
    b = torch.ones(1, dtype=torch.float64, requires_grad=True)
    ga, gb = horovod.grouped_allgather([a, b], name="compat.ggather")
    (2 * ga.sum() + gb.sum()).backward()
    assert a.grad.tolist() == [2.0] * (r + 1) and b.grad.tolist() == [1.0]


def test_broadcast_gradient_is_averaged_on_the_root():
    x = torch.ones(3, dtype=torch.float64, requires_grad=True)
    horovod.broadcast(x, 0, name="compat.bcast").sum().backward()
    assert x.grad.tolist() == [1.0 if horovod.rank() == 0 else 0.0] * 3


def test_reducescatter_gradient_is_scaled_by_the_number_of_ranks():
    n, r = horovod.size(), horovod.rank()
    for op, per_rank in ((horovod.Average, 1.0), (horovod.Sum, float(n))):
        x = torch.ones(2 * n, dtype=torch.float64, requires_grad=True)
        y = horovod.reducescatter(x, op=op, name=f"compat.rs.{op}")
        (y * (r + 1)).sum().backward()
        # hvd.torch's exact gradient is (p + 1) / n for Average and p + 1 for Sum; Horovod's n x
        expected = [(p + 1) * per_rank for p in range(n) for _ in range(2)]
        assert x.grad.tolist() == expected


def test_grouped_reducescatter_gradient_is_scaled_by_the_number_of_ranks():
    n, r = horovod.size(), horovod.rank()
    a = torch.ones(n, dtype=torch.float64, requires_grad=True)
    (ya,) = horovod.grouped_reducescatter([a], op=horovod.Sum, name="compat.grs")
    (ya * (r + 1)).sum().backward()
    assert a.grad.tolist() == [float(n * (p + 1)) for p in range(n)]


def test_allreduce_and_alltoall_gradients_are_hvds():
    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    horovod.allreduce(x, op=horovod.Sum, name="compat.ar").sum().backward()
    assert x.grad.tolist() == [float(horovod.size())] * 2


def test_without_gradients_the_results_are_hvds():
    n, r = horovod.size(), horovod.rank()
    x = torch.full((r + 1,), float(r))
    torch.testing.assert_close(horovod.allgather(x, name="compat.nograd.gather"),
                               hvd.torch.allgather(x, name="compat.nograd.gather2"))
    y = torch.arange(2.0 * n)
    torch.testing.assert_close(horovod.reducescatter(y, op=horovod.Sum, name="compat.nograd.rs"),
                               n * y[2 * r:2 * r + 2])
