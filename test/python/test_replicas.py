"""The replica check's comparison (hvd._replicas) across the job's ranks: what it accepts (the
same weights, last-bit rounding differences), what it flags (different or permuted weights,
inf/NaN on one rank, different models) and what it says; the schedule of HVD_CHECK_REPLICAS;
the torch and NumPy summaries agreeing."""
import numpy as np
import pytest
import torch

import hvd
from hvd import _replicas
from hvd.torch.optimizer import summarise as torch_summarise

RNG = np.random.default_rng(7)
WEIGHTS = [RNG.normal(size=(16, 8)).astype(np.float32), RNG.normal(size=(8,)).astype(np.float32),
           RNG.normal(size=(3, 3)).astype(np.float32)]
NAMES = ["fc.weight", "fc.bias", "head.weight"]


def check(arrays, names=NAMES, every=1, then=None):
    """Two updates' checks: after update 1 with `arrays`, after update 2 with `then` (by
    default `arrays` halved: an update that changed them). A first mismatch after an update is
    confirmed after the next one."""
    guard = _replicas.Guard("test", hvd.global_process_set, "broadcast them", every=every)
    for weights in (arrays, [a * a.dtype.type(0.5) for a in arrays] if then is None else then):
        if guard.tick():
            guard.check(_replicas.summarise(weights), [a.size for a in weights], names,
                        [a.shape for a in weights], [str(a.dtype) for a in weights])


def test_identical_weights_pass():
    check([w.copy() for w in WEIGHTS])


def test_last_bit_differences_between_ranks_pass():
    # Hosts whose CPUs round differently: a rank's weights a few ulps off.
    mine = [w.copy() for w in WEIGHTS]
    if hvd.rank() % 2:
        mine[0] = np.nextafter(mine[0], np.float32(np.inf))
        mine[1] = mine[1] * np.float32(1 + 2e-7)
    check(mine)


@pytest.mark.parametrize("how", ["reinitialised", "permuted", "nan"])
def test_a_rank_that_differs_is_named_with_the_first_variable(how):
    mine = [w.copy() for w in WEIGHTS]
    odd = hvd.rank() % 2 == 1
    if odd and how == "reinitialised":
        mine[1] = np.random.default_rng(hvd.rank()).normal(size=8).astype(np.float32)
    elif odd and how == "permuted":
        mine[2] = mine[2].T.copy()  # the same values (sums, squares) in another order
    elif odd and how == "nan":
        mine[1][3] = np.nan
    if hvd.size() == 1:
        check(mine)
        return
    differing = [r for r in range(hvd.size()) if r % 2]
    who = (f"rank {differing[0]} differs" if len(differing) == 1 else
           f"ranks {', '.join(map(str, differing))} differ")
    variable = "head.weight" if how == "permuted" else "fc.bias"
    with pytest.raises(_replicas.ReplicaMismatchError,
                       match=r"after update 2 \(and after update 1: no broadcast made them "
                             f"equal since\\): the ranks hold different trainable weights: "
                             f"{who} from rank 0. The first variable that differs is "
                             f"'{variable}'"):
        check(mine)


def test_a_check_due_while_a_rank_has_joined_is_skipped_by_the_ranks_still_training():
    # hvd.join: the ranks with more batches go on updating; the joined rank counts as zeros
    # in their allreduces, which must not read as a rank whose weights are all zero.
    if hvd.size() == 1:
        pytest.skip("needs two ranks")
    import hvd.numpy as hnp
    if hvd.rank() != 0:
        # Two checks, both due; their reductions complete once rank 0 has joined.
        check([w.copy() for w in WEIGHTS])
    assert hnp.join() != 0  # rank 0 joined first
    check([w.copy() for w in WEIGHTS])  # every rank back: checked again


def test_weights_apart_after_the_first_update_pass_when_a_broadcast_follows_it():
    # Horovod's own tests step once and then broadcast (test_broadcast_state): the ranks are
    # apart after update 1 and equal after update 2, which is no error.
    mine = [w + hvd.rank() for w in WEIGHTS]
    check(mine, every=0, then=[w.copy() for w in WEIGHTS])
    if hvd.size() > 1:  # still apart after update 2: with the default schedule, an error then
        with pytest.raises(_replicas.ReplicaMismatchError, match="after update 2 "):
            check(mine, every=0)


def test_starting_weights_apart_fail_only_when_still_apart_before_the_second_update():
    # Where the recipe broadcasts before training (Keras, TF1) the starting weights are checked;
    # a gradient of deliberately different weights reduced once (Horovod's tests of partial
    # optimizers do this) is no error, a second update on them is.
    mine = [w + hvd.rank() for w in WEIGHTS]
    guard = _replicas.Guard("start", hvd.global_process_set, "broadcast them", every=0,
                            before_update=True, first=0)
    stats = _replicas.summarise(mine)
    args = ([a.size for a in mine], NAMES, [a.shape for a in mine], [str(a.dtype) for a in mine])
    assert guard.tick()
    guard.check(stats, *args)
    if hvd.size() == 1:
        assert not guard.tick()
        return
    assert guard.tick()  # the repeat, after an update that changed the weights
    with pytest.raises(_replicas.ReplicaMismatchError,
                       match=r"start after update 1 \(and before the first update: no "
                             r"broadcast made them equal since\)"):
        guard.check(_replicas.summarise([w * np.float32(0.5) for w in mine]), *args)


def test_the_repeat_waits_for_an_update_that_changed_the_weights():
    # A graph that re-runs its gradient reductions without applying them (Horovod's TF1 tests
    # of partial tapes) counts updates that changed nothing: the ranks did not train apart.
    mine = [w + hvd.rank() for w in WEIGHTS]
    guard = _replicas.Guard("graph", hvd.global_process_set, "broadcast them", every=0)
    args = ([a.size for a in mine], NAMES, [a.shape for a in mine], [str(a.dtype) for a in mine])
    for weights in (mine, mine, mine):  # updates 1, 2, 3: checked, repeated, repeated
        assert guard.tick() == (hvd.size() > 1 or guard.updates_done == 1)
        guard.check(_replicas.summarise(weights), *args)
    if hvd.size() == 1:
        return
    changed = [w * np.float32(0.5) for w in mine]
    assert guard.tick()
    with pytest.raises(_replicas.ReplicaMismatchError,
                       match=r"after update 4 \(and after update 1: no broadcast"):
        guard.check(_replicas.summarise(changed), *args)


def test_different_models_are_named_with_each_ranks_variable_count():
    mine = WEIGHTS[:2] if hvd.rank() == hvd.size() - 1 else WEIGHTS
    names = NAMES[:len(mine)]
    if hvd.size() == 1:
        check(mine, names)
        return
    last = hvd.size() - 1
    counts = ", ".join(f"rank {r}: {2 if r == last else 3}" for r in range(hvd.size()))
    with pytest.raises(_replicas.ReplicaMismatchError,
                       match=f"train different models: rank {last} has other trainable "
                             rf"variables .* \(variables per rank: {counts}\)"):
        check(mine, names)


@pytest.mark.parametrize("every, checked", [
    (-1, []), (0, [1]), (1, list(range(1, 13))), (5, [1, 5, 10]),
])
def test_schedule_of_hvd_check_replicas(every, checked):
    assert [n for n in range(13) if _replicas.due(n, every)] == checked


def test_tensorflow_guards_count_before_the_update():
    guard = _replicas.Guard("x", hvd.global_process_set, "", every=0, before_update=True)
    # Reductions 1, 2, 3: the check of "after update 1" comes at the second.
    assert [guard.tick() for _ in range(3)] == [False, True, False]
    assert guard.updates_done == 2
    # Where the recipe broadcasts before training, the starting weights: the first reduction.
    start = _replicas.Guard("x", hvd.global_process_set, "", every=2, before_update=True,
                            first=0)
    assert [start.tick() for _ in range(5)] == [True, False, True, False, True]


def test_torch_and_numpy_summaries_agree():
    torch.manual_seed(0)
    params = [torch.randn(64, 64), torch.randn(5), torch.randn(3, dtype=torch.complex64),
              torch.randn(0), torch.randn(1), torch.randn(3000).to(torch.bfloat16)]
    arrays = [(torch.view_as_real(p) if p.is_complex() else p).float().numpy() for p in params]
    for chunk in (1 << 22, 1000):
        np.testing.assert_allclose(torch_summarise(params, chunk=chunk),
                                   _replicas.summarise(arrays, chunk=chunk), rtol=1e-12,
                                   atol=1e-9)
