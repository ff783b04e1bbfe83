"""Hierarchical allreduce of CUDA tensors on real processes (--hierarchical-allreduce). One GPU
stands in for two hosts: each rank gets its own HVD_HOSTNAME and NCCL_HOSTID, so hvd sees two
hosts of one rank (NCCL within each, TCP across) and NCCL accepts the shared GPU for the flat
communicator the other operations use (over its socket transport on loopback). Skipped, with the
reason, where there is no CUDA device or hvd was built without CUDA."""
import json
import sys

import pytest

from conftest import FAKE_HOST, cuda_ready, run_hvdrun


# The GPU tests share one device (and time it): one worker of the parallel runner runs them all.
pytestmark = [pytest.mark.skipif(not cuda_ready(),
                                 reason="needs a CUDA device, torch and hvd built with NCCL"),
              pytest.mark.xdist_group("gpu")]

WORKER = r"""
import os, sys, torch
import hvd.torch as hvd
hvd.init()
torch.cuda.set_device(0)
n, r = hvd.size(), hvd.rank()
dev = torch.device("cuda", 0)

def expected_sum(count):
    return (torch.arange(count, dtype=torch.float64) % 7) * n + n * (n + 1) / 2

for count in (1, 3, 1001, 3_000_001):
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.float64):
        if dtype in (torch.float16, torch.bfloat16) and count > 1001:
            continue  # the sums would not be exact
        x = ((torch.arange(count, device=dev) % 7) + r + 1).to(dtype)
        out = hvd.allreduce(x, op=hvd.Sum, name=f"sum.{count}.{dtype}")
        assert out.dtype == dtype and out.device == dev
        assert torch.equal(out.cpu().double(), expected_sum(count)), (count, dtype)
# Average with scale factors, Max, and a fused group of small tensors.
x = torch.full((1000,), float(r + 1), device=dev)
avg = hvd.allreduce(x, op=hvd.Average, prescale_factor=4.0, postscale_factor=0.5, name="avg")
assert torch.allclose(avg.cpu(), torch.full((1000,), 2.0 * (n + 1) / 2)), avg[:4]
mx = hvd.allreduce(x, op=hvd.Max, name="max")
assert torch.equal(mx.cpu(), torch.full((1000,), float(n)))
group = [torch.full((17 + i,), float(i + r), device=dev) for i in range(30)]
outs = hvd.grouped_allreduce(group, op=hvd.Sum, name="group")
for i, o in enumerate(outs):
    assert torch.equal(o.cpu(), torch.full((17 + i,), float(n * i + n * (n - 1) / 2))), i
# Other operations run on the flat NCCL communicator.
b = torch.full((5,), float(r), device=dev)
hvd.broadcast_(b, root_rank=n - 1, name="bcast")
assert torch.equal(b.cpu(), torch.full((5,), float(n - 1)))
g = hvd.allgather(torch.full((r + 1, 2), float(r), device=dev), name="gather")
assert g.shape == (n * (n + 1) // 2, 2)
hvd.shutdown()
print("worker ok")
"""


def run_on_fake_hosts(tmp_path, np, *flags):
    """Each rank on a host of its own: fakehost0, fakehost1, ..."""
    timeline = tmp_path / "timeline.json"
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    wrapper = (f'{FAKE_HOST} exec {sys.executable} {script}')
    r = run_hvdrun("-np", np, *flags, "--timeline-filename", timeline, "--log-level", "info",
                   "-x", "NCCL_SOCKET_IFNAME=lo", "-x", "HVD_OP_TIMEOUT=60",
                   "sh", "-c", wrapper, timeout=300)
    return r, timeline


def phases(timeline):
    events = json.loads(timeline.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    return {e.get("name") for e in events}


def test_two_hosts_allreduce_in_stages_and_other_operations_run_flat(tmp_path):
    r, timeline = run_on_fake_hosts(tmp_path, 2, "--hierarchical-allreduce")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("worker ok") == 2
    assert "hierarchical allreduce: NCCL within each of 2 hosts of 1 rank(s)" in r.stderr
    names = phases(timeline)
    assert "HIERARCHICAL_ALLREDUCE" in names and "HIERARCHICAL_ALLREDUCE (fused)" in names, names
    assert "NCCL_BROADCAST" in names and "NCCL_ALLGATHER" in names, names


def test_without_the_flag_the_same_job_runs_flat(tmp_path):
    r, timeline = run_on_fake_hosts(tmp_path, 2)
    assert r.returncode == 0, r.stdout + r.stderr
    names = phases(timeline)
    assert "NCCL_ALLREDUCE" in names and not any(n.startswith("HIERARCHICAL") for n in names)


def test_one_host_says_the_flat_allreduce_is_already_local(tmp_path):
    timeline = tmp_path / "timeline.json"
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    r = run_hvdrun("-np", 1, "--hierarchical-allreduce", "--timeline-filename", timeline,
                   "--log-level", "info", sys.executable, script, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "the flat NCCL allreduce is already within one host" in r.stderr
    assert "NCCL_ALLREDUCE" in phases(timeline)
