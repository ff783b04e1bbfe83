"""Elastic jobs across hosts: hvdrun's own workers and workers it starts over SSH on real sshd
servers in network namespaces (ssh_hosts.py), training through hvd.elastic.run while hosts fail,
join and refuse the login. Skips with the reason when namespaces cannot be made."""
import os
import re
import signal
import stat
import subprocess
import sys
import time

import pytest

from conftest import HVDRUN, REPO, process_gone
from ssh_hosts import SSH_PORT, SshHosts, unavailable_reason
import chaos
from test_hvdrun_elastic import CHAOS, WORKER, assert_survived_the_chaos, finals

_reason = unavailable_reason()
# One worker of the parallel runner runs the module, in order, on one set of hosts.
pytestmark = [pytest.mark.skipif(_reason is not None, reason=f"SSH hosts: {_reason}"),
              pytest.mark.xdist_group("elastic_ssh")]


@pytest.fixture(scope="module")
def hosts():
    h = SshHosts(2).start()
    yield h
    h.close()


def command(*args):
    return [str(HVDRUN), "--ssh-port", str(SSH_PORT), *map(str, args)]


def environment(hosts):
    env = hosts.env()
    env.pop("PYTHONPATH", None)  # hvdrun finds hvd's package itself, for every host
    return env


def hvdrun(hosts, *args, timeout=180):
    return subprocess.run(command(*args), capture_output=True, text=True, timeout=timeout,
                          env=environment(hosts), cwd=REPO)


def worker_hosts(stdout):
    """worker id -> the network namespace it ran in (from its HOSTNAME line)."""
    out = {}
    for line in stdout.splitlines():
        m = re.match(r"\[\d+\]<stdout>:worker (\d+) runs on (\S+)", line)
        if m:
            out[int(m.group(1))] = m.group(2)
    return out


def test_a_failed_remote_host_leaves_and_the_rest_finish_across_hosts(hosts, tmp_path):
    a, b = hosts.addresses
    r = hvdrun(hosts, "--min-np", 2, "-H", f"localhost:1,{a}:1,{b}:1",
               "--blacklist-failure-limit", 1, "-x", "CRASH_WORKER=2",
               "-x", "CRASH_AT=10", "-x", f"CRASH_MARKER={tmp_path / 'crashed'}", "-x",
               "SHOW_HOST=1", sys.executable, WORKER)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "worker 2 dies at step 10" in r.stdout
    assert (f"elastic: worker 2 on {b} exited with code 3; blacklisting host {b} and going on "
            "without it") in r.stderr
    # Worker 0 ran here, worker 1 in host a's namespace: the survivors' round spans two hosts.
    where = worker_hosts(r.stdout)
    assert where[0] == os.readlink("/proc/self/ns/net"), where
    assert where[1] != where[0] and where[2] not in (where[0], where[1]), where
    done = finals(r.stdout)
    assert sorted(done) == [0, 1], r.stdout[-3000:]
    for worker in (0, 1):
        assert done[worker].endswith("steps 30, sizes [2, 3], resets [2], identical True"), done
    assert done[0].startswith("rank 0 of 2")


def test_chaos_five_random_kill_9s_of_a_torch_job_on_two_hosts_keep_its_progress(hosts, tmp_path):
    a, b = hosts.addresses
    pids = tmp_path / "pids"
    pids.mkdir()
    seed = int(os.environ.get("HVD_CHAOS_SEED", time.time_ns() % 1000))
    result = chaos.run_with_kills(
        command("--min-np", 2, "--max-np", 4, "-H", f"{a}:2,{b}:2", *CHAOS, "-x",
                f"PID_DIR={pids}", sys.executable, WORKER),
        environment(hosts), pids, kills=5, seed=seed, timeout=240)
    assert_survived_the_chaos(*result, workers=4, steps=200)


def test_a_remote_host_the_discovery_script_adds_joins_the_running_job(hosts, tmp_path):
    a, _ = hosts.addresses
    grow = tmp_path / "grow"
    script = tmp_path / "hosts.sh"
    script.write_text(f"#!/bin/sh\necho localhost:1\n[ -e {grow} ] && echo {a}:2\nexit 0\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    r = hvdrun(hosts, "--min-np", 1, "--max-np", 3, "--host-discovery-script", script,
               "-x", f"GROW_FILE={grow}", "-x", "GROW_AT=5", "-x", "WANT_SIZE=3",
               "-x", "SHOW_HOST=1", sys.executable, WORKER)
    assert r.returncode == 0, r.stderr[-4000:]
    where = worker_hosts(r.stdout)
    assert where[1] == where[2] != where[0], where
    done = finals(r.stdout)
    assert sorted(done) == [0, 1, 2], r.stdout[-3000:]
    assert done[0].endswith("steps 30, sizes [1, 3], resets [3], identical True"), done
    # The new workers took rank 0's state over the bridge.
    assert done[1] == "rank 1 of 3, steps 30, sizes [1, 3], resets [], identical True", done
    assert done[2] == "rank 2 of 3, steps 30, sizes [1, 3], resets [], identical True", done


def test_a_host_that_fails_its_ssh_check_is_blacklisted_and_the_job_goes_on(hosts):
    # No machine answers at this address: the check fails while workers 0 and 1 wait for the
    # first round, which hvdrun then gives up for one without the host. A permanent neighbour
    # entry for a MAC nobody has makes the connection attempt vanish, so the check fails at
    # --ssh-connect-timeout, after the local workers have surely joined round
    # 0; an address nobody claims would fail ARP after about 3 s, which the workers could
    # outlast on a loaded machine and join round 1 directly.
    dead = f"{hosts.prefix}.250"
    subprocess.run(["ip", "neigh", "replace", dead, "lladdr", "02:00:00:00:02:50", "dev",
                    hosts.bridge, "nud", "permanent"], check=True)
    try:
        r = hvdrun(hosts, "--min-np", 2, "-H", f"localhost:2,{dead}:1", "--ssh-connect-timeout",
                   12, sys.executable, WORKER)
    finally:
        subprocess.run(["ip", "neigh", "del", dead, "dev", hosts.bridge], check=False)
    assert r.returncode == 0, r.stderr[-4000:]
    assert f"worker 2 on {dead} could not be started on its host" in r.stderr
    assert f"blacklisting host {dead}" in r.stderr
    assert "elastic: round 0 was given up for round 1" in r.stderr
    done = finals(r.stdout)
    assert sorted(done) == [0, 1], r.stdout[-3000:]
    for worker in (0, 1):
        assert done[worker].endswith("steps 30, sizes [2], resets [], identical True"), done


def test_interrupting_an_elastic_job_stops_its_remote_workers(hosts, tmp_path):
    a, b = hosts.addresses
    pids = tmp_path / "pids"
    pids.mkdir()
    code = ("import os, time, hvd.numpy as hvd; hvd.init(); "
            f"open(os.path.join({str(pids)!r}, str(os.getpid())), 'w').close(); "
            "time.sleep(600)")
    p = subprocess.Popen(command("--min-np", 2, "-H", f"{a}:1,{b}:1", sys.executable, "-c", code),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=environment(hosts), cwd=REPO)
    deadline = time.monotonic() + 60
    while len(os.listdir(pids)) < 2 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.1)
    if len(os.listdir(pids)) < 2:
        p.kill()
        pytest.fail(f"the workers did not start: {p.communicate(timeout=30)}")
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGINT, err[-3000:]
    assert "interrupted by SIGINT: stopped 2 workers" in err
    for pid in map(int, os.listdir(pids)):
        assert process_gone(pid), f"worker pid {pid} outlived hvdrun"


LISTEN_WORKER = """
import os, numpy as np, hvd.numpy as hvd
hvd.init()
total = hvd.allreduce(np.array([float(os.environ["HVD_WORKER_ID"]) + 1.0]), op=hvd.Sum)
print("SUM", os.environ["HVD_WORKER_ID"], os.environ.get("HVD_NETWORK_INTERFACE", "-"),
      int(total[0]), flush=True)
hvd.shutdown()
"""


def test_per_host_network_interfaces_choose_where_each_hosts_workers_listen(hosts):
    a, _ = hosts.addresses
    r = hvdrun(hosts, "--min-np", 2, "-H", f"localhost:1,{a}:1", "--network-interface",
               f"localhost={hosts.bridge},{a}=eth0", sys.executable, "-c", LISTEN_WORKER)
    assert r.returncode == 0, r.stderr[-4000:]
    lines = sorted(l.split("SUM ", 1)[1] for l in r.stdout.splitlines() if "SUM " in l)
    assert lines == [f"0 {hosts.bridge} 3", "1 eth0 3"], r.stdout



BLACK_HOLE = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen()
print("listening", flush=True)
held = []
while True:
    held.append(s.accept()[0])  # accepted, never answered: an SSH handshake waits for a banner
"""


def test_interrupting_while_a_new_host_is_checked_does_not_wait_for_its_timeout(hosts, tmp_path):
    # A "host" that accepts the TCP connection and never sends SSH's banner, with a long connect
    # timeout: Ctrl-C must stop the job at once, not when the host's check gives up.
    port = 2299
    hole = subprocess.Popen(["ip", "netns", "exec", hosts.namespaces[1], sys.executable, "-c",
                             BLACK_HOLE, str(port)], stdout=subprocess.PIPE, text=True)
    config = hosts.home / ".ssh" / "config"
    try:
        assert hole.stdout.readline().strip() == "listening"
        config.write_text(f"Host blackhole\n  HostName {hosts.addresses[1]}\n  Port {port}\n")
        pids = tmp_path / "pids"
        pids.mkdir()
        code = ("import os, time; "
                f"open(os.path.join({str(pids)!r}, str(os.getpid())), 'w').close(); "
                "import hvd.numpy as hvd; hvd.init(); time.sleep(600)")
        p = subprocess.Popen([str(HVDRUN), "--min-np", "2", "-H", "localhost:2,blackhole:1",
                              "--ssh-connect-timeout", "120", sys.executable, "-c", code],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=environment(hosts), cwd=REPO)
        deadline = time.monotonic() + 60
        while len(os.listdir(pids)) < 2 and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.1)
        time.sleep(2)  # the black hole's check is waiting for the banner
        asked = time.monotonic()
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=150)
        took = time.monotonic() - asked
        assert p.returncode == 128 + signal.SIGINT, err[-3000:]
        assert took < 10, f"hvdrun took {took:.1f} s to stop: {err[-3000:]}"
        for pid in map(int, os.listdir(pids)):
            assert process_gone(pid), f"worker pid {pid} outlived hvdrun"
    finally:
        config.unlink(missing_ok=True)
        hole.kill()
        hole.wait()
