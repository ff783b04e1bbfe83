"""What hvdrun's jobs learn of the hosts they run on, across real SSH hosts (network namespaces
of this machine, ssh_hosts.py): a calibration measured on the hosts' layout, which jobs of that
layout pick their allreduce algorithms from, and the ranks of other host names on one kernel,
which share its CPUs. Skips with the reason when namespaces cannot be made."""
import json
import os

import pytest

from conftest import HVDRUN
from ssh_hosts import SshHosts, unavailable_reason
from test_hvdrun_ssh import hvdrun

_reason = unavailable_reason()
pytestmark = [pytest.mark.skipif(_reason is not None, reason=f"SSH hosts: {_reason}"),
              pytest.mark.xdist_group("ssh")]


@pytest.fixture(scope="module")
def hosts():
    h = SshHosts(2).start()
    yield h
    h.close()


BENCH = HVDRUN.parent / "hvd-bench"


def test_calibrate_across_hosts_saves_a_table_that_jobs_on_one_rank_per_host_pick_from(
        hosts, tmp_path):
    # On the job's own hosts (one rank each), calibrate times each allreduce algorithm and saves
    # the table with its layout (on 2 ranks the link too). A job that reads the file picks from
    # the table of its own layout and says so; one of another layout does not take it.
    model = tmp_path / "cluster.json"
    r = hvdrun(hosts, "-np", 2, "-H", hosts.hosts(1), BENCH, "-e", "64K", "calibrate", "--save",
               model, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "the link between two hosts" in r.stdout, r.stdout
    assert "allreduce over tcp on 2 ranks, 1 per host" in r.stdout
    saved = json.loads(model.read_text())
    tables = {(t["link"], t["ranks"], t["ranks_per_host"]): t for t in saved["measured_allreduce"]}
    assert sorted(tables) == [("tcp", 2, 1)]
    assert tables["tcp", 2, 1]["bytes"][-1] == 65536
    assert sorted(tables["tcp", 2, 1]["seconds"]) == ["rabenseifner", "recursive_doubling", "ring"]
    env = hosts.env(HVD_NETWORK_MODEL=str(model), HVD_LOG_LEVEL="info")
    sweep = [BENCH, "-b", "4", "-e", "1M", "-f", "16", "-n", "3", "-c", "1"]
    r = hvdrun(hosts, "-np", 2, "-H", hosts.hosts(1), *sweep, env=env)
    assert r.returncode == 0, r.stderr
    assert "Out of bounds values : 0 OK" in r.stdout, r.stdout
    assert ("auto picks from the times hvd-bench calibrate measured over tcp on 2 ranks, 1 per "
            "host") in r.stderr, r.stderr
    r = hvdrun(hosts, "-np", 4, "-H", hosts.hosts(2), *sweep, env=env)
    assert r.returncode == 0, r.stderr
    assert ("the model's measured tables (tcp on 2 ranks, 1 per host) are for other layouts than "
            "this job's (tcp on 4 ranks, 2 per host)") in r.stderr, r.stderr
    # Uneven hosts (2 + 1) have no layout a table could match, not even one of 3 ranks, 1 per
    # host, which the layout they report for the cost model (1 per host) would otherwise take.
    a, b = hosts.addresses
    uneven = dict(tables["tcp", 2, 1], ranks=3)
    model.write_text(json.dumps(dict(saved, measured_allreduce=[uneven])))
    r = hvdrun(hosts, "-np", 3, "-H", f"{a}:2,{b}:1", *sweep, env=env)
    assert r.returncode == 0, r.stderr
    assert "Out of bounds values : 0 OK" in r.stdout, r.stdout
    assert "auto picks from the times" not in r.stderr
    # Several ranks on a host: refused (the cost model chooses there), the file left as it was.
    model.write_text(json.dumps(saved))
    for hosts_arg in (hosts.hosts(2), f"{a}:2,{b}:1"):
        r = hvdrun(hosts, "-np", 4 if hosts_arg == hosts.hosts(2) else 3, "-H", hosts_arg, BENCH,
                   "-e", "64K", "calibrate", "--save", model)
        assert r.returncode != 0
        assert "calibrate: across hosts it measures one rank per host (-H host:1,...), not up " \
            "to 2" in r.stderr, r.stderr
        assert json.loads(model.read_text()) == saved


def test_ranks_of_other_host_names_on_this_kernel_count_as_sharing_its_cpus(hosts):
    # The two hosts are namespaces of this machine: n ranks on each fit their host's n CPUs, but
    # 2n share the kernel's n, so collectives wait as on a crowded host (and rank 0 says why).
    n = os.cpu_count()
    if not 2 <= n <= 8:
        pytest.skip(f"{n} CPUs: the job would need 2 x {n} ranks")
    env = hosts.env(HVD_LOG_LEVEL="info")
    sweep = [BENCH, "-b", "4", "-e", "256K", "-f", "64", "-n", "3", "-c", "1"]
    r = hvdrun(hosts, "-np", 2 * n, "-H", hosts.hosts(n), *sweep, env=env)
    assert r.returncode == 0, r.stderr
    assert "Out of bounds values : 0 OK" in r.stdout, r.stdout
    assert (f"{2 * n} ranks share {n} CPUs of this machine (hosts of other names run on its "
            "kernel: containers or network namespaces)") in r.stderr, r.stderr
    r = hvdrun(hosts, "-np", 2, "-H", hosts.hosts(1), *sweep, env=env)
    assert r.returncode == 0, r.stderr
    assert "ranks share" not in r.stderr
