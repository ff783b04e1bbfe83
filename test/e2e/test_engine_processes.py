"""The engine's knobs and timeline through hvdrun, on real processes."""
import json
import os
import signal
import subprocess
import time

from conftest import HVDRUN, WORKER, run_hvdrun


def worker_env(result):
    """{rank: {VAR: value}} from the 'env' worker's lines ("[1]<stdout>:HVD_RANK=1 ...")."""
    out = {}
    for line in result.stdout.splitlines():
        fields = dict(f.split("=", 1) for f in line.split(":", 1)[-1].split() if "=" in f)
        if "HVD_RANK" in fields:
            out[int(fields["HVD_RANK"])] = fields
    return out


def test_flags_and_config_file_reach_every_worker(tmp_path):
    config = tmp_path / "hvd.json"
    config.write_text(json.dumps({
        "params": {"fusion_threshold_mb": 2, "cycle_time_ms": 0.5, "cache_capacity": 7,
                   "hierarchical_allreduce": True, "hierarchical_allgather": True},
        "stall_check": {"enabled": False},
        "logging": {"level": "warning"},
    }))
    # The flag overrides the file's cache capacity.
    r = run_hvdrun("-np", 2, "--config-file", config, "--cache-capacity", 9, WORKER, "env")
    assert r.returncode == 0, r.stderr
    env = worker_env(r)
    assert sorted(env) == [0, 1]
    for rank in (0, 1):
        assert env[rank]["HVD_FUSION_THRESHOLD"] == str(2 * 1024 * 1024)
        assert env[rank]["HVD_CYCLE_TIME"] == "0.5"
        assert env[rank]["HVD_CACHE_CAPACITY"] == "9"
        assert env[rank]["HVD_STALL_CHECK_DISABLE"] == "1"
        assert env[rank]["HVD_LOG_LEVEL"] == "warn"
        assert env[rank]["HVD_HIERARCHICAL_ALLREDUCE"] == "1"
        assert env[rank]["HVD_HIERARCHICAL_ALLGATHER"] == "1"


def test_a_log_level_in_hvdruns_environment_applies_to_hvdrun_and_workers_unless_flagged():
    base = {k: v for k, v in os.environ.items() if not k.endswith("_LOG_LEVEL")}
    r = run_hvdrun("-np", 2, WORKER, "env", env=dict(base, HOROVOD_LOG_LEVEL="info"))
    assert r.returncode == 0, r.stderr
    assert [worker_env(r)[rank]["HVD_LOG_LEVEL"] for rank in (0, 1)] == ["info", "info"]
    assert "hvdrun info [launcher]" in r.stderr
    r = run_hvdrun("-np", 2, "--log-level", "error", WORKER, "env",
                   env=dict(base, HVD_LOG_LEVEL="info"))
    assert r.returncode == 0, r.stderr
    assert [worker_env(r)[rank]["HVD_LOG_LEVEL"] for rank in (0, 1)] == ["error", "error"]
    assert "info" not in r.stderr
    r = run_hvdrun("-np", 2, WORKER, "env", env=dict(base, HVD_LOG_LEVEL="loud"))
    assert r.returncode == 2
    assert "HVD_LOG_LEVEL: unknown log level 'loud'" in r.stderr and not r.stdout


def test_hierarchical_flags_reach_every_worker():
    r = run_hvdrun("-np", 2, "--hierarchical-allreduce", WORKER, "env")
    assert r.returncode == 0, r.stderr
    env = worker_env(r)
    assert [env[rank]["HVD_HIERARCHICAL_ALLREDUCE"] for rank in (0, 1)] == ["1", "1"]
    assert [env[rank]["HVD_HIERARCHICAL_ALLGATHER"] for rank in (0, 1)] == ["", ""]
    r = run_hvdrun("-np", 2, "--hierarchical-allgather", WORKER, "env")
    assert r.returncode == 0, r.stderr
    env = worker_env(r)
    assert [env[rank]["HVD_HIERARCHICAL_ALLGATHER"] for rank in (0, 1)] == ["1", "1"]


def test_bad_knobs_are_rejected_naming_the_key_before_anything_starts(tmp_path):
    config = tmp_path / "hvd.json"
    config.write_text(json.dumps({"library_options": {"num_nccl_streams": 2}}))
    r = run_hvdrun("-np", 2, "--config-file", config, WORKER, "env")
    assert r.returncode == 2
    assert "library_options.num_nccl_streams is not supported by hvd" in r.stderr
    r = run_hvdrun("-np", 2, "--timeline-mark-cycles", WORKER, "env")
    assert r.returncode == 2 and "--timeline-mark-cycles (HVD_TIMELINE_MARK_CYCLES=1) needs a " \
        "timeline" in r.stderr
    config.write_text(json.dumps({"params": {"cache_capacity": "lots"}}))
    r = run_hvdrun("-np", 2, "--config-file", config, WORKER, "env")
    assert r.returncode == 2 and 'params.cache_capacity: expected a number, got "lots"' in r.stderr
    r = run_hvdrun("-np", 2, "--cycle-time-ms", "-1", WORKER, "env")
    assert r.returncode == 2 and "HVD_CYCLE_TIME" in r.stderr
    r = run_hvdrun("-np", 2, WORKER, "env", env={"HVD_FUSION_THRESHOLD": "big", "PATH": "/usr/bin"})
    assert r.returncode == 2 and "HVD_FUSION_THRESHOLD='big': not an integer" in r.stderr


def timeline_events(path):
    events = json.loads(path.read_text())
    return [e for e in events if e.get("ph") == "X"]


def test_timeline_is_valid_json_after_a_normal_end(tmp_path):
    timeline = tmp_path / "timeline.json"
    r = run_hvdrun("-np", 2, "--timeline-filename", timeline, WORKER, "allreduce", 1000)
    assert r.returncode == 0, r.stderr
    phases = {e["name"] for e in timeline_events(timeline)}
    assert "NEGOTIATE_ALLREDUCE" in phases and "ALLREDUCE" in phases, phases
    names = [e["args"]["name"] for e in json.loads(timeline.read_text()) if e.get("ph") == "M"]
    assert any(n.startswith("allreduce.noname.") for n in names)
    assert not any(e["name"] == "CYCLE_START" for e in json.loads(timeline.read_text()))


def test_timeline_marks_each_dispatch_when_asked_from_flags_or_the_config_file(tmp_path):
    timeline = tmp_path / "timeline.json"
    config = tmp_path / "hvd.json"
    config.write_text(json.dumps({"timeline": {"filename": str(timeline), "mark_cycles": True}}))
    for how in (["--timeline-filename", timeline, "--timeline-mark-cycles"],
                ["--config-file", config]):
        r = run_hvdrun("-np", 2, *how, WORKER, "allreduce", 1000)
        assert r.returncode == 0, r.stderr
        events = json.loads(timeline.read_text())
        marks = [e for e in events if e["name"] == "CYCLE_START"]
        assert marks and all(e["ph"] == "i" for e in marks)
        # At least one mark per allreduce the worker ran (each is dispatched on its own).
        runs = [e for e in events if e.get("ph") == "X" and e["name"] == "ALLREDUCE"]
        assert len(marks) >= len({e["args"]["tensor"] for e in runs}) >= 1
        timeline.unlink()


def test_timeline_is_valid_json_after_ctrl_c(tmp_path):
    timeline = tmp_path / "timeline.json"
    job = subprocess.Popen([str(HVDRUN), "-np", "2", "--timeline-filename", str(timeline),
                            str(WORKER), "loop"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            if timeline.exists() and timeline.stat().st_size > 20000:
                break
            time.sleep(0.05)
        job.send_signal(signal.SIGINT)
        job.communicate(timeout=30)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode != 0
    events = timeline_events(timeline)  # parses: the file was valid when the job stopped
    assert len(events) > 50
    assert {"NEGOTIATE_ALLREDUCE", "ALLREDUCE"} <= {e["name"] for e in events}


def test_shutdown_and_init_again_under_hvdrun():
    r = run_hvdrun("-np", 3, WORKER, "reinit", 3)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(" ok") == 9, r.stdout
