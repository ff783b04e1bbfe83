"""DistributedOptimizer, broadcast_parameters / broadcast_optimizer_state and SyncBatchNorm
against single-process references."""
import copy
import warnings

import pytest
import torch

import hvd.torch as hvd
from optimizer_models import (BATCH, assert_identical_on_all_ranks, batch_of,
                              combined_batch, flat, make_model)


@pytest.mark.parametrize("overlap", ["on", "off"])
@pytest.mark.parametrize("opt_name", ["SGD", "Adam", "AdamW"])
def test_distributed_training_matches_single_process_on_the_combined_batch(opt_name, overlap):
    make_opt = {"SGD": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                "Adam": lambda p: torch.optim.Adam(p, lr=0.01),
                "AdamW": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1)}[opt_name]
    model = make_model(seed=hvd.rank())  # different on purpose: broadcast must fix it
    reference = make_model(seed=0)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    assert torch.equal(flat(model), flat(reference))
    opt = hvd.DistributedOptimizer(make_opt(model.parameters()),
                                   named_parameters=model.named_parameters(),
                                   gradient_overlap=overlap)
    assert isinstance(opt, getattr(torch.optim, opt_name))
    ref_opt = make_opt(reference.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(5):
        x, y = batch_of(hvd.rank(), step)
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        cx, cy = combined_batch(step)
        ref_opt.zero_grad()
        loss_fn(reference(cx), cy).backward()
        ref_opt.step()
    assert_identical_on_all_ranks(model)
    torch.testing.assert_close(flat(model), flat(reference), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opt_name", ["SGD", "LBFGS", "LBFGS-strong-wolfe"])
def test_step_with_a_closure_matches_single_process_on_the_combined_batch(opt_name):
    # LBFGS evaluates the closure several times per step and reads .grad after each, and its
    # stopping tests and line search compare losses: both must be the combined batch's. In
    # float64, as LBFGS amplifies float32's rounding differences to 1e-3 within three steps.
    make_opt = {"SGD": lambda p: torch.optim.SGD(p, lr=0.1),
                "LBFGS": lambda p: torch.optim.LBFGS(p, lr=0.5, max_iter=6),
                "LBFGS-strong-wolfe": lambda p: torch.optim.LBFGS(
                    p, lr=1, max_iter=6, line_search_fn="strong_wolfe")}[opt_name]
    model, reference = make_model().double(), make_model().double()
    opt = hvd.DistributedOptimizer(make_opt(model.parameters()),
                                   named_parameters=model.named_parameters())
    ref_opt = make_opt(reference.parameters())
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(3):
        x, y = batch_of(hvd.rank(), step)
        cx, cy = combined_batch(step)
        x, cx = x.double(), cx.double()

        def closure():
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            return loss

        def ref_closure():
            ref_opt.zero_grad()
            loss = loss_fn(reference(cx), cy)
            loss.backward()
            return loss

        loss, ref_loss = opt.step(closure), ref_opt.step(ref_closure)
        torch.testing.assert_close(loss, ref_loss.detach(), rtol=1e-9, atol=1e-9)
    assert_identical_on_all_ranks(model)
    torch.testing.assert_close(flat(model), flat(reference), rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("form", ["named_parameters", "parameters", "parameters_list"])
def test_broadcast_parameters_takes_every_form_horovod_takes(form):
    model, reference = make_model(seed=hvd.rank()), make_model(seed=0)
    params = {"named_parameters": model.named_parameters(),  # generators, as scripts pass them
              "parameters": model.parameters(),
              "parameters_list": list(model.parameters())}[form]
    hvd.broadcast_parameters(params, root_rank=0)
    assert torch.equal(flat(model), flat(reference))


def test_broadcast_parameters_names_what_it_cannot_take():
    with pytest.raises(ValueError, match="expected tensors or \\(name, tensor\\) pairs, got str"):
        hvd.broadcast_parameters(["weight"], root_rank=0)
    with pytest.raises(ValueError, match='"w" is a float, not a tensor'):
        hvd.broadcast_parameters({"w": 1.0}, root_rank=0)
    with pytest.raises(ValueError, match="got int"):
        hvd.broadcast_parameters(3, root_rank=0)


def test_a_channels_last_model_is_broadcast_and_trained():
    def make_conv(seed):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(),
                                   torch.nn.Conv2d(4, 2, 3)).to(memory_format=torch.channels_last)

    def images(rank, step):
        g = torch.Generator().manual_seed(1000 * step + rank)
        return torch.randn(2, 3, 7, 7, generator=g).to(memory_format=torch.channels_last)

    model, reference = make_conv(seed=hvd.rank()), make_conv(seed=0)
    assert not model[0].weight.is_contiguous()  # the case under test: NHWC strides
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    assert model[0].weight.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(flat(model), flat(reference))
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters())
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        opt.zero_grad()
        model(images(hvd.rank(), step)).square().mean().backward()
        opt.step()
        ref_opt.zero_grad()
        combined = torch.cat([images(r, step) for r in range(hvd.size())])
        reference(combined).square().mean().backward()
        ref_opt.step()
    assert_identical_on_all_ranks(model)
    torch.testing.assert_close(flat(model), flat(reference), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("overlap", ["on", "off"])
def test_backward_passes_per_step_accumulates_locally(overlap):
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=2, gradient_overlap=overlap)
    reference = make_model()
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    loss_fn = torch.nn.MSELoss(reduction="sum")
    opt.zero_grad()
    ref_opt.zero_grad()
    for micro in range(2):
        x, _ = batch_of(hvd.rank(), micro)
        loss_fn(model(x), torch.zeros(BATCH, 3)).backward()
        for r in range(hvd.size()):
            rx, _ = batch_of(r, micro)
            (loss_fn(reference(rx), torch.zeros(BATCH, 3)) / hvd.size()).backward()
    opt.step()
    ref_opt.step()
    torch.testing.assert_close(flat(model), flat(reference), rtol=1e-5, atol=1e-6)
    # a third backward before step() is an error
    opt.zero_grad()
    x, _ = batch_of(hvd.rank(), 9)
    for _ in range(2):
        loss_fn(model(x), torch.zeros(BATCH, 3)).backward()
    with pytest.raises(AssertionError, match="backward_passes_per_step"):
        loss_fn(model(x), torch.zeros(BATCH, 3)).backward()
    opt.synchronize()


@pytest.mark.parametrize("overlap", ["on", "off"])
@pytest.mark.parametrize("groups", [2, "explicit", "num_groups"])
def test_groups_and_fp16_compression(groups, overlap):
    model = make_model()
    params = list(model.parameters())
    grouping = {2: {"groups": 2}, "explicit": {"groups": [params[:2], params[2:]]},
                "num_groups": {"num_groups": 2}}[groups]  # Horovod's deprecated spelling
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                       named_parameters=model.named_parameters(),
                                       compression=hvd.Compression.fp16,
                                       gradient_overlap=overlap, **grouping)
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(deprecations) == (groups == "num_groups")
    assert len(opt._groups) == 2
    reference = make_model()
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    x, y = batch_of(hvd.rank(), 0)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    cx, cy = combined_batch(0)
    torch.nn.functional.cross_entropy(reference(cx), cy).backward()
    ref_opt.step()
    assert_identical_on_all_ranks(model)
    torch.testing.assert_close(flat(model), flat(reference), rtol=1e-2, atol=1e-3)


def test_synchronize_then_skip_synchronize_and_zero_grad_guard():
    model = make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), op=hvd.Sum)
    x, y = batch_of(hvd.rank(), 0)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    opt.synchronize()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    with opt.skip_synchronize():
        opt.step()
    assert_identical_on_all_ranks(model)


def test_unused_parameters_get_zero_gradients_on_every_rank():
    model = make_model()
    extra = torch.nn.Parameter(torch.ones(2))
    named = list(model.named_parameters()) + [("extra", extra)]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(list(model.parameters()) + [extra], lr=0.1),
                                   named_parameters=named)
    x, y = batch_of(hvd.rank(), 0)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    assert extra.grad is not None and extra.grad.tolist() == [0.0, 0.0]


def test_named_parameters_errors():
    model = make_model()
    named = list(model.named_parameters())
    dup = [("w", named[0][1]), ("w", named[1][1])] + named[2:]
    with pytest.raises(ValueError, match="unique; repeated: w"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=dup)
    with pytest.raises(ValueError, match="not in it"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=named[:2])
    with pytest.raises(ValueError, match="gradient_predivide_factor needs op=Average"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Adasum,
                                 gradient_predivide_factor=2.0)


def _adasum(a, b):
    ab, aa, bb = float(a @ b), float(a @ a), float(b @ b)
    return (1 - ab / (2 * aa)) * a + (1 - ab / (2 * bb)) * b


def test_adasum_optimizer_combines_the_ranks_steps():
    # Horovod's op=Adasum: every rank steps on its own gradients; the parameter changes are
    # combined with Adasum (pairwise, ranks 0 and 1 first).
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1).double()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(), op=hvd.Adasum)
    before = [p.detach().clone() for p in model.parameters()]
    torch.manual_seed(10 + hvd.rank())
    model(torch.randn(8, 4, dtype=torch.float64)).pow(2).sum().backward()
    if hvd.size() & (hvd.size() - 1):
        with pytest.raises(ValueError, match="adasum needs a power-of-two number of ranks"):
            opt.step()
        return
    opt.step()
    for p, start in zip(model.parameters(), before):
        deltas = hvd.allgather((-0.1 * p.grad).flatten()[None])
        level = list(deltas)
        while len(level) > 1:
            level = [_adasum(level[k], level[k + 1]) for k in range(0, len(level), 2)]
        torch.testing.assert_close((p.detach() - start).flatten(), level[0])
        gathered = hvd.allgather(p.detach()[None])
        assert bool((gathered == gathered[0]).all())


def test_sparse_gradients_reduced_and_as_dense():
    for as_dense in (False, True):
        torch.manual_seed(0)
        emb = torch.nn.Embedding(10, 3, sparse=True)
        opt = hvd.DistributedOptimizer(torch.optim.SGD(emb.parameters(), lr=1.0),
                                       named_parameters=emb.named_parameters(),
                                       sparse_as_dense=as_dense)
        before = emb.weight.detach().clone()
        emb(torch.tensor([hvd.rank()])).sum().backward()
        opt.step()
        delta = (before - emb.weight.detach())
        for r in range(10):
            expected = 1.0 / hvd.size() if r < hvd.size() else 0.0
            torch.testing.assert_close(delta[r], torch.full((3,), expected))


@pytest.mark.parametrize("opt_name", ["SGD", "Adam", "AdamW"])
def test_broadcast_optimizer_state_from_a_restored_root(opt_name):
    make_opt = {"SGD": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                "Adam": lambda p: torch.optim.Adam(p, lr=0.01),
                "AdamW": lambda p: torch.optim.AdamW(p, lr=0.01)}[opt_name]
    model = make_model()
    opt = make_opt(model.parameters())
    if hvd.rank() == 0:  # root has state (as after loading a checkpoint), the others none
        torch.nn.functional.cross_entropy(model(batch_of(0, 0)[0]), batch_of(0, 0)[1]).backward()
        opt.step()
        for g in opt.param_groups:
            g["lr"] = 0.123
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == 0.123
    state = opt.state_dict()["state"]
    assert len(state) == len(list(model.parameters()))
    key = "momentum_buffer" if opt_name == "SGD" else "exp_avg"
    rows = hvd.allgather(torch.cat([s[key].flatten() for s in state.values()]).unsqueeze(0))
    assert all(torch.equal(rows[0], rows[r]) for r in range(hvd.size()))


def test_an_lr_scheduler_made_before_wrapping_and_broadcasting_keeps_driving_the_lr():
    # The usual order in scripts: optimizer, scheduler, DistributedOptimizer, broadcast. The
    # broadcast must not detach the scheduler from the param groups the steps read.
    model = make_model()
    inner = torch.optim.SGD(model.parameters(), lr=0.1 * (hvd.rank() + 1), momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(inner, step_size=1, gamma=0.5)
    opt = hvd.DistributedOptimizer(inner, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0]["lr"] == 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the scheduler tracks the wrapped optimizer's step()
        for step in range(3):
            x, y = batch_of(hvd.rank(), step)
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            scheduler.step()
    assert opt.param_groups[0]["lr"] == inner.param_groups[0]["lr"] == 0.1 * 0.5 ** 3
    assert_identical_on_all_ranks(model)
    # A resume through the wrapper's load_state_dict keeps the scheduler attached too.
    checkpoint = copy.deepcopy(opt.state_dict())
    checkpoint["param_groups"][0]["lr"] = 0.2
    opt.load_state_dict(checkpoint)
    scheduler.step()
    assert opt.param_groups[0]["lr"] == inner.param_groups[0]["lr"] == 0.1


def test_sync_batch_norm_matches_batch_norm_on_the_combined_batch():
    torch.manual_seed(0)
    sync = hvd.SyncBatchNorm(4)
    local = torch.nn.BatchNorm1d(4)
    local.load_state_dict(copy.deepcopy(sync.state_dict()))
    with torch.no_grad():
        sync.weight.copy_(torch.arange(4.0) + 1)
        local.weight.copy_(torch.arange(4.0) + 1)
    xs = [torch.randn(3 + r, 4, generator=torch.Generator().manual_seed(r)) * (r + 1)
          for r in range(hvd.size())]
    mine = xs[hvd.rank()].clone().requires_grad_()
    out = sync(mine)
    (out * out.detach().sign()).sum().backward()
    full = torch.cat(xs).requires_grad_()
    ref = local(full)
    (ref * ref.detach().sign()).sum().backward()
    offset = sum(3 + r for r in range(hvd.rank()))
    rows = slice(offset, offset + 3 + hvd.rank())
    torch.testing.assert_close(out, ref[rows], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(mine.grad, full.grad[rows], rtol=1e-4, atol=1e-5)
    # each rank's weight gradient is its part of the combined batch's
    torch.testing.assert_close(hvd.allreduce(sync.weight.grad, op=hvd.Sum), local.weight.grad,
                               rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(sync.running_mean, local.running_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sync.running_var, local.running_var, rtol=1e-5, atol=1e-6)
    sync.eval()
    torch.testing.assert_close(sync(xs[0]), local.eval()(xs[0]), rtol=1e-5, atol=1e-5)


def sync_against_local(sync, local, xs, ranks, rtol=1e-4, atol=1e-4):
    """Runs `sync` on this rank's part of xs (one per rank in `ranks`) and `local` on all of
    them joined, and compares outputs, input gradients, weight gradients and running stats."""
    me = ranks.index(hvd.rank())
    mine = xs[me].clone().requires_grad_()
    out = sync(mine)
    (out.float() * out.detach().float().sign()).sum().backward()
    full = torch.cat([x.float() for x in xs]).requires_grad_()
    ref = local(full)
    (ref * ref.detach().sign()).sum().backward()
    offset = sum(x.shape[0] for x in xs[:me])
    rows = slice(offset, offset + xs[me].shape[0])
    assert out.dtype == xs[me].dtype
    torch.testing.assert_close(out.float(), ref[rows], rtol=rtol, atol=atol)
    torch.testing.assert_close(mine.grad.float(), full.grad[rows], rtol=rtol, atol=atol)
    if local.affine:
        ps = sync.process_set
        torch.testing.assert_close(hvd.allreduce(sync.weight.grad, op=hvd.Sum, process_set=ps),
                                   local.weight.grad, rtol=rtol, atol=atol)
        torch.testing.assert_close(hvd.allreduce(sync.bias.grad, op=hvd.Sum, process_set=ps),
                                   local.bias.grad, rtol=rtol, atol=atol)
    if local.track_running_stats:
        torch.testing.assert_close(sync.running_mean, local.running_mean, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(sync.running_var, local.running_var, rtol=1e-4, atol=1e-4)
        assert int(sync.num_batches_tracked) == int(local.num_batches_tracked)


@pytest.mark.parametrize("affine,track,momentum", [(True, True, 0.1), (False, True, None),
                                                   (True, False, 0.1)])
def test_sync_batch_norm_4d_with_large_means_and_an_empty_rank(affine, track, momentum):
    # Means of 50-150 against a spread of 0.5-1.5: naive float32 sums of squares would lose the
    # variance. The last rank has no rows at all in the second step.
    sync = hvd.SyncBatchNorm(5, affine=affine, track_running_stats=track, momentum=momentum)
    local = torch.nn.BatchNorm2d(5, affine=affine, track_running_stats=track, momentum=momentum)
    if affine:
        with torch.no_grad():
            for m in (sync, local):
                m.weight.copy_(torch.arange(5.0) - 1.5)
                m.bias.copy_(torch.arange(5.0) * 0.25)
    ranks = list(range(hvd.size()))
    for step in range(2):
        xs = []
        for r in ranks:
            rows = 0 if step == 1 and r == ranks[-1] and len(ranks) > 1 else 2 + r
            g = torch.Generator().manual_seed(10 * step + r)
            xs.append(torch.randn(rows, 5, 3, 4, generator=g) * (0.5 + 0.5 * r)
                      + 50.0 * (r + 1))
        for m in (sync, local):
            m.zero_grad()
        sync_against_local(sync, local, xs, ranks)


def test_sync_batch_norm_of_half_inputs_keeps_their_dtype():
    sync, local = hvd.SyncBatchNorm(3), torch.nn.BatchNorm1d(3)
    xs = [torch.randn(4, 3, 6, generator=torch.Generator().manual_seed(r)).half()
          for r in range(hvd.size())]
    sync_against_local(sync, local, xs, list(range(hvd.size())), rtol=2e-2, atol=2e-2)


def test_sync_batch_norm_in_a_process_set_reduces_over_its_members_only():
    if hvd.size() < 3:
        pytest.skip("needs 3 ranks: a set of 2 that is not the global one")
    members = [0, 2]
    ps = hvd.add_process_set(members)
    try:
        if hvd.rank() in members:
            sync, local = hvd.SyncBatchNorm(4, process_set=ps), torch.nn.BatchNorm1d(4)
            xs = [torch.randn(3, 4, generator=torch.Generator().manual_seed(r)) + r
                  for r in members]
            sync_against_local(sync, local, xs, members)
    finally:
        hvd.remove_process_set(ps)


def test_sync_batch_norm_with_every_batch_empty_says_so():
    sync = hvd.SyncBatchNorm(2)
    with pytest.raises(ValueError, match="every rank's batch is empty"):
        sync(torch.zeros(0, 2))


def test_gradient_predivide_factor_gives_the_same_average():
    model, reference = make_model(), make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   gradient_predivide_factor=4)  # an int, as scripts pass it
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    x, y = batch_of(hvd.rank(), 3)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    cx, cy = combined_batch(3)
    torch.nn.functional.cross_entropy(reference(cx), cy).backward()
    ref_opt.step()
    torch.testing.assert_close(flat(model), flat(reference), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="gradient_predivide_factor needs op=Average"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), op=hvd.Sum,
                                 gradient_predivide_factor=2.0)


def test_optimizer_on_a_process_set_averages_over_its_ranks_only():
    members = list(range(max(1, hvd.size() - 1)))
    ps = hvd.add_process_set(members)
    try:
        # Every rank wraps its optimizer with the set, as one script does on all ranks; the
        # rank outside it steps on its own gradient (as in Horovod) instead of failing.
        model, reference = make_model(), make_model()
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                       named_parameters=model.named_parameters(),
                                       process_set=ps)
        ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
        x, y = batch_of(hvd.rank(), 4)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        xs, ys = zip(*[batch_of(r, 4) for r in (members if ps.included() else [hvd.rank()])])
        torch.nn.functional.cross_entropy(reference(torch.cat(xs)), torch.cat(ys)).backward()
        ref_opt.step()
        torch.testing.assert_close(flat(model), flat(reference), rtol=1e-5, atol=1e-6)
    finally:
        hvd.remove_process_set(ps)


def test_load_state_dict_starts_a_fresh_accumulation():
    # A resume in the middle of backward_passes_per_step: the passes before the load do not
    # count, so the next two backward passes make one step (Horovod resets the same way).
    model, reference = make_model(), make_model()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=2)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    x, y = batch_of(hvd.rank(), 5)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.load_state_dict(opt.state_dict())
    opt.zero_grad()
    for step in (6, 7):
        x, y = batch_of(hvd.rank(), step)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        cx, cy = combined_batch(step)
        # the mean over ranks of each rank's loss gradient, accumulated over the two passes
        (torch.nn.functional.cross_entropy(reference(cx), cy)).backward()
    opt.step()
    ref_opt.step()
    torch.testing.assert_close(flat(model), flat(reference), rtol=1e-5, atol=1e-6)
