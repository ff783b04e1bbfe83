"""Runs under hvdrun: every rank runs the same tests in the same order, so each test's
collectives meet their peers. Run as `hvdrun -np N python -m pytest test/python`."""
import os

import pytest


def pytest_configure(config):
    if "HVD_RENDEZVOUS_ADDR" not in os.environ:
        # One rank is still a valid job, but the suite is meant for several.
        print("test/python: not under hvdrun; running as a single-rank job")


@pytest.fixture(scope="session", autouse=True)
def hvd_job():
    import torch
    torch.set_num_threads(1)
    import hvd
    hvd.init()
    yield
    hvd.shutdown()
