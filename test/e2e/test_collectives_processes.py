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
