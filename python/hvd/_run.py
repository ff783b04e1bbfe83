"""hvd.run: a Python function run as a job, through the same launcher as the command line.

The caller (the driver) starts ``hvdrun`` on ``python -m hvd._run_worker`` and serves the
function to the workers on a TCP port of its own. hvdrun places the workers (here and over
SSH), forwards their output, and stops the job when one fails, as for any command; each worker
connects back to the driver at the address it reached hvdrun's rendezvous on, proves it holds
the job's key (HMAC of a nonce), receives the pickled function, runs it and sends its return
value or its traceback. The key travels in the workers' environment, which hvdrun never puts
on a command line.
"""
import hashlib
import hmac
import os
import pathlib
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import sysconfig
import threading
from collections import deque

_GREETING = b"hvd.run worker"
_STDERR_KEPT = 40  # hvdrun's last stderr lines, quoted when the job fails without a traceback
_FAILURE_GRACE = 2.0  # seconds the other ranks may take to report after a peer's failure


class RunError(RuntimeError):
    """The job hvd.run started failed: which rank, where and why (a worker's traceback, or
    hvdrun's summary for a rank that died without one)."""


def _frame(data):
    return struct.pack("!Q", len(data)) + data


def _read_exact(sock, n):
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError(f"connection closed with {left} of {n} bytes unread")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_frame(sock):
    (length,) = struct.unpack("!Q", _read_exact(sock, 8))
    return _read_exact(sock, length)


def proof(key, nonce):
    """The worker's answer to the driver's nonce."""
    return hmac.new(key.encode(), _GREETING + nonce, hashlib.sha256).digest()


def _hvdrun():
    """The hvdrun built with this package: its build tree's (build/python/hvd ->
    build/apps/hvdrun), else the environment's scripts directory (a wheel's), else PATH."""
    here = pathlib.Path(os.path.abspath(__file__)).parent  # a build tree links, not copies
    candidates = [here.parent.parent / "apps" / "hvdrun",
                  pathlib.Path(sysconfig.get_path("scripts")) / "hvdrun",
                  shutil.which("hvdrun")]
    for c in candidates:
        if c and os.access(c, os.X_OK) and not os.path.isdir(c):
            return str(c)
    raise FileNotFoundError("hvd.run needs hvdrun, which is neither in this environment's "
                            f"scripts ({sysconfig.get_path('scripts')}) nor on PATH: install hvd "
                            "with `pip install .`, or put the hvdrun to use on PATH")


class _Driver:
    """Serves the pickled call to every worker that proves the key; collects the outcomes."""

    def __init__(self, payload, key):
        self.payload, self.key = payload, key
        self.outcomes = {}  # rank -> (ok, value or traceback text, host)
        self.failures = []  # ranks whose function raised, in the order their news came
        self.own_failures = []  # those whose error was not hvd's HorovodInternalError
        self.failed = threading.Event()
        self.failed_on_its_own = threading.Event()
        self.lock = threading.Lock()
        self.handlers = []
        self.server = socket.create_server(("", 0), family=socket.AF_INET, backlog=128)
        self.port = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return  # closed
            handler = threading.Thread(target=self._handle, args=(conn,), daemon=True)
            handler.start()
            self.handlers.append(handler)

    def _handle(self, conn):
        from hvd import _outcome
        with conn:
            try:
                conn.settimeout(30)  # the handshake; a worker's function may then run for days
                nonce = secrets.token_bytes(32)
                conn.sendall(nonce)
                if not hmac.compare_digest(_read_exact(conn, 32), proof(self.key, nonce)):
                    return  # not a worker of this job: it gets nothing and is never read
                host = _read_frame(conn).decode()
                conn.sendall(_frame(self.payload))
                conn.settimeout(None)
                rank = _read_frame(conn).decode()  # the one it ended with
                ok, value, peer_failure, _ = _outcome.loads(_read_frame(conn))
            except (OSError, ConnectionError, ValueError):
                return  # the worker died: hvdrun reports it
            with self.lock:
                self.outcomes[int(rank)] = (ok, value, host)
                if not ok:
                    self.failures.append(int(rank))
                    if not peer_failure:
                        self.own_failures.append(int(rank))
                        self.failed_on_its_own.set()
                    self.failed.set()

    def close(self):
        """After hvdrun ended: its workers have sent all they will; wait until it is read."""
        try:
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the accept (close alone does not)
        except OSError:
            pass
        self.server.close()
        self.thread.join(5)
        for handler in self.handlers:
            handler.join(30)


def run(func, args=(), kwargs=None, np=1, min_np=None, max_np=None, slots=None,
        reset_limit=None, hosts=None, hostfile=None, start_timeout=None, ssh_port=None,
        ssh_identity_file=None, disable_cache=None, output_filename=None, verbose=None,
        use_gloo=None, use_mpi=None, mpi_args=None, network_interface=None, executable=None,
        env=None):
    """Runs ``func(*args, **kwargs)`` on ``np`` ranks and returns their results, rank 0 first.

    The function calls ``hvd.init()`` itself, as a training script does. ``hosts``
    (``"a:2,b:2"``) or ``hostfile`` place the ranks as ``hvdrun -H``/``--hostfile`` do (over SSH
    for other machines, with ``ssh_port``, ``ssh_identity_file``); ``executable`` is the
    workers' Python (default: this one); ``env`` the workers' environment (default: this
    process's). A rank that raises, or dies, fails the call with RunError naming the rank, its
    host and the traceback. Horovod's signature: its elastic, MPI and cache arguments are refused
    with what to use instead, since their meaning differs here.
    """
    if min_np is not None or max_np is not None or slots is not None or reset_limit is not None:
        raise ValueError("hvd.run: min_np, max_np, slots and reset_limit start an elastic job, "
                         "whose workers come and go: run a script under `hvdrun --min-np ...` "
                         "with hvd.elastic.run instead (docs/elastic.md)")
    if use_mpi or mpi_args:
        raise ValueError("hvd.run: hvd does not use MPI (use_mpi, mpi_args); its own transports "
                         "run the job")
    del disable_cache, use_gloo  # nothing is cached; hvd's TCP transport is always there
    flags = ["-np", str(np)]
    for flag, value in (("-H", hosts), ("--hostfile", hostfile),
                        ("--start-timeout", start_timeout), ("--ssh-port", ssh_port),
                        ("--ssh-identity-file", ssh_identity_file),
                        ("--output-filename", output_filename),
                        ("--network-interface", network_interface)):
        if value is not None:
            flags += [flag, str(value)]
    if verbose:
        flags.append("--verbose")
    return launch(func, args, kwargs, flags, executable, env, np)


def launch(func, args, kwargs, flags, executable=None, env=None, np=None):
    """``hvdrun FLAGS`` on the worker command with func served to its workers; the results by
    the rank each worker ended with. `np`: the ranks that must all return (a static job); None:
    an elastic job, whose workers come and go, returns the results of the workers that finished
    (the last round's ranks)."""
    import cloudpickle
    key = secrets.token_hex(32)
    driver = _Driver(cloudpickle.dumps((func, tuple(args), dict(kwargs or {}))), key)
    command = [_hvdrun(), *flags]
    # A driver that imported Horovod's names from hvd's compatibility package: the function,
    # pickled with references to horovod.*, needs them on the workers too.
    if getattr(sys.modules.get("horovod"), "IS_HVD_COMPAT", False):
        command.append("--horovod-compat")
    command += [executable or sys.executable, "-m", "hvd._run_worker"]
    worker_env = dict(os.environ if env is None else env)
    worker_env.update(HVD_RUN_DRIVER_PORT=str(driver.port), HVD_RUN_KEY=key)
    try:
        code, stderr_tail = _supervise(command, worker_env, driver)
    finally:
        driver.close()
    return _results(driver, np, code, stderr_tail)


def _supervise(command, env, driver):
    """hvdrun to completion, or until a rank's function raised (driver.failed): then hvdrun is
    told to stop the job, as at Ctrl-C, and the others' errors (consequences) do not wait. Its
    stdout goes through; its stderr through with its tail kept."""
    tail = deque(maxlen=_STDERR_KEPT)
    proc = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True, bufsize=1)

    def pump():
        for line in proc.stderr:
            sys.stderr.write(line)
            tail.append(line.rstrip("\n"))

    pumping = threading.Thread(target=pump, daemon=True)
    pumping.start()
    try:
        while proc.poll() is None:
            if driver.failed.wait(0.05):
                # A peer's HorovodInternalError often arrives before the error that caused it:
                # the rank at fault gets a moment to report before the job is stopped.
                if not driver.failed_on_its_own.is_set():
                    driver.failed_on_its_own.wait(_FAILURE_GRACE)
                proc.terminate()
                break
        proc.wait()
        pumping.join(10)
        return proc.returncode, list(tail)
    except BaseException:  # Ctrl-C in the caller: stop the job as hvdrun stops it
        proc.terminate()
        proc.wait()
        raise


def _results(driver, np, code, stderr_tail):
    outcomes = driver.outcomes
    if driver.failures:
        # The first to raise for a reason of its own; the others' errors follow from it.
        rank = (driver.own_failures or driver.failures)[0]
        _, trace, host = outcomes[rank]
        raise RunError(f"rank {rank} on host {host} raised:\n{trace.rstrip()}")
    if code != 0:
        summary = "\n".join(line for line in stderr_tail if line.startswith("hvdrun"))
        raise RunError(f"the job failed (hvdrun exited with code {code}):\n"
                       + (summary or "\n".join(stderr_tail[-10:])))
    if np is None:
        if not outcomes:
            raise RunError("the elastic job ended without any worker returning a result")
        return [outcomes[r][1] for r in sorted(outcomes)]
    missing = [r for r in range(np) if r not in outcomes]
    if missing:
        raise RunError(f"ranks {missing} ended without returning a result")
    return [outcomes[r][1] for r in range(np)]
