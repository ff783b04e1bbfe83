"""hvd.elastic's state objects, sampler and run loop inside a fixed job (the rounds of a real
elastic job are tested end to end in test/e2e/test_hvdrun_elastic.py)."""
import pickle

import pytest
import torch

import hvd.torch as hvd
from hvd._elastic import run_fn


def test_object_state_saves_restores_and_takes_rank_0s_values():
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, epoch=hvd.rank(), seen=[1])
    state.sync()
    assert state.epoch == 0 and state.seen == [1]
    state.epoch = 5
    state.seen.append(2)
    state.commit()  # a fixed job: no newer round, nothing raised
    state.epoch = 9
    state.seen.append(3)
    state.restore()
    assert state.epoch == 5 and state.seen == [1, 2]


def test_torch_state_restores_the_model_and_optimizer_of_the_last_commit():
    torch.manual_seed(hvd.rank())  # every rank starts elsewhere; sync takes rank 0's
    model = torch.nn.Linear(3, 2)
    opt = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, opt, step=0)
    state.sync()
    rows = hvd.allgather(model.weight.detach().reshape(1, -1))
    assert all(torch.equal(rows[0], rows[r]) for r in range(hvd.size()))

    def step():
        opt.zero_grad()
        model(torch.ones(4, 3)).sum().backward()
        opt.step()
        state.step += 1

    step()
    state.commit()
    committed = [p.detach().clone() for p in model.parameters()]
    committed_moments = opt.state_dict()["state"][0]["exp_avg"].clone()
    step()
    step()
    assert not torch.equal(model.weight, committed[0])
    state.restore()
    assert state.step == 1
    assert all(torch.equal(p, c) for p, c in zip(model.parameters(), committed))
    assert torch.equal(opt.state_dict()["state"][0]["exp_avg"], committed_moments)


def test_two_failures_after_one_commit_restore_the_same_optimizer_state():
    model = torch.nn.Linear(3, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, opt)

    def step():
        opt.zero_grad()
        model(torch.ones(2, 3)).sum().backward()
        opt.step()

    step()
    state.commit()
    committed = opt.state_dict()["state"][0]["exp_avg"].clone()
    for _ in range(2):
        step()  # the restored optimizer updates its moments in place
        state.restore()
        assert torch.equal(opt.state_dict()["state"][0]["exp_avg"], committed)


def test_restoring_an_optimizer_with_gradients_in_flight_discards_them():
    model = torch.nn.Linear(3, 1)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())
    state = hvd.elastic.TorchState(model, opt)
    model(torch.ones(2, 3)).sum().backward()  # the hooks start the allreduces
    state.restore()
    opt.zero_grad()  # no AssertionError: nothing is in flight any more


def test_elastic_sampler_spreads_the_unprocessed_samples_over_the_ranks():
    dataset = list(range(23))
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=3)
    sampler.set_epoch(1)
    mine = list(sampler)
    assert len(mine) == len(sampler) == -(-23 // hvd.size())
    everyone = hvd.allgather_object(mine)
    assert set().union(*map(set, everyone)) == set(dataset)
    # Two batches of 2 are processed on every rank; the sampler state's sync merges them and
    # the next iteration spreads only the rest.
    sampler.record_batch(0, 2)
    sampler.record_batch(1, 2)
    processed = set().union(*map(set, hvd.allgather_object(mine[:4])))
    state = hvd.elastic.TorchState(sampler=sampler)
    state.sync()
    assert sampler.processed_indices == processed
    rest = set().union(*map(set, hvd.allgather_object(list(sampler))))
    assert rest == set(dataset) - processed
    sampler.set_epoch(2)
    assert sampler.processed_indices == set() and len(sampler) == -(-23 // hvd.size())


def test_the_run_loop_restores_after_a_failure_and_resyncs_after_a_host_update():
    resets = []
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, attempt=0)
    state.register_reset_callbacks([lambda: resets.append("callback")])
    events = iter([hvd.HorovodInternalError("peer died"),
                   hvd.HostsUpdatedInterrupt("round 2", skip_sync=True), None])

    def train(state, scale):
        state.attempt += 1
        event = next(events)
        if event is not None:
            raise event
        return state.attempt * scale

    # The reset stands in for leaving and joining rounds; this job keeps its one round.
    wrapped = run_fn(train, lambda: resets.append("reset"))
    # 1st call fails (restored to attempt 0), 2nd is interrupted (attempt 1 kept), 3rd returns 2.
    assert wrapped(state, 10) == 20
    assert resets == ["reset", "callback", "reset", "callback"]


def test_hosts_updated_interrupt_keeps_horovods_skip_sync():
    assert hvd.HostsUpdatedInterrupt("x").skip_sync is False
    assert hvd.HostsUpdatedInterrupt("x", skip_sync=True).skip_sync is True


def test_a_torch_states_commit_goes_through_pickle_and_back():
    # What --elastic-commit-dir writes: the last commit, model, optimizer and attributes.
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    state = hvd.elastic.TorchState(model, opt, step=0)
    model(torch.ones(4, 3)).sum().backward()
    opt.step()
    state.step = 1
    state.commit()
    on_disk = pickle.dumps(state.committed())
    weight = model.weight.detach().clone()
    moments = opt.state_dict()["state"][0]["exp_avg"].clone()
    model(torch.ones(4, 3)).sum().backward()
    opt.step()
    state.step = 2
    state.save()  # a later commit in memory, replaced by the one from disk below
    state.load_committed(pickle.loads(on_disk))
    assert state.step == 1
    assert torch.equal(model.weight.detach(), weight)
    assert torch.equal(opt.state_dict()["state"][0]["exp_avg"], moments)
    state.restore()  # the loaded commit is the state's last commit now
    assert torch.equal(model.weight.detach(), weight)
