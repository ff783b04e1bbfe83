"""A real Spark standalone cluster for the e2e tests: a master and two workers (2 cores each),
each in a network namespace of its own (ssh_hosts.py's hosts, without using their sshd), on the
hosts' bridge. The driver runs in this machine's namespace and binds the bridge address, where
the executors (started by the workers, so in their namespaces) reach it. Spark is PySpark's
(its bin/spark-class and jars), Java is Debian's OpenJDK. Everything lives in one temporary
directory, removed by close(); the daemons are ended by PID."""
import contextlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import time
import urllib.request

from ssh_hosts import SshHosts, unavailable_reason as ssh_unavailable

MASTER_PORT = 7077
MASTER_UI_PORT = 8080
WORKER_CORES = 2


def spark_home():
    try:
        import pyspark
    except ImportError:
        return None
    return pathlib.Path(pyspark.__file__).parent


def java_home():
    java = shutil.which("java")
    return pathlib.Path(os.path.realpath(java)).parents[1] if java else None


def unavailable_reason():
    reason = ssh_unavailable()
    if reason:
        return reason
    if spark_home() is None:
        return "PySpark is not installed (scripts/setup.sh installs hvd[spark])"
    if java_home() is None:
        return "no java on PATH (Debian: openjdk-17-jre-headless)"
    return None


class SparkCluster:
    def __init__(self, workers=2, python=None, pythonpath=""):
        """python: the executors' interpreter; pythonpath: their PYTHONPATH (hvd's build)."""
        self.hosts = SshHosts(workers + 1)
        self.workers = workers
        self.python = python
        self.pythonpath = pythonpath
        self.procs = []

    @property
    def master_url(self):
        return f"spark://{self.hosts.addresses[0]}:{MASTER_PORT}"

    @property
    def driver_host(self):
        return self.hosts.bridge_address

    def start(self):
        try:
            return self._start()
        except BaseException:
            self.close()
            raise

    def _env(self, name):
        d = self.hosts.dir / name
        d.mkdir(exist_ok=True)
        env = dict(os.environ)
        env.update(SPARK_HOME=str(spark_home()), JAVA_HOME=str(java_home()),
                   SPARK_LOG_DIR=str(d), SPARK_LOCAL_DIRS=str(d), SPARK_NO_DAEMONIZE="1",
                   SPARK_CONF_DIR=str(d), PYSPARK_PYTHON=self.python or "python3",
                   PYTHONPATH=self.pythonpath)
        return env

    def _spawn(self, i, name, argv):
        log = open(self.hosts.dir / f"{name}.log", "ab")
        command = self.hosts.host_command(i, [spark_home() / "bin" / "spark-class", *argv])
        self.procs.append(subprocess.Popen(command, env=self._env(name), stdout=log,
                                           stderr=subprocess.STDOUT, start_new_session=True))

    def _start(self):
        self.hosts.start()
        master = self.hosts.addresses[0]
        self._spawn(0, "master", ["org.apache.spark.deploy.master.Master", "--host", master,
                                  "--port", MASTER_PORT, "--webui-port", MASTER_UI_PORT])
        for w in range(1, self.workers + 1):
            self._spawn(w, f"worker{w}", [
                "org.apache.spark.deploy.worker.Worker", "--host", self.hosts.addresses[w],
                "--cores", WORKER_CORES, "--memory", "2g", "--webui-port", "8081",
                "--work-dir", self.hosts.dir / f"work{w}", self.master_url])
        self.wait_for_workers(self.workers)
        return self

    def alive_workers(self):
        url = f"http://{self.hosts.addresses[0]}:{MASTER_UI_PORT}/json/"
        with contextlib.suppress(OSError, ValueError):
            with urllib.request.urlopen(url, timeout=2) as r:
                state = json.load(r)
            return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")
        return 0

    def wait_for_workers(self, n, timeout=90):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.alive_workers() >= n:
                return
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited with {p.returncode}; logs in "
                                       f"{self.hosts.dir}")
            time.sleep(0.5)
        raise RuntimeError(f"{n} Spark workers did not register in {timeout} s; logs in "
                           f"{self.hosts.dir}")

    def log(self, name):
        return (self.hosts.dir / f"{name}.log").read_text(errors="replace")

    def close(self):
        # Each daemon leads a process group: a worker's executors and their Python workers go
        # with it.
        for p in reversed(self.procs):
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(10)
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.hosts.close()
