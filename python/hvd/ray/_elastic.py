"""hvd.ray's elastic jobs (RayExecutor with min_workers/max_workers): hvdrun's own elastic driver
(rounds, blacklisting, --reset-limit, hvd.elastic.run's state), with Ray for its hosts and its
workers.

run() starts ``hvdrun --min-np/--max-np`` on the driver (through hvd.run's launch, which serves
the function to the workers and gathers their results) with
* a discovery script that prints the file this executor rewrites every second from Ray's live
  nodes (``address:slots``, slots from each node's CPUs, and GPUs with use_gpu; the driver's
  node first, so that rank 0 starts on the node least likely to leave);
* a launch agent (hvd/ray/_agent.py) in place of SSH: for each worker hvdrun runs one agent,
  which asks this executor (a Unix socket in a private directory) to start the worker's command
  in a Ray actor pinned to the node at that address. The actor holds the worker's CPUs (and
  GPUs) while it runs; its output and exit status go back through the agent to hvdrun.

A node that leaves (its raylet stops) ends its actors, and with them their workers (each dies
with its actor's process); hvdrun sees lost workers, forms a round of the others, and adds
workers again when discovery offers the node's address once more and its blacklist cooldown
is over.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import sys
import tempfile
import threading
from typing import Any, Dict, List, Optional

from hvd.ray import _agent

_LAUNCHER = "hvd.ray"
# Ray nodes come back after a restart with the same address. Without a cooldown a node that
# left once would be out for the rest of the job; Horovod's hvdrun default (never) is kept for
# host lists, Ray jobs get this unless cooldown_range says otherwise.
DEFAULT_COOLDOWN = (10, 300)
DISCOVERY_INTERVAL = 1.0
STOP_GRACE = 10  # seconds from a stopped worker's SIGTERM to its SIGKILL (hvdrun's default)


class _ProcessActor:
    """One worker's process on its node (made a Ray actor class by ElasticJob)."""

    def __init__(self):
        import threading
        self.proc = None
        self.stopped = False  # terminate() came first: run() starts nothing
        self.lock = threading.Lock()

    def ready(self):
        return os.getpid()

    def run(self, argv, env, cwd):
        """Runs the worker; yields ("o"|"e", bytes) as it writes, then ("x", exit status)."""
        import selectors
        import subprocess

        from hvd import _ranks
        child_env = dict(os.environ)  # the node's (CUDA_VISIBLE_DEVICES from Ray) ...
        child_env.update(env)         # ... under what hvdrun forwards
        with self.lock:
            stopped = self.stopped
            if not stopped:
                self.proc = subprocess.Popen(argv, env=child_env,
                                             cwd=cwd if os.path.isdir(cwd) else None,
                                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE,
                                             preexec_fn=_ranks._die_with_parent)  # dies with it
        if stopped:
            yield "x", -15  # stopped before it started: as if by SIGTERM
            return
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ, "o")
        selector.register(self.proc.stderr, selectors.EVENT_READ, "e")
        streams = 2
        while streams:
            for key, _ in selector.select():
                data = os.read(key.fd, 1 << 16)
                if data:
                    yield key.data, data
                else:
                    selector.unregister(key.fileobj)
                    streams -= 1
        yield "x", self.proc.wait()

    def terminate(self, grace):
        import subprocess
        with self.lock:
            self.stopped = True
            proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()


class ElasticJob:
    def __init__(self, settings, min_workers: int, max_workers: Optional[int],
                 cpus_per_worker: float, gpus_per_worker: float, reset_limit: Optional[int],
                 cooldown_range, elastic_timeout: int):
        for name, value in (("min_workers", min_workers), ("max_workers", max_workers)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{_LAUNCHER}: {name} must be a positive integer, got "
                                 f"{value!r}")
        if max_workers is not None and max_workers < min_workers:
            raise ValueError(f"{_LAUNCHER}: max_workers={max_workers} is below "
                             f"min_workers={min_workers}")
        cooldown = tuple(cooldown_range) if cooldown_range is not None else DEFAULT_COOLDOWN
        if len(cooldown) != 2 or not 1 <= cooldown[0] <= cooldown[1]:
            raise ValueError(f"{_LAUNCHER}: cooldown_range must be (min_seconds, max_seconds) "
                             f"with 1 <= min <= max, got {cooldown_range!r}")
        self.settings = settings
        self.min_workers, self.max_workers = min_workers, max_workers
        self.cpus_per_worker, self.gpus_per_worker = cpus_per_worker, gpus_per_worker
        self.reset_limit, self.cooldown = reset_limit, cooldown
        self.elastic_timeout = elastic_timeout
        self.executable = None
        self._dir = None
        self._server = None
        self._stopped = threading.Event()
        self._threads: List[threading.Thread] = []
        self._nodes: Dict[str, str] = {}  # address -> node id, of the live nodes
        self._actors = set()
        self._lock = threading.Lock()

    # -- lifetime ---------------------------------------------------------------------------
    def start(self, ray, executable_cls, args, kwargs, env):
        if self._dir is not None:
            raise RuntimeError(f"{_LAUNCHER}: start() was called already; shutdown() first")
        self._ray = ray
        self._stopped.clear()  # a start after shutdown() serves again
        self._actor_cls = ray.remote(_ProcessActor)
        self.executable = (executable_cls, tuple(args or ()), dict(kwargs or {}))
        self.env = env
        self._dir = tempfile.mkdtemp(prefix="hvd-ray-")  # 0700: the socket is this user's
        try:
            self._hosts_file = os.path.join(self._dir, "hosts")
            self._refresh_hosts()
            self._discovery = self._script("discover", f"exec cat {shlex.quote(self._hosts_file)}")
            agent = os.path.join(os.path.dirname(os.path.abspath(_agent.__file__)), "_agent.py")
            self._agent = self._script(
                "agent", f"exec {shlex.quote(sys.executable)} {shlex.quote(agent)} \"$@\"")
            self._socket_path = os.path.join(self._dir, "agents.sock")
            self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._server.bind(self._socket_path)
            self._server.listen(64)
            for target in (self._discover_forever, self._serve_agents):
                t = threading.Thread(target=target, daemon=True)
                t.start()
                self._threads.append(t)
        except BaseException:
            self.shutdown()
            raise

    def shutdown(self):
        self._stopped.set()
        if self._server is not None:
            try:
                self._server.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._server.close()
            self._server = None
        for t in self._threads:
            t.join(5)
        self._threads = []
        with self._lock:
            actors, self._actors = list(self._actors), set()
        for actor in actors:
            self._ray.kill(actor, no_restart=True)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _script(self, name, body):
        path = os.path.join(self._dir, name)
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\n{body}\n")
        os.chmod(path, 0o700)
        return path

    # -- run --------------------------------------------------------------------------------
    def run(self, fn, args, kwargs) -> List[Any]:
        from hvd import _run
        if self._dir is None:
            raise RuntimeError(f"{_LAUNCHER}: call start() first")
        flags = ["--min-np", str(self.min_workers),
                 "--host-discovery-script", self._discovery,
                 "--launch-agent", self._agent,
                 "--start-timeout", str(int(self.settings.timeout_s)),
                 "--elastic-timeout", str(int(self.elastic_timeout)),
                 "--blacklist-cooldown-range", str(self.cooldown[0]), str(self.cooldown[1])]
        if self.max_workers is not None:
            flags += ["--max-np", str(self.max_workers)]
        if self.reset_limit is not None:
            flags += ["--reset-limit", str(self.reset_limit)]
        if self.settings.nics:
            flags += ["--network-interface", sorted(self.settings.nics)[0]]
        env = dict(os.environ)
        env.update(self.env)
        env[_agent.SOCKET_ENV] = self._socket_path
        return _run.launch(fn, args or (), kwargs, flags, env=env)

    def execute(self, fn) -> List[Any]:
        cls, args, kwargs = self.executable
        if cls is None:
            raise RuntimeError(f"{_LAUNCHER}: execute() needs start(executable_cls=...)")
        return self.run(_call_on_executable, (fn, cls, args, kwargs), None)

    # -- discovery --------------------------------------------------------------------------
    def _refresh_hosts(self):
        ray = self._ray
        here = ray.get_runtime_context().get_node_id()
        lines, nodes = [], {}
        alive = [n for n in ray.nodes() if n.get("Alive", n.get("alive"))]
        alive.sort(key=lambda n: (n["NodeID"] != here, n["NodeManagerAddress"]))
        for node in alive:
            resources = node.get("Resources", {})
            slots = resources.get("CPU", 0) // self.cpus_per_worker if self.cpus_per_worker \
                else 1 << 16
            if self.gpus_per_worker:
                slots = min(slots, resources.get("GPU", 0) // self.gpus_per_worker)
            address = node["NodeManagerAddress"]
            nodes[address] = node["NodeID"]
            if int(slots) > 0:
                lines.append(f"{address}:{int(slots)}\n")
        with self._lock:
            self._nodes = nodes
        partial = self._hosts_file + ".part"
        with open(partial, "w") as f:
            f.writelines(lines)
        os.replace(partial, self._hosts_file)

    def _discover_forever(self):
        while not self._stopped.wait(DISCOVERY_INTERVAL):
            try:
                self._refresh_hosts()
            except Exception as e:  # noqa: BLE001  (GCS briefly unreachable: keep the last list)
                print(f"{_LAUNCHER}: reading the Ray cluster's nodes failed: {e!r}",
                      file=sys.stderr, flush=True)

    # -- the agents -------------------------------------------------------------------------
    def _serve_agents(self):
        while not self._stopped.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return  # closed by shutdown()
            threading.Thread(target=self._serve_agent, args=(conn,), daemon=True).start()

    def _serve_agent(self, conn):
        with conn:
            kind, payload = _agent.read_frame(conn)
            if kind != _agent.REQUEST:
                return
            request = json.loads(payload)
            host = request["host"]
            try:
                self._run_worker(conn, host, request)
            except OSError:
                pass  # the agent is gone: hvdrun stopped it, and _run_worker killed the actor

    def _run_worker(self, conn, host, request):
        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        with self._lock:
            node = self._nodes.get(host)
        if node is None:
            conn.sendall(_agent.frame(_agent.LOST, f"no live Ray node has the address {host} "
                                                   "(it left the cluster)".encode()))
            return
        actor = self._actor_cls.options(
            num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker, max_concurrency=2,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
        with self._lock:
            self._actors.add(actor)
        # The agent's stop (hvdrun's SIGTERM) or end is watched from now on, also while the
        # actor waits for its node's resources: neither may be lost.
        stop = threading.Event()
        threading.Thread(target=self._relay_stop, args=(conn, actor, stop), daemon=True).start()
        try:
            timeout = self.settings.timeout_s
            ready, _ = ray.wait([actor.ready.remote()], timeout=timeout)
            if not ready:
                free = ray.available_resources()
                conn.sendall(_agent.frame(_agent.LOST, (
                    f"a worker of {self.cpus_per_worker:g} CPUs and {self.gpus_per_worker:g} "
                    f"GPUs did not start on node {host} within timeout_s={timeout} (the cluster "
                    f"has {free.get('CPU', 0):g} CPUs and {free.get('GPU', 0):g} GPUs "
                    "free)").encode()))
                return
            if stop.is_set():
                conn.sendall(_agent.frame(_agent.EXIT, b"-15"))
                return
            stream = actor.run.options(num_returns="streaming").remote(
                request["argv"], request["env"], request["cwd"])
            try:
                for ref in stream:
                    kind, data = ray.get(ref)
                    if kind == "x":
                        conn.sendall(_agent.frame(_agent.EXIT, str(data).encode()))
                        return
                    conn.sendall(_agent.frame(_agent.OUT if kind == "o" else _agent.ERR, data))
            except ray.exceptions.RayError as e:
                reason = str(e).strip().splitlines()[0] if str(e).strip() else ""
                conn.sendall(_agent.frame(_agent.LOST, (
                    f"the worker on node {host} was lost with its Ray actor "
                    f"({type(e).__name__}: {reason})").encode()))
        finally:
            with self._lock:
                self._actors.discard(actor)
            ray.kill(actor, no_restart=True)

    def _relay_stop(self, conn, actor, stop):
        """hvdrun's SIGTERM to the agent stops the worker (terminate, then SIGKILL after
        STOP_GRACE); an agent that vanished (hvdrun's SIGKILL) takes its worker with it."""
        while True:
            try:
                kind, _ = _agent.read_frame(conn)
            except OSError:
                return  # _run_worker closed the connection: the worker's end was relayed
            if kind != _agent.STOP:
                self._ray.kill(actor, no_restart=True)
                return
            if not stop.is_set():
                stop.set()
                actor.terminate.remote(STOP_GRACE)


def _call_on_executable(fn, cls, args, kwargs):
    return fn(cls(*args, **kwargs))
