"""The replica check (HVD_CHECK_REPLICAS) through real jobs: a job whose ranks hold different
weights fails on its first check, naming the ranks and the variable; the Horovod recipes pass;
`off` turns the check off; Keras's broadcast callback reaches models built by their first
batch (without the check, which would otherwise hide a missed broadcast)."""
import os
import pathlib
import re
import sys
import time

import pytest

from conftest import TF_PYTHONS, run_hvdrun

WORKER = pathlib.Path(__file__).with_name("replica_guard_worker.py")
TF_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2"}


def job(np, flavour, *flags, env=None, hvdrun_args=(), python=sys.executable):
    environment = {k: v for k, v in os.environ.items() if k != "HVD_CHECK_REPLICAS"}
    environment.update(TF_ENV, **(env or {}))
    started = time.monotonic()
    r = run_hvdrun("-np", np, *hvdrun_args, python, WORKER, flavour, *flags,
                   env=environment, timeout=180)
    return r, time.monotonic() - started


def weights(r):
    """Each rank's weight checksum."""
    return re.findall(r"^\[(\d+)\]<stdout>:WEIGHTS (\d+)$", r.stdout, re.M)


def assert_identical(r, np):
    assert r.returncode == 0, r.stderr[-3000:]
    found = weights(r)
    assert len(found) == np and len({w for _, w in found}) == 1, found


def assert_mismatch(r, ranks, variable, update=1, what="DistributedOptimizer", confirmed=False):
    """`confirmed`: the first check after an update found the ranks apart and the next one
    (after update `update`) confirmed it (a script may broadcast after its first step)."""
    assert r.returncode != 0, r.stdout[-2000:]
    text = r.stdout + r.stderr
    assert "ReplicaMismatchError" in text
    when = "before the first update" if update == 0 else f"after update {update}"
    if confirmed:
        before = "before the first update" if update == 1 else f"after update {update - 1}"
        when += f" (and {before}: no broadcast made them equal since)"
    who = f"rank {ranks[0]} differs" if len(ranks) == 1 else \
        f"ranks {', '.join(map(str, ranks))} differ"
    assert f"replica check of {what} {when}: the ranks hold different trainable weights: " \
           f"{who} from rank 0" in text, text[-3000:]
    assert f"The first variable that differs is {variable!r}" in text
    assert "HVD_CHECK_REPLICAS=off" in text
    assert not weights(r)  # no rank trained on past the check


# -- torch --------------------------------------------------------------------------------------
@pytest.mark.parametrize("np", [2, 3])
def test_torch_ranks_initialised_differently_fail_at_the_second_update(np):
    r, took = job(np, "torch", "--differ")
    assert_mismatch(r, list(range(1, np)), "0.weight", update=2, confirmed=True)
    assert "hvd.broadcast_parameters(model.state_dict(), root_rank=0)" in r.stderr
    assert took < 60


@pytest.mark.parametrize("np", [2, 3])
def test_torch_recipe_with_broadcast_passes_with_identical_weights(np):
    r, _ = job(np, "torch", "--differ", "--broadcast", env={"HVD_CHECK_REPLICAS": "every:2"})
    assert_identical(r, np)


@pytest.mark.parametrize("how", ["flag"])
def test_off_turns_the_check_off(how, tmp_path):
    # The flag, the variable and the config file's key set the same parameter: the parameter
    # table's unit tests check that every flag and key sets its variable (test_param_table.cc),
    # so one job here shows that "off" reaches the workers and turns the check off.
    r, _ = job(2, "torch", "--differ", hvdrun_args=("--check-replicas", "off"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert len({w for _, w in weights(r)}) == 2  # the ranks did train different models


def test_every_n_catches_a_rank_that_drifts_later():
    # Rank 1 changes its weights after update 3: `first` checked before that and misses it;
    # every:2 finds it at update 4.
    r, _ = job(2, "torch", "--perturb", "3", env={"HVD_CHECK_REPLICAS": "first"})
    assert r.returncode == 0, r.stderr[-2000:]
    r, _ = job(2, "torch", "--perturb", "3", env={"HVD_CHECK_REPLICAS": "every:2"})
    assert_mismatch(r, [1], "2.bias", update=4)


@pytest.mark.parametrize("value", ["sometimes", "every:0", "every:x"])
def test_a_bad_value_is_refused_naming_the_variable(value):
    r, _ = job(1, "torch", env={"HVD_CHECK_REPLICAS": value})
    assert r.returncode != 0
    assert f"HVD_CHECK_REPLICAS='{value}': expected off, first or every:N" in r.stderr


# -- Keras --------------------------------------------------------------------------------------
@pytest.mark.parametrize("python", TF_PYTHONS)
@pytest.mark.parametrize("np", [2])
@pytest.mark.parametrize("flavour", ["keras-seq", "keras-sub"])
def test_keras_callback_broadcasts_models_built_by_their_first_batch(flavour, np, python):
    # The check off: this is the callback's own doing. A broadcast to more than one receiver is
    # checked by the API suites at 3 ranks (test/python/tensorflow, scripts/test.sh).
    r, _ = job(np, flavour, "--differ", "--broadcast", env={"HVD_CHECK_REPLICAS": "off"},
               python=python)
    assert_identical(r, np)


@pytest.mark.parametrize("python", TF_PYTHONS)
@pytest.mark.parametrize("flavour", ["keras-seq", "keras-sub"])
def test_keras_without_the_broadcast_fails_naming_the_variable(flavour, python):
    # No callback: the starting weights are compared before the first update, and the job
    # fails when they are still apart before the second.
    r, _ = job(2, flavour, "--differ", python=python)
    keras2 = python != sys.executable  # tf.keras 2 names variables dense/kernel:0
    variable = {("keras-seq", False): "sequential/dense/kernel",
                ("keras-sub", False): "net/dense/kernel",
                ("keras-seq", True): "dense/kernel:0",
                ("keras-sub", True): "net/dense/kernel:0"}[flavour, keras2]
    assert_mismatch(r, [1], variable, update=1, confirmed=True)


@pytest.mark.parametrize("python", TF_PYTHONS)
def test_keras_with_the_callback_passes_the_check(python):
    r, _ = job(2, "keras-seq", "--differ", "--broadcast", env={"HVD_CHECK_REPLICAS": "every:3"},
               python=python)
    assert_identical(r, 2)


# -- DistributedGradientTape --------------------------------------------------------------------
@pytest.mark.parametrize("python", TF_PYTHONS)
def test_tape_loop_that_never_broadcasts_fails(python):
    r, _ = job(2, "tape", "--differ", python=python)
    assert_mismatch(r, [1], "w:0", update=2, what="DistributedGradientTape", confirmed=True)


def test_tape_loop_broadcasting_after_the_first_step_passes():
    # Horovod's TF2 recipe broadcasts after the first step; the check comes after it.
    r, _ = job(2, "tape", "--differ", "--broadcast", env={"HVD_CHECK_REPLICAS": "every:2"})
    assert_identical(r, 2)


def test_rank_local_sources_are_not_compared():
    r, _ = job(2, "tape", "--local-differ", env={"HVD_CHECK_REPLICAS": "every:1"})
    assert_identical(r, 2)
