"""When DistributedOptimizer starts the gradients' allreduces: from backward's hooks or at
step() (HVD_GRADIENT_OVERLAP, gradient_overlap=)."""
import pytest
import torch

import hvd.torch as hvd
from hvd import _core
from optimizer_models import assert_identical_on_all_ranks, batch_of, make_model


@pytest.mark.parametrize("threads", ["share", "fewer"])
@pytest.mark.parametrize("overlap", ["on", "off", "auto", None])
def test_gradient_overlap_decides_whether_backward_or_step_starts_the_allreduces(overlap,
                                                                                  threads):
    # on: each gradient's hook submits its allreduce during backward; off: step() submits them
    # all; auto: off when every rank is on one host and torch's threads fill this rank's CPUs
    # (host-memory gradients); None: the job's HVD_GRADIENT_OVERLAP (auto unless the suite's
    # launcher set it).
    share = _core.cpu_share()
    if threads == "fewer" and share == 1:
        pytest.skip("this rank has one CPU: torch cannot leave it a spare one")
    before_threads = torch.get_num_threads()
    torch.set_num_threads(share if threads == "share" else share - 1)
    try:
        model = make_model()
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                       named_parameters=model.named_parameters(),
                                       gradient_overlap=overlap)
    finally:
        torch.set_num_threads(before_threads)
    policy = _core.gradient_overlap() if overlap is None else overlap
    one_host = hvd.local_size() == hvd.size()
    in_backward = policy == "on" or (policy == "auto" and (not one_host or threads == "fewer"))
    gradients = len(list(model.parameters()))
    x, y = batch_of(hvd.rank(), 0)
    # The second step is counted: the first one's replica check (HVD_CHECK_REPLICAS) submits
    # collectives of its own after the update.
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad()
    before = _core.stats()["submitted"]
    torch.nn.functional.cross_entropy(model(x), y).backward()
    during = _core.stats()["submitted"] - before
    opt.step()
    assert during == (gradients if in_backward else 0)
    assert _core.stats()["submitted"] - before == gradients
    assert_identical_on_all_ranks(model)


@pytest.mark.parametrize("policy, on_gpu, one_host, threads, share, expected", [
    ("on", False, True, 4, 4, True),
    ("off", True, False, 1, 8, False),
    ("auto", False, True, 4, 4, False),   # compute fills the rank's CPUs: step() starts them
    ("auto", False, True, 8, 4, False),
    ("auto", False, True, 3, 4, True),    # a spare core moves them beside backward
    ("auto", False, False, 4, 4, True),   # across hosts the network hides behind backward
    ("auto", True, True, 4, 4, True),     # GPU gradients: the copies are not CPU work
])
def test_auto_overlap_defers_only_host_gradients_on_one_host_with_no_spare_core(
        policy, on_gpu, one_host, threads, share, expected):
    from hvd.torch.optimizer import starts_in_backward
    assert starts_in_backward(policy, on_gpu=on_gpu, one_host=one_host, compute_threads=threads,
                              cpu_share=share) is expected


@pytest.mark.parametrize("overlap", ["on", "off"])
def test_hundreds_of_long_named_gradients_started_together_train_in_step(overlap):
    # 300 gradients with long names, all submitted by step() (off) or by the hooks (on): the
    # first step's negotiation messages outgrow the engine's control links' buffers (a 64 KiB
    # ring over shared memory), which deadlocked the ranks until the op timeout when a collective
    # started while such a message was on its way (test_engine.cc's "negotiation messages larger
    # than the control links' buffers" makes that happen every time; here it depends on timing).
    torch.manual_seed(0)
    layers = [torch.nn.Linear(64, 64) for _ in range(150)]  # weights too large to ride inline
    model = torch.nn.Sequential()
    for i, layer in enumerate(layers):
        model.add_module("a_long_module_path_as_deep_models_have_" * 5 + f"{i:03d}", layer)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                   named_parameters=model.named_parameters(),
                                   gradient_overlap=overlap)
    g = torch.Generator().manual_seed(hvd.rank())
    for _ in range(10):
        opt.zero_grad()
        model(torch.randn(4, 64, generator=g)).pow(2).mean().backward()
        opt.step()
    assert_identical_on_all_ranks(model)


def test_gradient_overlap_refuses_other_values():
    model = make_model()
    with pytest.raises(ValueError, match="gradient_overlap must be 'auto', 'on' or 'off', "
                                         "got 'sometimes'"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=model.named_parameters(),
                                 gradient_overlap="sometimes")
