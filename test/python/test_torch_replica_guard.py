"""The replica check (HVD_CHECK_REPLICAS) through hvd.torch's DistributedOptimizer in a training
loop: ranks initialised differently fail at the second update, naming the ranks, the first
parameter and the broadcast that fixes it; the Horovod recipe (broadcast_parameters and
broadcast_optimizer_state) passes; a rank whose weights drift later is found by `every:N` and
missed by `first`. What a failing check does to a job (its exit, hvdrun's report): one job in
test/e2e/test_replica_guard.py."""
import numpy as np
import pytest
import torch

import hvd
import hvd.torch as ht
from hvd import _replicas
from replica_messages import mismatch

FIRST, EVERY_2 = 0, 2  # HVD_CHECK_REPLICAS=first and every:2 as the runtime reads them


def data(rank, n=64):
    rng = np.random.default_rng(100 + rank)
    x = rng.normal(size=(n, 8)).astype("float32")
    return torch.from_numpy(x), torch.from_numpy((x[:, 0] > 0).astype("int64") + (x[:, 1] > 0))


def train(differ=False, broadcast=False, drift_after=0, steps=8):
    """The parameters after `steps` updates of a small model; `drift_after` K: rank 1 changes its
    weights after update K on (a rank that forgot something)."""
    torch.manual_seed(hvd.rank() if differ else 0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    opt = ht.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.01),
                                  named_parameters=model.named_parameters())
    if broadcast:
        ht.broadcast_parameters(model.state_dict(), root_rank=0)
        ht.broadcast_optimizer_state(opt, root_rank=0)
    x, y = data(hvd.rank())
    for step in range(1, steps + 1):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if drift_after and step >= drift_after and hvd.rank() == 1:
            with torch.no_grad():
                model[2].bias.add_(0.5)
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def assert_same_on_every_rank(weights):
    rows = ht.allgather(weights[None])
    for q in range(1, hvd.size()):
        assert torch.equal(rows[0], rows[q]), f"rank {q}'s weights differ from rank 0's"


@pytest.fixture(autouse=True)
def several_ranks():
    if hvd.size() == 1:
        pytest.skip("the check compares ranks")


def test_ranks_initialised_differently_fail_at_the_second_update(check_replicas):
    check_replicas(FIRST)
    with pytest.raises(_replicas.ReplicaMismatchError) as raised:
        train(differ=True)
    assert raised.match(mismatch(list(range(1, hvd.size())), "0.weight", update=2,
                                 confirmed=True))
    assert "hvd.broadcast_parameters(model.state_dict(), root_rank=0)" in str(raised.value)
    assert "HVD_CHECK_REPLICAS=off" in str(raised.value)


def test_the_recipe_with_broadcasts_passes_with_identical_weights(check_replicas):
    check_replicas(EVERY_2)
    assert_same_on_every_rank(train(differ=True, broadcast=True))


def test_a_rank_that_drifts_later_is_missed_by_first_and_found_by_every_n(check_replicas):
    # Rank 1 changes its weights after update 3: `first` checked before that; every:2 finds it
    # at update 4.
    check_replicas(FIRST)
    train(drift_after=3)
    check_replicas(EVERY_2)
    with pytest.raises(_replicas.ReplicaMismatchError, match=mismatch([1], "2.bias", update=4)):
        train(drift_after=3)
