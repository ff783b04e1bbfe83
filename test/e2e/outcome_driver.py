"""The cluster tests' drivers (test_spark.py, test_ray.py): a script of their own, run as users
run it, that prints `OUTCOME <json>` lines and last `"done": true`. Returns the lines' fields
merged, or fails the test with the driver's output (and `context`, e.g. a daemon's log)."""
import json
import subprocess

import pytest


def run_outcome_driver(command, code, tmp_path, env, timeout=300, context=lambda: ""):
    """`command(script)`: the argv that runs the script written from `code`."""
    script = tmp_path / "driver.py"
    script.write_text(code)
    r = subprocess.run(command(script), capture_output=True, text=True, timeout=timeout,
                       env=env, cwd=tmp_path)
    outcome = {}
    for line in r.stdout.splitlines():
        if line.startswith("OUTCOME "):
            outcome.update(json.loads(line[len("OUTCOME "):]))
    if "done" not in outcome:
        pytest.fail(f"driver exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}\n"
                    f"{context()}")
    return outcome
