"""Runs under hvdrun: every rank runs the same tests in the same order, so each test's
collectives meet their peers. Run as `hvdrun -np N python -m pytest test/python`."""
import os
import tempfile
from pathlib import Path

import pytest


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "size_dependent: takes a path that depends on the number of ranks (Adasum's "
        "power of two, process sets' members); scripts/test.sh runs these again at 3 ranks")
    if "HVD_RENDEZVOUS_ADDR" not in os.environ:
        # One rank is still a valid job, but the suite is meant for several.
        print("test/python: not under hvdrun; running as a single-rank job")
    if config.option.basetemp is None and "HVD_RANK" in os.environ:
        # A temporary root per rank: ranks sharing pytest's default root race to clean up each
        # other's old directories (PytestWarning: Directory not empty).
        config.option.basetemp = os.path.join(
            tempfile.gettempdir(), f"hvd-pytest-{os.getuid()}-rank{os.environ['HVD_RANK']}")


TENSORFLOW_TESTS = Path(__file__).parent / "tensorflow"


def pytest_ignore_collect(collection_path, config):
    # TensorFlow and torch.compile's Triton each load their own LLVM, and whichever comes second
    # aborts the process ("Option ... registered more than once"). The TensorFlow tests run in
    # processes of their own: only when asked for by path (pytest test/python/tensorflow).
    if Path(collection_path) == TENSORFLOW_TESTS:
        asked = [Path(a.split("::")[0]).resolve() for a in config.args]
        return not any(p == TENSORFLOW_TESTS or TENSORFLOW_TESTS in p.parents for p in asked)
    return None


@pytest.fixture(scope="session", autouse=True)
def hvd_job():
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:  # a TensorFlow-only environment (TensorFlow 2.15 + Keras 2)
        pass
    import hvd
    hvd.init()
    yield
    hvd.shutdown()


@pytest.fixture
def check_replicas(monkeypatch):
    """Sets the replica check's schedule that the guards made in a test read: -1 off, 0 first,
    N every:N (HVD_CHECK_REPLICAS, parsed once per job at init: its parsing is a unit test, its
    reaching the workers an e2e test)."""
    from hvd import _replicas

    def schedule(every):
        monkeypatch.setattr(_replicas._core, "check_replicas_every", lambda: every)
    return schedule
