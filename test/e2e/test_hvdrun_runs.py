"""hvdrun starts real ranks that agree on collectives and see their placement."""
import json
import os
import re
import socket
import subprocess
import time

import pytest

from conftest import BUILD, DEMO, WORKER, python_worker, run_hvdrun


@pytest.mark.parametrize("np", [1, 2, 3, 4])
def test_allreduce_on_local_ranks(np):
    r = run_hvdrun("-np", np, "-H", f"localhost:{np}", WORKER, "allreduce", 100_000)
    assert r.returncode == 0, r.stderr
    for rank in range(np):
        assert f"[{rank}]<stdout>:rank {rank} ok" in r.stdout


def test_demo_prints_the_agreed_sum():
    r = run_hvdrun("-np", 4, "-H", "localhost:4", DEMO)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("allreduce sum = [10, 20, 30, 40]") == 4
    assert "WRONG" not in r.stdout


def test_double_dash_ends_hvdruns_options_and_later_ones_reach_the_command():
    r = run_hvdrun("-np", 2, "--", *python_worker("import sys; print(sys.argv[1:])"),
                   "-x", "--", "-np")
    assert r.returncode == 0, r.stderr
    for rank in range(2):
        assert f"[{rank}]<stdout>:['-x', '--', '-np']" in r.stdout


ENV_PRINTER = ("import os; print(' '.join(f'{k}={os.environ.get(k)}' for k in ('HVD_TRANSPORT', "
               "'HVD_LOG_LEVEL', 'HVD_LOG_HIDE_TIME', 'HVD_HIERARCHICAL_ALLREDUCE')))")


def test_a_horovodrun_command_line_runs_unchanged(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=2\n")
    r = run_hvdrun("-np", 2, "-hostfile", hostfile, "--log-level", "WARNING", "--gloo",
                   "--disable-cache", "--tcp", "--log-hide-timestamp", "--prefix-timestamp",
                   *python_worker(ENV_PRINTER))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2, r.stdout
    for line in lines:
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[[01]\]<stdout>:"
                            r"HVD_TRANSPORT=tcp HVD_LOG_LEVEL=warn HVD_LOG_HIDE_TIME=1 "
                            r"HVD_HIERARCHICAL_ALLREDUCE=None", line), line


def test_horovod_log_level_names_and_the_no_hierarchical_flag_over_a_config_file(tmp_path):
    config = tmp_path / "horovod.json"
    config.write_text('{"params": {"hierarchical_allreduce": true}}')
    env = dict(os.environ, HOROVOD_LOG_LEVEL="Fatal")
    r = run_hvdrun("-np", 1, "--config-file", config, "--no-hierarchical-allreduce",
                   *python_worker(ENV_PRINTER), env=env)
    assert r.returncode == 0, r.stderr
    assert "HVD_LOG_LEVEL=critical" in r.stdout and "HVD_HIERARCHICAL_ALLREDUCE=0" in r.stdout
    assert not re.match(r"\d{4}-", r.stdout), "no timestamps without --prefix-timestamp"
    # -cb is horovodrun's --check-build; -hostfile no longer reads as -h (the help)
    r = run_hvdrun("-cb")
    assert r.returncode == 0 and "hvd " in r.stdout and "Usage" not in r.stdout, r.stdout


def test_hvdrun_log_lines_start_with_the_time_unless_hidden():
    r = run_hvdrun("-np", 2, "--log-level", "info", *python_worker("import hvd; hvd.init()"))
    assert r.returncode == 0, r.stderr
    assert re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} hvdrun info \[launcher\]",
                     r.stderr, re.M), r.stderr
    assert re.search(r"^\[0\]<stderr>:\d{4}-\d\d-\d\d \S+ \S+ \[rank 0/2\] info", r.stderr,
                     re.M), r.stderr
    r = run_hvdrun("-np", 2, "--log-level", "info", "--log-hide-timestamp",
                   *python_worker("import hvd; hvd.init()"))
    assert r.returncode == 0, r.stderr
    assert re.search(r"^hvdrun info \[launcher\]", r.stderr, re.M), r.stderr
    assert re.search(r"^\[0\]<stderr>:\S+ \[rank 0/2\] info", r.stderr, re.M), r.stderr


@pytest.mark.parametrize("args, message", [
    (["--tcp", "--transport", "shm"], "excludes"),
    (["--log-level", "loud"], "unknown log level 'loud'"),
    (["--mpi"], "unknown option '--mpi': hvd has no MPI controller; it runs its own over TCP "
                "(what horovodrun's --gloo picks), so leave it out"),
    (["--num-nccl-streams", "2"], "unknown option '--num-nccl-streams'"),
    (["--autotune-log-file", "x"], "--autotune-log-file (HVD_AUTOTUNE_LOG=x) needs --autotune"),
    (["--autotune", "--fusion-threshold-mb", "1", "--cycle-time-ms", "0"],
     "which fixes them: leave one out"),
])
def test_conflicting_or_unknown_horovodrun_flags_are_refused(args, message):
    r = run_hvdrun("-np", 1, *args, "true")
    assert r.returncode != 0 and message in r.stderr, r.stderr


def test_broadcast_from_a_non_zero_root():
    r = run_hvdrun("-np", 3, WORKER, "broadcast", 2)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(" ok") == 3


def test_a_worker_without_a_launcher_is_a_single_rank():
    import subprocess
    env = {"PATH": "/usr/bin:/bin"}
    r = subprocess.run([str(WORKER), "allreduce", "10"], capture_output=True, text=True,
                       timeout=30, env=env)
    assert r.returncode == 0, r.stderr
    assert "rank 0 ok" in r.stdout


def test_placement_variables_with_two_hosts_on_this_machine():
    r = run_hvdrun("-np", 4, "-H", "localhost:2,127.0.0.1:2", WORKER, "env")
    assert r.returncode == 0, r.stderr
    rows = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\[(\d+)\]<stdout>:(.*)", line)
        rows[int(m.group(1))] = dict(kv.split("=", 1) for kv in m.group(2).split())
    want = {  # rank: local rank, local size, cross rank, cross size, host
        0: ("0", "2", "0", "2", "localhost"), 1: ("1", "2", "0", "2", "localhost"),
        2: ("0", "2", "1", "2", "127.0.0.1"), 3: ("1", "2", "1", "2", "127.0.0.1")}
    for rank, (lr, ls, cr, cs, host) in want.items():
        row = rows[rank]
        assert (row["HVD_RANK"], row["HVD_SIZE"]) == (str(rank), "4")
        assert (row["HVD_LOCAL_RANK"], row["HVD_LOCAL_SIZE"]) == (lr, ls)
        assert (row["HVD_CROSS_RANK"], row["HVD_CROSS_SIZE"]) == (cr, cs)
        assert row["HVD_HOSTNAME"] == host
        assert row["HOROVOD_RANK"] == str(rank)
        assert (row["RANK"], row["WORLD_SIZE"]) == (str(rank), "4")
        assert (row["LOCAL_RANK"], row["LOCAL_WORLD_SIZE"]) == (lr, ls)


def test_np_caps_ranks_below_the_listed_slots():
    r = run_hvdrun("-np", 2, "-H", "localhost:8", WORKER, "env")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 2
    assert "HVD_LOCAL_SIZE=2" in r.stdout


def test_exported_variables_reach_workers(monkeypatch):
    monkeypatch.setenv("FROM_LAUNCHER", "copied")
    code = "import os; print(os.environ['GIVEN'], os.environ['FROM_LAUNCHER'])"
    r = run_hvdrun("-np", 2, "-x", "GIVEN=value", "-x", "FROM_LAUNCHER", *python_worker(code))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("value copied") == 2


def test_version():
    r = run_hvdrun("--version")
    assert r.returncode == 0
    assert re.match(r"hvdrun \d+\.\d+\.\d+", r.stdout)


def test_start_timeout_names_the_rank_that_never_joined():
    # Rank 1 never initialises hvd; the others give up after --start-timeout and say who is missing.
    code = ("import os, subprocess, sys, time\n"
            "if os.environ['HVD_RANK'] == '1': time.sleep(30)\n"
            f"sys.exit(subprocess.call(['{WORKER}', 'allreduce', '4']))\n")
    r = run_hvdrun("-np", 3, "--start-timeout", 2, "--grace-seconds", 1, *python_worker(code))
    assert r.returncode != 0
    # Ranks 0 and 2 time out together and the first to fail stops the job; either waited for
    # rank 1's address (rank 0 gathers the address table for both) and must name rank 1.
    assert "ranks {1} to publish their addresses" in r.stderr, r.stderr
    assert "job failed" in r.stderr


def test_hostfile_places_ranks(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# two names for this machine\nlocalhost slots=2\n\n127.0.0.1 slots=1\n")
    r = run_hvdrun("-np", 3, "--hostfile", hostfile, WORKER, "env")
    assert r.returncode == 0, r.stderr
    assert "HVD_RANK=2 HVD_SIZE=3 HVD_LOCAL_RANK=0 HVD_LOCAL_SIZE=1 HVD_CROSS_RANK=1" in r.stdout


def test_hostfile_errors_name_file_and_line(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=2\nother slot=1\n")
    r = run_hvdrun("-np", 1, "--hostfile", hostfile, "true")
    assert r.returncode == 2
    assert f"{hostfile}:2: unexpected token 'slot=1'" in r.stderr
    r = run_hvdrun("-np", 1, "-H", "localhost:1", "--hostfile", hostfile, "true")
    assert "either -H or --hostfile" in r.stderr


def test_slurm_allocation_gives_hosts_and_default_np(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_NODELIST", "localhost")
    monkeypatch.setenv("SLURM_TASKS_PER_NODE", "3")
    r = run_hvdrun(WORKER, "allreduce", 1000)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(" ok") == 3
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[01-02]")
    monkeypatch.setenv("SLURM_TASKS_PER_NODE", "2(x2)")
    r = run_hvdrun("--ssh-connect-timeout", 2, "true")
    assert r.returncode == 1
    assert "2 of 2 remote hosts failed the check; nothing was started" in r.stderr
    assert "host 'node01'" in r.stderr and "host 'node02'" in r.stderr
    # Without the tasks per node it is not a usable allocation: -np is needed as usual.
    monkeypatch.delenv("SLURM_TASKS_PER_NODE")
    r = run_hvdrun(WORKER, "allreduce", 10)
    assert r.returncode == 2
    assert "-np/--num-proc is required" in r.stderr


def test_host_entries_with_user_ipv6_and_default_slots():
    import getpass
    r = run_hvdrun("-np", 3, "-H", f"[::1]:1,{getpass.getuser()}@localhost,127.0.0.1:1",
                   WORKER, "allreduce", 1000)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(" ok") == 3


def _cpu_lists(stdout, np):
    """rank -> the set of distinct CPU lists its threads have, from the worker's 'affinity' mode."""
    lists = {}
    for rank in range(np):
        m = re.search(rf"\[{rank}\]<stdout>:rank {rank} cpus (.+)", stdout)
        assert m, stdout
        lists[rank] = set(m.group(1).split())
    return lists


def _expand(cpu_list):
    cpus = set()
    for part in cpu_list.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def test_workers_bind_to_their_share_of_the_cpus_with_every_thread():
    allowed = os.sched_getaffinity(0)
    np = 2
    if len(allowed) < np:
        pytest.skip("needs at least 2 CPUs")
    env = {k: v for k, v in os.environ.items() if k != "HVD_BIND_TO"}  # the default: core
    r = run_hvdrun("-np", np, WORKER, "affinity", env=env)
    assert r.returncode == 0, r.stderr
    lists = _cpu_lists(r.stdout, np)
    # One list per process: the thread started before hvd_init and the engine's threads too.
    assert all(len(v) == 1 for v in lists.values()), lists
    shares = [_expand(next(iter(lists[rank]))) for rank in range(np)]
    assert shares[0] and shares[1] and not shares[0] & shares[1], shares
    assert shares[0] | shares[1] == allowed


@pytest.mark.parametrize("how", ["flag", "env"])
def test_binding_can_be_turned_off(how):
    allowed = os.sched_getaffinity(0)
    args = ["--bind-to", "none"] if how == "flag" else []
    env = dict(os.environ, HVD_BIND_TO="none") if how == "env" else None
    r = run_hvdrun(*args, "-np", 2, WORKER, "affinity", env=env)
    assert r.returncode == 0, r.stderr
    for cpu_lists in _cpu_lists(r.stdout, 2).values():
        assert {frozenset(_expand(c)) for c in cpu_lists} == {frozenset(allowed)}


def test_more_ranks_than_cpus_stay_unbound():
    allowed = os.sched_getaffinity(0)
    np = len(allowed) + 1
    r = run_hvdrun("-np", np, WORKER, "affinity", timeout=120)
    assert r.returncode == 0, r.stderr
    for cpu_lists in _cpu_lists(r.stdout, np).values():
        assert {frozenset(_expand(c)) for c in cpu_lists} == {frozenset(allowed)}


def test_an_unknown_binding_is_refused_before_any_worker_starts():
    r = run_hvdrun("--bind-to", "socket", "-np", 2, WORKER, "affinity")
    assert r.returncode != 0
    assert "--bind-to" in r.stderr and "socket" in r.stderr
    assert "cpus" not in r.stdout
    r = run_hvdrun("-np", 2, WORKER, "affinity", env=dict(os.environ, HVD_BIND_TO="socket"))
    assert r.returncode != 0
    assert "HVD_BIND_TO='socket': expected one of core, none" in r.stderr
    assert "cpus" not in r.stdout


@pytest.mark.parametrize("how", [("--allreduce-algorithm", "rabenseifner"),
                                 ("-x", "HVD_ALLREDUCE_ALGORITHM=recursive_doubling")])
def test_a_forced_allreduce_algorithm_agrees_on_every_rank(how):
    # 100,000 elements are above the ring threshold: the forced algorithm, not the ring, runs.
    r = run_hvdrun("-np", 3, *how, WORKER, "allreduce", 100_000)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(" ok") == 3


def test_an_unknown_allreduce_algorithm_fails_naming_the_variable():
    r = run_hvdrun("--allreduce-algorithm", "tree", "-np", 2, WORKER, "allreduce", 10)
    assert r.returncode != 0
    assert "--allreduce-algorithm" in r.stderr and "tree" in r.stderr
    want = ("HVD_ALLREDUCE_ALGORITHM='bogus': expected one of auto, ring, recursive_doubling, "
            "rabenseifner")
    r = run_hvdrun("-np", 2, WORKER, "allreduce", 10,
                   env=dict(os.environ, HVD_ALLREDUCE_ALGORITHM="bogus"))
    assert r.returncode != 0 and want in r.stderr, r.stderr
    assert " ok" not in r.stdout
    # A worker started without hvdrun fails at init the same way.
    import subprocess
    r = subprocess.run([str(WORKER), "allreduce", "10"], capture_output=True, text=True,
                       timeout=30, env={"PATH": "/usr/bin:/bin", "HVD_ALLREDUCE_ALGORITHM": "bogus"})
    assert r.returncode != 0 and want in r.stderr, r.stderr


def test_calibrate_writes_a_model_that_the_runtime_reads_and_a_bad_one_fails_init(tmp_path):
    model = tmp_path / "model.json"
    bench = BUILD / "apps" / "hvd-bench"
    r = run_hvdrun("-np", 2, bench, "calibrate", "--save", model)
    assert r.returncode == 0, r.stderr
    assert "the link within a host" in r.stdout
    fields = json.loads(model.read_text())
    assert 0 < fields["intra_host_latency_seconds"] < 0.01
    assert fields["intra_host_bytes_per_second"] > 1e8
    assert fields["reduce_bytes_per_second"] > 1e8
    # The runtime takes it, and the simulator too.
    r = run_hvdrun("-np", 2, "-x", f"HVD_NETWORK_MODEL={model}", WORKER, "allreduce", 100_000)
    assert r.returncode == 0 and r.stdout.count(" ok") == 2, r.stderr
    sim = __import__("subprocess").run([str(bench), "simulate", "8", "--model", str(model),
                                        "-b", "4", "-e", "4"], capture_output=True, text=True,
                                       timeout=60)
    assert sim.returncode == 0 and "8 ranks" in sim.stdout, sim.stderr
    # A model with an unknown field fails every rank's init, naming the file and the field.
    model.write_text('{"nic_speed": 3}')
    r = run_hvdrun("-np", 2, "-x", f"HVD_NETWORK_MODEL={model}", WORKER, "allreduce", 10)
    assert r.returncode != 0
    assert f"HVD_NETWORK_MODEL={model}: unknown field nic_speed" in r.stderr, r.stderr
    assert " ok" not in r.stdout


def test_calibrate_keeps_this_hosts_algorithm_table_where_its_jobs_read_it(tmp_path):
    # Without --save, calibrate within a host writes this host's model, with each algorithm's
    # measured times over the job's link; jobs within the host read it when HVD_NETWORK_MODEL is
    # unset, and a broken one fails their init naming the file and what to do.
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    bench = BUILD / "apps" / "hvd-bench"
    r = run_hvdrun("-np", 2, "--transport", "tcp", bench, "calibrate", env=env)
    assert r.returncode == 0, r.stderr
    saved = tmp_path / "hvd" / f"network_model-{socket.gethostname()}.json"
    assert f"saved to {saved}" in r.stdout, r.stdout
    assert "allreduce over tcp on 2 ranks" in r.stdout
    tables = json.loads(saved.read_text())["measured_allreduce"]
    assert [(t["link"], t["ranks"]) for t in tables] == [("tcp", 2)]
    assert sorted(tables[0]["seconds"]) == ["rabenseifner", "recursive_doubling", "ring"]
    assert tables[0]["bytes"][0] == 4 and tables[0]["bytes"][-1] == 16 << 20
    # One rank has no link to measure: refused, the host's file left as it was.
    before = saved.read_text()
    r = run_hvdrun("-np", 1, bench, "calibrate", env=env)
    assert r.returncode != 0
    assert "calibrate: within a host it measures 2 ranks (their table serves 2-rank jobs), " \
        "not 1: run it with -np 2" in r.stderr, r.stderr
    assert saved.read_text() == before
    # Calibrating the other link keeps this one's table.
    r = run_hvdrun("-np", 2, "--transport", "shm", bench, "calibrate", env=env)
    assert r.returncode == 0, r.stderr
    tables = json.loads(saved.read_text())["measured_allreduce"]
    assert sorted((t["link"], t["ranks"]) for t in tables) == [("shm", 2), ("tcp", 2)]
    r = run_hvdrun("-np", 2, WORKER, "allreduce", 300_000, env=env)
    assert r.returncode == 0 and r.stdout.count(" ok") == 2, r.stderr
    saved.write_text('{"measured_allreduce": [{"link": "shm", "ranks": 2, "bytes": [1], '
                     '"seconds": {"fastest": [1]}}]}')
    r = run_hvdrun("-np", 2, WORKER, "allreduce", 10, env=env)
    assert r.returncode != 0
    assert f"this host's calibration {saved}" in r.stderr, r.stderr
    assert "unknown allreduce algorithm 'fastest'" in r.stderr
    assert "run hvd-bench calibrate again, or remove the file" in r.stderr
    # Which mends it: calibrate replaces a model it cannot read.
    r = run_hvdrun("-np", 2, bench, "calibrate", env=env)
    assert r.returncode == 0, r.stderr
    assert "replacing a model it cannot read" in r.stderr
    r = run_hvdrun("-np", 2, WORKER, "allreduce", 10, env=env)
    assert r.returncode == 0 and r.stdout.count(" ok") == 2, r.stderr


# Fills and frees a 64 MiB block twice and prints the page faults of the second pass. The block
# is above glibc's largest self-adjusted mmap threshold (32 MiB on 64-bit), so by default each
# pass maps it afresh and the kernel faults in every page again (at least 32 faults even with
# transparent huge pages); kept in the heap, the second pass finds its pages already there.
REFAULTS = """
import resource, numpy as np, hvd.numpy as hvd
hvd.init()
def fill_and_free():
    block = np.ones(64 << 20, dtype=np.uint8)
    del block
fill_and_free()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
fill_and_free()
print('refaults', resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
hvd.shutdown()
"""


def _refaults(result, np):
    counts = [int(m) for m in re.findall(r"<stdout>:refaults (\d+)", result.stdout)]
    assert len(counts) == np, result.stdout
    return counts


def test_malloc_retention_keeps_freed_blocks_from_being_faulted_in_again(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    default = _refaults(run_hvdrun("-np", 2, *python_worker(REFAULTS), env=env), 2)
    assert all(n >= 32 for n in default), default
    r = run_hvdrun("-np", 2, "--malloc-retain-mb", 256, *python_worker(REFAULTS), env=env)
    assert r.returncode == 0, r.stderr
    assert all(n < 8 for n in _refaults(r, 2)), r.stdout
    # The same through the environment and through the config file.
    r = run_hvdrun("-np", 1, *python_worker(REFAULTS), env=dict(env, HVD_MALLOC_RETAIN_MB="256"))
    assert all(n < 8 for n in _refaults(r, 1)), r.stdout
    config = tmp_path / "hvd.json"
    config.write_text('{"params": {"malloc_retain_mb": 256}}')
    r = run_hvdrun("-np", 1, "--config-file", config, *python_worker(REFAULTS), env=env)
    assert all(n < 8 for n in _refaults(r, 1)), r.stdout


def test_a_malloc_retention_glibc_cannot_take_is_refused_before_any_worker_starts():
    r = run_hvdrun("-np", 2, "--malloc-retain-mb", 4096, *python_worker("print('started')"))
    assert r.returncode == 2 and "HVD_MALLOC_RETAIN_MB" in r.stderr and "4096" in r.stderr
    assert "started" not in r.stdout


OVERLAP = """
import hvd
from hvd import _core  # the runtime's value, which hvd.torch's DistributedOptimizer reads
hvd.init()
print('overlap', _core.gradient_overlap())
hvd.shutdown()
"""


def _overlaps(result, np):
    assert result.returncode == 0, result.stderr
    found = re.findall(r"<stdout>:overlap (\w+)", result.stdout)
    assert len(found) == np, result.stdout
    return set(found)


def test_gradient_overlap_comes_from_the_flag_the_environment_or_the_config_file(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HVD_GRADIENT_OVERLAP"}
    assert _overlaps(run_hvdrun("-np", 2, *python_worker(OVERLAP), env=env), 2) == {"auto"}
    r = run_hvdrun("-np", 2, "--gradient-overlap", "on", *python_worker(OVERLAP), env=env)
    assert _overlaps(r, 2) == {"on"}
    r = run_hvdrun("-np", 1, *python_worker(OVERLAP), env=dict(env, HVD_GRADIENT_OVERLAP="off"))
    assert _overlaps(r, 1) == {"off"}
    config = tmp_path / "hvd.json"
    config.write_text('{"params": {"gradient_overlap": "on"}}')
    r = run_hvdrun("-np", 1, "--config-file", config, *python_worker(OVERLAP), env=env)
    assert _overlaps(r, 1) == {"on"}
    r = run_hvdrun("-np", 2, "--gradient-overlap", "sometimes", *python_worker(OVERLAP), env=env)
    assert r.returncode != 0 and "--gradient-overlap" in r.stderr and "sometimes" in r.stderr
    r = run_hvdrun("-np", 1, *python_worker(OVERLAP),
                   env=dict(env, HVD_GRADIENT_OVERLAP="sometimes"))
    assert r.returncode != 0 and "HVD_GRADIENT_OVERLAP='sometimes'" in r.stderr
    assert "overlap" not in r.stdout


CROWDED = "of this host: collectives poll only"


@pytest.mark.parametrize("crowded", [True, False])
def test_direct_collectives_poll_like_the_engines_where_ranks_outnumber_the_cpus(
        tmp_path, crowded):
    """hvdrun started on one CPU (taskset's way): its 2 ranks share it, so hvd-bench's
    collectives poll only for small messages, briefly, and rank 0 says so; on 2 CPUs each rank
    is bound to one of its own and polls as MPI's blocking calls do."""
    allowed = sorted(os.sched_getaffinity(0))
    if not crowded and len(allowed) < 2:
        pytest.skip("needs 2 CPUs")
    cpus = {allowed[0]} if crowded else set(allowed)
    bench = BUILD / "apps" / "hvd-bench"
    report = tmp_path / "rows.json"
    r = run_hvdrun("-np", 2, "--log-level", "info", bench, "-b", "4", "-e", "1M", "-f", "64",
                   "-w", "1", "-n", "2", "--placement", "out", "--json", report,
                   preexec_fn=lambda: os.sched_setaffinity(0, cpus), timeout=120)
    assert r.returncode == 0, r.stderr
    rows = json.loads(report.read_text())["rows"]
    assert [row["size"] for row in rows] == [4, 256, 16384, 1 << 20]
    assert all(row["out_of_place"]["wrong"] == 0 for row in rows), rows
    said = [line for line in r.stderr.splitlines() if CROWDED in line]
    if crowded:
        assert len(said) == 1 and "[rank 0/2]" in said[0], r.stderr[-2000:]
        assert ("2 ranks share 1 CPU of this host: collectives poll only for messages of at "
                "most 64 KiB, for 30 us (HVD_SPIN_MICROSECONDS), and sleep at once on larger "
                "ones") in said[0]
    else:
        assert not said, said


def test_hvd_bench_times_only_the_placement_asked_for(tmp_path):
    bench = BUILD / "apps" / "hvd-bench"
    report = tmp_path / "rows.json"
    r = run_hvdrun("-np", 2, bench, "-b", "4", "-e", "64", "-f", "4", "-w", "1", "-n", "2",
                   "--placement", "out", "--json", report)
    assert r.returncode == 0, r.stderr
    rows = json.loads(report.read_text())["rows"]
    assert [row["size"] for row in rows] == [4, 16, 64]
    assert all(row["out_of_place"]["wrong"] == 0 and row["in_place"] is None for row in rows)
    r = run_hvdrun("-np", 1, bench, "--placement", "sideways")
    assert r.returncode != 0
    assert "--placement 'sideways': use both, out (out of place) or in (in place)" in r.stderr


def test_hvd_bench_startup_first_stamps_every_rank_then_sweeps(tmp_path):
    """One launch gives bench/fake_hosts.py both figures: every rank's initialisation stamp
    (taken past a barrier, within the run) and then the sweep, on new collectives."""
    bench = BUILD / "apps" / "hvd-bench"
    report = tmp_path / "rows.json"
    start = time.time_ns()
    r = run_hvdrun("-np", 3, bench, "--startup-first", "-b", "4", "-e", "64", "-f", "4", "-w",
                   "1", "-n", "2", "--placement", "out", "--json", report)
    end = time.time_ns()
    assert r.returncode == 0, r.stderr
    stamps = [int(x) for x in re.findall(r"HVD_INITIALISED (\d+)", r.stdout)]
    assert len(stamps) == 3, r.stdout
    assert all(start < s < end for s in stamps)
    rows = json.loads(report.read_text())["rows"]
    assert [row["size"] for row in rows] == [4, 16, 64]
    assert all(row["out_of_place"]["wrong"] == 0 for row in rows)
    r = subprocess.run([bench, "--startup-first", "simulate", "4"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2
    assert "--startup-first goes before a sweep" in r.stderr and "not with simulate" in r.stderr
