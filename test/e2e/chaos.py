"""The elastic chaos test's killer and its verdict: an elastic job of elastic_worker.py runs
while SIGKILLs hit random workers, one at a time, each once the job has formed a round again
(the replacement of the previous one trains). What the job must show: every rank ends with the
same weights after all its steps, and no kill cost more than one commit interval of progress
(the worker commits after every step)."""
import os
import random
import re
import signal
import subprocess
import threading
import time


def kill_workers_at_random(process, pid_dir, kills, seed, log):
    """Reads `process`'s stdout into `log` (a list of lines) and, from a thread, kills `kills`
    random live workers by SIGKILL: the first once the job trains, each next one once a worker
    that started after the previous kill trains. Returns the thread and the killed worker ids."""
    rng = random.Random(seed)
    killed = []
    trained = threading.Event()
    lock = threading.Lock()

    def read():
        for line in process.stdout:
            with lock:
                log.append(line.rstrip("\n"))
            if re.search(r"<stdout>:worker \d+ at step", line):
                trained.set()
        trained.set()

    def kill():
        for _ in range(kills):
            trained.clear()
            if not trained.wait(120) or process.poll() is not None:
                return
            time.sleep(rng.uniform(0.3, 1.2))
            live = sorted(int(n) for n in os.listdir(pid_dir) if n.isdigit())
            live = [w for w in live if w not in killed]
            if not live or process.poll() is not None:
                return
            worker = rng.choice(live)
            pid = int((pid_dir / str(worker)).read_text())
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.append(worker)
            with lock:
                log.append(f"chaos: killed worker {worker} (pid {pid}; HVD_CHAOS_SEED={seed})")
            # The next kill waits for a step of a round formed after this one.
            time.sleep(0.5)

    reader = threading.Thread(target=read, daemon=True)
    killer = threading.Thread(target=kill, daemon=True)
    reader.start()
    killer.start()
    return reader, killer, killed


def run_with_kills(command, env, pid_dir, kills, seed, timeout):
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env)
    log, stderr = [], []
    reader, killer, killed = kill_workers_at_random(process, pid_dir, kills, seed, log)
    errors = threading.Thread(target=lambda: stderr.append(process.stderr.read()), daemon=True)
    errors.start()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        errors.join(10)
        raise AssertionError(f"the chaos job ran past {timeout} s:\n" + "\n".join(log[-50:]) +
                             "".join(stderr)[-3000:])
    for thread in (reader, errors, killer):
        thread.join(10)
    return process.returncode, log, "".join(stderr), killed


def progress_lost_per_kill(log):
    """For each round a worker entered after a kill: how many steps behind the furthest step
    any worker had started before that kill the round began."""
    furthest = 0
    lost = []
    pending = False
    for line in log:
        m = re.search(r"<stdout>:worker \d+ at step (\d+)", line)
        if m and not pending:
            furthest = max(furthest, int(m.group(1)))
        if line.startswith("chaos: killed"):
            pending = True
        m = re.search(r"<stdout>:worker \d+ trains from step (\d+)", line)
        if m and pending:
            lost.append(furthest - int(m.group(1)))
            pending = False
    return lost
