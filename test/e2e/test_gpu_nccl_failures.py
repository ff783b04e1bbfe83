"""GPU collectives that cannot finish, on real processes: a hung NCCL collective is cut short by
the watchdog (HVD_OP_TIMEOUT), a stopped peer by the liveness check (its NCCL communicator
aborted), and each job fails with a report naming the rank, host and operation instead of
hanging; a GPU that is merely busy is not taken for a stopped rank. Two ranks share the one GPU
as two "hosts" (conftest.FAKE_HOST), so they form a real two-rank NCCL communicator. Skipped
without a CUDA device."""
import re
import sys
import time

import pytest

from conftest import FAKE_HOST, cuda_ready, run_hvdrun

# The GPU tests share one device (and time it): one worker of the parallel runner runs them all.
pytestmark = [pytest.mark.skipif(not cuda_ready(),
                                 reason="needs a CUDA device, torch and hvd built with NCCL"),
              pytest.mark.xdist_group("gpu")]

# Rank 1 keeps its GPU busy for about two minutes on the stream that produces the tensor, so its NCCL kernel
# cannot start (hvd's stream waits for the caller's) while rank 0's waits for it in NCCL.
HANG = r"""
import torch
import hvd.torch as hvd
hvd.init()
torch.cuda.set_device(0)
x = torch.ones(1 << 20, device="cuda")
hvd.allreduce(x, name="warmup")  # the NCCL communicator exists before the hang
if hvd.rank() == 1:
    torch.cuda._sleep(240_000_000_000)  # a spinning kernel: about 2 minutes at 2 GHz
hvd.allreduce(x, name="grad.hang")
print("not reached")
"""


def test_a_hung_nccl_allreduce_fails_the_job_with_the_timeout_report(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text(HANG)
    start = time.monotonic()
    r = run_hvdrun("-np", 2, "-x", "NCCL_SOCKET_IFNAME=lo", "-x", "HVD_OP_TIMEOUT=5",
                   "--grace-seconds", "3", "sh", "-c", f"{FAKE_HOST} exec {sys.executable} {script}",
                   timeout=100)
    elapsed = time.monotonic() - start
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "not reached" not in r.stdout
    # HVD_OP_TIMEOUT (5 s), the abort, hvdrun's grace (3 s); without the watchdog the job would
    # wait for the kernel and run into the timeout above.
    assert elapsed < 45, f"the job took {elapsed:.0f} s: the hang was not cut short\n{out}"
    assert 'rank 0 on fakehost0: allreduce "grad.hang"' in out, out
    assert "did not finish within the operation timeout (HVD_OP_TIMEOUT)" in out, out


# Rank 1's GPU is busy (a spinning kernel on the stream that produces the tensor) for about four
# times the liveness timeout, so both engines wait on their streams that long inside the
# allreduce: their heartbeats must go on from those waits, or each would take the other for a
# stopped process.
BUSY = r"""
import time, torch
import hvd.torch as hvd
hvd.init()
torch.cuda.set_device(0)
n = 1 << 20
x = torch.full((n,), float(hvd.rank() + 1), device="cuda")
hvd.allreduce(x, name="warmup")
t = time.monotonic()
torch.cuda._sleep(100_000_000)
torch.cuda.synchronize()
cycles = int(100_000_000 * SECONDS / (time.monotonic() - t))
start = time.monotonic()
if hvd.rank() == 1:
    torch.cuda._sleep(cycles)
y = hvd.allreduce(x, op=hvd.Sum, name="grad.after_busy_gpu")
assert torch.equal(y.cpu(), torch.full((n,), 3.0)), y[:4]
print(f"rank {hvd.rank()} waited {time.monotonic() - start:.1f} s", flush=True)
"""


def test_a_gpu_busy_longer_than_the_liveness_timeout_is_not_taken_for_a_stopped_rank(tmp_path):
    script = tmp_path / "busy.py"
    script.write_text(BUSY.replace("SECONDS", "12"))
    r = run_hvdrun("-np", 2, "-x", "NCCL_SOCKET_IFNAME=lo", "-x", "HVD_LIVENESS_TIMEOUT_SECONDS=3",
                   "-x", "HVD_OP_TIMEOUT=120", "sh", "-c",
                   f"{FAKE_HOST} exec {sys.executable} {script}", timeout=100)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    waits = [float(w) for w in re.findall(r"rank \d waited ([\d.]+) s", r.stdout)]
    assert len(waits) == 2, out
    assert min(waits) > 6, f"the GPU was not busy past the liveness timeout: {waits}\n{out}"
    assert "has sent nothing" not in out


# Rank 1 submits an allreduce and stops itself (SIGSTOP) before rank 0 submits its own, so rank
# 0's NCCL kernel waits for a peer that never comes, and rank 0's engine waits on its stream.
STOPPED = r"""
import os, signal, sys, time, torch
import hvd.torch as hvd
hvd.init()
torch.cuda.set_device(0)
x = torch.ones(1 << 20, device="cuda")
hvd.allreduce(x, name="warmup")
pids = hvd.allgather(torch.tensor([os.getpid()]), name="pids")
if hvd.rank() == 1:
    handle = hvd.allreduce_async(x, name="grad.peer_stopped")
    time.sleep(0.5)  # the request reaches rank 0 in milliseconds
    os.kill(os.getpid(), signal.SIGSTOP)
    hvd.synchronize(handle)
    sys.exit("rank 1 should never finish")
def stopped(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
deadline = time.monotonic() + 30
while not stopped(int(pids[1])):
    assert time.monotonic() < deadline, "rank 1 did not stop"
    time.sleep(0.05)
start = time.monotonic()
try:
    hvd.allreduce(x, name="grad.peer_stopped")
    print("no error")
except Exception as e:
    print(f"rank 0 failed after {time.monotonic() - start:.1f} s: {e}", flush=True)
    print(f"rank 0 exits at {time.time():.3f}", flush=True)
    sys.exit(3)
"""


def test_a_rank_stopped_during_an_nccl_allreduce_is_named_and_the_job_ends(tmp_path):
    script = tmp_path / "stopped.py"
    script.write_text(STOPPED)
    start = time.monotonic()
    r = run_hvdrun("-np", 2, "-x", "NCCL_SOCKET_IFNAME=lo", "-x", "HVD_LIVENESS_TIMEOUT_SECONDS=4",
                   "-x", "HVD_OP_TIMEOUT=120", "--grace-seconds", "3", "sh", "-c",
                   f"{FAKE_HOST} exec {sys.executable} {script}", timeout=100)
    ended = time.time()
    elapsed = time.monotonic() - start
    out = r.stdout + r.stderr
    assert r.returncode == 3, out
    m = re.search(r"rank 0 failed after ([\d.]+) s: (.*)", r.stdout)
    assert m, out
    # The liveness timeout (4 s), not the operation timeout (120 s), ended the wait.
    assert float(m.group(1)) < 15, out
    assert re.search(r"rank 1 \(on host \S+\) has sent nothing for", m.group(2)), out
    assert "HVD_LIVENESS_TIMEOUT_SECONDS" in m.group(2), out
    # Rank 0's process then exits at once although its NCCL kernel never finished: the wait
    # aborted the communicator. Left running, it held the process about 11 s more on an H200.
    exits = float(re.search(r"rank 0 exits at ([\d.]+)", r.stdout).group(1))
    assert ended - exits < 5, f"rank 0 took {ended - exits:.1f} s to exit\n{out}"
    assert elapsed < 60, f"the job took {elapsed:.0f} s\n{out}"
