"""Ranks started without hvdrun on one machine, with a launcher's variables as srun would set
them: what the real daemons (test_slurm.py, test_mpirun.py) cannot show cheaply, errors and
re-initialisation."""
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import REPO, WORKER

WORKER_CODE = textwrap.dedent("""
    import numpy as np, hvd.numpy as hvd
    hvd.init()
    total = hvd.allreduce(np.array([float(hvd.rank() + 1)]), op=hvd.Sum)
    print("PLACED", hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), hvd.cross_rank(),
          hvd.cross_size(), int(total[0]), flush=True)
    hvd.shutdown()
""")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ranks(per_rank_env, command, common):
    procs = []
    for extra in per_rank_env:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("HVD_", "HOROVOD_", "SLURM_", "OMPI_", "PMI_"))}
        env.update(common)
        env.update(extra)
        procs.append(subprocess.Popen(command, env=env, cwd=REPO, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    results = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        results.append((p.returncode, out, err))
    return results


def slurm_env(rank, tasks_per_node):
    counts = [int(c) for c in tasks_per_node.split(",")]
    node, first = 0, 0
    while rank >= first + counts[node]:
        first += counts[node]
        node += 1
    return {"SLURM_PROCID": str(rank), "SLURM_STEP_NUM_TASKS": str(sum(counts)),
            "SLURM_LOCALID": str(rank - first), "SLURM_NODEID": str(node),
            "SLURM_STEP_TASKS_PER_NODE": tasks_per_node, "SLURM_JOB_ID": "4242",
            "SLURM_STEP_ID": "0", "SLURM_NTASKS": str(sum(counts))}


def test_a_loopback_rendezvous_for_a_step_over_several_nodes_is_refused():
    # Two "nodes" (2 + 1 tasks) but the address is loopback: no other node could reach it.
    # (test_slurm.py runs steps over real nodes.)
    common = {"HVD_RENDEZVOUS_ADDR": "127.0.0.1", "HVD_RENDEZVOUS_PORT": str(free_port()),
              "HVD_SECRET": "c0ffee" * 8, "PYTHONPATH": str(REPO / "build" / "python"),
              "HVD_START_TIMEOUT": "3"}
    (code, _, err), *_ = start_ranks([slurm_env(r, "2,1") for r in range(3)],
                                     [sys.executable, "-c", WORKER_CODE], common)
    assert code != 0
    assert "HVD_RENDEZVOUS_ADDR=127.0.0.1, which is loopback 127.0.0.1 on its host" in err, err
    assert "the job spans 2 nodes" in err, err


REINIT_CODE = textwrap.dedent("""
    import numpy as np, hvd.numpy as hvd
    for round in range(3):
        hvd.init()
        total = hvd.allreduce(np.array([float(hvd.rank() + 1)]), op=hvd.Sum, name=f"r{round}")
        print("ROUND", round, hvd.rank(), int(total[0]), flush=True)
        hvd.shutdown()
""")


def test_srun_started_ranks_shut_down_and_initialise_again():
    # Rank 0's rendezvous server belongs to its runtime: every shutdown closes it (the other
    # ranks wait until it has), and every init serves a new one on the same port.
    common = {"HVD_RENDEZVOUS_ADDR": "127.0.0.1", "HVD_RENDEZVOUS_PORT": str(free_port()),
              "HVD_SECRET": "5eed" * 16, "PYTHONPATH": str(REPO / "build" / "python"),
              "HVD_START_TIMEOUT": "20"}
    results = start_ranks([slurm_env(r, "3") for r in range(3)],
                          [sys.executable, "-c", REINIT_CODE], common)
    for rank, (code, out, err) in enumerate(results):
        assert code == 0, err
        assert [line.split()[1:] for line in out.splitlines() if line.startswith("ROUND")] == \
            [[str(round), str(rank), "6"] for round in range(3)], out + err


def test_missing_secret_or_address_is_explained():
    per_rank = [slurm_env(r, "2") for r in range(2)]
    # Without munge's programs (no PATH to them) srun ranks cannot get a secret from rank 0.
    (code, _, err), _ = start_ranks(per_rank, [str(WORKER), "allreduce", "10"],
                                    {"HVD_RENDEZVOUS_ADDR": "127.0.0.1", "PATH": "/nonexistent",
                                     "HVD_RENDEZVOUS_PORT": str(free_port())})
    assert code != 0 and "Slurm: HVD_SECRET is not set" in err and "openssl rand" in err, err
    (code, _, err), _ = start_ranks(per_rank, [str(WORKER), "allreduce", "10"],
                                    {"HVD_SECRET": "x" * 64})
    assert code != 0 and "Slurm started 2 ranks without hvdrun" in err
    assert "HVD_RENDEZVOUS_ADDR" in err
    (code, _, err), _ = start_ranks(per_rank, [str(WORKER), "allreduce", "10"],
                                    {"HVD_SECRET": "x" * 64, "HVD_RENDEZVOUS_ADDR": "10.255.255.1",
                                     "HVD_RENDEZVOUS_PORT": str(free_port()),
                                     "HVD_START_TIMEOUT": "3"})
    assert code != 0 and "is not an address of its host" in err, err


def test_horovod_names_for_the_rendezvous_are_accepted():
    common = {"HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1",
              "HOROVOD_GLOO_RENDEZVOUS_PORT": str(free_port()), "HVD_SECRET": "ab" * 32,
              "HVD_START_TIMEOUT": "20"}
    for code, out, err in start_ranks([slurm_env(r, "2") for r in range(2)],
                                      [str(WORKER), "allreduce", "100"], common):
        assert code == 0, err
        assert "ok" in out


@pytest.mark.skipif(shutil.which("munge") is None, reason="munge is not installed")
def test_srun_ranks_without_a_running_munged_fail_at_once_saying_so():
    if subprocess.run(["munge", "-n"], capture_output=True).returncode == 0:
        pytest.skip("a munged answers on this machine")
    per_rank = [slurm_env(r, "2") for r in range(2)]
    started = time.monotonic()
    (code, _, err), (code1, _, err1) = start_ranks(
        per_rank, [str(WORKER), "allreduce", "10"],
        {"HVD_RENDEZVOUS_ADDR": "127.0.0.1", "HVD_RENDEZVOUS_PORT": str(free_port()),
         "HVD_START_TIMEOUT": "5"})
    assert code != 0 and code1 != 0
    assert "Slurm: rank 0 on host" in err and "munge failed: " in err and \
        "is munged running on its default socket? Or export HVD_SECRET" in err, err
    assert "rank 1 on host" in err1 and "cannot get the job secret" in err1, err1
    assert time.monotonic() - started < 20
