"""The job secret protects every connection and never leaks into output or command lines."""
import os
import re

from conftest import python_worker, run_hvdrun

INTRUDER = """
import os, socket
s = socket.create_connection((os.environ['HVD_RENDEZVOUS_ADDR'],
                              int(os.environ['HVD_RENDEZVOUS_PORT'])), timeout=10)
hello = s.recv(36)
s.sendall(b'\\0' * 64)   # a made-up nonce and proof
print('closed' if s.recv(1) == b'' else 'still open', flush=True)
"""


def test_a_connection_without_the_secret_is_rejected():
    r = run_hvdrun("-np", 1, "--log-level", "warn", *python_worker(INTRUDER))
    assert r.returncode == 0, r.stderr
    assert "[0]<stdout>:closed" in r.stdout
    assert "authentication failed" in r.stderr


def test_the_secret_is_in_the_worker_environment_only(tmp_path):
    code = ("import os, sys\n"
            "secret = os.environ['HVD_SECRET']\n"
            "open(os.path.join(sys.argv[1], os.environ['HVD_RANK']), 'w').write(secret)\n"
            "cmdline = open(f'/proc/{os.getppid()}/cmdline').read()\n"
            "mine = open('/proc/self/cmdline').read()\n"
            "print('secret in argv' if secret in cmdline + mine else 'argv clean')\n")
    r = run_hvdrun("-np", 2, "--verbose", *python_worker(code), tmp_path)
    assert r.returncode == 0, r.stderr
    secrets = {(tmp_path / str(rank)).read_text() for rank in range(2)}
    assert len(secrets) == 1
    secret = secrets.pop()
    assert re.fullmatch(r"[0-9a-f]{64}", secret)
    assert r.stdout.count("argv clean") == 2
    assert secret not in r.stdout and secret not in r.stderr
    assert "rendezvous at 127.0.0.1:" in r.stderr  # --verbose did print the launch details


def test_print_config_lists_parameters_without_printing_the_secret(monkeypatch):
    monkeypatch.setenv("HVD_SECRET", "do-not-print-me")
    monkeypatch.setenv("HOROVOD_START_TIMEOUT", "45")
    r = run_hvdrun("--print-config")
    assert r.returncode == 0, r.stderr
    assert "do-not-print-me" not in r.stdout + r.stderr
    assert "HVD_SECRET" in r.stdout and "now (set)" in r.stdout
    assert "HVD_START_TIMEOUT (also HOROVOD_START_TIMEOUT)" in r.stdout
    assert "default 30, range [1, 86400], now 45" in r.stdout
    monkeypatch.setenv("HVD_OP_TIMEOUT", "soon")
    r = run_hvdrun("--print-config")
    assert r.returncode == 2
    assert "HVD_OP_TIMEOUT='soon': not an integer" in r.stderr
