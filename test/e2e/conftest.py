"""Shared helpers for the end-to-end tests: they run the built hvdrun on real processes."""
import functools
import os
import pathlib
import resource
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("HVD_BUILD_DIR", REPO / "build"))
HVDRUN = BUILD / "apps" / "hvdrun"
WORKER = BUILD / "test" / "e2e_worker"
DEMO = BUILD / "examples" / "allreduce_demo"


# The interpreter of the second TensorFlow environment (TensorFlow 2.15, Keras 2, Estimator),
# which scripts/setup.sh makes and scripts/test.sh names.
TF215 = pathlib.Path(os.environ.get("HVD_TF215_PYTHON",
                                    pathlib.Path.home() / ".cache/hvd/venv-tf215/bin/python"))
# Parameters for tests that run under both TensorFlow environments.
TF_PYTHONS = [pytest.param(sys.executable, id="tf2.21"),
              pytest.param(TF215, id="tf2.15", marks=pytest.mark.skipif(
                  not TF215.exists(), reason=f"{TF215} missing: run scripts/setup.sh"))]


def run_hvdrun(*args, timeout=60, **kwargs):
    """Runs hvdrun to completion; a hang fails the test at `timeout` instead of stalling CI."""
    return subprocess.run([str(HVDRUN), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, **kwargs)


def python_worker(code):
    """A command line that runs `code` in a fresh Python interpreter."""
    return [sys.executable, "-c", code]


@functools.lru_cache(maxsize=None)
def cuda_ready():
    """True when torch sees a CUDA device and the built hvd has CUDA and NCCL."""
    probe = ("import torch, hvd; "
             "print(int(torch.cuda.is_available() and hvd.cuda_built() and bool(hvd.nccl_built())))")
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    try:
        r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                           timeout=120, env=env)
    except subprocess.TimeoutExpired:
        return False
    return r.stdout.strip() == "1"


# A shell prefix that puts each rank alone on a host of its own, as far as hvd and NCCL can tell
# (HVD_HOSTNAME for hvd, NCCL_HOSTID for NCCL): ranks sharing one GPU then form NCCL
# communicators across "hosts" (NCCL's socket transport; pass -x NCCL_SOCKET_IFNAME=lo).
FAKE_HOST = ("export HVD_HOSTNAME=fakehost$HVD_RANK NCCL_HOSTID=fakehost$HVD_RANK HVD_LOCAL_RANK=0 "
             "HVD_LOCAL_SIZE=1 HVD_CROSS_RANK=$HVD_RANK HVD_CROSS_SIZE=$HVD_SIZE;")


def hvd_segments():
    """The shared-memory segment names in /dev/shm (any job's)."""
    return {n for n in os.listdir("/dev/shm") if n.startswith("hvd-")}


def process_gone(pid):
    """True when pid no longer runs (a zombie waiting for a reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:"):
                    return "Z" in line.split()[1]
    except FileNotFoundError:
        return True
    return False


def pytest_configure(config):
    # scripts/test.sh runs the suite under pytest-xdist, then the tests marked whole_machine
    # alone. Tests that share a resource among themselves carry pytest.mark.xdist_group (one
    # worker runs a group's tests in order).
    config.addinivalue_line(
        "markers", "whole_machine: needs the machine to itself: counts machine-wide state "
        "(every job's /dev/shm segments, free memory) or times against bounds that other tests' "
        "load would break; run after the parallel tests, alone")


# The modules whose tests start PyTorch or TensorFlow on every rank (seconds of CPU each): run
# first, so that the parallel run's workers share them out instead of ending on them.
HEAVY_MODULES = ("test_tensorflow_tutorials", "test_python_package", "test_replica_guard",
                 "test_hvdrun_elastic", "test_slurm", "test_mpirun", "test_mpi_operator")


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.module.__name__ not in HEAVY_MODULES)  # stable


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    # The CPU seconds of the processes the test started and waited for (hvdrun and, through it,
    # its local ranks): the suite's cost on a machine of few cores is CPU, not wall time.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    yield
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    item.user_properties.append(("cpu_seconds", round(cpu, 2)))


def pytest_terminal_summary(terminalreporter):
    """The tests whose processes used the most CPU, and the total (with --durations)."""
    shown = terminalreporter.config.option.durations
    if shown is None:
        return
    costs = []
    for reports in terminalreporter.stats.values():
        for report in reports:
            for key, value in getattr(report, "user_properties", ()):
                if key == "cpu_seconds" and getattr(report, "when", "") == "call":
                    costs.append((value, report.nodeid))
    if not costs:
        return
    costs.sort(reverse=True)
    total = sum(c for c, _ in costs)
    terminalreporter.write_sep("=", f"CPU seconds of the tests' processes: {total:.0f} in all")
    for cpu, nodeid in costs[:shown or len(costs)]:
        terminalreporter.write_line(f"{cpu:8.1f}s cpu  {nodeid}")


@pytest.fixture(scope="session", autouse=True)
def built():
    for path in (HVDRUN, WORKER, DEMO):
        if not path.exists():
            pytest.exit(f"{path} is missing: build first (scripts/build.sh)", returncode=1)
