"""Every collective through hvdrun with real processes, checked by hvd-bench on closed-form data."""
import json

import pytest

from conftest import BUILD, run_hvdrun

BENCH = BUILD / "apps" / "hvd-bench"


@pytest.mark.parametrize("op", ["allreduce", "allgather", "broadcast", "alltoall",
                                "reducescatter", "barrier"])
@pytest.mark.parametrize("np", [2, 3])
def test_collective_results_are_right_in_separate_processes(tmp_path, op, np):
    out = tmp_path / "rows.json"
    args = ["-o", op, "-b", "4", "-e", "2M", "-f", "16", "-w", "1", "-n", "2", "--json", out]
    if op == "broadcast":
        args += ["-r", str(np - 1)]
    r = run_hvdrun("-np", np, BENCH, *args, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(out.read_text())
    assert report["op"] == op and report["ranks"] == np
    assert report["rows"], "no rows measured"
    for row in report["rows"]:
        for variant in ("out_of_place", "in_place"):
            if row[variant] is not None:
                assert row[variant]["wrong"] == 0, (variant, row)
                assert row[variant]["time_us"] > 0


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8", "int64", "float64", "bool"])
def test_allreduce_of_every_dtype_across_processes(dtype):
    r = run_hvdrun("-np", 3, BENCH, "-o", "allreduce", "-d", dtype, "-b", "1K", "-e", "4M",
                   "-f", "64", "-w", "1", "-n", "2", "--redop", "max", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Out of bounds values : 0 OK" in r.stdout


def test_bench_rejects_bad_arguments():
    r = run_hvdrun("-np", 1, BENCH, "-o", "allscatter")
    assert r.returncode != 0
    assert "unknown collective" in r.stderr
    r = run_hvdrun("-np", 2, BENCH, "-o", "broadcast", "-r", "5")
    assert r.returncode != 0
    assert "-r 5" in r.stderr


def test_engine_benchmark_alternates_fusion_on_and_off(tmp_path):
    out = tmp_path / "engine.json"
    r = run_hvdrun("-np", 2, BENCH, "engine", "--steps", "2", "--rounds", "3",
                   "--latency-iters", "50", "--json", out, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(out.read_text())
    assert report["rounds"] == 3
    assert report["engine_latency_us_median"] > 0 and report["direct_latency_us_median"] > 0
    assert report["cache_hit_rate"] == 1.0
    lists = {l["list"]: l for l in report["lists"]}
    assert set(lists) == {"resnet-like", "small"}
    for l in lists.values():
        assert len(l["fused_step_ms_per_round"]) == 3 and len(l["unfused_step_ms_per_round"]) == 3
        assert l["unfused_collectives_per_step"] == l["tensors"] == 100
    # The small list (2.4 MiB) fits one fusion buffer when all of a step is ready together;
    # it never takes as many collectives as tensors.
    assert lists["small"]["fused_collectives_per_step"] < 100
