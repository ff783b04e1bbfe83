"""Which transport a job's workers use, through hvdrun with real processes: shared memory when
all ranks are on one host (TCP when asked, or when ranks are on several hosts), the collective
fallback to TCP when one rank cannot use shared memory, and no segment left in /dev/shm."""
import sys

import pytest

from conftest import FAKE_HOST, WORKER, hvd_segments, run_hvdrun


def assert_ranks_ok(r, np):
    assert r.returncode == 0, r.stderr
    for rank in range(np):
        assert f"[{rank}]<stdout>:rank {rank} ok" in r.stdout, r.stdout


def assert_links(r, np, what):
    for rank in range(np):
        for scope in ("global", "control"):
            assert f"[rank {rank}/{np}] info [runtime] {scope}: {what}" in r.stderr, r.stderr


@pytest.mark.parametrize("transport, what", [("auto", "shared memory with 2 local peers"),
                                             ("shm", "shared memory with 2 local peers"),
                                             ("tcp", "tcp on 127.0.0.1:")])
def test_a_one_host_job_uses_the_transport_asked_for(transport, what):
    before = hvd_segments()
    r = run_hvdrun("-np", 3, "--log-level", "info", "--transport", transport, WORKER,
                   "allreduce", 300_000)
    assert_ranks_ok(r, 3)
    assert_links(r, 3, what)
    assert hvd_segments() - before == set()


def test_a_rank_that_cannot_use_shared_memory_moves_every_rank_to_tcp():
    # Rank 1's rings have another size, so no rank can map the segments of all the others.
    cmd = (f'if [ "$HVD_RANK" = 1 ]; then export HVD_SHM_BUFFER_BYTES=8192; fi; '
           f'exec {WORKER} allreduce 300000')
    before = hvd_segments()
    r = run_hvdrun("-np", 3, "--log-level", "info", "sh", "-c", cmd)
    assert_ranks_ok(r, 3)
    assert "shared memory unavailable: rank 0: shm: rank 1's segment" in r.stderr, r.stderr
    assert "HVD_SHM_BUFFER_BYTES" in r.stderr
    # Once per rank: the control links follow the data links' choice without trying again.
    assert r.stderr.count("(HVD_TRANSPORT=auto: using TCP)") == 3, r.stderr
    assert_links(r, 3, "tcp on 127.0.0.1:")
    assert hvd_segments() - before == set()


def test_ranks_on_several_hosts_use_tcp_and_refuse_a_forced_shm():
    r = run_hvdrun("-np", 2, "--log-level", "info", "sh", "-c",
                   f"{FAKE_HOST} exec {WORKER} allreduce 1000")
    assert_ranks_ok(r, 2)
    assert_links(r, 2, "tcp on 127.0.0.1:")
    r = run_hvdrun("-np", 2, "--transport", "shm", "sh", "-c",
                   f"{FAKE_HOST} exec {WORKER} allreduce 1000")
    assert r.returncode != 0
    assert ("HVD_TRANSPORT=shm, but the job's 2 ranks are not all on one host (1 on fakehost"
            in r.stderr), r.stderr


def test_hvdrun_rejects_an_unknown_transport():
    r = run_hvdrun("-np", 2, "--transport", "rdma", WORKER, "allreduce", 4)
    assert r.returncode != 0
    assert "--transport" in r.stderr and "rdma" in r.stderr


def test_a_job_stopped_during_init_leaves_no_segment_in_dev_shm():
    # Rank 1 fails before it initialises; rank 0 has created its segment and waits for rank 1's
    # in the rendezvous when hvdrun stops it (SIGTERM, no destructors run), so only the
    # launcher's clean-up at the end of the job can remove the name.
    code = ("import os, subprocess, sys, time\n"
            "if os.environ['HVD_RANK'] == '1': time.sleep(1.5); sys.exit(3)\n"
            f"os.execv('{WORKER}', ['{WORKER}', 'allreduce', '4'])\n")
    before = hvd_segments()
    r = run_hvdrun("-np", 2, "--log-level", "info", "--start-timeout", 30, "--grace-seconds", 1,
                   sys.executable, "-c", code)
    assert r.returncode == 3, r.stderr
    assert "removed 1 shared-memory segments the job's ranks left in /dev/shm" in r.stderr, r.stderr
    assert hvd_segments() - before == set()
