"""The helper modules of Horovod that scripts and Horovod's own tests import from the horovod
package (horovod.runner..., horovod.common.util), provided by the compatibility package."""
import os
import sys
import threading
from pathlib import Path

import pytest

import hvd

sys.path.insert(0, str(Path(hvd.__file__).parent / "compat"))  # what --horovod-compat does
from horovod.common.util import env, is_version_greater_equal_than  # noqa: E402
from horovod.runner.common.util.env import get_env_rank_and_size  # noqa: E402
from horovod.runner.util.threads import in_thread  # noqa: E402


def test_the_launchers_rank_and_size_are_read_from_the_environment():
    assert get_env_rank_and_size() == (hvd.rank(), hvd.size())


def test_env_sets_variables_for_a_block_and_puts_back_what_was_there(monkeypatch):
    monkeypatch.setenv("HVD_TEST_KEPT", "before")
    monkeypatch.delenv("HVD_TEST_NEW", raising=False)
    with env(HVD_TEST_KEPT="during", HVD_TEST_NEW="new", HVD_TEST_NONE=None):
        assert os.environ["HVD_TEST_KEPT"] == "during" and os.environ["HVD_TEST_NEW"] == "new"
        assert "HVD_TEST_NONE" not in os.environ
    assert os.environ["HVD_TEST_KEPT"] == "before" and "HVD_TEST_NEW" not in os.environ


def test_in_thread_runs_the_target_in_the_background():
    seen = []
    t = in_thread(seen.append, (threading.current_thread().name,), name="bg")
    t.join(5)
    assert seen and t.daemon and t.name == "bg"
    with pytest.raises(ValueError, match="must be a tuple"):
        in_thread(print, args=[1])
    in_thread(lambda: 1 / 0, silent=True).join(5)  # swallowed: nothing reaches threading's hook


def test_version_comparison():
    assert is_version_greater_equal_than("2.15.1", "2.15.0")
    assert not is_version_greater_equal_than("2.9.0", "2.15.0")
    with pytest.raises(ValueError):
        is_version_greater_equal_than("2.15", "2.15")
