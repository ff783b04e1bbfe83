"""hvd ranks started by a real Open MPI mpirun over two SSH hosts (network namespaces with host
names of their own, ssh_hosts.py): mpirun's daemons start the ranks, hvd takes placement, port
and secret from mpirun's variables, and only rank 0's host is named by the job script. Skips
with the reason when the hosts or mpirun are missing."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import BUILD, REPO
from placed_ranks import EXAMPLE, PLACEMENT, TRAIN_DIGEST, layout, placements, values
from ssh_hosts import SSH_PORT, SshHosts, unavailable_reason

MPIRUN = shutil.which("mpirun.openmpi")
_reason = unavailable_reason() or (None if MPIRUN else "missing mpirun.openmpi (openmpi-bin)")
pytestmark = [pytest.mark.skipif(_reason is not None, reason=f"mpirun: {_reason}"),
              pytest.mark.xdist_group("mpirun")]

NAMES = ["hvdmpi1", "hvdmpi2"]


@pytest.fixture(scope="module")
def hosts():
    h = SshHosts(2, hostnames=NAMES).start()
    # The user's ssh client settings for the cluster; mpirun runs `ssh` itself, which reads
    # the passwd entry's home, not $HOME: the file is passed with -F.
    (h.home / ".ssh" / "config").write_text(
        f"Host hvdmpi*\n    Port {SSH_PORT}\n    IdentityFile {h.key}\n"
        "    StrictHostKeyChecking no\n    UserKnownHostsFile /dev/null\n    LogLevel ERROR\n")
    yield h
    h.close()


def mpirun(hosts, *args, timeout=180):
    env = hosts.env(PYTHONPATH=str(BUILD / "python"), OMP_NUM_THREADS="1")
    for name in list(env):
        if name.startswith(("HVD_", "HOROVOD_", "OMPI_", "PMIX_")):
            del env[name]
    # Daemons and ranks talk over the hosts' bridge, not this machine's other interfaces.
    command = [MPIRUN, "--allow-run-as-root", "--mca", "plm_rsh_args",
               f"-F {hosts.home / '.ssh' / 'config'}", "--mca", "oob_tcp_if_include",
               f"{hosts.prefix}.0/24", "-x", "PYTHONPATH", "-x", "OMP_NUM_THREADS", *args]
    return subprocess.run(hosts.on_login_node(command), capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)


def test_mpirun_ranks_train_the_pytorch_example_with_identical_weights(hosts):
    r = mpirun(hosts, "-np", "4", "-H", "hvdmpi1:2,hvdmpi2:2", "-x", "HVD_RENDEZVOUS_ADDR=hvdmpi1",
               sys.executable, TRAIN_DIGEST, EXAMPLE, "--epochs", "1")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    placed = placements(r.stdout)
    assert layout(placed) == {
        0: (4, 0, 2, 0, 2, "hvdmpi1"), 1: (4, 1, 2, 0, 2, "hvdmpi1"),
        2: (4, 0, 2, 1, 2, "hvdmpi2"), 3: (4, 1, 2, 1, 2, "hvdmpi2")}, r.stdout
    assert len(values(placed)) == 1, placed  # one set of weights
    assert "final test accuracy" in r.stdout, r.stdout[-2000:]


def test_mpirun_without_rank_0s_host_says_what_to_export(hosts):
    r = mpirun(hosts, "-np", "2", "-H", "hvdmpi1:1,hvdmpi2:1", sys.executable, "-c",
               "import hvd.numpy as h; h.init()", timeout=60)
    assert r.returncode != 0
    assert "Open MPI started 2 ranks without hvdrun, but HVD_RENDEZVOUS_ADDR (rank 0's host, " \
           "where rank 0 serves the rendezvous) is not set" in r.stderr, r.stderr[-3000:]


MPIEXEC_HYDRA = shutil.which("mpiexec.hydra")


@pytest.mark.skipif(MPIEXEC_HYDRA is None, reason="missing mpiexec.hydra (mpich)")
def test_mpich_mpiexec_ranks_run_a_job_with_the_three_exports(hosts):
    # MPICH's Hydra gives rank and local placement only: the job script exports rank 0's host,
    # a port and the secret (docs/cluster.md).
    env = hosts.env(PYTHONPATH=str(BUILD / "python"), OMP_NUM_THREADS="1")
    ssh = hosts.dir / "ssh"  # Hydra runs one program, without arguments of its own
    ssh.write_text(f'#!/bin/sh\nexec ssh -F {hosts.home / ".ssh" / "config"} "$@"\n')
    ssh.chmod(0o755)
    command = [MPIEXEC_HYDRA, "-launcher", "ssh", "-launcher-exec", ssh,
               "-localhost", hosts.bridge_address,
               "-hosts", "hvdmpi1:2,hvdmpi2:2", "-n", "4",
               "-genv", "HVD_RENDEZVOUS_ADDR", "hvdmpi1", "-genv", "HVD_RENDEZVOUS_PORT", "29876",
               "-genv", "HVD_SECRET", "0123abcd" * 8, sys.executable, "-c", PLACEMENT]
    r = subprocess.run(hosts.on_login_node(command), capture_output=True, text=True, timeout=60,
                       env=env, cwd=REPO)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    placed = placements(r.stdout)
    assert layout(placed) == {
        0: (4, 0, 2, 0, 2, "hvdmpi1"), 1: (4, 1, 2, 0, 2, "hvdmpi1"),
        2: (4, 0, 2, 1, 2, "hvdmpi2"), 3: (4, 1, 2, 1, 2, "hvdmpi2")}, r.stdout
    assert values(placed) == {"10.0"}, r.stdout
