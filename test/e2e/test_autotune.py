"""Autotune (hvdrun --autotune) on real processes: rank 0 changes the fusion threshold and the
cycle time while the ranks train, every result stays exact on every rank, the CSV log records
each sample and the choice, a knob given explicitly stays fixed, and bad settings are refused
before anything starts."""
import csv
import json
import sys

from conftest import run_hvdrun

# Named allreduces of mixed sizes (fused and not; 70000 floats are past the fusion size limit)
# and a grouped one, whose chunks each rank's executor cuts with the threshold the coordinator
# sent. Values differ per rank, step and tensor, so a chunk cut differently on two ranks, or a
# tensor reduced with another's data, shows as a wrong result.
WORKER = r"""
import sys
import numpy as np
import hvd, hvd.numpy as hnp
hvd.init()
r, n = hvd.rank(), hvd.size()
sizes = [1, 3, 60, 64, 65, 500, 4000, 30000, 70000, 100]
wrong = 0
def values(e, k, s, rank):
    return (np.arange(e, dtype=np.float32) % 7) + (rank + 1) * (k + 1) + s
def expected(e, k, s):
    return sum(values(e, k, s, q) for q in range(n))
for s in range(int(sys.argv[1])):
    handles = [hnp.allreduce_async(values(e, k, s, r), op=hvd.Sum, name=f"grad.{k}")
               for k, e in enumerate(sizes)]
    group = hnp.grouped_allreduce_async([values(e, 20 + k, s, r) for k, e in enumerate(sizes)],
                                        op=hvd.Sum, name="grouped")
    for k, (e, h) in enumerate(zip(sizes, handles)):
        wrong += int(not np.array_equal(hnp.synchronize(h), expected(e, k, s)))
    for k, (e, out) in enumerate(zip(sizes, hnp.synchronize(group))):
        wrong += int(not np.array_equal(out, expected(e, 20 + k, s)))
print(f"wrong={wrong} samples={hvd._core.stats()['autotune_samples']}")
hvd.shutdown()
"""


def results(stdout, np_):
    out = {}
    for rank in range(np_):
        line = next(l for l in stdout.splitlines() if l.startswith(f"[{rank}]<stdout>:wrong="))
        fields = dict(f.split("=") for f in line.split(":", 1)[1].split())
        out[rank] = {k: int(v) for k, v in fields.items()}
    return out


def read_log(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_autotune_searches_settings_while_results_stay_exact(tmp_path):
    log = tmp_path / "autotune.csv"
    r = run_hvdrun("-np", 3, "--autotune", "--autotune-log-file", log,
                   "--autotune-warmup-samples", 1, "--autotune-steps-per-sample", 2,
                   "--autotune-bayes-opt-max-samples", 8,
                   sys.executable, "-c", WORKER, 40, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    res = results(r.stdout, 3)
    assert [res[q]["wrong"] for q in range(3)] == [0, 0, 0]
    # Rank 0 tunes; 1 warm-up and 8 search samples, then the choice.
    assert res[0]["samples"] == 10 and res[1]["samples"] == 0 and res[2]["samples"] == 0
    rows = read_log(log)
    assert [row["phase"] for row in rows] == ["warmup"] + ["search"] * 8 + ["chosen"]
    assert [int(row["sample"]) for row in rows[:9]] == list(range(1, 10))
    # The configured setting (128 MiB, no cycle time) is measured first, then others.
    assert (rows[0]["fusion_threshold_bytes"], float(rows[0]["cycle_time_ms"])) == (str(128 << 20), 0)
    assert (rows[1]["fusion_threshold_bytes"], float(rows[1]["cycle_time_ms"])) == (str(128 << 20), 0)
    settings = {(row["fusion_threshold_bytes"], row["cycle_time_ms"]) for row in rows[1:9]}
    assert len(settings) >= 4, rows
    for row in rows[:9]:
        assert int(row["steps"]) == 2 and int(row["bytes"]) > 0
        assert float(row["score_bytes_per_second"]) == \
            __import__("pytest").approx(int(row["bytes"]) / float(row["seconds"]), rel=1e-3)
    chosen = (rows[9]["fusion_threshold_bytes"], rows[9]["cycle_time_ms"])
    assert chosen in settings


def test_a_knob_given_explicitly_stays_fixed_and_horovods_variables_turn_autotune_on(tmp_path):
    log = tmp_path / "autotune.csv"
    env = {"HOROVOD_AUTOTUNE": "1", "HOROVOD_AUTOTUNE_LOG": str(log),
           "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "0", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "2",
           "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "5", "PATH": "/usr/bin:/bin"}
    r = run_hvdrun("-np", 2, "--fusion-threshold-mb", 1, sys.executable, "-c", WORKER, 20,
                   timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    res = results(r.stdout, 2)
    assert res[0] == {"wrong": 0, "samples": 6} and res[1]["wrong"] == 0
    rows = read_log(log)
    assert [row["phase"] for row in rows] == ["search"] * 5 + ["chosen"]
    assert {row["fusion_threshold_bytes"] for row in rows} == {str(1 << 20)}
    assert len({row["cycle_time_ms"] for row in rows}) >= 3


def test_the_config_files_autotune_section_turns_it_on(tmp_path):
    log = tmp_path / "autotune.csv"
    config = tmp_path / "hvd.json"
    config.write_text(json.dumps({"autotune": {
        "enabled": True, "log_file": str(log), "warmup_samples": 0, "steps_per_sample": 3,
        "bayes_opt_max_samples": 3, "gaussian_process_noise": 0.5}}))
    r = run_hvdrun("-np", 2, "--config-file", config, sys.executable, "-c", WORKER, 15,
                   timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert results(r.stdout, 2)[0] == {"wrong": 0, "samples": 4}
    rows = read_log(log)
    assert [row["phase"] for row in rows] == ["search"] * 3 + ["chosen"]
    assert all(int(row["steps"]) == 3 for row in rows[:3])


def test_a_log_file_that_cannot_be_created_fails_the_job_naming_it(tmp_path):
    missing = tmp_path / "no" / "such" / "dir" / "autotune.csv"
    r = run_hvdrun("-np", 2, "--autotune", "--autotune-log-file", missing,
                   sys.executable, "-c", WORKER, 3, timeout=120)
    assert r.returncode != 0
    assert str(missing) in r.stderr and "HVD_AUTOTUNE_LOG" in r.stderr, r.stderr[-3000:]
