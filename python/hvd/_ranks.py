"""Ranks that a cluster framework started (Spark tasks, Ray actors), placed by hvd: the one
mechanism hvd.spark.run and hvd.ray.RayExecutor share. Given where each worker runs, ranks go
host by host (the host of worker 0 first, so rank 0 stays where the framework put worker 0),
each worker learns its HVD_* placement, and rank 0 serves the job's rendezvous itself on a port
it picked (HVD_EXTERNAL_LAUNCHER), so nothing needs to reach the driver. A Spark rank runs the
function in a process of its own (run_rank: python -m hvd._task_worker), so the executor's
Python worker stays clean for its next task and a rank that crashes fails its task, not the
executor; a Ray actor is a process of its own already."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

# The last bytes of a rank's output kept for the driver (it prints them with the rank).
OUTPUT_KEPT = 1 << 20


@dataclass(frozen=True)
class Placement:
    rank: int
    size: int
    local_rank: int
    local_size: int
    cross_rank: int
    cross_size: int
    host: str


def place(hosts: Sequence[str]) -> List[Placement]:
    """The placement of worker i (in the framework's order) running on hosts[i]."""
    if not hosts:
        raise ValueError("no workers to place")
    order: List[str] = []
    for h in hosts:
        if h not in order:
            order.append(h)
    by_host: Dict[str, List[int]] = {h: [i for i, x in enumerate(hosts) if x == h] for h in order}
    placements: List[Optional[Placement]] = [None] * len(hosts)
    rank = 0
    for h in order:
        workers = by_host[h]
        for local_rank, worker in enumerate(workers):
            placements[worker] = Placement(rank, len(hosts), local_rank, len(workers),
                                           order.index(h), len(order), h)
            rank += 1
    # Cross rank counts the hosts that have a worker of this local rank (uneven hosts).
    fixed = []
    for p in placements:
        hosts_with = [h for h in order if len(by_host[h]) > p.local_rank]
        fixed.append(Placement(p.rank, p.size, p.local_rank, p.local_size,
                               hosts_with.index(p.host), len(hosts_with), p.host))
    return fixed


# Rank 0's rendezvous port is picked below the kernel's ephemeral range (32768 and up on
# Linux): the port is free when picked and released before rank 0's runtime binds it, and in
# between no outgoing connection and no listener on port 0 can take it.
_PORTS = range(20000, 32000)


def free_port(host: str) -> int:
    """A TCP port free on `host` now, for rank 0's rendezvous."""
    import random
    for port in random.sample(_PORTS, 64):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free TCP port on {host} in {_PORTS.start}-{_PORTS.stop - 1} "
                       "after 64 tries")


def with_interface(env: Dict[str, str], nics) -> Dict[str, str]:
    """`env` with HVD_NETWORK_INTERFACE the first of `nics` (names) this host has, unless env
    names one; run where the rank runs."""
    present = {name for _, name in socket.if_nameindex()} if nics else set()
    nic = next((n for n in sorted(nics or ()) if n in present), None)
    if nic and "HVD_NETWORK_INTERFACE" not in env:
        env = {**env, "HVD_NETWORK_INTERFACE": nic}
    return env


def rank_environment(p: Placement, rendezvous: str, port: int, secret: str, launcher: str,
                     job_id: str) -> Dict[str, str]:
    return {"HVD_RANK": str(p.rank), "HVD_SIZE": str(p.size),
            "HVD_LOCAL_RANK": str(p.local_rank), "HVD_LOCAL_SIZE": str(p.local_size),
            "HVD_CROSS_RANK": str(p.cross_rank), "HVD_CROSS_SIZE": str(p.cross_size),
            "HVD_HOSTNAME": p.host, "HVD_RENDEZVOUS_ADDR": rendezvous,
            "HVD_RENDEZVOUS_PORT": str(port), "HVD_SECRET": secret,
            "HVD_EXTERNAL_LAUNCHER": launcher, "HVD_JOB_ID": job_id}


@dataclass
class Outcome:
    """What one rank's run of the function came to."""
    rank: int
    host: str
    ok: bool
    value: object          # the return value, or the traceback text
    output: str            # the rank's stdout and stderr, interleaved (the last OUTPUT_KEPT)
    finished: float        # time.time() when it ended: the first failure is the cause
    peer_failure: bool     # the error was hvd's HorovodInternalError (a consequence, mostly)


def run_rank(payload: bytes, env: Dict[str, str], placement: Placement,
             executable: Optional[str] = None, echo=None) -> Outcome:
    """Runs the pickled (func, args, kwargs) in a new Python process with `env` added to this
    one's environment, waits for it, and returns its outcome. `echo(line)` sees each line of its
    output as it comes (the framework's worker log)."""
    with tempfile.TemporaryDirectory(prefix="hvd-rank-") as tmp:
        result_path = os.path.join(tmp, "result")
        child_env = dict(os.environ)
        child_env.update(env)
        child_env["HVD_TASK_RESULT"] = result_path
        proc = subprocess.Popen([executable or sys.executable, "-m", "hvd._task_worker"],
                                env=child_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        kept = bytearray()

        def pump():
            for line in proc.stdout:
                kept.extend(line)
                if len(kept) > OUTPUT_KEPT:
                    del kept[:len(kept) - OUTPUT_KEPT]
                if echo:
                    echo(line.decode(errors="replace"))

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            proc.stdin.write(payload)
            proc.stdin.close()
        except BrokenPipeError:
            pass  # it died at start: its exit code and output say why
        code = proc.wait()
        reader.join(30)
        output = kept.decode(errors="replace")
        ok, peer, finished = False, False, time.time()
        if not os.path.exists(result_path):
            value = (f"rank {placement.rank}'s Python process exited with code {code} without a "
                     f"result (killed, or it crashed){_last_lines(output)}")
        else:
            try:
                from hvd import _outcome
                with open(result_path, "rb") as f:
                    ok, value, peer, finished = _outcome.loads(f.read())
            except Exception as e:  # noqa: BLE001  (a result whose class is not importable here)
                value = f"rank {placement.rank}'s result cannot be read where it ran: {e!r}"
        return Outcome(placement.rank, placement.host, ok, value, output, finished, peer)


def _die_with_parent():
    """The rank's process is killed when its task's process goes (a cancelled Spark job kills
    the Python worker): no rank outlives its task."""
    import ctypes
    import signal
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _last_lines(output: str, n: int = 20) -> str:
    lines = output.rstrip().splitlines()[-n:]
    return (":\n" + "\n".join(lines)) if lines else ""


def first_failure(outcomes: Sequence[Outcome]) -> Optional[Outcome]:
    """The failure that explains the others: a rank's own error before one that says a peer
    failed, the earliest of those first."""
    failed = [o for o in outcomes if not o.ok]
    if not failed:
        return None
    return min(failed, key=lambda o: (o.peer_failure, o.finished, o.rank))


def failure_message(launcher: str, failure: Outcome, where: str = "host") -> str:
    """`where`: what the framework calls the rank's machine (a Ray "node")."""
    return (f"{launcher}: rank {failure.rank} on {where} {failure.host} failed:\n"
            f"{str(failure.value).rstrip()}")
