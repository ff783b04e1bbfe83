"""The replica check (HVD_CHECK_REPLICAS) through real jobs: what a failing check does to a job
(it ends with a non-zero exit, no rank trains past the check, and hvdrun's output names the ranks,
the variable and the fix), for a PyTorch and a Keras job; `off` reaching the workers from the
flag; a bad value refused at start. The check's schedules, the frontends' recipes that pass and
the loops that fail (every Keras model kind and both Keras versions, DistributedGradientTape,
rank-local sources) run in the API suites, in one process per rank
(test/python/test_torch_replica_guard.py, test/python/tensorflow/test_tensorflow_replica_guard.py);
the variable's parsing in test/unit/test_params.cc."""
import os
import pathlib
import re
import sys
import time

from conftest import run_hvdrun

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
def test_torch_ranks_initialised_differently_fail_the_job_at_the_second_update():
    r, took = job(2, "torch", "--differ")
    assert_mismatch(r, [1], "0.weight", update=2, confirmed=True)
    assert "hvd.broadcast_parameters(model.state_dict(), root_rank=0)" in r.stderr
    assert took < 60


def test_off_turns_the_check_off():
    # The flag, the variable and the config file's key set the same parameter: the parameter
    # table's unit tests check that every flag and key sets its variable (test_param_table.cc),
    # so one job here shows that "off" reaches the workers and turns the check off.
    r, _ = job(2, "torch", "--differ", hvdrun_args=("--check-replicas", "off"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert len({w for _, w in weights(r)}) == 2  # the ranks did train different models


def test_a_bad_value_fails_the_job_at_start_naming_the_variable():
    # Every value's parsing: test_params.cc.
    r, _ = job(1, "torch", env={"HVD_CHECK_REPLICAS": "every:0"})
    assert r.returncode != 0
    assert "HVD_CHECK_REPLICAS='every:0': expected off, first or every:N" in r.stderr


# -- Keras --------------------------------------------------------------------------------------
def test_keras_fit_without_the_broadcast_fails_the_job_naming_the_variable():
    # No callback: the starting weights are compared before the first update, and fit fails
    # when they are still apart before the second.
    r, _ = job(2, "keras-seq", "--differ")
    assert_mismatch(r, [1], "sequential/dense/kernel", update=1, confirmed=True)
