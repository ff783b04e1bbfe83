"""hvd's horovod.torch and horovod.tensorflow against Horovod itself: the same script per
framework (horovod_conformance_{torch,tf}_worker.py: every collective, op and dtype, autograd
through each, DistributedOptimizer / DistributedGradientTape variants, objects, process sets,
join) runs under Horovod's horovodrun and under `hvdrun --horovod-compat`, and every result
Horovod returns must come back the same from hvd. Where Horovod refuses a case (int8
allreduce, a non-contiguous tensor, SyncBatchNorm on the CPU), hvd may do more.

Needs Horovod built by bench/install_horovod.sh (HVD_TEST_HOROVOD_PYTHON names another
Python that imports it); a framework Horovod was built without is skipped.
"""
import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import run_hvdrun

HERE = pathlib.Path(__file__).parent
# framework: (worker script, cases each rank must have compared at least)
FRAMEWORKS = {"torch": (HERE / "horovod_conformance_torch_worker.py", 60),
              "tensorflow": (HERE / "horovod_conformance_tf_worker.py", 50)}
# (Where hvd differs from Horovod on purpose there is no case: the gradient of a Max allreduce,
# which Horovod computes as a Max allreduce of the gradient and hvd refuses, hangs Horovod
# 0.28.1 at 3 ranks.)
HOROVOD_PYTHON = pathlib.Path(os.environ.get(
    "HVD_TEST_HOROVOD_PYTHON", pathlib.Path.home() / ".cache/hvd/horovod-venv/bin/python"))


def horovod_has(framework):
    if not HOROVOD_PYTHON.exists():
        return False
    r = subprocess.run([str(HOROVOD_PYTHON), "-c", f"import horovod.{framework}"],
                       capture_output=True, timeout=120)
    return r.returncode == 0


def run_both(worker, np_, tmp_path):
    env = dict(os.environ, WITH_SETS="1" if np_ >= 3 else "0", TF_CPP_MIN_LOG_LEVEL="2")
    out = {}
    for library in ("horovod", "hvd"):
        out_dir = tmp_path / library
        out_dir.mkdir()
        env["OUT_DIR"] = str(out_dir)
        if library == "horovod":
            r = subprocess.run([str(HOROVOD_PYTHON.parent / "horovodrun"), "--gloo", "-np",
                                str(np_), "-H", f"localhost:{np_}", str(HOROVOD_PYTHON),
                                str(worker)], capture_output=True, text=True, timeout=300,
                               env=env, cwd=tmp_path)
        else:
            r = run_hvdrun("-np", np_, "--horovod-compat", sys.executable, worker, env=env,
                           timeout=300, cwd=tmp_path)
        assert r.returncode == 0, f"{library}: {r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        out[library] = [json.loads((out_dir / f"{rank}.json").read_text())
                        for rank in range(np_)]
    return out["horovod"], out["hvd"]


def differences(expected, got, where, tolerance):
    if isinstance(expected, dict) and "values" in expected:
        if not isinstance(got, dict) or "values" not in got:
            return [f"{where}: {got!r}, expected a tensor"]
        if (got["dtype"], got["shape"]) != (expected["dtype"], expected["shape"]):
            return [f"{where}: {got['dtype']} {got['shape']}, Horovod "
                    f"{expected['dtype']} {expected['shape']}"]
        bad = [i for i, (e, g) in enumerate(zip(expected["values"], got["values"]))
               if not math.isclose(e, g, rel_tol=tolerance, abs_tol=tolerance)]
        return [f"{where}[{bad[0]}]: {got['values'][bad[0]]}, Horovod "
                f"{expected['values'][bad[0]]}"] if bad else []
    if isinstance(expected, dict):
        if not isinstance(got, dict) or set(got) != set(expected):
            return [f"{where}: {got!r}, Horovod {expected!r}"]
        return [d for k in expected for d in differences(expected[k], got[k], f"{where}.{k}",
                                                         tolerance)]
    if isinstance(expected, list):
        if not isinstance(got, list) or len(got) != len(expected):
            return [f"{where}: {got!r}, Horovod {expected!r}"]
        return [d for i, (e, g) in enumerate(zip(expected, got))
                for d in differences(e, g, f"{where}[{i}]", tolerance)]
    return [] if got == expected else [f"{where}: {got!r}, Horovod {expected!r}"]


@pytest.mark.parametrize("np_", [2, 3])
@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_horovod_scripts_get_horovods_results(framework, np_, tmp_path):
    if not horovod_has(framework):
        pytest.skip(f"no Horovod with {framework} at {HOROVOD_PYTHON} "
                    "(bench/install_horovod.sh)")
    worker, least = FRAMEWORKS[framework]
    horovod, hvd = run_both(worker, np_, tmp_path)
    compared, problems = 0, []
    for rank in range(np_):
        for case, expected in horovod[rank].items():
            got = hvd[rank].get(case)
            refused = isinstance(expected, dict) and "error" in expected
            failed = isinstance(got, dict) and "error" in got
            if case.startswith("error."):
                # both must raise, and what catches Horovod's must catch hvd's: that is what
                # scripts rely on (hvd's may be a subclass, e.g. OperationRejectedError)
                caught_as = got.get("caught_as", [got.get("error")]) if failed else []
                if expected.get("error") not in caught_as:
                    problems.append(f"rank {rank} {case}: hvd {got}, Horovod {expected}")
                compared += 1
            elif refused:
                continue  # Horovod refuses it; hvd may take it
            elif failed:
                problems.append(f"rank {rank} {case}: hvd raised {got['error']}: "
                                f"{got['message']}")
            else:
                # fp16 sums round differently (Horovod adds in float16, hvd in float32)
                tolerance = 2e-3 if "fp16" in case or "float16" in case else 1e-6
                problems += [f"rank {rank} {d}"
                             for d in differences(expected, got, case, tolerance)]
                compared += 1
    assert not problems, "\n".join(problems)
    assert compared >= least * np_, f"only {compared} cases compared"
