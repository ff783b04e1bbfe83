"""hvdrun connects to at most --ssh-concurrency (HVD_SSH_CONCURRENCY) remote hosts at once.
The hosts are loopback listeners that accept and never speak SSH, named through ~/.ssh/config:
each check waits for a greeting until --ssh-connect-timeout, so the listeners see how many
connections hvdrun holds open at once, and the job's length shows the waves. Needs no root."""
import os
import select
import socket
import subprocess
import threading
import time

import pytest

from conftest import HVDRUN, REPO, WORKER


class SilentHosts:
    """`count` listeners on 127.0.0.1; `most_open` is the most connections open at once."""

    def __init__(self, count):
        self.listeners = []
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen(16)
            self.listeners.append(s)
        self.ports = [s.getsockname()[1] for s in self.listeners]
        self.most_open = 0
        self.accepted = 0
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        open_ = []
        while not self._stop:
            ready, _, _ = select.select(open_ + self.listeners, [], [], 0.02)
            # Closes before accepts: a client that closed before the next one connected is never
            # counted together with it.
            for c in [c for c in ready if c in open_]:
                if self._closed(c):
                    open_.remove(c)
                    c.close()
            for s in [s for s in ready if s in self.listeners]:
                c, _ = s.accept()
                open_.append(c)
                self.accepted += 1
                self.most_open = max(self.most_open, len(open_))
        for c in open_:
            c.close()

    @staticmethod
    def _closed(c):
        """Reads what the client sent (its SSH banner) and says whether its stream ended."""
        c.setblocking(False)
        try:
            while True:
                data = c.recv(4096)
                if not data:
                    return True
        except BlockingIOError:
            return False
        except OSError:
            return True

    def close(self):
        self._stop = True
        self._thread.join()
        for s in self.listeners:
            s.close()


@pytest.fixture
def silent_hosts(tmp_path):
    hosts = SilentHosts(6)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("".join(
        f"Host silent{i}\n    HostName 127.0.0.1\n    Port {port}\n"
        for i, port in enumerate(hosts.ports)))
    env = dict(os.environ, HOME=str(home))
    env.pop("SSH_AUTH_SOCK", None)
    env.pop("HVD_SSH_CONCURRENCY", None)
    yield hosts, env
    hosts.close()


def run_on_silent_hosts(env, *flags):
    hostlist = ",".join(f"silent{i}:1" for i in range(6))
    start = time.monotonic()
    r = subprocess.run([str(HVDRUN), "--ssh-connect-timeout", "1", *flags, "-np", "6", "-H",
                        hostlist, str(WORKER), "env"], capture_output=True, text=True,
                       timeout=60, env=env, cwd=REPO)
    return r, time.monotonic() - start


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_at_most_the_ssh_concurrency_hosts_are_connected_at_once(silent_hosts, how):
    hosts, env = silent_hosts
    if how == "flag":
        r, elapsed = run_on_silent_hosts(env, "--ssh-concurrency", "2")
    else:
        r, elapsed = run_on_silent_hosts(dict(env, HVD_SSH_CONCURRENCY="2"))
    assert r.returncode != 0
    assert "6 of 6 remote hosts failed the check; nothing was started" in r.stderr, r.stderr
    for i in range(6):
        assert f"host 'silent{i}'" in r.stderr, r.stderr
    assert r.stderr.count("no SSH greeting within the connect timeout") == 6, r.stderr
    assert hosts.accepted == 6
    assert hosts.most_open <= 2, f"{hosts.most_open} hosts were connected at once"
    # Three waves of two, each waiting out the 1 s connect timeout.
    assert elapsed >= 2.7, f"took {elapsed:.1f} s: the hosts were not checked two at a time"


def test_a_bad_ssh_concurrency_is_refused_naming_it(silent_hosts):
    hosts, env = silent_hosts
    r, _ = run_on_silent_hosts(env, "--ssh-concurrency", "0")
    assert r.returncode == 2 and "--ssh-concurrency" in r.stderr, r.stderr
    r, _ = run_on_silent_hosts(dict(env, HVD_SSH_CONCURRENCY="lots"))
    assert r.returncode != 0 and "HVD_SSH_CONCURRENCY" in r.stderr, r.stderr
    assert hosts.accepted == 0, "nothing was connected"
