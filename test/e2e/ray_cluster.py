"""A real Ray cluster for the e2e tests: a head node and a worker node (`ray start`), each in a
network namespace of its own (ssh_hosts.py's hosts, without using their sshd) with its own
address, CPUs and temporary directory. Drivers run on the head node (in its namespace), as
`ray.init` wants a local node. The nodes are ended by PID (`ray start --block` stops its node's
processes when it is terminated); the directory is removed by close()."""
import contextlib
import os
import pathlib
import signal
import subprocess
import sys
import time

from ssh_hosts import SshHosts, unavailable_reason as ssh_unavailable

GCS_PORT = 6379
CPUS_PER_NODE = 2


def ray_command():
    """The `ray` CLI of this Python's environment, or None."""
    candidate = pathlib.Path(sys.executable).parent / "ray"
    return candidate if candidate.exists() else None


def unavailable_reason():
    reason = ssh_unavailable()
    if reason:
        return reason
    if ray_command() is None:
        return "Ray is not installed (scripts/setup.sh installs hvd[ray])"
    return None


class RayCluster:
    def __init__(self, nodes=2, pythonpath=""):
        self.hosts = SshHosts(nodes)
        self.nodes = nodes
        self.pythonpath = pythonpath
        self.procs = {}

    @property
    def address(self):
        return f"{self.hosts.addresses[0]}:{GCS_PORT}"

    def env(self):
        env = dict(os.environ)
        env.update(PYTHONPATH=self.pythonpath, RAY_USAGE_STATS_ENABLED="0",
                   RAY_DISABLE_IMPORT_WARNING="1", OMP_NUM_THREADS="1")
        return env

    def start(self):
        try:
            self.hosts.start()
            for i in range(self.nodes):
                self.start_node(i)
            self.wait_for_nodes(self.nodes)
            return self
        except BaseException:
            self.close()
            raise

    def start_node(self, i):
        temp = self.hosts.dir / f"ray{i}"
        temp.mkdir(exist_ok=True)
        argv = [ray_command(), "start", "--block", "--disable-usage-stats",
                f"--node-ip-address={self.hosts.addresses[i]}", f"--num-cpus={CPUS_PER_NODE}",
                "--num-gpus=0", "--object-store-memory=100000000", f"--temp-dir={temp}"]
        if i == 0:
            argv += ["--head", f"--port={GCS_PORT}", "--include-dashboard=false"]
        else:
            argv += [f"--address={self.address}"]
        log = open(self.hosts.dir / f"node{i}.log", "ab")
        self.procs[i] = subprocess.Popen(self.hosts.host_command(i, argv), env=self.env(),
                                         stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def stop_node(self, i):
        """Ends node i's processes (its raylet with them), as a machine that went away."""
        p = self.procs.pop(i, None)
        if p is None or p.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(5)  # `ray start --block` stops its node's processes, then exits
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()

    def alive_nodes(self):
        r = subprocess.run(self.on_head([sys.executable, "-c",
                                         "import ray; ray.init(address=%r, logging_level='ERROR');"
                                         " print(sum(n['Alive'] for n in ray.nodes()))"
                                         % self.address]),
                           capture_output=True, text=True, env=self.env(), timeout=60)
        with contextlib.suppress(ValueError):
            return int(r.stdout.strip().splitlines()[-1])
        return 0

    def wait_for_nodes(self, n, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for i, p in self.procs.items():
                if p.poll() is not None:
                    raise RuntimeError(f"ray node {i} exited with {p.returncode}:\n"
                                       f"{self.log(i)[-3000:]}")
            if self.alive_nodes() >= n:
                return
            time.sleep(1)
        raise RuntimeError(f"{n} Ray nodes were not up in {timeout} s; logs in {self.hosts.dir}")

    def on_head(self, argv):
        return self.hosts.host_command(0, argv)

    def log(self, i):
        return (self.hosts.dir / f"node{i}.log").read_text(errors="replace")

    def close(self):
        for i in sorted(self.procs, reverse=True):
            self.stop_node(i)
        self.hosts.close()
