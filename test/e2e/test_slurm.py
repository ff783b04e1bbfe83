"""hvd under a real Slurm 22.05 (slurm_cluster.py: munged, slurmctld and two slurmd nodes with
their own host names and addresses): ranks started by srun inside and outside a batch job, with
nothing of hvd's exported (the secret comes from rank 0 in munge credentials), and a bare hvdrun
inside salloc reaching the nodes over SSH. Nothing sets a SLURM_* variable by hand: every one
comes from the daemons. Skips with the reason when the daemons cannot run here."""
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import BUILD, HVDRUN, REPO
from placed_ranks import EXAMPLE, PLACEMENT, TRAIN_DIGEST, layout, placements, values
from slurm_cluster import SlurmCluster, unavailable_reason

_reason = unavailable_reason()
pytestmark = [pytest.mark.skipif(_reason is not None, reason=f"Slurm: {_reason}"),
              pytest.mark.xdist_group("slurm")]


@pytest.fixture(scope="module")
def cluster():
    c = SlurmCluster(nodes=2, cpus=4).start()
    yield c
    c.close()


def user_env(cluster, **extra):
    """A user's login environment: this virtualenv's python first on PATH, and hvd importable
    (as installed; srun ranks have no hvdrun to find it)."""
    env = cluster.env(PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
                      PYTHONPATH=str(BUILD / "python"), OMP_NUM_THREADS="1")
    for name in list(env):
        if name.startswith(("HVD_", "HOROVOD_", "SLURM_", "OMPI_", "PMI_")):
            del env[name]
    env["SLURM_CONF"] = str(cluster.conf)
    env.update(extra)
    return env


def test_srun_ranks_take_an_uneven_layout_and_train_with_identical_weights(cluster):
    # 3 tasks on the first node and 1 on the second (-w lists one node per task).
    r = cluster.run(["srun", "-N", "2", "-n", "4", "--distribution=arbitrary",
                     "-w", "hvdnode1,hvdnode1,hvdnode1,hvdnode2", "--kill-on-bad-exit=1",
                     "python", TRAIN_DIGEST, EXAMPLE, "--epochs", "1"],
                    env=user_env(cluster), timeout=180, cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:] + cluster.logs()[-3000:]
    placed = placements(r.stdout)
    assert layout(placed) == {
        0: (4, 0, 3, 0, 2, "hvdnode1"), 1: (4, 1, 3, 0, 1, "hvdnode1"),
        2: (4, 2, 3, 0, 1, "hvdnode1"), 3: (4, 0, 1, 1, 2, "hvdnode2")}, r.stdout
    assert len(values(placed)) == 1, placed  # one set of weights
    assert "final test accuracy" in r.stdout, r.stdout[-2000:]


def test_srun_names_the_failing_rank_and_node_and_ends_the_step_quickly(cluster):
    # Rank 3 (hvdnode2) fails after init while the others wait in a collective.
    code = ("import numpy as np, hvd.numpy as h\nh.init()\n"
            "if h.rank() == 3: raise RuntimeError('rank 3: bad batch')\n"
            "h.allreduce(np.ones(4), name='grads')\n")
    started = time.monotonic()
    r = cluster.run(["srun", "-N", "2", "-n", "4", "--kill-on-bad-exit=1", "python", "-c", code],
                    env=user_env(cluster), timeout=60)
    took = time.monotonic() - started
    assert r.returncode != 0
    assert took < 10, (took, r.stderr[-3000:])
    # Slurm names the task and node; hvd's surviving ranks name the rank and its host.
    assert re.search(r"hvdnode2: task 3: Exited with exit code 1", r.stderr), r.stderr[-3000:]
    assert "rank 3: bad batch" in r.stderr, r.stderr[-3000:]
    assert re.search(r"rank 3 \(host hvdnode2\)|rank 3 on host hvdnode2", r.stderr), \
        r.stderr[-3000:]


def test_sbatch_runs_the_example_job_script_and_only_rank_0_writes_checkpoints(cluster, tmp_path):
    # The example as users submit it, from the project directory; smaller here (2 ranks, one
    # epoch) by sbatch's own options and the script's pass-through arguments.
    ckpt = tmp_path / "ckpt"
    site = tmp_path / "site"  # records which rank opens what for writing in the checkpoint dir
    site.mkdir()
    (site / "sitecustomize.py").write_text(f"""import os, sys
def _audit(event, args):
    if event == "open" and args and isinstance(args[0], str) and \\
            os.path.realpath(args[0]).startswith({str(ckpt)!r}) and \\
            (args[1] is None or any(c in args[1] for c in "wax")):
        print("AUDIT rank", os.environ.get("SLURM_PROCID"), os.path.basename(args[0]),
              file=sys.stderr)
sys.addaudithook(_audit)
""")
    out = tmp_path / "job.out"
    env = user_env(cluster, PYTHONPATH=f"{site}{os.pathsep}{BUILD / 'python'}")
    r = cluster.run(["sbatch", "--wait", "-N", "2", "--ntasks-per-node=1", "-o", out,
                     REPO / "examples" / "slurm_job.sbatch", "--epochs", "1",
                     "--checkpoint-dir", ckpt], env=env, timeout=180, cwd=REPO)
    log = out.read_text() if out.exists() else ""
    assert r.returncode == 0, r.stderr[-2000:] + log[-3000:] + cluster.logs()[-3000:]
    assert "epoch 1: test loss" in log and "(2 ranks)" in log, log[-3000:]
    assert sorted(p.name for p in ckpt.iterdir()) == ["checkpoint-1.pt"]
    audits = [line for line in log.splitlines() if line.startswith("AUDIT")]
    assert audits and all(line.startswith("AUDIT rank 0 ") for line in audits), audits
    assert not (REPO / "checkpoints").exists()


def test_bare_hvdrun_in_salloc_takes_the_allocation_and_reaches_nodes_over_ssh(cluster):
    # hvdrun runs on the login node, as salloc runs its command; no -H, no -np.
    r = cluster.run(["salloc", "-N", "2", "--ntasks-per-node=2", HVDRUN, "python", "-c",
                     PLACEMENT], env=user_env(cluster), timeout=120)
    assert r.returncode == 0, r.stderr[-3000:] + cluster.logs()[-3000:]
    placed = placements(r.stdout)
    assert layout(placed) == {
        0: (4, 0, 2, 0, 2, "hvdnode1"), 1: (4, 1, 2, 0, 2, "hvdnode1"),
        2: (4, 0, 2, 1, 2, "hvdnode2"), 3: (4, 1, 2, 1, 2, "hvdnode2")}, r.stdout
    assert values(placed) == {"10.0"}, r.stdout


def test_a_secret_handed_over_by_another_user_is_refused(cluster):
    # Another user's process holds the port rank 0 hands the secret on (the rendezvous port
    # + 1) and answers with a credential of its own, made decodable by this user: the rank
    # must see whose it is. Rank 0 cannot bind the port and says so.
    port = 23000
    evil = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           "munge", f"--restrict-uid={os.getuid()}"],
                          input=b"hvd-job-secret slurm-1.0 " + b"e" * 64, capture_output=True,
                          check=True).stdout
    serve = ("import socket, sys; s = socket.socket(); "
             "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
             f"s.bind(('{cluster.hosts.addresses[0]}', {port + 1})); s.listen(8); "
             "print('listening', flush=True)\n"
             "while True:\n c, _ = s.accept(); c.sendall(sys.stdin.buffer.read() or b''); c.close()")
    impostor = subprocess.Popen(["ip", "netns", "exec", cluster.hosts.namespaces[0], sys.executable,
                                 "-c", serve], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        impostor.stdin.write(evil)
        impostor.stdin.close()
        assert impostor.stdout.readline().strip() == b"listening"
        r = cluster.run(["srun", "-N", "2", "-n", "2", "python", "-c",
                         "import hvd.numpy as h; h.init()"],
                        env=user_env(cluster, HVD_RENDEZVOUS_PORT=str(port), HVD_START_TIMEOUT="5"),
                        timeout=60)
    finally:
        impostor.kill()
        impostor.wait()
    assert r.returncode != 0
    assert re.search(r"Slurm: rank 0 on host hvdnode1: cannot serve the job secret at "
                     rf"[\d.]+:{port + 1}: Address already in use", r.stderr), r.stderr[-3000:]
    assert re.search(rf"rank 1 on host hvdnode2: cannot get the job secret \(no HVD_SECRET was "
                     rf"exported\): the credential from rank 0 \(hvdnode1:{port + 1}\) was made by "
                     rf"uid \d+, not by this user", r.stderr), r.stderr[-3000:]
