"""The example config files in configs/ load through hvdrun, and defaults.json states the
defaults (checked against --print-config, so the file cannot drift from the parameter table)."""
import json
import re

import pytest

from conftest import REPO, run_hvdrun

CONFIGS = sorted((REPO / "configs").glob("*.json"))


def printed(config):
    """{variable: (default, now)} from `hvdrun --config-file config --print-config`."""
    r = run_hvdrun("--config-file", config, "--print-config")
    assert r.returncode == 0, r.stderr
    out = {}
    for name, default, now in re.findall(
            r"^(HVD_\w+).*\n\s+\w+, default (\S+?),? .*?now (.*)$", r.stdout, re.M):
        out[name] = (default, now)
    return out


@pytest.mark.parametrize("config", CONFIGS, ids=[c.name for c in CONFIGS])
def test_each_example_config_loads(config):
    values = printed(config)
    keys = sum(len(section) for section in json.loads(config.read_text()).values())
    set_by_file = [n for n, (_, now) in values.items() if now != "(default)"]
    assert len(set_by_file) == keys, (config.name, set_by_file)


def test_defaults_json_states_every_default():
    values = printed(REPO / "configs" / "defaults.json")
    for name, (default, now) in values.items():
        if now != "(default)":
            assert now == default, f"configs/defaults.json sets {name}={now}, default {default}"
