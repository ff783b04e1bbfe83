"""Strangers on the network cost nothing: silent connections to a worker's port or to the
rendezvous during start-up delay no one, and a rendezvous out of file descriptors pauses with a
log line instead of spinning, then serves the job once descriptors are free."""
import os
import re
import resource
import socket
import subprocess
import sys
import threading
import time

from conftest import HVDRUN

WORKER = """
import os, sys, time
import numpy as np
gate = sys.argv[1]
if os.environ["HVD_RANK"] not in sys.argv[2].split(","):
    deadline = time.monotonic() + 60
    while not os.path.exists(gate):
        if time.monotonic() > deadline:
            sys.exit("the test never opened the gate")
        time.sleep(0.05)
import hvd, hvd.numpy as hn
hvd.init()
print("mean", hn.allreduce(np.ones(4, np.float32), name="x")[0], flush=True)
"""


class Job:
    """hvdrun in the background, its stderr collected line by line as it comes."""

    def __init__(self, *args, preexec_fn=None):
        self.proc = subprocess.Popen([str(HVDRUN), *map(str, args)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, preexec_fn=preexec_fn)
        self.lines, self.out = [], []
        self.cond = threading.Condition()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.lines), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True).start()

    def _read(self, stream, into):
        for line in stream:
            with self.cond:
                into.append(line)
                self.cond.notify_all()

    def wait_for(self, pattern, timeout=30):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines:
                    if m := re.search(pattern, line):
                        return m
                left = deadline - time.monotonic()
                assert left > 0 and self.proc.poll() is None, \
                    f"no line matching {pattern!r}:\n" + "".join(self.lines[-30:])
                self.cond.wait(min(left, 0.5))

    def finish(self, timeout):
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        time.sleep(0.2)  # the readers drain the pipes
        return self.proc.returncode, "".join(self.out), "".join(self.lines)


def silent(host, port, n):
    return [socket.create_connection((host, int(port)), timeout=5) for _ in range(n)]


def test_silent_connections_to_a_worker_and_the_rendezvous_delay_no_one(tmp_path):
    gate = tmp_path / "gate"
    job = Job("-np", 3, "--transport", "tcp", "--log-level", "info", sys.executable, "-c",
              WORKER, gate, "0")
    try:
        rdzv = job.wait_for(r"rendezvous at ([\d.]+):(\d+)")
        strangers = silent(rdzv[1], rdzv[2], 200)
        # Rank 0 runs init alone and waits for ranks 1 and 2 on its port.
        port = job.wait_for(r"rank 0/3: listening on ([\d.]+):(\d+)")
        strangers += silent(port[1], port[2], 3)
        time.sleep(0.5)  # rank 0 has accepted them and waits for their handshakes
        opened = time.monotonic()
        gate.touch()
        code, out, err = job.finish(timeout=60)
        took = time.monotonic() - opened
    finally:
        if job.proc.poll() is None:
            job.proc.kill()
    assert code == 0, err[-3000:]
    assert out.count("mean 1.0") == 3, out
    # One at a time with a 10 s deadline each, three silent peers held rank 0 for 30 s and the
    # job failed at its 30 s start timeout; side by side they delay nothing.
    assert took < 10, took
    # The rendezvous held at most 128 of them unauthenticated, evicting the oldest, and logged
    # the first few with their addresses.
    assert re.search(r"rendezvous: dropped the connection from 127\.0\.0\.1:\d+: evicted: 128 "
                     r"connections were waiting", err), err[-3000:]
    assert "HVD_SECRET" not in err  # nobody's secret was blamed
    for s in strangers:
        s.close()


def test_a_rendezvous_out_of_descriptors_pauses_with_a_log_line_then_serves_the_job(tmp_path):
    gate = tmp_path / "gate"

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))

    job = Job("-np", 2, "--log-level", "info", sys.executable, "-c", WORKER, gate, "",
              preexec_fn=limit)
    try:
        rdzv = job.wait_for(r"rendezvous at ([\d.]+):(\d+)")
        strangers = silent(rdzv[1], rdzv[2], 160)  # more than hvdrun's 128 descriptors
        job.wait_for(r"rendezvous: out of file descriptors \(.*; ulimit -n is 128\)")
        # No spinning on the ready listener while it waits: a second of hvdrun's CPU time.
        def cpu():
            with open(f"/proc/{job.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        before = cpu()
        time.sleep(1.0)
        assert cpu() - before < 0.2
        # The workers start while the strangers still hold their descriptors; each stranger is
        # dropped at its handshake deadline, and the workers get in once descriptors are free.
        gate.touch()
        code, out, err = job.finish(timeout=90)
    finally:
        if job.proc.poll() is None:
            job.proc.kill()
    assert code == 0, err[-3000:]
    assert out.count("mean 1.0") == 2, out
    assert "rendezvous: file descriptors are free again" in err
    for s in strangers:
        s.close()
