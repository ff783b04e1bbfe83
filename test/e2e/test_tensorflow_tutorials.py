"""Horovod's TensorFlow tutorials as their users write them (`import horovod.tensorflow...`),
run unchanged through `hvdrun --horovod-compat`: every rank ends with bit-identical weights
and the model learns. On TensorFlow 2.21 with Keras 3 (this interpreter) and on TensorFlow 2.15
with Keras 2 and Estimator (HVD_TF215_PYTHON, the virtualenv scripts/setup.sh makes)."""
import os
import pathlib
import re
import sys

import pytest

from conftest import REPO, TF215, TF_PYTHONS, run_hvdrun

EXAMPLES = REPO / "examples"


def tutorial(np, script, *args, python=sys.executable, **env_extra):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **env_extra)
    r = run_hvdrun("-np", np, "--horovod-compat", python, EXAMPLES / script,
                   "--print-weights-digest", *args, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    digests = dict(re.findall(r"rank (\d+): weights digest ([0-9a-f]{8})", r.stdout))
    assert sorted(digests) == [str(q) for q in range(np)], r.stdout[-2000:]
    assert len(set(digests.values())) == 1, digests  # bit-identical on every rank
    accuracy = float(re.search(r"test accuracy: ([\d.]+)%", r.stdout).group(1))
    return r, accuracy


# Each tutorial runs on 2 ranks under both TensorFlow versions; shards of unequal size (3 ranks)
# once for Keras (the subclassed model, on TensorFlow 2.21) and once for TF1's hooks (the
# Estimator, on TensorFlow 2.15): what else 3 ranks change, the API suites check at np 3
# (scripts/test.sh). Each run starts TensorFlow on every rank, the suite's largest cost, so a
# variant whose difference the API suites check in one process runs once: the subclassed Keras
# model (the callback's broadcast of models built by their first batch, for both model kinds
# and both Keras versions: test_tensorflow_replica_guard.py) and the TF1 resume from rank 0's
# checkpoint (the same tf.compat.v1 path on both versions and any number of ranks).
TWO_RANKS = [pytest.param(2, p.values[0], id=f"2-{p.id}", marks=p.marks) for p in TF_PYTHONS]


@pytest.mark.parametrize("model, np, python", [
    pytest.param("sequential", *p.values, id=f"sequential-{p.id}", marks=p.marks)
    for p in TWO_RANKS] + [pytest.param("subclassed", 3, sys.executable, id="subclassed-3-tf2.21")])
def test_tf2_keras_model_built_by_its_first_batch(model, np, python):
    args = ["--subclassed"] if model == "subclassed" else []
    _, accuracy = tutorial(np, "tensorflow2_keras_mnist.py", "--epochs", "3", *args,
                           python=python)
    assert accuracy > 85


@pytest.mark.parametrize("np, python", TWO_RANKS)
def test_tf1_monitored_training_session_with_hook_and_rank0_checkpoints(np, python, tmp_path):
    checkpoints = tmp_path / "ckpt"
    _, accuracy = tutorial(np, "tensorflow_v1_mnist.py", "--checkpoint-dir", checkpoints,
                           "--steps", "600", python=python)
    assert accuracy > 85
    written = sorted(p.name for p in checkpoints.iterdir())
    assert "checkpoint" in written and any(n.startswith("model.ckpt-") for n in written)
    if (np, python) != (2, sys.executable):
        return
    # A rerun resumes from rank 0's checkpoint: the broadcast hands it to every rank, and
    # training continues to a later global step.
    _, resumed = tutorial(np, "tensorflow_v1_mnist.py", "--checkpoint-dir", checkpoints,
                          "--steps", str(1200), python=python)
    later = sorted(p.name for p in checkpoints.iterdir() if p.name.startswith("model.ckpt-"))
    assert later != [n for n in written if n.startswith("model.ckpt-")]
    assert resumed > 85


@pytest.mark.skipif(not TF215.exists(), reason=f"{TF215} missing: run scripts/setup.sh")
@pytest.mark.parametrize("np", [3])  # TF1's hooks on shards of unequal size; only TF 2.15 has it
def test_estimator_with_hook_and_a_model_dir_on_rank0_only(np, tmp_path):
    model_dir = tmp_path / "model"
    scratch = tmp_path / "tmp"  # the job's temporary directory: no other test's in it
    scratch.mkdir()
    _, accuracy = tutorial(np, "tensorflow_estimator_mnist.py", "--model-dir", model_dir,
                           python=TF215, TMPDIR=str(scratch))
    assert accuracy > 85
    written = {p.name for p in model_dir.iterdir()}
    assert "checkpoint" in written and "eval" in written
    # The other ranks trained in temporary directories of their own, removed at the end.
    assert not list(scratch.glob("hvd-estimator-*"))
