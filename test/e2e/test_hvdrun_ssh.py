"""hvdrun across hosts over SSH: real sshd servers in network namespaces (ssh_hosts.py), real
ranks, real sockets across a bridge. Skips with the reason when namespaces cannot be made."""
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import HVDRUN, REPO, WORKER, hvd_segments, process_gone
from ssh_hosts import SSH_PORT, SshHosts, unavailable_reason
from test_host_hierarchical import WORKER as HIERARCHICAL_WORKER

_reason = unavailable_reason()
# One worker of the parallel runner runs the module, in order, on one set of hosts.
pytestmark = [pytest.mark.skipif(_reason is not None, reason=f"SSH hosts: {_reason}"),
              pytest.mark.xdist_group("ssh")]


@pytest.fixture(scope="module")
def hosts():
    h = SshHosts(2).start()
    yield h
    h.close()


def hvdrun(hosts, *args, env=None, timeout=90, port_flag="--ssh-port"):
    return subprocess.run([str(HVDRUN), port_flag, str(SSH_PORT), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout,
                          env=env or hosts.env(), cwd=REPO)


def netns_inode(ns=None):
    prefix = ["ip", "netns", "exec", ns] if ns else []
    return subprocess.run(prefix + ["readlink", "/proc/self/ns/net"], capture_output=True,
                          text=True, check=True).stdout.strip()


TOPOLOGY_WORKER = textwrap.dedent("""
    import os, numpy as np, hvd.numpy as hvd
    hvd.init()
    total = hvd.allreduce(np.array([hvd.rank() + 1.0]), op=hvd.Sum)
    print("TOPO", hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size(), hvd.cross_rank(),
          hvd.cross_size(), os.environ["HVD_HOSTNAME"], os.readlink("/proc/self/ns/net"),
          int(total[0]), os.getcwd(), os.environ.get("HVD_TEST_X", "-"),
          os.environ.get("CUDA_VISIBLE_DEVICES", "-"), flush=True)
    hvd.shutdown()
""")


def topology_lines(stdout):
    rows = {}
    for line in stdout.splitlines():
        if "TOPO " in line:
            f = line.split("TOPO ", 1)[1].split()
            rows[int(f[0])] = f[1:]
    return rows


def test_two_hosts_two_slots_place_ranks_and_reduce_across_the_bridge(hosts):
    env = hosts.env(CUDA_VISIBLE_DEVICES="7")
    r = hvdrun(hosts, "-np", 4, "-H", hosts.hosts(2), "-x", "HVD_TEST_X=forwarded", "--verbose",
               sys.executable, "-c", TOPOLOGY_WORKER, env=env)
    assert r.returncode == 0, r.stderr
    rows = topology_lines(r.stdout)
    assert sorted(rows) == [0, 1, 2, 3], r.stdout
    a, b = hosts.addresses
    ns = [netns_inode(n) for n in hosts.namespaces]
    expected = {0: (0, 0, a, ns[0]), 1: (1, 0, a, ns[0]), 2: (0, 1, b, ns[1]), 3: (1, 1, b, ns[1])}
    for rank, (local, cross, host, inode) in expected.items():
        size, local_rank, local_size, cross_rank, cross_size, hostname, netns, total, cwd, x, cuda = rows[rank]
        assert (int(size), int(local_rank), int(local_size)) == (4, local, 2)
        assert (int(cross_rank), int(cross_size)) == (cross, 2)
        assert hostname == host and netns == inode, "rank ran in its host's namespace"
        assert int(total) == 10
        assert cwd == str(REPO) and x == "forwarded"
        assert cuda == "-", "CUDA_VISIBLE_DEVICES belongs to the remote machine, not forwarded"
    # Ranks talk over the bridge, each host's ranks on the host's own address.
    assert re.search(rf"\[0\]<stderr>:.*global: tcp on {re.escape(a)}:", r.stdout + r.stderr)
    assert re.search(rf"\[2\]<stderr>:.*global: tcp on {re.escape(b)}:", r.stdout + r.stderr)
    assert f"rendezvous at {hosts.bridge_address}:" in r.stderr
    known = (hosts.home / ".ssh" / "known_hosts").read_text()
    assert f"[{a}]:{SSH_PORT} ssh-ed25519" in known and f"[{b}]:{SSH_PORT} ssh-ed25519" in known


def test_hierarchical_allreduce_and_allgather_across_two_ssh_hosts(hosts):
    r = hvdrun(hosts, "-np", 4, "-H", hosts.hosts(2), "--hierarchical-allreduce",
               "--hierarchical-allgather", "--log-level", "info", sys.executable, "-c",
               HIERARCHICAL_WORKER, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("<stdout>:worker ok") == 4, r.stdout[-3000:]
    assert ("hierarchical allreduce and allgather: 2 hosts of 2 ranks; within a host over "
            "shared memory, across hosts over TCP") in r.stdout + r.stderr


def test_local_and_remote_ranks_share_one_job(hosts):
    # horovodrun's -p names the SSH port as --ssh-port does
    r = hvdrun(hosts, "-np", 3, "-H", f"localhost:1,{hosts.addresses[0]}:2",
               sys.executable, "-c", TOPOLOGY_WORKER, port_flag="-p")
    assert r.returncode == 0, r.stderr
    rows = topology_lines(r.stdout)
    assert rows[0][6] == netns_inode() and rows[1][6] == netns_inode(hosts.namespaces[0])
    assert [int(rows[k][7]) for k in range(3)] == [6, 6, 6]


def test_torch_distributed_reaches_rank_0_across_hosts(hosts):
    from test_python_package import TORCH_DISTRIBUTED
    a, _ = hosts.addresses
    for spec in (f"localhost:1,{a}:1", f"{a}:1,localhost:1"):  # rank 0 here, then over there
        # The host names of these namespaced hosts resolve to loopback, so their ranks name
        # their interface; hvdrun's own ranks get the rendezvous address's interface.
        r = hvdrun(hosts, "-np", 2, "-H", spec, "--network-interface", f"{a}=eth0",
                   sys.executable, "-c", TORCH_DISTRIBUTED)
        assert r.returncode == 0, r.stderr
        assert sorted(l.split("TD ", 1)[1].split()[:3] for l in r.stdout.splitlines()
                      if "TD " in l) == [["0", "2", "3"], ["1", "2", "3"]], r.stdout


def test_per_host_network_interface_and_missing_interface(hosts):
    a, b = hosts.addresses
    r = hvdrun(hosts, "-np", 2, "-H", hosts.hosts(1), "--network-interface",
               f"{a}=eth0,{b}=eth0", "--verbose", sys.executable, "-c", TOPOLOGY_WORKER)
    assert r.returncode == 0, r.stderr
    assert f"host {a}: ssh {a}:{SSH_PORT} as" in r.stderr and "ranks use interface eth0" in r.stderr
    r = hvdrun(hosts, "-np", 2, "-H", hosts.hosts(1), "--network-interface",
               f"{a}=eth0,{b}=ib7", sys.executable, "-c", TOPOLOGY_WORKER)
    assert r.returncode != 0 and "TOPO" not in r.stdout
    assert f"{b}: network interface 'ib7' not found (interfaces: eth0 lo" in r.stderr, r.stderr


def test_missing_remote_program_or_script_is_named_with_the_host(hosts):
    a = hosts.addresses[0]
    r = hvdrun(hosts, "-np", 1, "-H", f"{a}:1", "/opt/nowhere/python3", "train.py")
    assert r.returncode != 0
    assert f"{a}: /opt/nowhere/python3: not found" in r.stderr, r.stderr
    r = hvdrun(hosts, "-np", 1, "-H", f"{a}:1", sys.executable, "no_such_train.py")
    assert f"{a}: no_such_train.py: not found" in r.stderr, r.stderr
    assert "nothing was started" in r.stderr


def test_preflight_reports_every_failing_host_at_once_and_starts_nothing(hosts, tmp_path):
    a, b = hosts.addresses
    home = tmp_path / "home"
    shutil.copytree(hosts.home, home)
    ssh = home / ".ssh"
    # A listener that accepts but never speaks SSH: the greeting times out.
    silent = socket.socket()
    silent.bind((hosts.bridge_address, 0))
    silent.listen(8)
    (ssh / "config").write_text(textwrap.dedent(f"""
        Host refused
            HostName {a}
            Port 2999
        Host stranger
            HostName {a}
            User hvd-no-such-user
        Host silent
            HostName {hosts.bridge_address}
            Port {silent.getsockname()[1]}
        Host *
            IdentityFile ~/.ssh/id_ed25519
            Port {SSH_PORT}
    """))
    # A wrong key recorded for host b: its real key must be refused as changed.
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    wrong = other.with_suffix(".pub").read_text().split()[:2]
    (ssh / "known_hosts").write_text(f"[{b}]:{SSH_PORT} {' '.join(wrong)}\n")
    env = hosts.env(HOME=str(home))
    marker = f"preflight-{os.getpid()}"
    hostlist = f"{a}:1,refused:1,stranger:1,{b}:1,no-such-host.invalid:1,silent:1"
    start = time.monotonic()
    r = subprocess.run([str(HVDRUN), "--ssh-connect-timeout", "2", "-np", "6", "-H", hostlist,
                        str(WORKER), "env", marker], capture_output=True, text=True, timeout=60,
                       env=env, cwd=REPO)
    elapsed = time.monotonic() - start
    silent.close()
    assert r.returncode != 0 and "HVD_RANK" not in r.stdout, "no rank may start"
    err = r.stderr
    assert "5 of 6 remote hosts failed the check; nothing was started" in err, err
    assert "host 'refused' (" in err and "port 2999" in err and "connection refused" in err
    assert "host 'stranger'" in err and "user hvd-no-such-user" in err
    assert "authentication failed; tried key" in err and "id_ed25519 (rejected by the server)" in err
    assert f"host '{b}' (port {SSH_PORT}, user" in err and "HOST KEY CHANGED" in err
    assert "SHA256:" in err
    assert "host 'no-such-host.invalid'" in err and "cannot resolve" in err
    assert "host 'silent'" in err and "no SSH greeting within the connect timeout" in err
    assert f"host '{a}'" not in err.split("nothing was started")[1], "the good host is not listed"
    assert elapsed < 15, f"hosts are checked in parallel (took {elapsed:.1f} s)"
    assert (ssh / "known_hosts").read_text().count(f"[{b}]") == 1, "a changed key is never added"


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def processes_with(marker):
    """PIDs whose command line contains marker, on any namespace 'host' (they share /proc)."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes() and not process_gone(int(entry.name)):
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def parent_of(pid):
    """The parent's PID (0 once the process is gone)."""
    try:
        return int(pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


LOOP_WORKER = textwrap.dedent("""
    import os, sys, time, numpy as np, hvd.numpy as hvd
    hvd.init()
    hvd.allreduce(np.ones(1), op=hvd.Sum)
    print("READY", hvd.rank(), flush=True)
    if hvd.rank() == int(os.environ.get("DIE_RANK", "-1")):
        time.sleep(0.5)
        os.kill(os.getpid(), 9)
    time.sleep(600)
""")


def start_job(hosts, marker, env=None):
    cmd = [str(HVDRUN), "--ssh-port", str(SSH_PORT), "--grace-seconds", "2", "-np", "4", "-H",
           hosts.hosts(2), "-x", "MY_API_TOKEN", sys.executable, "-c", LOOP_WORKER, marker]
    env = dict(env or hosts.env(), MY_API_TOKEN="tok-" + marker)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=REPO)


def read_until_ready(proc, ranks=4, timeout=60):
    seen, lines = set(), []
    deadline = time.monotonic() + timeout
    os.set_blocking(proc.stdout.fileno(), False)
    while len(seen) < ranks and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            time.sleep(0.05)
            continue
        lines.append(line)
        if "READY" in line:
            seen.add(int(line.split("READY")[1]))
    assert len(seen) == ranks, f"ranks ready: {sorted(seen)}: {lines}"


def test_killed_remote_rank_fails_the_job_naming_rank_and_host(hosts):
    marker = f"die-{os.getpid()}"
    proc = start_job(hosts, marker, env=hosts.env(DIE_RANK="3"))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGKILL, err
    assert f"hvdrun: job failed: rank 3 on host {hosts.addresses[1]} (over ssh" in err, err
    assert "SIGKILL" in err.split("job failed")[1]
    wait_for(lambda: not processes_with(marker), 15, "every rank to end")


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_stopping_hvdrun_leaves_no_process_on_any_host(hosts, how):
    marker = f"stop-{how}-{os.getpid()}"
    proc = start_job(hosts, marker)
    try:
        read_until_ready(proc)
        workers = [p for p in processes_with(marker) if "python" in pathlib.Path(f"/proc/{p}/exe").resolve().name]
        assert len(workers) >= 4
        proc.send_signal(getattr(signal, how))
        proc.wait(30)
        wait_for(lambda: not processes_with(marker), 20, f"no process left after {how}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.whole_machine  # compares every job's /dev/shm
def test_a_remote_job_stopped_during_init_leaves_no_segment_in_dev_shm(hosts):
    # Both ranks on one remote host use shared memory. Rank 1 fails before it initialises; rank 0
    # has created its segment and waits for rank 1's when its lifeline stops it (SIGTERM, no
    # destructors run), so only the host's run script can remove the name. (The fake hosts share
    # this machine's /dev/shm, so the run script must get there before hvdrun's own clean-up.)
    a = hosts.addresses[0]
    code = ("import os, sys, time\n"
            "if os.environ['HVD_RANK'] == '1': time.sleep(1.5); sys.exit(3)\n"
            f"os.execv('{WORKER}', ['{WORKER}', 'allreduce', '4'])\n")
    before = hvd_segments()
    r = hvdrun(hosts, "-np", 2, "-H", f"{a}:2", "--grace-seconds", 1, "--log-level", "info",
               sys.executable, "-c", code)
    out = r.stdout + r.stderr
    assert r.returncode == 3, out
    assert f"hvdrun: {a}: removed 1 shared-memory segments the job's ranks left in /dev/shm" in out
    assert "] info [launcher] removed" not in out, "the remote host had already cleaned up"
    assert hvd_segments() - before == set()


def start_stubborn_job(hosts, marker):
    """4 ranks on 2 hosts that ignore SIGTERM and print READY, with a 60 s grace period."""
    stubborn = "trap '' TERM; echo READY $HVD_RANK; while :; do sleep 1; done"
    return subprocess.Popen([str(HVDRUN), "--ssh-port", str(SSH_PORT), "--grace-seconds", "60",
                             "-np", "4", "-H", hosts.hosts(2), "sh", "-c", stubborn, marker],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=hosts.env(), cwd=REPO)


def test_second_interrupt_kills_remote_ranks_that_ignore_sigterm(hosts):
    """Ranks ignoring SIGTERM: the first Ctrl-C asks them to stop and they stay; the second
    kills them at once on every host, long before the 60 s grace period."""
    marker = f"stubborn-{os.getpid()}"
    proc = start_stubborn_job(hosts, marker)
    try:
        read_until_ready(proc)
        proc.send_signal(signal.SIGINT)
        time.sleep(1.5)
        assert len(processes_with(marker)) >= 4, "SIGTERM is ignored: the ranks are still there"
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=15)
        assert "second interrupt: killing all ranks now" in err, err
        wait_for(lambda: not processes_with(marker), 10, "the ranks to be killed")
        assert time.monotonic() - start < 10, "killed at once, not after the grace period"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_kill_the_host_never_confirms_is_given_up_on_after_2_s(hosts):
    """A killed remote rank counts as ended when its remote script exits. Here the scripts are
    stopped, so they cannot: hvdrun still ends within a few seconds of the second Ctrl-C, says
    which ranks it gave up on, and the kill itself reached every host."""
    marker = f"unconfirmed-{os.getpid()}"
    proc = start_stubborn_job(hosts, marker)
    stopped = []
    try:
        read_until_ready(proc)
        shells = [p for p in processes_with(marker)
                  if pathlib.Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"sh\0-c\0trap")]
        # A shell forked to run `sleep` has its parent's command line until it execs: not a rank.
        ranks = [p for p in shells if parent_of(p) not in shells]
        assert len(ranks) == 4, ranks
        # Each rank's parent is its remote script, which reports the rank's exit.
        for pid in ranks:
            parent = int(pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            os.kill(parent, signal.SIGSTOP)
            stopped.append(parent)
        proc.send_signal(signal.SIGINT)
        time.sleep(1)
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
        elapsed = time.monotonic() - start
        assert "second interrupt: killing all ranks now" in err, err
        assert err.count("no exit from the remote host within 2 s of the kill") == 4, err
        assert 1.5 < elapsed < 10, f"gave up after {elapsed:.1f} s"
        wait_for(lambda: all(process_gone(p) for p in ranks), 10,
                 "the ranks to be killed")
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_secrets_never_appear_on_any_command_line(hosts):
    marker = f"secret-{os.getpid()}"
    proc = start_job(hosts, marker)
    try:
        read_until_ready(proc)
        secret = token = None
        ranks = 0
        for pid in processes_with(marker):
            try:
                env = dict(kv.split("=", 1) for kv in
                           (pathlib.Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0"))
                           if "=" in kv)
            except OSError:
                continue
            if "HVD_RANK" in env and env.get("HVD_HOSTNAME") in hosts.addresses:
                ranks += 1
                secret = env["HVD_SECRET"]
                token = env["MY_API_TOKEN"]
        assert ranks == 4 and secret and token == "tok-" + marker
        for entry in pathlib.Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                except OSError:
                    continue
                assert secret.encode() not in cmdline, f"job secret on pid {entry.name}'s command line"
                assert token.encode() not in cmdline, f"token on pid {entry.name}'s command line"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def test_dropped_ssh_connection_fails_the_job_and_ends_that_hosts_ranks(hosts):
    """SIGKILL to sshd's processes for hvdrun's connection to host 0 (no SSH goodbye): hvdrun
    names the lost connection and stops the job; the remote scripts stop every rank's group."""
    marker = f"drop-{os.getpid()}"
    proc = start_job(hosts, marker)
    try:
        read_until_ready(proc)
        listener = hosts.sshd[0].pid
        connection = [pid for pid in _descendants(listener) if _comm(pid).startswith("sshd")]
        assert connection, "sshd has a process for hvdrun's connection"
        for pid in connection:
            os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode != 0
        assert "ssh connection lost" in err and hosts.addresses[0] in err, err
        # libssh2's error in words, not its bare code.
        assert re.search(r"ssh connection lost while rank was running: [A-Za-z].* \(libssh2 "
                         r"error -\d+\)", err), err
        wait_for(lambda: not processes_with(marker), 20, "remote ranks to end after the drop")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_one_connection_per_host_carries_its_ranks(hosts):
    """Ranks share the connection the preflight checked; more than 8 ranks on a host (sshd's
    MaxSessions defaults to 10) get a further connection."""
    def accepted():
        return sum((hosts.dir / f"sshd{i}.log").read_text().count("Accepted publickey")
                   for i in range(2))
    before = accepted()
    r = hvdrun(hosts, "-np", 4, "-H", hosts.hosts(2), "sh", "-c", "echo rank=$HVD_RANK")
    assert r.returncode == 0, r.stderr
    assert sorted(re.findall(r"rank=(\d)", r.stdout)) == ["0", "1", "2", "3"]
    assert accepted() - before == 2, "one connection per host"
    before = accepted()
    a = hosts.addresses[0]
    r = hvdrun(hosts, "-np", 10, "-H", f"{a}:10", "sh", "-c", "echo rank=$HVD_RANK")
    assert r.returncode == 0, r.stderr
    assert sorted(int(x) for x in re.findall(r"rank=(\d+)", r.stdout)) == list(range(10))
    assert accepted() - before == 2, "10 ranks on one host: two connections"



def test_more_hosts_than_ssh_concurrency_still_start_one_connection_each(hosts, tmp_path):
    """Four host names (two per real host, through ~/.ssh/config) checked two at a time: every
    host is still checked, keeps its one connection for its rank, and the ranks reduce."""
    a, b = hosts.addresses
    home = tmp_path / "home"
    shutil.copytree(hosts.home, home)
    aliases = {"h0": a, "h1": b, "h2": a, "h3": b}
    (home / ".ssh" / "config").write_text("".join(
        f"Host {name}\n    HostName {address}\n    Port {SSH_PORT}\n"
        for name, address in aliases.items()))

    def accepted():
        return sum((hosts.dir / f"sshd{i}.log").read_text().count("Accepted publickey")
                   for i in range(2))
    before = accepted()
    r = subprocess.run([str(HVDRUN), "--ssh-concurrency", "2", "--log-level", "info", "-np", "4",
                        "-H", ",".join(f"{n}:1" for n in aliases), sys.executable, "-c",
                        TOPOLOGY_WORKER], capture_output=True, text=True, timeout=90,
                       env=hosts.env(HOME=str(home)), cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert "checking 4 remote hosts, at most 2 at once" in r.stderr, r.stderr
    rows = topology_lines(r.stdout)
    assert sorted(rows) == [0, 1, 2, 3], r.stdout
    assert all(int(row[7]) == 10 for row in rows.values()), rows
    assert accepted() - before == 4, "one connection per host name"

def _descendants(pid):
    children = {}
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            children.setdefault(_ppid(int(entry.name)), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _comm(pid):
    try:
        return pathlib.Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _ppid(pid):
    try:
        return int(pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def test_keys_from_ssh_agent_authenticate(hosts, tmp_path):
    """No key file in ~/.ssh: the only key is held by an ssh-agent."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "known_hosts").write_text(hosts.known_hosts())
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        wait_for(sock.exists, 10, "ssh-agent's socket")
        env = hosts.env(HOME=str(home), SSH_AUTH_SOCK=str(sock))
        subprocess.run(["ssh-add", "-q", str(hosts.key)], env=env, check=True,
                       capture_output=True)
        r = hvdrun(hosts, "-np", 2, "-H", hosts.hosts(1), sys.executable, "-c", TOPOLOGY_WORKER,
                   env=env)
        assert r.returncode == 0, r.stderr
        assert sorted(topology_lines(r.stdout)) == [0, 1]
        r = hvdrun(hosts, "-np", 1, "-H", f"{hosts.addresses[0]}:1", "true",
                   env=hosts.env(HOME=str(home)))
        assert "authentication failed" in r.stderr, "without the agent there is no key"
    finally:
        agent.terminate()
        agent.wait(10)


def echo_ranks(hosts, host_list):
    """Two ranks on `host_list` that print their rank; checks both ran, returns the result."""
    r = hvdrun(hosts, "-np", 2, "-H", host_list, "sh", "-c", "echo rank=$HVD_RANK", timeout=60)
    assert r.returncode == 0, r.stderr
    assert sorted(re.findall(r"rank=(\d)", r.stdout)) == ["0", "1"]
    return r


def test_login_script_chatter_does_not_reach_the_ranks_output(tmp_path):
    """A remote ~/.bashrc that prints (and is slow) runs before the checks; hvdrun waits for
    its ready line, and nothing the login printed shows up as rank output."""
    home = tmp_path / "login-home"
    home.mkdir()
    (home / ".bashrc").write_text("echo welcome-from-bashrc\nsleep 0.2\ntouch ~/bashrc-ran\n")
    h = SshHosts(1, login_home=home).start()
    try:
        r = echo_ranks(h, h.hosts(2))
        assert "welcome-from-bashrc" not in r.stdout + r.stderr
        assert (home / "bashrc-ran").exists(), "the remote shells read the login script"
    finally:
        h.close()


def test_key_exchange_is_ecdh_p256_where_offered_and_falls_back_where_not():
    """hvdrun asks for ECDH on P-256 first (cheaper for sshd than curve25519, see
    keyExchangePreference); a server whose admin allows only curve25519 still gets a login."""
    h = SshHosts(2, sshd_options=[
        "LogLevel DEBUG1", "LogLevel DEBUG1\nKexAlgorithms curve25519-sha256"]).start()
    try:
        echo_ranks(h, h.hosts(1))
        kex = [re.findall(r"kex: algorithm: (\S+)", h.sshd_log(i).read_text()) for i in (0, 1)]
        assert kex[0] and set(kex[0]) == {"ecdh-sha2-nistp256"}, kex
        assert kex[1] and set(kex[1]) == {"curve25519-sha256"}, kex
    finally:
        h.close()
