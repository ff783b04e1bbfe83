"""hvdrun in a Kubernetes MPI Operator launcher pod, emulated with the operator's files and
behaviours: worker pods are sshd servers in network namespaces (ssh_hosts.py) named
<job>-worker-<i>.<job>.<namespace>.svc by the launcher's /etc/hosts; the launcher is a mount
namespace of hvdrun's own whose /etc is overlaid (so that /etc/mpi exists there only) with
/etc/mpi/hostfile (`<pod> slots=N`), /etc/mpi/discover_hosts.sh, the client settings the
operator's images put in /etc/ssh/ssh_config, and the key Secret mounted read-only at ~/.ssh:
an EC P-521 key in PEM named id_rsa, id_rsa.pub, authorized_keys. Skips with the reason when
namespaces or overlay mounts cannot be made here."""
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import HVDRUN, REPO
from placed_ranks import EXAMPLE, PLACEMENT, TRAIN_DIGEST, placements, values
from ssh_hosts import SSH_PORT, SshHosts, sh, unavailable_reason
from test_hvdrun_elastic import WORKER as ELASTIC_WORKER, finals

JOB, NAMESPACE = "hvd-mnist", "default"
PODS = [f"{JOB}-worker-{i}.{JOB}.{NAMESPACE}.svc" for i in range(2)]


def overlay_reason():
    """Why /etc cannot be overlaid in a mount namespace here, or None."""
    probe = subprocess.run(
        ["unshare", "--mount", "sh", "-c", "d=$(mktemp -d) && mount -t tmpfs t $d && "
         "mkdir $d/u $d/w && mount -t overlay o -o lowerdir=/etc,upperdir=$d/u,workdir=$d/w "
         "/etc && mkdir /etc/mpi; r=$?; umount -l /etc $d 2>/dev/null; rmdir $d; exit $r"],
        capture_output=True, text=True)
    return None if probe.returncode == 0 else f"cannot overlay /etc: {probe.stderr.strip()}"


_reason = unavailable_reason() or overlay_reason()
pytestmark = [pytest.mark.skipif(_reason is not None, reason=f"MPI Operator pods: {_reason}"),
              pytest.mark.xdist_group("mpi_operator")]


@pytest.fixture(scope="module")
def pods():
    h = SshHosts(2).start()
    # The operator's SSH Secret: one EC P-521 key in PEM, under the name id_rsa, authorized on
    # every worker.
    secret = h.dir / "ssh-secret"
    secret.mkdir(mode=0o700)
    sh("ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "", "-C", "",
       "-f", str(secret / "id_rsa"))
    shutil.copy(secret / "id_rsa.pub", secret / "authorized_keys")
    with open(h.dir / "authorized_keys", "a") as f:
        f.write((secret / "id_rsa.pub").read_text())
    h.secret = secret
    yield h
    h.close()


class LauncherPod:
    """The launcher pod's files in `root` (tmp_path); command() wraps argv to run in it."""

    def __init__(self, pods, root, hostfile, discover=None):
        self.root = root
        self.mpi = root / "etc-mpi"  # mounted at /etc/mpi, as the operator's ConfigMap
        self.mpi.mkdir()
        (self.mpi / "hostfile").write_text(hostfile)
        if discover is not None:
            self.write_discover_hosts(discover)
        (root / "hosts").write_text("127.0.0.1 localhost\n" + "".join(
            f"{a} {p}\n" for a, p in zip(pods.addresses, PODS)))
        # The operator's images (mpioperator/base) set these for the launcher's ssh.
        (root / "ssh_config").write_text(f"Host *\n    Port {SSH_PORT}\n"
                                         "    StrictHostKeyChecking no\n"
                                         "    UserKnownHostsFile /dev/null\n")
        self.home = root / "root"
        (self.home / ".ssh").mkdir(parents=True)
        self.pods = pods

    def write_discover_hosts(self, hosts):
        """As the operator rewrites the ConfigMap's script: one `echo` per running worker."""
        tmp = self.mpi / ".discover_hosts.sh"
        tmp.write_text("#!/bin/sh\n" + "".join(f"echo {h}\n" for h in hosts))
        tmp.chmod(0o755)
        os.replace(tmp, self.mpi / "discover_hosts.sh")

    def command(self, argv):
        r, ssh = self.root, self.home / ".ssh"
        setup = (f"mkdir {r}/ov && mount -t tmpfs launcher-etc {r}/ov && mkdir {r}/ov/u {r}/ov/w "
                 f"&& mount -t overlay launcher-etc -o lowerdir=/etc,upperdir={r}/ov/u,"
                 f"workdir={r}/ov/w /etc && mkdir -p /etc/mpi /etc/ssh "
                 f"&& mount --bind {self.mpi} /etc/mpi && mount --bind {r}/hosts /etc/hosts "
                 f"&& touch /etc/ssh/ssh_config && mount --bind {r}/ssh_config /etc/ssh/ssh_config "
                 f"&& mount --bind {self.pods.secret} {ssh} && mount -o remount,bind,ro {ssh} "
                 '&& exec "$@"')
        return ["unshare", "--mount", "sh", "-c", setup, "sh", *map(str, argv)]

    def env(self):
        # The operator's variables for the launcher of an Open MPI job.
        env = self.pods.env(HOME=str(self.home), OMP_NUM_THREADS="1",
                            OMPI_MCA_orte_default_hostfile="/etc/mpi/hostfile",
                            OMPI_MCA_orte_keep_fqdn_hostnames="true",
                            OMPI_MCA_plm_rsh_args="-o ConnectionAttempts=10")
        env.pop("PYTHONPATH", None)  # hvdrun finds hvd's package itself, for every host
        return env


def test_the_launcher_pod_trains_with_the_read_only_key_and_late_worker_sshd(pods, tmp_path):
    pod = LauncherPod(pods, tmp_path, "".join(f"{p} slots=1\n" for p in PODS))
    for i in range(2):
        pods.stop_sshd(i)
    try:
        def workers_come_up():  # their containers start 5 s after the launcher's
            time.sleep(5)
            for i in range(2):
                pods.start_sshd(i)

        late = threading.Thread(target=workers_come_up)
        late.start()
        r = subprocess.run(pod.command([HVDRUN, "--hostfile", "/etc/mpi/hostfile", sys.executable,
                                        TRAIN_DIGEST, EXAMPLE, "--epochs", "1"]),
                           capture_output=True, text=True, timeout=180, env=pod.env(), cwd=REPO)
        late.join()
    finally:
        for i in range(2):
            if pods.sshd[i].poll() is not None:
                pods.start_sshd(i)
    assert r.returncode == 0, r.stderr[-4000:]
    placed = placements(r.stdout)
    assert sorted(placed) == [0, 1], r.stdout[-2000:]
    assert len(values(placed)) == 1, placed  # one set of weights
    assert "final test accuracy" in r.stdout, r.stdout[-2000:]


def test_a_bare_hvdrun_takes_the_operators_default_hostfile(pods, tmp_path):
    # As a bare mpirun would: no --hostfile, no -np; 2 pods x 2 slots.
    pod = LauncherPod(pods, tmp_path, "".join(f"{p} slots=2\n" for p in PODS))
    r = subprocess.run(pod.command([HVDRUN, sys.executable, "-c", PLACEMENT]),
                       capture_output=True, text=True, timeout=60, env=pod.env(), cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    placed = placements(r.stdout)
    assert sorted(placed) == [0, 1, 2, 3], r.stdout
    assert {p.where[:5] for p in placed.values()} >= {(4, 0, 2, 0, 2), (4, 1, 2, 1, 2)}, placed
    assert values(placed) == {"10.0"}, r.stdout


def test_an_elastic_job_survives_a_deleted_worker_pod(pods, tmp_path):
    pod = LauncherPod(pods, tmp_path, "".join(f"{p} slots=1\n" for p in PODS), discover=PODS)
    proc = subprocess.Popen(
        pod.command([HVDRUN, "-np", 2, "--min-np", 1, "--max-np", 2, "--ssh-connect-timeout", 30,
                     "--host-discovery-script",
                     "/etc/mpi/discover_hosts.sh", "-x", "STEPS=80", "-x", "STEP_SLEEP=0.1",
                     "-x", "SHOW_STEPS=1", sys.executable, ELASTIC_WORKER]),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=pod.env(), cwd=REPO)
    out, deleted = [], False
    try:
        deadline = time.monotonic() + 120
        for line in proc.stdout:
            out.append(line)
            if not deleted and "at step 20" in line:
                # Kubernetes deletes pod 1: every process in it dies, and the operator drops
                # it from discover_hosts.sh.
                pids = sh("ip", "netns", "pids", pods.namespaces[1]).stdout.split()
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):  # gone with its parent
                        os.kill(int(pid), signal.SIGKILL)
                pod.write_discover_hosts(PODS[:1])
                deleted, deleted_at = True, time.monotonic()
            if time.monotonic() > deadline:
                break
        proc.wait(timeout=60)
        finished_at = time.monotonic()
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        pods.sshd[1].wait(10)
        pods.start_sshd(1)
    stdout = "".join(out)
    assert deleted, stdout[-3000:] + err[-3000:]
    assert proc.returncode == 0, err[-4000:]
    done = finals(stdout)
    assert len(done) >= 1 and all(line.endswith("identical True") for line in done.values()), \
        stdout[-3000:]
    # It trained at 2 workers, then on at 1 after one reset.
    assert done[0].endswith("steps 80, sizes [1, 2], resets [1], identical True"), done
    # The lost worker is named with its pod. The survivor did not wait for a replacement there
    # (started when the pod still was in discover_hosts.sh) to fail at --ssh-connect-timeout
    # 30 s: the round goes on without it once the pod leaves the script.
    assert re.search(rf"elastic: worker \d+ on {re.escape(PODS[1])} was lost with hvdrun's SSH "
                     "connection to its host", err), err[-3000:]
    assert finished_at - deleted_at < 25, (finished_at - deleted_at, err[-3000:])
