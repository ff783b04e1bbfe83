"""Which transport a job's workers use, through hvdrun with real processes: shared memory when
all ranks are on one host (TCP when asked, or when ranks are on several hosts), the collective
fallback to TCP when one rank cannot use shared memory, and no segment left in /dev/shm."""
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import FAKE_HOST, HVDRUN, WORKER, hvd_segments, run_hvdrun


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
@pytest.mark.whole_machine  # compares every job's /dev/shm
def test_a_one_host_job_uses_the_transport_asked_for(transport, what):
    before = hvd_segments()
    r = run_hvdrun("-np", 3, "--log-level", "info", "--transport", transport, WORKER,
                   "allreduce", 300_000)
    assert_ranks_ok(r, 3)
    assert_links(r, 3, what)
    assert hvd_segments() - before == set()


@pytest.mark.whole_machine  # compares every job's /dev/shm
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
    # Rank 0 warns; the others, whose reason is the same, only log it.
    assert r.stderr.count("(HVD_TRANSPORT=auto: using TCP)") == 3, r.stderr
    warnings = [line for line in r.stderr.splitlines()
                if "warning" in line and "(HVD_TRANSPORT=auto: using TCP)" in line]
    assert len(warnings) == 1 and "[rank 0/3]" in warnings[0], warnings
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


@pytest.mark.whole_machine  # compares every job's /dev/shm
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


def in_own_dev_shm(size, *command):
    """`command` in a mount namespace whose /dev/shm is a fresh tmpfs of `size` (mount's
    spelling: "300m"; "0" for no limit)."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            f'mount -t tmpfs -o size={size} tmpfs /dev/shm && exec "$@"', "sh", *command]


def own_dev_shm_reason():
    if os.geteuid() != 0:
        return "needs root to mount a tmpfs of its own on /dev/shm"
    r = subprocess.run(in_own_dev_shm("1m", "true"), capture_output=True, text=True)
    return None if r.returncode == 0 else f"unshare/mount failed: {r.stderr.strip()}"


def hvdrun_in_own_dev_shm(size, *args, timeout):
    return subprocess.run(in_own_dev_shm(size, str(HVDRUN), *map(str, args)), capture_output=True,
                          text=True, timeout=timeout)


needs_own_dev_shm = pytest.mark.skipif(own_dev_shm_reason() is not None,
                                       reason=str(own_dev_shm_reason()))

# Rank 0 reads how much of its private /dev/shm the job's rings hold after init and after a
# 4 MiB allreduce, and then, where asked, fills the rest with a file, so that rings the next
# allreduce uses for the first time find no room.
DEV_SHM_WORKER = r"""
import os, sys
import numpy as np
import hvd, hvd.numpy as hn
hvd.init()
def used_mib():
    s = os.statvfs("/dev/shm")
    return (s.f_blocks - s.f_bfree) * s.f_frsize / 2**20
hn.allreduce(np.ones(4, np.float32), name="small")
at_init = used_mib()
x = hn.allreduce(np.ones(1 << 20, np.float32), op=hvd.Sum, name="grad.4mib")
assert (x == hvd.size()).all()
if hvd.rank() == 0:
    print(f"used {at_init:.1f} MiB after init, {used_mib():.1f} MiB after 4 MiB", flush=True)
    if sys.argv[1] == "fill":
        with open("/dev/shm/filler", "wb") as f:
            try:
                while True:
                    f.write(b"\0" * (1 << 20))
                    f.flush()
            except OSError:
                pass
hn.allreduce(np.ones(1, np.float32), name="filled")  # rank 0 has filled /dev/shm
try:
    hn.alltoall(np.ones(hvd.size() << 18, np.float32), name="grad.every_pair")
    print(f"rank {hvd.rank()} alltoall ok", flush=True)
except Exception as e:
    print(f"rank {hvd.rank()} failed: {e}", flush=True)
    sys.exit(3)
"""


@needs_own_dev_shm
def test_rings_take_their_dev_shm_pages_when_first_used():
    # 16 ranks could need 16 x 15 rings of 1 MiB and 64 KiB (255 MiB), which they took at start;
    # now a ring is taken by the pairs that use it (20 MiB after init here). An alltoall then
    # uses every pair.
    r = hvdrun_in_own_dev_shm("300m", "-np", 16, "--transport", "shm", sys.executable, "-c",
                              DEV_SHM_WORKER, "keep", timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    m = re.search(r"used ([\d.]+) MiB after init, ([\d.]+) MiB after 4 MiB", r.stdout)
    assert m, r.stdout
    assert float(m.group(1)) < 64, m.group(0)  # all at start: 255 MiB
    assert float(m.group(2)) < 128, m.group(0)
    assert r.stdout.count("alltoall ok") == 16


@needs_own_dev_shm
def test_a_ring_that_finds_dev_shm_full_at_first_use_fails_the_job_naming_both_ranks():
    # /dev/shm had room for every ring when the job started, then something else filled it.
    start = time.monotonic()
    r = hvdrun_in_own_dev_shm("300m", "-np", 16, "--transport", "shm", sys.executable, "-c",
                              DEV_SHM_WORKER, "fill", timeout=120)
    took = time.monotonic() - start
    out = r.stdout + r.stderr
    assert r.returncode == 3, out[-3000:]
    assert "Bus error" not in out and "SIGBUS" not in out and "signal 7" not in out
    m = re.search(r"rank \d+ failed: .*(rank (\d+)/16: (send to|recv from) rank (\d+) \(shm, "
                  r"pid \d+\): /dev/shm has no room for the 1024 KiB ring between them "
                  r"\(it is full\): free space in /dev/shm .*HVD_SHM_BUFFER_BYTES)", r.stdout)
    assert m, out[-3000:]
    assert took < 60, took


@needs_own_dev_shm
@pytest.mark.parametrize("size, links", [("0", "shared memory with 7 local peers"),
                                         ("32m", "tcp on 127.0.0.1:")])
def test_init_still_checks_that_dev_shm_has_room_for_every_ring(size, links):
    # 8 ranks may need 57 MiB of data rings. A tmpfs without a limit (which reports no blocks)
    # has room; 32 MiB has not, so the job moves to TCP at init, as when every ring was taken
    # there, instead of failing at a first use later.
    r = hvdrun_in_own_dev_shm(size, "-np", 8, "--log-level", "info", WORKER, "allreduce",
                              1_000_000, timeout=60)
    assert_ranks_ok(r, 8)
    assert_links(r, 8, links)
    if size == "32m":
        assert ("shm: /dev/shm has 32 MiB free, and the 8 ranks of this host may need 57 MiB for "
                "their rings of 1024 KiB" in r.stderr), r.stderr[-2000:]
