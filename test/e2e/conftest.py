"""Shared helpers for the end-to-end tests: they run the built hvdrun on real processes."""
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("HVD_BUILD_DIR", REPO / "build"))
HVDRUN = BUILD / "apps" / "hvdrun"
WORKER = BUILD / "test" / "e2e_worker"
DEMO = BUILD / "examples" / "allreduce_demo"


def run_hvdrun(*args, timeout=60, **kwargs):
    """Runs hvdrun to completion; a hang fails the test at `timeout` instead of stalling CI."""
    return subprocess.run([str(HVDRUN), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, **kwargs)


def python_worker(code):
    """A command line that runs `code` in a fresh Python interpreter."""
    return [sys.executable, "-c", code]


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


@pytest.fixture(scope="session", autouse=True)
def built():
    for path in (HVDRUN, WORKER, DEMO):
        if not path.exists():
            pytest.exit(f"{path} is missing: build first (scripts/build.sh)", returncode=1)
