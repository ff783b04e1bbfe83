"""A real Slurm cluster for the e2e tests: one munged, a slurmctld and one slurmd per node, the
nodes being the SSH tests' hosts (network namespaces with an sshd) with host names of their own
(UTS namespaces) and an /etc/hosts that resolves them, as on a cluster with DNS. The controller
runs in this machine's namespace on the hosts' bridge, so srun, sbatch and salloc run here as on
a login node. Everything lives in one temporary directory and is removed by close(); the daemons
are ended by PID. Needs root, Debian's slurmd, slurmctld, slurm-client and munge."""
import contextlib
import os
import pathlib
import shutil
import subprocess
import time

from ssh_hosts import SSH_PORT, SshHosts, unavailable_reason as ssh_unavailable

DAEMONS = {"munged": "/usr/sbin/munged", "munge": "/usr/bin/munge",
           "slurmctld": "/usr/sbin/slurmctld", "slurmd": "/usr/sbin/slurmd",
           "srun": shutil.which("srun") or "/usr/bin/srun"}
CONTROLLER = "hvdctl"
MUNGE_SOCKET = pathlib.Path("/run/munge/munge.socket.2")  # munge's default


def munge_answers():
    """A munged on the default socket encodes and decodes a credential."""
    try:
        cred = subprocess.run(["munge", "-n"], capture_output=True, timeout=5)
        return cred.returncode == 0 and subprocess.run(
            ["unmunge"], input=cred.stdout, capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def unavailable_reason():
    reason = ssh_unavailable()
    if reason:
        return reason
    for name, path in DAEMONS.items():
        if not os.path.exists(path):
            return f"missing {path} (Debian: slurmd slurmctld slurm-client munge)"
    return None


class SlurmCluster:
    """`nodes` Slurm nodes named hvdnode1.., `cpus` CPUs each (more than this machine has is
    allowed: SlurmdParameters=config_overrides), in one partition `debug`."""

    def __init__(self, nodes=2, cpus=4):
        self.names = [f"hvdnode{i + 1}" for i in range(nodes)]
        self.cpus = cpus
        self.hosts = SshHosts(nodes, hostnames=self.names)
        self.daemons = []

    @property
    def dir(self):
        return self.hosts.dir

    def start(self):
        self.hosts.start()
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self):
        os.chmod(self.dir, 0o755)  # munged wants its socket's directories searchable by all
        self.conf = self.dir / "slurm.conf"
        self._start_munged()
        (self.dir / "state").mkdir()
        self.conf.write_text(self._config())
        # slurmctld checks that its host name is SlurmctldHost's.
        self._spawn("slurmctld", ["unshare", "--uts", "sh", "-c",
                                  f'hostname {CONTROLLER} && exec "$@"', "sh",
                                  DAEMONS["slurmctld"], "-D", "-f", self.conf])
        for i, name in enumerate(self.names):
            (self.dir / f"spool-{name}").mkdir()
            self._spawn(f"slurmd-{name}", self.hosts.host_command(
                i, [DAEMONS["slurmd"], "-D", "-f", self.conf], keep_sys=True))
        self._wait(self._nodes_idle, "every node idle in sinfo", timeout=30)
        self._login_home()

    def _start_munged(self):
        """munged on its default socket, where Slurm's daemons and hvd's ranks (munge_secret.h)
        find it on a real cluster; one already answering there (a machine's own, another test
        run's) serves this cluster too."""
        if munge_answers():
            return
        MUNGE_SOCKET.parent.mkdir(mode=0o755, exist_ok=True)
        key = self.dir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self._spawn("munged", [DAEMONS["munged"], "-F", f"--socket={MUNGE_SOCKET}",
                               f"--key-file={key}", f"--pid-file={self.dir}/munged.pid",
                               f"--seed-file={self.dir}/munged.seed",
                               f"--log-file={self.dir}/munged.log"])
        self._wait(munge_answers, "munged's socket")

    def _config(self):
        d = self.dir
        # The controller's port on the bridge: one per subnet, so clusters made by concurrent
        # test runs do not meet.
        port = 17000 + self.hosts.subnet_number
        nodes = "".join(f"NodeName={n} NodeAddr={a} CPUs={self.cpus} State=UNKNOWN\n"
                        for n, a in zip(self.names, self.hosts.addresses))
        return f"""ClusterName=hvdtest
SlurmctldHost={CONTROLLER}({self.hosts.bridge_address})
SlurmctldPort={port}
SlurmdPort=6818
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool-%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/builtin
KillWait=2
MessageTimeout=10
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
{nodes}PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""

    def _login_home(self):
        """hvdrun's HOME on the login node: the hosts' key, their keys as known hosts by name,
        and the sshd port in ~/.ssh/config, as a cluster's users have them."""
        ssh = self.hosts.home / ".ssh"
        (ssh / "config").write_text(f"Host hvdnode*\n    Port {SSH_PORT}\n")
        (ssh / "known_hosts").write_text("".join(
            f"[{n}]:{SSH_PORT} {self.hosts.host_key(i)}\n" for i, n in enumerate(self.names)))

    def _spawn(self, name, argv):
        log = open(self.dir / f"{name}.out", "w")
        self.daemons.append((name, subprocess.Popen([str(a) for a in argv], stdout=log,
                                                    stderr=subprocess.STDOUT)))

    def _wait(self, ready, what, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, p in self.daemons:
                if p.poll() is not None:
                    raise RuntimeError(f"{name} exited with {p.returncode} while waiting for "
                                       f"{what}:\n{self.logs()}")
            if ready():
                return
            time.sleep(0.1)
        raise RuntimeError(f"timed out after {timeout} s waiting for {what}:\n{self.logs()}")

    def _nodes_idle(self):
        r = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True,
                           env=self.env(), timeout=10)
        states = dict(line.split() for line in r.stdout.splitlines() if line.strip())
        return r.returncode == 0 and all(states.get(n) == "idle" for n in self.names)

    # --- use ---------------------------------------------------------------------------------
    def env(self, **extra):
        """The environment of a user on the login node: SLURM_CONF, the HOME with the SSH key."""
        env = self.hosts.env(SLURM_CONF=str(self.conf))
        env.update(extra)
        return env

    def run(self, argv, timeout=120, **kwargs):
        """argv run to completion on the login node (where the node names resolve), in the
        cluster's environment."""
        kwargs.setdefault("env", self.env())
        return subprocess.run(self.hosts.on_login_node(argv), capture_output=True, text=True,
                              timeout=timeout, **kwargs)

    def logs(self):
        out = []
        for path in sorted(self.dir.glob("*.log")) + sorted(self.dir.glob("*.out")):
            with contextlib.suppress(OSError):
                out.append(f"--- {path.name}\n" + path.read_text()[-2000:])
        return "\n".join(out)

    # --- teardown ----------------------------------------------------------------------------
    def close(self):
        for name, p in reversed(self.daemons):
            if p.poll() is None:
                p.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(10)
            if p.poll() is None:
                p.kill()
                p.wait()
        self.daemons = []
        self.hosts.close()
