"""A hung NCCL collective on real processes: the watchdog (HVD_OP_TIMEOUT) aborts the NCCL
communicator and the job fails with a report naming the rank, host and operation, instead of
hanging. Two ranks share the one GPU as two "hosts" (conftest.FAKE_HOST), so they form a real
two-rank NCCL communicator. Skipped without a CUDA device."""
import sys
import time

import pytest

from conftest import FAKE_HOST, cuda_ready, run_hvdrun

pytestmark = pytest.mark.skipif(not cuda_ready(),
                                reason="needs a CUDA device, torch and hvd built with NCCL")

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
