"""hvdrun --launch-agent (launcher/launch_agent.h): every worker starts as `AGENT HOST COMMAND`
on hvdrun's machine. The agent here starts the command in HOST's network namespace with only the
variables HVD_LAUNCH_AGENT_ENV names, as a cluster scheduler would start it on its node; the
elastic path runs in test_ray.py, with Ray actors behind the agent."""
import sys
import time

import pytest

from conftest import BUILD, run_hvdrun
from ssh_hosts import SshHosts, unavailable_reason

pytestmark = pytest.mark.skipif(unavailable_reason() is not None,
                                reason=f"network namespaces: {unavailable_reason()}")

AGENT = """#!{python}
import os, sys
host, argv = sys.argv[1], sys.argv[2:]
namespaces = {namespaces!r}
with open({log!r}, "a") as f:
    f.write(repr((host, argv, sorted(os.environ["HVD_LAUNCH_AGENT_ENV"].split(",")))) + "\\n")
if host == {refused!r}:
    sys.exit("agent: no node " + host + " in this cluster")
env = {{n: os.environ[n] for n in os.environ["HVD_LAUNCH_AGENT_ENV"].split(",") if n}}
os.execvpe("ip", ["ip", "netns", "exec", namespaces[host], *argv], env)
"""

WORKER = ("import hvd.numpy as h, numpy as np, os; h.init(); "
          "print('rank', h.rank(), 'on', os.environ['HVD_HOSTNAME'], 'sum', "
          "h.allreduce(np.array([h.rank() + 1.0]), op=h.Sum)[0], "
          "'home' if 'HOME' in os.environ else 'no-home', flush=True)")


@pytest.fixture(scope="module")
def hosts():
    h = SshHosts(2).start()
    yield h
    h.close()


def agent(tmp_path, hosts, refused=""):
    log = tmp_path / "agent.log"
    path = tmp_path / "agent"
    path.write_text(AGENT.format(python=sys.executable, log=str(log), refused=refused,
                                 namespaces=dict(zip(hosts.addresses, hosts.namespaces))))
    path.chmod(0o755)
    return path, log


def test_every_worker_starts_through_the_agent_on_its_host(hosts, tmp_path):
    path, log = agent(tmp_path, hosts)
    r = run_hvdrun("-np", "2", "-H", hosts.hosts(1), "--launch-agent", path,
                   sys.executable, "-c", WORKER, env={**hosts.env(),
                                                     "PYTHONPATH": str(BUILD / "python")})
    assert r.returncode == 0, r.stderr[-3000:]
    a0, a1 = hosts.addresses
    assert f"[0]<stdout>:rank 0 on {a0} sum 3.0 no-home" in r.stdout
    assert f"[1]<stdout>:rank 1 on {a1} sum 3.0 no-home" in r.stdout
    calls = [eval(line) for line in log.read_text().splitlines()]  # noqa: S307  (our own repr)
    assert sorted(c[0] for c in calls) == [a0, a1]
    for _, argv, names in calls:
        assert argv[:2] == [sys.executable, "-c"]  # the command as given, nothing added
        assert {"HVD_RANK", "HVD_SECRET", "HVD_RENDEZVOUS_ADDR", "PYTHONPATH"} <= set(names)
        assert "HOME" not in names  # the host's own, as over SSH


def test_a_worker_the_agent_cannot_start_fails_the_job_naming_rank_and_host(hosts, tmp_path):
    a1 = hosts.addresses[1]
    path, _ = agent(tmp_path, hosts, refused=a1)
    start = time.monotonic()
    r = run_hvdrun("-np", "2", "-H", hosts.hosts(1), "--launch-agent", path,
                   sys.executable, "-c", WORKER, env={**hosts.env(),
                                                     "PYTHONPATH": str(BUILD / "python")})
    assert r.returncode != 0
    assert time.monotonic() - start < 20
    assert f"rank 1 on host {a1}" in r.stderr, r.stderr[-3000:]
    assert f"agent: no node {a1} in this cluster" in r.stderr


def test_an_agent_that_is_not_there_refuses_the_job():
    r = run_hvdrun("-np", "1", "--launch-agent", "/nonexistent/agent", "true")
    assert r.returncode == 2
    assert "--launch-agent: /nonexistent/agent: not found" in r.stderr
