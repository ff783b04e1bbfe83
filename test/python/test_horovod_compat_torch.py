"""The horovod.torch compatibility package scales the gradients of allgather, broadcast and
reducescatter as Horovod 0.28 does, through hvd/torch/horovod_semantics.py
(test/e2e/test_horovod_conformance.py compares against Horovod itself where it is installed);
hvd.torch's own stay exact (test_torch_ops.py)."""
import sys
from pathlib import Path

import pytest
import torch

import hvd
import hvd.torch
from hvd.torch import horovod_semantics

sys.path.insert(0, str(Path(hvd.__file__).parent / "compat"))  # what --horovod-compat does
import horovod.torch as horovod  # noqa: E402


def test_the_compat_package_is_hvd():
    assert horovod.rank() == hvd.torch.rank() and horovod.allreduce is hvd.torch.allreduce
    assert getattr(sys.modules["horovod"], "IS_HVD_COMPAT", False)


def test_horovods_conventions_are_hvds_horovod_semantics_module():
    for name in horovod_semantics.__all__:
        assert getattr(horovod, name) is getattr(horovod_semantics, name), name
        assert getattr(hvd.torch, name) is not getattr(horovod_semantics, name), name
    assert horovod.mpi_ops.allgather is horovod_semantics.allgather
    assert horovod.mpi_ops.broadcast_optimizer_state is hvd.torch.broadcast_optimizer_state
    assert (horovod.functions.broadcast_optimizer_state
            is horovod_semantics.broadcast_optimizer_state)


def test_the_same_allgather_differentiates_as_horovod_in_horovod_torch_and_exactly_in_hvd_torch():
    r, n = horovod.rank(), horovod.size()
    grads = {}
    for library, allgather in (("horovod", horovod.allgather), ("hvd", hvd.torch.allgather)):
        x = torch.ones(2, dtype=torch.float64, requires_grad=True)
        (allgather(x, name=f"compat.same.{library}").sum() * (r + 1)).backward()
        grads[library] = x.grad.tolist()
    # every rank's loss weighs each gathered row by (rank + 1): hvd's gradient is the sum of
    # those weights over the ranks, Horovod's their mean
    assert grads["hvd"] == [n * (n + 1) / 2] * 2
    assert grads["horovod"] == [(n + 1) / 2] * 2


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


def test_what_horovods_own_torch_tests_read_of_the_optimizer_and_its_state():
    # test_optimizer_no_named_parameters, test_broadcast_state_no_grad,
    # test_horovod_reducescatter_adasum, test_synchronize_step_warning of Horovod's suite.
    import warnings
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    opt = horovod.DistributedOptimizer(torch.optim.SGD(
        [{"params": model[0].parameters()}, {"params": model[1].parameters()}], lr=0.1))
    names = opt._parameter_names
    assert sorted(names.values()) == [f"allreduce.noname.{i}" for i in range(4)]
    assert set(names) == set(model.parameters())
    named = horovod.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters())
    assert sorted(named._parameter_names.values()) == ["0.bias", "0.weight", "1.bias",
                                                       "1.weight"]
    frozen = torch.nn.Parameter(torch.ones(2), requires_grad=False)
    trained = torch.nn.Parameter(torch.ones(3))
    sgd = horovod.DistributedOptimizer(torch.optim.SGD([frozen, trained], lr=0.1, momentum=0.9))
    horovod.broadcast_optimizer_state(sgd, root_rank=0)
    assert frozen.grad is None and torch.equal(trained.grad, torch.zeros(3))
    with pytest.raises(horovod.HorovodInternalError, match="Adasum"):
        horovod.reducescatter(torch.ones(4), op=horovod.Adasum)
    named.zero_grad()
    model(torch.ones(1, 4)).sum().backward()
    named.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        named.step()
    assert any("optimizer.step() called without optimizer.skip_synchronize()" in str(w.message)
               for w in caught)


def test_sparse_as_dense_hands_the_optimizer_sparse_gradients_back():
    # SparseAdam takes sparse gradients only (Horovod's test_sparse_embeddings).
    for sparse_as_dense in (False, True):
        embedding = torch.nn.Embedding(10, 3, sparse=True)
        opt = horovod.DistributedOptimizer(torch.optim.SparseAdam(list(embedding.parameters()),
                                                                  lr=0.1),
                                           sparse_as_dense=sparse_as_dense)
        rows = [[1, 2, 4, 5], [4, 3, 2, 9]] if horovod.rank() == 0 else [[1, 3, 4], [4, 7, 9]]
        opt.zero_grad()
        embedding(torch.tensor(rows)).sum().backward()
        opt.step()
        assert embedding.weight.grad.is_sparse
