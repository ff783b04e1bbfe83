"""SSH as Kubernetes' MPI Operator sets it up for a launcher pod: the client settings in the
system-wide /etc/ssh/ssh_config (StrictHostKeyChecking no, UserKnownHostsFile /dev/null), the
key Secret mounted read-only at ~/.ssh, worker pods whose sshd starts after the launcher, and
pod names that resolve only once the pods run. The launcher's files are swapped in a mount
namespace of hvdrun's own (unshare -m), the pods are sshd servers in network namespaces
(ssh_hosts.py). Skips with the reason when namespaces cannot be made."""
import shutil
import subprocess
import sys
import threading
import time

import pytest

from conftest import HVDRUN, REPO
from ssh_hosts import SSH_PORT, SshHosts, unavailable_reason

_reason = unavailable_reason()
pytestmark = [pytest.mark.skipif(_reason is not None, reason=f"SSH hosts: {_reason}"),
              pytest.mark.xdist_group("ssh_pods")]

# Every rank allreduces its rank + 1: the sum proves the two "pods" formed one job.
ALLREDUCE = ("import hvd.numpy as h, numpy as np; h.init(); "
             "print('sum', h.allreduce(np.array([h.rank() + 1.0]), op=h.Sum)[0])")


@pytest.fixture(scope="module")
def pods():
    h = SshHosts(2).start()
    yield h
    h.close()


def launcher_home(pods, tmp_path, known_hosts=None):
    """The launcher's HOME: ~/.ssh holds the key (as the Secret does), no config."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    shutil.copy(pods.key, home / ".ssh" / "id_ed25519")
    if known_hosts is not None:
        (home / ".ssh" / "known_hosts").write_text(known_hosts)
    return home


def in_launcher_pod(setup, command):
    """`command` (a list) run under `unshare -m` after the shell lines `setup` (bind mounts)."""
    script = setup + '\nexec "$@"'
    return ["unshare", "--mount", "sh", "-c", script, "sh", *map(str, command)]


def hvdrun(pods, home, setup, *args, timeout=120):
    return subprocess.run(in_launcher_pod(setup, [HVDRUN, *args]), capture_output=True,
                          text=True, timeout=timeout, env=pods.env(HOME=str(home)), cwd=REPO)


def test_the_system_ssh_config_is_read_after_the_users(pods, tmp_path):
    # The operator's images set the port and host key policy in /etc/ssh/ssh_config; the user's
    # ~/.ssh/config (none here) would win. No --ssh-port: the port comes from the system file.
    home = launcher_home(pods, tmp_path)
    system = tmp_path / "ssh_config"
    system.write_text(f"Host *\n    Port {SSH_PORT}\n    StrictHostKeyChecking no\n"
                      "    UserKnownHostsFile /dev/null\n")
    r = hvdrun(pods, home, f"mount --bind {system} /etc/ssh/ssh_config",
               "-np", 2, "-H", pods.hosts(1), sys.executable, "-c", ALLREDUCE)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("sum 3.0") == 2, r.stdout
    assert not (home / ".ssh" / "known_hosts").exists()  # UserKnownHostsFile /dev/null


def test_a_read_only_ssh_directory_accepts_a_new_host_key_with_a_warning(pods, tmp_path):
    # The key Secret mounted read-only: accept-new cannot record the hosts' keys, which warns
    # for each host and fails none.
    home = launcher_home(pods, tmp_path)
    ssh = home / ".ssh"
    r = hvdrun(pods, home, f"mount --bind {ssh} {ssh} && mount -o remount,bind,ro {ssh}",
               "--ssh-port", SSH_PORT, "-np", 2, "-H", pods.hosts(1), sys.executable, "-c", ALLREDUCE)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("sum 3.0") == 2, r.stdout
    for address in pods.addresses:
        assert f"{address}: host key ssh-ed25519 SHA256:" in r.stderr, r.stderr[-3000:]
    assert r.stderr.count("accepted but not recorded (cannot append to "
                          f"{ssh / 'known_hosts'}: Read-only file system); it is checked again "
                          "next time") == 2, r.stderr[-3000:]


def test_a_pod_whose_name_resolves_and_sshd_starts_late_is_waited_for(pods, tmp_path):
    # Pod b's DNS name is not published and its sshd not started when hvdrun starts; both come
    # 3 s later. hvdrun tries again until --ssh-connect-timeout instead of failing at once.
    home = launcher_home(pods, tmp_path, known_hosts=pods.known_hosts())
    hosts_file = tmp_path / "hosts"
    a, b = pods.addresses
    hosts_file.write_text(f"127.0.0.1 localhost\n{a} pod-a.job.default.svc\n")
    pods.stop_sshd(1)
    try:
        def publish():
            time.sleep(3)
            with open(hosts_file, "a") as f:
                f.write(f"{b} pod-b.job.default.svc\n")
            pods.start_sshd(1)

        late = threading.Thread(target=publish)
        late.start()
        started = time.monotonic()
        r = hvdrun(pods, home, f"mount --bind {hosts_file} /etc/hosts",
                   "--ssh-port", SSH_PORT, "--ssh-connect-timeout", 30, "-np", 2, "-H",
                   "pod-a.job.default.svc:1,pod-b.job.default.svc:1", "--log-level", "debug",
                   sys.executable, "-c", ALLREDUCE)
        took = time.monotonic() - started
        late.join()
    finally:
        if pods.sshd[1].poll() is not None:
            pods.start_sshd(1)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("sum 3.0") == 2, r.stdout
    assert took >= 3
    # Each kind of failure is logged once, at debug.
    assert r.stderr.count("cannot resolve the name: Name or service not known; trying again "
                          "until --ssh-connect-timeout") == 1, r.stderr[-3000:]


def test_a_pod_that_never_starts_fails_at_the_connect_timeout_naming_it(pods, tmp_path):
    home = launcher_home(pods, tmp_path, known_hosts=pods.known_hosts())
    pods.stop_sshd(1)
    try:
        started = time.monotonic()
        r = hvdrun(pods, home, "true", "--ssh-port", SSH_PORT, "--ssh-connect-timeout", 3,
                   "-np", 2, "-H", pods.hosts(1), sys.executable, "-c", ALLREDUCE)
        took = time.monotonic() - started
    finally:
        pods.start_sshd(1)
    assert r.returncode != 0
    b = pods.addresses[1]
    assert f"host '{b}'" in r.stderr and "connection refused (is sshd running on port " \
        f"{SSH_PORT}?) (tried " in r.stderr and "within --ssh-connect-timeout 3000 ms)" in \
        r.stderr, r.stderr[-3000:]
    assert 3 <= took < 20, took
