"""Elastic jobs end to end: hvdrun --min-np/--max-np/--host-discovery-script with real worker
processes that fail and join while training through hvd.elastic.run. The job's "hosts" are
names of this machine (localhost and 127.0.0.1), which hvdrun keeps apart as hosts."""
import json
import os
import re
import socket
import stat
import sys
import time

import pytest

import chaos
from conftest import HVDRUN, REPO, run_hvdrun

WORKER = REPO / "test" / "e2e" / "elastic_worker.py"
TORCH = ("-x", "ELASTIC_FRAMEWORK=torch")  # the worker's model in PyTorch (else NumPy)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(extra)
    return env


def finals(stdout):
    """worker id -> its final line."""
    out = {}
    for line in stdout.splitlines():
        m = re.match(r"\[\d+\]<stdout>:worker (\d+): (rank .*)", line)
        if m:
            out[int(m.group(1))] = m.group(2)
    return out


def assert_finished(r, workers, ending, also=()):
    """Exactly `workers` and `also` printed a final line, each of `workers` ending with
    `ending`; returns the lines."""
    done = finals(r.stdout)
    assert sorted(done) == sorted([*workers, *also]), r.stdout[-3000:]
    for worker in workers:
        assert done[worker].endswith(ending), done
    return done


def discovery_script(tmp_path, body):
    path = tmp_path / "hosts.sh"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_a_failed_worker_is_replaced_and_the_survivors_go_on_from_the_last_commit(tmp_path):
    # PyTorch's TorchState (model and optimizer) restored to the last commit; the other tests of
    # the launcher's elastic rounds keep their state in NumPy (elastic_worker.py). Worker 2
    # fails once: its host's other slots are fine, so worker 3 takes its slot.
    r = run_hvdrun("--min-np", 2, "-H", "localhost:2,127.0.0.1:1", *TORCH, "-x", "CRASH_WORKER=2",
                   "-x", "CRASH_AT=10", "-x", f"CRASH_MARKER={tmp_path / 'crashed'}",
                   sys.executable, WORKER, timeout=180, env=clean_env())
    assert r.returncode == 0, r.stderr[-4000:]
    assert "worker 2 dies at step 10" in r.stdout
    assert ("elastic: worker 2 on 127.0.0.1 exited with code 3; replacing it (1 of "
            "--blacklist-failure-limit 3 on 127.0.0.1)") in r.stderr
    assert "blacklisting" not in r.stderr
    done = assert_finished(r, [0, 1], "steps 30, sizes [3], resets [3], identical True",
                           also=[3])
    assert done[0].startswith("rank 0 of 3")
    assert done[3] == "rank 2 of 3, steps 30, sizes [3], resets [], identical True", done
    # The replacement started from the survivors' last commit, not from step 0.
    m = re.search(r"<stdout>:worker 3 trains from step (\d+)", r.stdout)
    assert m and int(m.group(1)) >= 9, r.stdout[-3000:]


def test_one_host_kill_9_of_rank_0_keeps_the_progress_of_its_other_workers(tmp_path):
    # The usual one-machine elastic job: the discovery script offers localhost:4. Worker 0 (rank
    # 0, whose state the others would take) dies by SIGKILL; the three others keep their state,
    # one of them becomes rank 0, and worker 4 takes the free slot from their last commit.
    script = discovery_script(tmp_path, "echo localhost:4\n")
    r = run_hvdrun("--min-np", 2, "--host-discovery-script", script, "-x", "CRASH_WORKER=0",
                   "-x", "CRASH_AT=10", "-x", "CRASH_SIGNAL=KILL",
                   "-x", f"CRASH_MARKER={tmp_path / 'crashed'}",
                   sys.executable, WORKER, timeout=180, env=clean_env())
    assert r.returncode == 0, r.stderr[-4000:]
    assert "worker 0 dies at step 10" in r.stdout
    assert "elastic: worker 0 on localhost was killed by signal 9 (SIGKILL)" in r.stderr
    assert "replacing it (1 of --blacklist-failure-limit 3 on localhost)" in r.stderr
    assert "blacklisting" not in r.stderr and "all workers lost" not in r.stderr
    done = assert_finished(r, [1, 2, 3], "steps 30, sizes [4], resets [4], identical True",
                           also=[4])
    assert done[1].startswith("rank 0 of 4"), done
    assert done[4] == "rank 3 of 4, steps 30, sizes [4], resets [], identical True", done
    m = re.search(r"<stdout>:worker 4 trains from step (\d+)", r.stdout)
    assert m and int(m.group(1)) >= 9, r.stdout[-3000:]


def test_every_worker_lost_at_once_is_announced_and_the_job_starts_over(tmp_path):
    script = discovery_script(tmp_path, "echo localhost:2\n")
    r = run_hvdrun("--min-np", 2, "--host-discovery-script", script, "--blacklist-failure-limit", 5,
                   "-x", "CRASH_WORKER=0,1", "-x", "CRASH_AT=10", "-x", "CRASH_SIGNAL=KILL",
                   "-x", f"CRASH_MARKER={tmp_path / 'crashed'}",
                   sys.executable, WORKER, timeout=180, env=clean_env())
    assert r.returncode == 0, r.stderr[-4000:]
    assert "hvdrun: elastic: all workers lost (the last: worker " in r.stderr, r.stderr[-3000:]
    assert "training restarts from the beginning" in r.stderr
    done = finals(r.stdout)
    assert sorted(done) == [2, 3] or sorted(done) == [3, 4], r.stdout[-3000:]
    assert re.search(r"<stdout>:worker [234] trains from step 0 ", r.stdout), r.stdout[-3000:]


def every_worker_killed_at_step_10(tmp_path, *flags, steps=30):
    script = discovery_script(tmp_path, "echo localhost:2\n")
    return run_hvdrun("--min-np", 2, "--host-discovery-script", script, *flags,
                      "-x", "CRASH_WORKER=0,1", "-x", "CRASH_AT=10", "-x", "CRASH_SIGNAL=KILL",
                      "-x", f"CRASH_MARKER={tmp_path / 'crashed'}", "-x", f"STEPS={steps}",
                      sys.executable, WORKER, timeout=180, env=clean_env())


def test_every_worker_lost_under_require_progress_fails_the_job_saying_so(tmp_path):
    r = every_worker_killed_at_step_10(tmp_path, "--elastic-require-progress")
    assert r.returncode == 1, r.stderr[-3000:]
    assert ("hvdrun: job failed: elastic: all workers lost (the last: worker ") in r.stderr
    assert ("no worker holds the training's state, and --elastic-require-progress forbids "
            "starting over (--elastic-commit-dir would keep it on disk)") in r.stderr
    assert not finals(r.stdout)


def test_every_worker_lost_resumes_from_the_on_disk_commit_and_so_does_a_new_run(tmp_path):
    commits = tmp_path / "commits"
    r = every_worker_killed_at_step_10(tmp_path, "--elastic-commit-dir", commits,
                                       "--elastic-require-progress")
    assert r.returncode == 0, r.stderr[-4000:]
    assert ("training restarts from the last on-disk commit in " + str(commits)) in r.stderr
    commit = commits / "hvd-elastic-commit.pkl"
    assert f"hvd: elastic: resuming from the commit in {commit}" in r.stderr
    # The replacements took the state of the commit after step 9 (each worker committed after
    # every step and died before step 10).
    assert re.search(r"<stdout>:worker [23] trains from step 10 as rank 0 ", r.stdout), \
        r.stdout[-3000:]
    assert_finished(r, [2, 3], "steps 30, sizes [2], resets [], identical True")
    # A new run of the job goes on from the last commit, step 30, to its 35 steps.
    r = run_hvdrun("--min-np", 2, "-H", "localhost:2", "--elastic-commit-dir", commits,
                   "-x", "STEPS=35", sys.executable, WORKER, timeout=120, env=clean_env())
    assert r.returncode == 0, r.stderr[-4000:]
    assert "[0]<stdout>:worker 0 trains from step 30 as rank 0 of 2" in r.stdout, r.stdout
    assert_finished(r, [0, 1], "steps 35, sizes [2], resets [], identical True")


def assert_survived_the_chaos(returncode, log, stderr, killed, workers, steps):
    out = "\n".join([line for line in log if line.startswith("chaos:")] + log[-60:]) + "\n" + \
        stderr[-3000:]
    assert returncode == 0, out
    assert len(killed) == 5, out
    assert "all workers lost" not in stderr and "blacklisting" not in stderr, out
    done = {}
    for line in log:
        m = re.match(r"\[\d+\]<stdout>:worker (\d+): (rank .*)", line)
        if m:
            done[int(m.group(1))] = m.group(2)
    assert len(done) == workers, out
    for line in done.values():
        assert f", steps {steps}, " in line and line.endswith("identical True"), done
    # Each kill cost at most one commit interval (a step) of the progress made before it.
    lost = chaos.progress_lost_per_kill(log)
    assert lost and all(n <= 1 for n in lost), (lost, out)


CHAOS = ("-x", "ELASTIC_FRAMEWORK=torch", "-x", "SHOW_STEPS=1", "-x", "STEPS=200",
         "-x", "STEP_SLEEP=0.05")


def test_chaos_five_random_kill_9s_of_a_one_host_torch_job_keep_its_progress(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    script = discovery_script(tmp_path, "echo localhost:4\n")
    command = [str(HVDRUN), "--min-np", "2", "--max-np", "4", "--host-discovery-script",
               str(script), *CHAOS, "-x", f"PID_DIR={pids}", sys.executable, str(WORKER)]
    seed = int(os.environ.get("HVD_CHAOS_SEED", time.time_ns() % 1000))
    result = chaos.run_with_kills(command, clean_env(), pids, kills=5, seed=seed, timeout=240)
    assert_survived_the_chaos(*result, workers=4, steps=200)


def test_a_host_whose_workers_keep_failing_leaves_and_the_survivors_finish(tmp_path):
    r = run_hvdrun("--min-np", 2, "-H", "localhost:2,127.0.0.1:1", "--blacklist-failure-limit", 1,
                   "-x", "CRASH_WORKER=2", "-x", "CRASH_AT=10",
                   "-x", f"CRASH_MARKER={tmp_path / 'crashed'}",
                   sys.executable, WORKER, timeout=180, env=clean_env())
    assert r.returncode == 0, r.stderr[-4000:]
    assert ("elastic: worker 2 on 127.0.0.1 exited with code 3; blacklisting host 127.0.0.1 "
            "and going on without it") in r.stderr
    # Both survivors ran all 30 steps, first with 3 workers, then with 2, and agree.
    done = assert_finished(r, [0, 1], "steps 30, sizes [2, 3], resets [2], identical True")
    assert done[0].startswith("rank 0 of 2")


# Starting with one worker matters: a one-worker job must keep PyTorch's DistributedOptimizer's
# hooks, or it would not reduce its gradients once others joined. On a host with a calibration
# (hvd-bench calibrate's file), the first round, within one host, uses it, and the rounds across
# hosts must not: there the ranks agree on one model.
@pytest.mark.parametrize("first,calibrated", [(2, False), (1, False), (1, True)])
def test_hosts_the_discovery_script_adds_join_the_running_job(tmp_path, first, calibrated):
    grow = tmp_path / "grow"
    script = discovery_script(tmp_path, f"echo localhost:{first}\n"
                                        f"[ -e {grow} ] && echo 127.0.0.1:{3 - first}\nexit 0\n")
    env = clean_env()
    if calibrated:
        saved = tmp_path / "cache" / "hvd" / f"network_model-{socket.gethostname()}.json"
        saved.parent.mkdir(parents=True)
        saved.write_text(json.dumps({"intra_host_latency_seconds": 2e-7, "measured_allreduce": [
            {"link": "shm", "ranks": 2, "bytes": [4, 1024], "seconds": {"ring": [1e-6, 2e-6]}}]}))
        env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    r = run_hvdrun("--min-np", first, "--max-np", 3, "--host-discovery-script", script,
                   *(TORCH if first == 1 else ()), "-x", f"GROW_FILE={grow}", "-x", "GROW_AT=5", "-x", "WANT_SIZE=3",
                   sys.executable, WORKER, timeout=180, env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    done = finals(r.stdout)
    assert sorted(done) == [0, 1, 2], r.stdout[-3000:]
    for worker in range(first):
        assert done[worker].endswith(f"steps 30, sizes [{first}, 3], resets [3], identical True"), done
    # The new workers took rank 0's state (the steps and the sizes they ran at), not step 0.
    for worker in range(first, 3):
        assert done[worker] == (f"rank {worker} of 3, steps 30, sizes [{first}, 3], resets [], "
                                "identical True"), done


def test_a_worker_that_dies_right_after_the_first_round_formed_fails_its_host_not_the_job(
        tmp_path):
    # Worker 2 dies at its first step, within hvdrun's tick of the round forming: the job had
    # started (every worker joined), so this is the host's failure, not the script's.
    r = run_hvdrun("--blacklist-failure-limit", 1, "--min-np", 2, "-H", "localhost:2,127.0.0.1:1",
                   "-x", "CRASH_WORKER=2",
                   "-x", "CRASH_AT=0", "-x", f"CRASH_MARKER={tmp_path / 'crashed'}",
                   sys.executable, WORKER, timeout=120, env=clean_env())
    assert r.returncode == 0, r.stderr[-4000:]
    assert "worker 2 dies at step 0" in r.stdout
    assert "blacklisting host 127.0.0.1 and going on without it" in r.stderr
    assert_finished(r, [0, 1], "steps 30, sizes [2], resets [2], identical True")


def test_a_new_worker_that_fails_at_start_is_given_up_and_the_others_go_on(tmp_path):
    # Worker 2 (the added host's) dies before its init; the running workers, already connecting
    # in the round that included it, leave that round for the next one without it.
    grow = tmp_path / "grow"
    script = discovery_script(tmp_path, f"echo localhost:2\n[ -e {grow} ] && echo 127.0.0.1:1\n"
                                        "exit 0\n")
    start = time.monotonic()
    r = run_hvdrun("--blacklist-failure-limit", 1, "--min-np", 2, "--host-discovery-script", script,
                   "-x", f"GROW_FILE={grow}",
                   "-x", "GROW_AT=5", "-x", "START_CRASH_WORKER=2", "-x", "START_CRASH_DELAY=4",
                   "-x", "STEP_SLEEP=0.1", sys.executable, WORKER, timeout=180, env=clean_env())
    assert r.returncode == 0, r.stderr[-4000:]
    assert "worker 2: this host lacks something" in r.stderr
    assert "blacklisting host 127.0.0.1" in r.stderr
    # The survivors were waiting for worker 2 in round 1 and left it when round 2 appeared.
    assert "elastic: round 1 was given up for round 2 while its workers connected" in r.stderr
    assert_finished(r, [0, 1], "steps 30, sizes [2], resets [2], identical True")
    assert time.monotonic() - start < 60


def test_a_blacklisted_host_comes_back_after_its_cooldown(tmp_path):
    r = run_hvdrun("--blacklist-failure-limit", 1, "--min-np", 2, "-H", "localhost:2,127.0.0.1:1",
                   "--blacklist-cooldown-range",
                   2, 10, "-x", "CRASH_WORKER=2", "-x", "CRASH_AT=10", "-x",
                   f"CRASH_MARKER={tmp_path / 'crashed'}", "-x", "WANT_SIZE=3",
                   sys.executable, WORKER, timeout=180, env=clean_env())
    assert r.returncode == 0, r.stderr[-4000:]
    assert ("elastic: worker 2 on 127.0.0.1 exited with code 3; blacklisting host 127.0.0.1 "
            "for 2 s and going on without it") in r.stderr
    done = finals(r.stdout)
    # Worker 3 took the returned host's slot; the job ended with three workers again.
    assert sorted(done) == [0, 1, 3], r.stdout[-3000:]
    for worker in (0, 1):
        assert done[worker].endswith("steps 30, sizes [2, 3], resets [2, 3], identical True"), done
    assert done[3] == "rank 2 of 3, steps 30, sizes [2, 3], resets [], identical True", done


def test_a_spare_host_replaces_a_failed_one_under_max_np(tmp_path):
    # Three offered hosts, --max-np 2: the third stands by until worker 1's host fails, then
    # worker 2 starts there (in the same step that handles the failure) and takes rank 1.
    script = discovery_script(tmp_path, "echo localhost:1\necho 127.0.0.1:1\n"
                                        "echo 127.0.0.2:1\n")
    r = run_hvdrun("--blacklist-failure-limit", 1, "--min-np", 2, "--max-np", 2,
                   "--host-discovery-script", script,
                   "-x", "CRASH_WORKER=1", "-x", "CRASH_AT=10",
                   "-x", f"CRASH_MARKER={tmp_path / 'crashed'}",
                   sys.executable, WORKER, timeout=180, env=clean_env())
    assert r.returncode == 0, r.stderr[-4000:]
    assert "worker 1 dies at step 10" in r.stdout
    done = finals(r.stdout)
    assert sorted(done) == [0, 2], r.stdout[-3000:]
    assert done[0] == "rank 0 of 2, steps 30, sizes [2], resets [2], identical True", done
    assert done[2] == "rank 1 of 2, steps 30, sizes [2], resets [], identical True", done


def test_the_horovod_elastic_api_runs_unchanged_with_the_compat_flag(tmp_path):
    r = run_hvdrun("--min-np", 2, "--horovod-compat", *TORCH, "-x", "USE_HOROVOD_COMPAT=1",
                   "-x", "STEPS=5", sys.executable, WORKER, timeout=120, env=clean_env())
    assert r.returncode == 0, r.stderr[-4000:]
    assert finals(r.stdout)[1] == "rank 1 of 2, steps 5, sizes [2], resets [], identical True"


def test_a_script_error_before_the_job_forms_fails_at_once_as_a_static_job():
    start = time.monotonic()
    r = run_hvdrun("--min-np", 2, "-H", "localhost:1,127.0.0.1:1", sys.executable, "-c",
                   "import sys; sys.exit('bad flag --lr')", timeout=60, env=clean_env())
    assert r.returncode == 1
    assert "hvdrun: job failed: worker" in r.stderr
    assert "bad flag --lr" in r.stderr
    assert time.monotonic() - start < 30


def test_too_few_slots_on_a_fixed_host_list_fail_the_job_naming_the_failure(tmp_path):
    r = run_hvdrun("--blacklist-failure-limit", 1, "--min-np", 2, "-H", "localhost:1,127.0.0.1:1",
                   "-x", "CRASH_WORKER=1",
                   "-x", "CRASH_AT=5", "-x", f"CRASH_MARKER={tmp_path / 'crashed'}",
                   sys.executable, WORKER, timeout=120, env=clean_env())
    assert r.returncode == 1
    assert ("hvdrun: job failed: elastic: 1 usable slots (localhost:1; blacklisted: 127.0.0.1) "
            "but --min-np 2 and the host list is fixed (no --host-discovery-script); last "
            "failure: worker 1 on 127.0.0.1 exited with code 3") in r.stderr, r.stderr[-3000:]
    assert "worker 1 dies at step 5" in r.stdout


def test_the_reset_limit_ends_a_job_that_keeps_changing(tmp_path):
    r = run_hvdrun("--min-np", 1, "--reset-limit", 0, "-H", "localhost:1,127.0.0.1:1",
                   "-x", "CRASH_WORKER=1", "-x", "CRASH_AT=5",
                   "-x", f"CRASH_MARKER={tmp_path / 'crashed'}",
                   sys.executable, WORKER, timeout=120, env=clean_env())
    assert r.returncode == 1
    assert "but reached --reset-limit 0" in r.stderr, r.stderr[-3000:]


def test_a_failing_discovery_script_refuses_the_job_before_anything_starts(tmp_path):
    script = discovery_script(tmp_path, "echo 'no cluster here' >&2\nexit 2\n")
    r = run_hvdrun("--min-np", 1, "--host-discovery-script", script, sys.executable, "-c",
                   "print('ran')", env=clean_env())
    assert r.returncode != 0
    assert f"{script} exited with code 2: no cluster here" in r.stderr
    assert "ran" not in r.stdout


@pytest.mark.parametrize("args,message", [
    (["--min-np", 3, "--max-np", 2], "--max-np 2 is below --min-np 3"),
    (["--max-np", 2], "an elastic job needs --min-np or -np"),
    (["--min-np", 1, "-H", "localhost:1", "--host-discovery-script", "/bin/true"],
     "give either --host-discovery-script or -H/--hostfile, not both"),
    (["--min-np", 1, "--host-discovery-script", "/nonexistent/hosts.sh"],
     "/nonexistent/hosts.sh: not found"),
    (["--min-np", 1, "--slots-per-host", 0], "--slots-per-host: Value 0 not in range 1"),
    (["--min-np", 0], "--min-np: Value 0 not in range 1"),
    (["--min-np", 1, "--host-discovery-script", "/bin/true", "--network-interface", "localhost=lo"],
     "with --host-discovery-script, give one interface for every host"),
    (["--blacklist-cooldown-range", 5, 2, "--min-np", 1], "the maximum is below the minimum"),
    # -np after a two-value option is still read as -np
    (["--blacklist-cooldown-range", 5, 6, "-np", 1], "applies to elastic jobs only"),
    (["--min-np", 2, "-np", 1, "--max-np", 1], "--max-np 1 is below --min-np 2"),
])
def test_inconsistent_elastic_flags_are_refused(args, message):
    r = run_hvdrun(*args, sys.executable, "-c", "print('ran')", env=clean_env())
    assert r.returncode == 2
    assert message in r.stderr
    assert "ran" not in r.stdout


def test_the_elastic_mnist_example_survives_a_failure_and_still_learns(tmp_path):
    r = run_hvdrun("--min-np", 2, "-H", "localhost:2,127.0.0.1:1", sys.executable,
                   REPO / "examples" / "pytorch_mnist_elastic.py", "--simulate-failure", "2:2",
                   "--epochs", 3, "--checkpoint-dir", tmp_path / "ckpt", timeout=300,
                   env=clean_env())
    assert r.returncode == 0, r.stderr[-4000:]
    assert "[2]<stdout>:worker 2: simulating a failure at epoch 2" in r.stdout
    assert re.search(r"\[0\]<stdout>:epoch 1: test accuracy [\d.]+% \(3 workers\)", r.stdout)
    # Worker 3 replaced worker 2 on its slot: the job ended with 3 workers again.
    m = re.search(r"\[0\]<stdout>:final test accuracy: ([\d.]+)% \(3 workers\)", r.stdout)
    assert m and float(m.group(1)) >= 85.0, r.stdout[-3000:]
    assert sorted(os.listdir(tmp_path / "ckpt")) == [f"checkpoint-{e}.pt" for e in (1, 2, 3)]


# Horovod's spelling (horovod.tensorflow.keras.elastic) names the same objects: the compat
# package's import test (test_python_package.py) shows it.
def test_keras_fit_survives_a_failed_host_with_the_elastic_callbacks(tmp_path):
    r = run_hvdrun("--min-np", 2, "-H", "localhost:2,127.0.0.1:1",
                   "-x", "CRASH_WORKER=2", "-x", f"CRASH_MARKER={tmp_path / 'crashed'}",
                   sys.executable, REPO / "test" / "e2e" / "elastic_keras_worker.py",
                   timeout=300, env=clean_env(TF_CPP_MIN_LOG_LEVEL="2"))
    assert r.returncode == 0, r.stderr[-4000:]
    assert "worker 2 dies at epoch 2" in r.stdout
    done = finals(r.stdout)
    # Worker 3 took worker 2's slot and the model's state at the last commit.
    assert sorted(done) == [0, 1, 3], r.stdout[-3000:]
    for worker in (0, 1, 3):
        assert done[worker].endswith("epoch 5, sizes [3], identical True"), done


def test_keras_fit_started_by_one_worker_reduces_once_others_join(tmp_path):
    # The graph model.fit traced with one worker must still reduce when a second one joins
    # (and both must end with the same weights).
    grow = tmp_path / "grow"
    script = discovery_script(tmp_path, f"echo localhost:1\n[ -e {grow} ] && echo 127.0.0.1:1\n"
                                        "exit 0\n")
    r = run_hvdrun("--min-np", 1, "--max-np", 2, "--host-discovery-script", script,
                   "-x", f"GROW_FILE={grow}", "-x", "WANT_SIZE=2",
                   sys.executable, REPO / "test" / "e2e" / "elastic_keras_worker.py",
                   timeout=150, env=clean_env(TF_CPP_MIN_LOG_LEVEL="2"))
    assert r.returncode == 0, r.stderr[-4000:]
    done = finals(r.stdout)
    assert sorted(done) == [0, 1], r.stdout[-3000:]
    assert done[0].endswith("epoch 5, sizes [1, 2], identical True"), done
    assert done[1].endswith("epoch 5, sizes [2], identical True"), done
