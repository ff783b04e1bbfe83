"""A failure anywhere stops the whole job quickly, names the rank, and leaves no process."""
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import random

import pytest

from conftest import (BUILD, HVDRUN, WORKER, hvd_segments, process_gone, python_worker,
                      run_hvdrun)

# Each rank records its pid and its child's pid, then waits: the child proves that the whole
# process group is ended, not just the worker itself.
PID_WRITER = """
import os, subprocess, sys, time
child = subprocess.Popen(['sleep', '120'])
with open(os.path.join(sys.argv[1], os.environ['HVD_RANK']), 'w') as f:
    f.write(f'{os.getpid()} {child.pid}')
print('ready', flush=True)
time.sleep(120)
"""


def read_pids(directory, ranks, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        files = [directory / str(r) for r in range(ranks)]
        if all(f.exists() and f.read_text() for f in files):
            return [int(p) for f in files for p in f.read_text().split()]
        time.sleep(0.05)
    raise AssertionError(f"workers did not start within {timeout}s")


def wait_all_gone(pids, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if all(process_gone(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def test_a_failing_rank_ends_the_job_with_its_code():
    script = ('if [ "$HVD_RANK" = 1 ]; then echo "bad input on rank 1" >&2; exit 3; fi; '
              'exec sleep 60')
    start = time.time()
    r = run_hvdrun("-np", 4, "sh", "-c", script)
    assert r.returncode == 3
    assert time.time() - start < 8, "the other ranks were not stopped promptly"
    assert "job failed: rank 1 on host localhost (pid " in r.stderr
    assert "exited with code 3" in r.stderr
    assert "last stderr lines of rank 1" in r.stderr
    assert "    bad input on rank 1" in r.stderr
    assert r.stderr.count("job failed") == 1


def test_a_rank_killed_by_a_signal_is_named():
    script = 'if [ "$HVD_RANK" = 0 ]; then kill -SEGV $$; fi; exec sleep 60'
    r = run_hvdrun("-np", 2, "sh", "-c", script)
    assert r.returncode == 128 + signal.SIGSEGV
    assert "rank 0" in r.stderr and "SIGSEGV" in r.stderr
    assert "wrote nothing to stderr" in r.stderr


def test_sigkill_of_a_rank_mentions_the_oom_killer():
    r = run_hvdrun("-np", 2, "sh", "-c", 'if [ "$HVD_RANK" = 1 ]; then kill -9 $$; fi; sleep 60')
    assert r.returncode == 137
    assert "SIGKILL" in r.stderr and "out-of-memory" in r.stderr


def test_ranks_that_ignore_sigterm_are_killed_after_the_grace_period():
    script = ('if [ "$HVD_RANK" = 0 ]; then exit 5; fi; trap "" TERM; '
              'while true; do sleep 0.1; done')
    start = time.time()
    r = run_hvdrun("-np", 3, "--grace-seconds", 1, "sh", "-c", script)
    assert r.returncode == 5
    assert time.time() - start < 8


def test_sigkill_of_hvdrun_leaves_no_worker_behind(tmp_path):
    proc = subprocess.Popen([str(HVDRUN), "-np", "3", "--grace-seconds", "2",
                             *python_worker(PID_WRITER), str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        pids = read_pids(tmp_path, 3)
        proc.kill()
        proc.wait(timeout=10)
        assert wait_all_gone(pids, timeout=10), [p for p in pids if not process_gone(p)]
    finally:
        if proc.poll() is None:
            proc.kill()


SHM_LOOP = """
import os, random, time
if os.environ["HVD_RANK"] == "1":
    time.sleep(random.uniform(0, 1))  # a rank that starts late: rank 0 waits with its segment
import hvd, hvd.numpy as hn, numpy as np
hvd.init()
for i in range(1000):
    hn.allreduce(np.ones(1 << 16, np.float32), name=f"x{i % 4}")
"""


def descendants(pid):
    """The children of pid (every thread's), read from /proc."""
    out = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out.update(int(c) for c in f.read().split())
    except FileNotFoundError:
        pass
    return out


def test_sigkill_of_hvdrun_at_random_moments_leaves_no_shared_memory_behind():
    # 20 jobs whose ranks set up and use shared memory; each hvdrun is SIGKILLed at a random
    # moment of its start-up or run. Its orphan guardian stops the workers and removes what they
    # left in /dev/shm; before, 3 runs in 4 left a segment. Only these jobs' segments count (so
    # the test runs beside others): hvdrun logs its job id at info level before any rank starts,
    # and a job's segments are named hvd-<job id>-...
    rng = random.Random(int(time.time()))
    moments, prefixes = [], []
    for _ in range(20):
        proc = subprocess.Popen([str(HVDRUN), "-np", "2", "--transport", "shm", "--log-level",
                                 "info", "--grace-seconds", "2", *python_worker(SHM_LOOP)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        moment = rng.uniform(0.0, 2.0)
        moments.append(round(moment, 2))
        time.sleep(moment)
        children = descendants(proc.pid)  # the guardian and the workers started so far
        proc.kill()
        # The guardian holds hvdrun's stderr until it has cleaned up.
        _, err = proc.communicate(timeout=30)
        m = re.search(r"\[launcher\] job ([0-9a-f]+): ", err)
        if m:
            prefixes.append(f"hvd-{m.group(1)}-")
        assert wait_all_gone(children, timeout=20), moments
    assert prefixes, "no job lived long enough to log its id"
    left = {n for n in hvd_segments() if n.startswith(tuple(prefixes))}
    assert not left, f"left {sorted(left)} after kills at {moments} s"


def test_first_ctrl_c_stops_the_job_in_order(tmp_path):
    proc = subprocess.Popen([str(HVDRUN), "-np", "2", *python_worker(PID_WRITER), str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = read_pids(tmp_path, 2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert "interrupted by SIGINT" in err
    assert wait_all_gone(pids, timeout=5)


def test_second_ctrl_c_kills_at_once(tmp_path):
    stubborn = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + PID_WRITER
    proc = subprocess.Popen([str(HVDRUN), "-np", "2", "--grace-seconds", "60",
                             *python_worker(stubborn), str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = read_pids(tmp_path, 2)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.3)
    start = time.time()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert time.time() - start < 5
    assert proc.returncode == 130
    assert "second interrupt" in err
    assert wait_all_gone(pids, timeout=5)


@pytest.mark.parametrize("args, message", [
    (["-H", "a:0"], "out of range"),
    (["-H", "a:two"], "not an integer"),
    (["-H", "a:1:2"], "more than one ':'"),
    (["-H", "localhost:1,,localhost:1"], "entry 2 is empty"),
    (["-np", "5", "-H", "localhost:2,127.0.0.1:2"], "-np 5 is more than the 4 slots of the hosts (localhost:2,127.0.0.1:2)"),
    (["-np", "0"], "--num-proc: must be at least 1, got 0"),
    (["-np", "-1"], "--num-proc: must be at least 1, got -1"),
    (["-H", ""], "--hosts: the host list is empty"),
    (["-H", ","], "--hosts: the host list is empty"),
    (["-np", "2", "-H", "localhost:1", "127.0.0.1:1"], "looks like a host spec"),
    (["-np", "2", "-H", "localhost:2"], "no command"),
    (["-np", "1", "no-such-program-hvd"], "no-such-program-hvd: command not found"),
    (["-np", "1", "-x", "1BAD=x"], "not a valid variable name"),
    (["-np", "1", "-x", "HVD_RANK=5"], "-x HVD_RANK=5: hvdrun sets HVD_RANK for each rank"),
])
def test_bad_input_is_refused_before_anything_starts(tmp_path, args, message):
    marker = tmp_path / "started"
    cmd = [] if "no command" in message or "command not found" in message or \
        "host spec" in message else ["sh", "-c", f"touch {marker}"]
    if "host spec" in message:
        cmd = ["sh", "-c", f"touch {marker}"]
    if "-np" not in args:
        args = ["-np", "1", *args]
    r = run_hvdrun(*args, *cmd)
    assert r.returncode != 0
    assert message in r.stderr
    assert not marker.exists()


def test_a_directory_as_program_or_hostfile_and_slots_given_twice_are_named(tmp_path):
    r = run_hvdrun("-np", 1, tmp_path)
    assert r.returncode != 0 and f"{tmp_path}: is a directory, not a program" in r.stderr
    r = run_hvdrun("-np", 1, "--hostfile", tmp_path, "true")
    assert r.returncode != 0 and f"--hostfile {tmp_path}: is a directory, not a hostfile" in r.stderr
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=2 slots=3\n")
    r = run_hvdrun("-np", 1, "--hostfile", hostfile, "true")
    assert r.returncode != 0
    assert f"{hostfile}:1: 'slots=3': slots given twice for host 'localhost'" in r.stderr


def test_a_program_that_cannot_be_executed_says_why(tmp_path):
    script = tmp_path / "no_interpreter"
    script.write_bytes(b"\x00\x01 not a program")
    script.chmod(0o755)
    r = run_hvdrun("-np", 1, script)
    assert r.returncode != 0
    assert f"hvdrun: cannot run {script}: Exec format error" in r.stderr


def test_missing_np_is_refused():
    r = run_hvdrun("sh", "-c", "true")
    assert r.returncode != 0
    assert "-np/--num-proc is required" in r.stderr


def test_a_horovod_script_without_horovod_compat_is_told_about_the_flag():
    script = "import horovod.torch as hvd\nhvd.init()\n"
    env = {k: v for k, v in os.environ.items() if k != "HVD_HOROVOD_COMPAT"}
    r = run_hvdrun("-np", 2, *python_worker(script), env=env)
    assert r.returncode == 1
    assert "No module named 'horovod'" in r.stderr
    assert "hvdrun: hint: the script imports horovod" in r.stderr and "--horovod-compat" in r.stderr
    r = run_hvdrun("-np", 2, "--horovod-compat", *python_worker(script), env=env)
    assert r.returncode == 0, r.stderr[-2000:]


# A rank that dies inside a collective while something between hvdrun and it hides the death
# (a job script that reports the program's status and exits 0): hvdrun sees a clean exit, so
# the other ranks must notice by themselves, and name it.
WRAPPER = ["sh", "-c", '"$@"; exit 0', "wrapper"]
DIE_WORKER = pathlib.Path(__file__).with_name("die_in_collective_worker.py")


def dying_cases():
    """Every signal over every transport for the C++ and NumPy workers; the frameworks only
    change how the survivors' error reaches them (the same for every transport and signal), so
    each runs once, on a transport and a signal of its own (each of their runs starts the
    framework on 3 ranks)."""
    sigs = {"SIGABRT": signal.SIGABRT, "SIGKILL": signal.SIGKILL}
    cases = [(w, s, t) for w in ("c++", "numpy") for s in sigs for t in ("shm", "tcp")]
    cases += [("torch", "SIGKILL", "shm"), ("tensorflow", "SIGABRT", "tcp")]
    return [pytest.param(w, sigs[s], t, id=f"{w}-{s}-{t}") for w, s, t in cases]


@pytest.mark.parametrize("worker, sig, transport", dying_cases())
def test_a_rank_dying_inside_a_collective_behind_a_wrapper_is_noticed_and_named(worker, sig,
                                                                               transport):
    if worker == "c++":
        program = [str(WORKER), "die", str(int(sig))]
    else:
        program = [sys.executable, str(DIE_WORKER), worker, str(int(sig))]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    # Every rank's wrapper exits 0, so hvdrun's status says nothing: the ranks' lines do.
    r = run_hvdrun("-np", 3, "--transport", transport, *WRAPPER, *program, env=env, timeout=90)
    for rank in (0, 2):
        m = re.search(rf"^\[{rank}\]<stdout>:rank {rank} failed after ([\d.]+) s: (.*)$",
                      r.stdout, re.M)
        assert m, r.stdout[-3000:] + r.stderr[-3000:]
        took, error = float(m.group(1)), m.group(2)
        assert took < 10, error
        assert "rank 1" in error and "allreduce" in error, error  # the dead rank, the operation


def mismatch_worker(setup, on_rank_0, on_the_others):
    """Rank 0 calls one thing and the others another; each prints "rank R failed after S s:
    ERROR" when its call fails, then all allreduce once more, which prints "sum N"."""
    return f"""
import time, hvd, hvd.numpy as hn, numpy as np
hvd.init()
{setup}
start = time.monotonic()
try:
    if hvd.rank() == 0:
        {on_rank_0}
    else:
        {on_the_others}
except hvd.HorovodInternalError as e:
    print(f"rank {{hvd.rank()}} failed after {{time.monotonic() - start:.2f}} s: {{e}}", flush=True)
# An error every rank agrees on leaves the job able to go on.
print("sum", hn.allreduce(np.array([1.0]), op=hvd.Sum, name="after")[0], flush=True)
"""


def assert_every_rank_failed_at_once_and_went_on(r, np, *saying):
    assert r.returncode == 0, r.stderr[-2000:]
    for rank in range(np):
        m = re.search(rf"^\[{rank}\]<stdout>:rank {rank} failed after ([\d.]+) s: (.*)$",
                      r.stdout, re.M)
        assert m, r.stdout
        assert float(m.group(1)) < 5
        for text in saying:
            assert text in m.group(2), m.group(2)
    assert r.stdout.count(f"<stdout>:sum {float(np)}") == np


def test_barrier_against_remove_process_set_fails_at_once_on_both_ranks_naming_both():
    worker = mismatch_worker("ps = hvd.add_process_set([0])", "hvd.remove_process_set(ps)",
                             "hn.barrier()")
    r = run_hvdrun("-np", 2, *python_worker(worker), timeout=60)
    assert_every_rank_failed_at_once_and_went_on(
        r, 2, 'ranks {1} wait in barrier "barrier.noname.0"', "ranks {0} wait in remove_process_set")


def test_allreduce_against_allgather_under_one_name_fails_at_once_on_every_rank_naming_both():
    worker = mismatch_worker("", 'hn.allreduce(np.ones(4, np.float32), name="grad.w")',
                             'hn.allgather(np.ones(4, np.float32), name="grad.w")')
    r = run_hvdrun("-np", 3, *python_worker(worker), timeout=60)
    assert_every_rank_failed_at_once_and_went_on(
        r, 3, "operation mismatch: rank {0} allreduce, ranks {1,2} allgather")


SLOW_TO_EXIT_ON_INIT_ERROR = """
import time, hvd
try:
    hvd.init()
except Exception:
    time.sleep(1)  # a framework's teardown: rank 1, whose link broke, exits first
    raise
"""


@pytest.mark.parametrize("timeline", ["/nonexistent/dir/timeline.json", "/dev/full"])
@pytest.mark.parametrize("rank_0_exits", ["at once", "last"])
def test_a_late_init_failure_of_rank_0_is_the_headline_not_the_peer_whose_link_broke(
        timeline, rank_0_exits):
    # Rank 0 fails while its engine starts (it writes the timeline); rank 1, already running,
    # sees the link to it break. Five runs where the race goes either way, one where rank 1
    # surely exits first.
    code = "import hvd; hvd.init()" if rank_0_exits == "at once" else SLOW_TO_EXIT_ON_INIT_ERROR
    for run in range(5 if rank_0_exits == "at once" else 1):
        r = run_hvdrun("-np", 2, "--timeline-filename", timeline, *python_worker(code),
                       timeout=60)
        assert r.returncode == 1, r.stderr[-3000:]
        headline = r.stderr[r.stderr.index("hvdrun: job failed: "):]
        assert headline.startswith("hvdrun: job failed: rank 0 on host "), (run, headline)
        first_line, rest = headline.split("\n", 1)
        assert "exited with code 1" in first_line, (run, headline)
        assert "timeline: cannot " in rest.split("hvdrun: rank 1 ")[0], (run, headline)
        # Rank 1, if it failed before it was stopped, is named as failing because of rank 0.
        peer_lines = [line for line in rest.splitlines() if line.startswith("hvdrun: rank 1 ")]
        if rank_0_exits == "last":
            assert peer_lines, headline
        for line in peer_lines:
            assert line.startswith("hvdrun: rank 1 failed because of a peer: "), line
            assert "rank 0" in line, line


JOIN_WITHOUT_A_PEER = """
import os, time, hvd, hvd.numpy as hn, numpy as np
hvd.init()
if hvd.rank() == 0:
    start = time.monotonic()
    try:
        hn.join()
    except hvd.HorovodInternalError as e:
        print(f"rank 0 failed after {time.monotonic() - start:.2f} s: {e}", flush=True)
else:
    for b in range(5):
        hn.allreduce(np.ones(3), name=f"batch.{b}")
    if os.environ["LEAVE"] == "crash":
        os._exit(3)
"""


@pytest.mark.parametrize("leave", ["exit", "crash"])
def test_join_fails_at_once_on_every_rank_when_a_peer_leaves_without_joining(leave):
    started = time.monotonic()
    r = run_hvdrun("-np", 2, "-x", f"LEAVE={leave}", *python_worker(JOIN_WITHOUT_A_PEER),
                   timeout=60)
    took = time.monotonic() - started
    assert r.returncode != 0, r.stdout + r.stderr
    # The job ends on rank 1's failure: a program that finished without joining while its
    # peer waited in join is one; a crash is one anyway (hvdrun may stop rank 0 before its join
    # has failed: the crash ends the job).
    assert "hvdrun: job failed: rank 1" in r.stderr, r.stderr[-3000:]
    assert took < 30
    if leave == "exit":
        m = re.search(r"^\[0\]<stdout>:rank 0 failed after ([\d.]+) s: (.*)$", r.stdout, re.M)
        assert m, r.stdout + r.stderr[-3000:]
        assert float(m.group(1)) < 5
        assert "join: ranks {1} (on host localhost) shut down (their program finished or called " \
               "shutdown) without joining" in m.group(2)
        assert "hvd: shutdown failed: join: ranks {1} (on host localhost) shut down" in r.stderr, \
            r.stderr[-3000:]


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_a_rank_stopped_inside_a_transfer_is_reported_then_fails_the_job(transport):
    worker = pathlib.Path(__file__).with_name("stop_in_collective_worker.py")
    started = time.monotonic()
    r = run_hvdrun("-np", 2, "--transport", transport, "-x", "HVD_STALL_CHECK_TIME_SECONDS=2",
                   "-x", "HVD_STALL_SHUTDOWN_TIME_SECONDS=4", sys.executable, worker,
                   timeout=60)
    took = time.monotonic() - started
    assert r.returncode == 3, r.stderr[-2000:]
    # The warning first, then the failure, both naming the stopped peer and the transfer.
    assert re.search(r"warning \[engine\] stall: rank 0/2: recv from rank 1 .* no data moved "
                     r"for 2 s \(\d+ of \d+ bytes done\).*HVD_STALL_CHECK_TIME_SECONDS", r.stderr)
    m = re.search(r"^\[0\]<stdout>:rank 0 failed after ([\d.]+) s: (.*)$", r.stdout, re.M)
    assert m, r.stdout[-2000:]
    assert "recv from rank 1" in m.group(2) and "no data moved for 4 s" in m.group(2)
    if transport == "shm":  # the peer's process state, read from /proc
        assert "rank 1's process" in m.group(2) and "is stopped" in m.group(2)
    assert took < 30  # hvdrun wakes the stopped rank to stop it: no 10 s grace for SIGKILL


def test_a_rank_stopped_in_a_direct_collective_over_shared_memory_is_named_at_the_liveness_timeout():
    # hvd-bench's sweep runs the collectives without the engine (no heartbeats): the transfer's
    # wait sees rank 1's process stopped and fails at HVD_LIVENESS_TIMEOUT_SECONDS (3 s here,
    # 60 by default), not at the op timeout (300 s).
    bench = BUILD / "apps" / "hvd-bench"
    job = subprocess.Popen([str(HVDRUN), "-np", "2", "--log-level", "info", "--transport", "shm",
                            "-x", "HVD_LIVENESS_TIMEOUT_SECONDS=3", str(bench), "-b", "64M",
                            "-e", "64M", "-w", "0", "-n", "1000000"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        pid = None
        for line in job.stderr:
            m = re.search(r"started rank 1 on \S+ as pid (\d+)", line)
            if m:
                pid = int(m.group(1))
                break
        assert pid, "hvdrun did not say rank 1's pid"
        time.sleep(2)  # inside the 64 MiB allreduces
        os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        _, stderr = job.communicate(timeout=90)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    took = time.monotonic() - stopped
    assert job.returncode != 0, stderr[-3000:]
    assert f"rank 1's process (pid {pid}) is stopped (SIGSTOP, a debugger, a paused job), " \
           "stopping (HVD_LIVENESS_TIMEOUT_SECONDS)" in stderr, stderr[-3000:]
    assert "hvdrun: job failed: rank" in stderr
    assert took < 30, took


def test_a_stopped_rank_ends_the_job_after_the_liveness_timeout():
    # Every engine sends a sign of life each second, also from inside a collective's waits; a
    # rank that goes silent for HVD_LIVENESS_TIMEOUT_SECONDS is named and the job ends. Rank 1
    # stops between operations in one job and inside a transfer in the other; the two jobs run
    # side by side. Only the liveness check may end them: the stall and operation timeouts keep
    # their (longer) defaults. The 60 s default is checked by a unit test of the parameters
    # (test_params.cc), so this test waits 5 s instead of a minute.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HVD_STALL", "HVD_LIVENESS", "HVD_OP_TIMEOUT"))}
    env["HVD_LIVENESS_TIMEOUT_SECONDS"] = "5"
    here = pathlib.Path(__file__).parent
    started = time.monotonic()
    jobs = [subprocess.Popen([str(HVDRUN), "-np", "3", sys.executable, str(here / name)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            for name in ("stop_between_operations_worker.py", "stop_in_collective_worker.py")]
    for job in jobs:
        try:
            out, err = job.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            job.kill()
            raise
        took = time.monotonic() - started
        assert job.returncode == 3, err[-2000:]
        assert took <= 60, took  # well inside the stall check's 60 s warning
        m = re.search(r"^\[(0|2)\]<stdout>:rank \d failed after ([\d.]+) s: (.*)$", out, re.M)
        assert m, out[-2000:]
        # The heartbeats' check, or inside a shared-memory transfer the transport's, which sees
        # the process stopped: whichever comes first.
        assert re.search(r"rank 1 \(on host \S+\) has sent nothing for [5-9] s|"
                         r"no data moved for [5-9] s .*rank 1's process \(pid \d+\) is stopped",
                         m.group(3)), m.group(3)
        assert "stopped (SIGSTOP" in m.group(3) and "HVD_LIVENESS_TIMEOUT_SECONDS" in m.group(3)


FDS = """
import os
fds = {f: os.readlink(f"/proc/self/fd/{f}") for f in os.listdir("/proc/self/fd")
       if os.path.exists(f"/proc/self/fd/{f}")}
print("fds", sorted(int(f) for f in fds), flush=True)
"""


def test_a_worker_inherits_no_descriptor_of_hvdrun_beyond_its_standard_streams():
    # Not the rendezvous listener, SSH sessions or pipes: a worker could keep them open past
    # hvdrun (or write to them).
    with open(os.devnull) as stray:  # a descriptor of the caller's, inherited by hvdrun
        r = run_hvdrun("-np", 2, *python_worker(FDS), pass_fds=(stray.fileno(),))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.count("<stdout>:fds [0, 1, 2]") == 2, r.stdout


CHILD_FDS = """
import os, subprocess, sys
import hvd, hvd.numpy as hn, numpy as np
hvd.init()
hn.allreduce(np.ones(4, np.float32), name="x")
mine = sum(os.readlink(f"/proc/self/fd/{f}").startswith("socket:")
           for f in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{f}"))
# A program the worker starts without closing descriptors (fork and exec, as os.system does).
child = subprocess.run(["sh", "-c", "ls -l /proc/$$/fd"], close_fds=False, capture_output=True,
                       text=True).stdout
print("worker sockets", mine, "child sockets", child.count("socket:"), flush=True)
"""


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_a_program_a_worker_starts_inherits_none_of_its_links(transport):
    # A data loader or a shell command started by the worker must not hold the worker's links
    # (or the rendezvous connection) open after the worker dies: its peers would never see the
    # link close. Every socket hvd opens is close-on-exec.
    r = run_hvdrun("-np", 2, "--transport", transport, *python_worker(CHILD_FDS))
    assert r.returncode == 0, r.stderr[-2000:]
    lines = re.findall(r"worker sockets (\d+) child sockets (\d+)", r.stdout)
    assert len(lines) == 2, r.stdout
    for worker, child in lines:
        assert int(worker) > 0 and int(child) == 0, r.stdout


def _with_open_files(limit_command, worker_args, only_rank=None):
    """A shell line that sets an open-file limit (for `only_rank`, else every rank) and execs
    the e2e worker."""
    guard = f'[ "$HVD_RANK" = {only_rank} ] && ' if only_rank is not None else ""
    return ["sh", "-c", f'{guard}{limit_command}; exec "$0" "$@"', str(WORKER), *worker_args]


def test_a_job_raises_a_low_soft_open_file_limit_and_runs():
    """40 ranks need 264 open files in hvdrun and 142 on rank 0; under a soft limit of 128 (the
    hard limit higher) both raise theirs and the job runs, where before the connections waited
    in the kernel until a 30 s handshake timeout failed it."""
    r = subprocess.run(
        ["sh", "-c", 'ulimit -S -n 128 && exec "$@"', "sh", str(HVDRUN), "--log-level", "info",
         "-np", "40"] + _with_open_files("ulimit -S -n 100", ["allreduce", "3"], only_rank=0),
        capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "raised the open-file limit (ulimit -n) from 128 to 264 for 40 ranks" in r.stderr
    assert re.search(r"\[rank 0/40\].*raised the open-file limit \(ulimit -n\) from 100 to 142 "
                     r"for the links of 40 ranks", r.stderr), r.stderr[-3000:]


def test_a_hard_open_file_limit_too_low_fails_at_once_saying_what_to_raise():
    # hvdrun's own need: refused before anything starts.
    start = time.monotonic()
    r = subprocess.run(["sh", "-c", 'ulimit -n 128 && exec "$@"', "sh", str(HVDRUN), "-np", "40",
                        str(WORKER), "allreduce", "3"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert time.monotonic() - start < 5
    assert ("hvdrun: error: starting 40 ranks (each one's output streams and rendezvous "
            "connection in hvdrun) needs about 264 open files, but the hard limit (ulimit -Hn) "
            "is 128 (soft limit 128): raise it where the job starts (`ulimit -n 264`") in r.stderr
    # A rank's own: it fails at init naming itself, its host and the count, and ends the job.
    start = time.monotonic()
    r = run_hvdrun("-np", "40", *_with_open_files("ulimit -n 100", ["allreduce", "3"],
                                                  only_rank=0), timeout=120)
    assert r.returncode != 0
    assert time.monotonic() - start < 30, "the job ends when rank 0 fails, not at a timeout"
    assert re.search(r"rank 0/40 on host \S+: a job of 40 ranks \(a socket to each peer, two on "
                     r"rank 0\) needs about 142 open files, but the hard limit \(ulimit -Hn\) is "
                     r"100", r.stderr), r.stderr[-3000:]
