"""Fake remote hosts for the SSH tests: network namespaces joined by a bridge, each running a
real OpenSSH sshd on keys generated for the test. hvdrun runs in the root namespace and reaches
the hosts over veth pairs, as it would reach machines on a LAN; the ranks on different hosts talk
over the same bridge. Needs root (ip netns); callers skip with a message otherwise."""
import contextlib
import fcntl
import os
import pathlib
import re
import shutil
import socket
import subprocess
import tempfile
import time

SSHD = "/usr/sbin/sshd"
SSH_PORT = 2222


def unavailable_reason():
    """Why these hosts cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root for ip netns"
    for tool in (SSHD, shutil.which("ip"), shutil.which("ssh-keygen")):
        if not tool or not os.path.exists(tool):
            return f"missing {tool or 'ip/ssh-keygen'} (Debian: openssh-server, iproute2)"
    probe = f"hvdprobe{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if r.returncode != 0:
        return f"ip netns add failed: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def sh(*args, check=True):
    return subprocess.run(list(args), capture_output=True, text=True, check=check)


# Held while a subnet is chosen and its bridge given its address, so that hosts made at the same
# time by other processes (the parallel test runner's workers, a benchmark) take other subnets.
SUBNET_LOCK = "/run/lock/hvd-test-subnets.lock"


def subnets_in_use():
    """The N of every 10.N.x.x address on this machine's root namespace."""
    out = sh("ip", "-4", "-o", "addr", "show").stdout
    return {int(n) for n in re.findall(r"inet 10\.(\d+)\.", out)}


class SshHosts:
    """`count` hosts at 10.N.0.2, 10.N.0.3, ...; the bridge (hvdrun's side) is 10.N.0.1. N is
    the `subnet` given, or else one that no address on this machine uses."""

    def __init__(self, count, subnet=None, login_home=None, host_keys=None, hostnames=None,
                 sshd_options=None):
        """login_home: the HOME sshd gives sessions (its shell reads that .bashrc); default: the
        user's own, so remote shells run this machine's login scripts. host_keys: per host, the
        key types its sshd offers (ssh-keygen -t names); default: ed25519 only. hostnames: per
        host, a name; each sshd (and every process started through it or host_command) then runs
        in UTS and mount namespaces of its own, with that host name and an /etc/hosts (the file
        `hosts_file`) that resolves every host's name, as on separate machines: OpenMPI's and
        Slurm's daemons route by host name. sshd_options: per host, more sshd_config
        lines (e.g. "KexAlgorithms curve25519-sha256"); the log is each host's sshd_log(i)."""
        self.count = count
        self.hostnames = hostnames
        self.login_home = login_home
        self.host_keys = host_keys or [("ed25519",)] * count
        self.sshd_options = sshd_options or [""] * count
        self.subnet = subnet
        self._name(subnet if subnet is not None else 0)
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="hvd-ssh-"))
        self.home = self.dir / "home"  # hvdrun's HOME: its ~/.ssh is made here
        self.key = self.home / ".ssh" / "id_ed25519"
        self.hosts_file = self.dir / "hosts"
        self.sshd = []

    def _name(self, subnet):
        self.subnet_number = subnet
        self.tag = f"{os.getpid() % 10000}x{subnet}"
        self.prefix = f"10.{subnet}.0"
        self.bridge = f"hvdbr{self.tag}"
        self.bridge_address = f"{self.prefix}.1"
        self.addresses = [f"{self.prefix}.{i + 2}" for i in range(self.count)]
        self.namespaces = [f"hvdns{self.tag}h{i}" for i in range(self.count)]

    # --- setup -----------------------------------------------------------------------------
    NEIGH = "/proc/sys/net/ipv4/neigh/default/gc_thresh"

    def _make_room_for_neighbours(self):
        """The kernel's ARP table is one for all namespaces, and its limits (gc_thresh1..3, 128 /
        512 / 1,024 by default) are the root namespace's: hosts that all talk to each other fill
        it with count x count entries, and past the limit new peers' packets are dropped
        ("neighbor table overflow"), which real hosts, each with a table of its own, never see.
        Raised for the hosts' life and restored by close()."""
        need = self.count * (self.count + 1) + 1024
        self._neigh_saved = {}
        for k in (1, 2, 3):
            path = f"{self.NEIGH}{k}"
            old = int(pathlib.Path(path).read_text())
            if old < need:
                self._neigh_saved[path] = old
        for path in sorted(self._neigh_saved, reverse=True):  # thresh3 first: 1 <= 2 <= 3
            pathlib.Path(path).write_text(str(need))

    def _add_bridge(self):
        """The bridge with its address, in a subnet no other bridge on this machine uses."""
        os.makedirs(os.path.dirname(SUBNET_LOCK), exist_ok=True)
        with open(SUBNET_LOCK, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            used = subnets_in_use()
            if self.subnet is None:
                free = [n for n in range(10, 250) if n not in used]
                if not free:
                    raise RuntimeError("no free 10.N.0.0/24 subnet for the test hosts")
                self._name(free[0])
            elif self.subnet in used:
                raise RuntimeError(f"subnet 10.{self.subnet}.0.0/24 is in use on this machine")
            sh("ip", "link", "add", self.bridge, "type", "bridge")
            sh("ip", "addr", "add", f"{self.bridge_address}/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")

    def start(self):
        """Makes the hosts; on a failure removes what it made, then raises."""
        try:
            return self._start()
        except BaseException:
            self.close()
            raise

    def _start(self):
        os.makedirs("/run/sshd", exist_ok=True)
        if self.count > 16:
            self._make_room_for_neighbours()
        (self.home / ".ssh").mkdir(parents=True, mode=0o700)
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key))
        (self.dir / "authorized_keys").write_text((self.key.with_suffix(".pub")).read_text())
        self._add_bridge()
        if self.hostnames:
            self.hosts_file.write_text("127.0.0.1 localhost\n" + "".join(
                f"{a} {n}\n" for a, n in zip(self.addresses, self.hostnames)))
        for i, (ns, address) in enumerate(zip(self.namespaces, self.addresses)):
            outer, inner = f"hvdv{self.tag}a{i}", f"hvdv{self.tag}b{i}"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
            sh("ip", "link", "set", inner, "netns", ns)
            sh("ip", "link", "set", outer, "master", self.bridge)
            sh("ip", "link", "set", outer, "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", inner, "name", "eth0")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{address}/24", "dev", "eth0")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
            self.sshd.append(self._start_sshd(i, ns))
        for address in self.addresses:
            self._wait_listening(address)
        return self

    def _start_sshd(self, i, ns):
        host_keys = ""
        for kind in self.host_keys[i]:
            host_key = self.dir / f"host{i}_{kind}"
            sh("ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(host_key))
            host_keys += f"HostKey {host_key}\n"
        # libssh2 1.10 verifies RSA host keys with SHA-1 only (ssh-rsa), which OpenSSH 8.8+
        # turns off by default.
        if "rsa" in self.host_keys[i]:
            host_keys += "HostKeyAlgorithms +ssh-rsa\n"
        config = self.dir / f"sshd{i}.conf"
        config.write_text(f"""Port {SSH_PORT}
ListenAddress 0.0.0.0
{host_keys}AuthorizedKeysFile {self.dir}/authorized_keys
PidFile {self.dir}/sshd{i}.pid
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
PrintMotd no
MaxStartups 100:30:200
MaxSessions 100
""" + (f"SetEnv HOME={self.login_home}\n" if self.login_home else "")
                          + (self.sshd_options[i] + "\n" if self.sshd_options[i] else ""))
        return self._launch_sshd(i, ns)

    def _launch_sshd(self, i, ns):
        config = self.dir / f"sshd{i}.conf"
        log = open(self.sshd_log(i), "a")
        return subprocess.Popen(self.host_command(i, [SSHD, "-D", "-e", "-f", str(config)]),
                                stdout=log, stderr=subprocess.STDOUT)

    def host_command(self, i, argv, keep_sys=False):
        """argv run on host i: in its network namespace and, with hostnames, its own UTS and
        mount namespaces (its name, the shared hosts file as /etc/hosts). keep_sys: this
        machine's /sys stays (nsenter), with its cgroup file systems, which `ip netns exec`'s
        fresh /sys lacks (slurmd needs them)."""
        argv = [str(a) for a in argv]
        if self.hostnames:
            setup = (f"hostname {self.hostnames[i]} && "
                     f"mount --bind {self.hosts_file} /etc/hosts && exec \"$@\"")
            argv = ["unshare", "--uts", "--mount", "sh", "-c", setup, "sh"] + argv
        if keep_sys:
            return ["nsenter", f"--net=/run/netns/{self.namespaces[i]}"] + argv
        return ["ip", "netns", "exec", self.namespaces[i]] + argv

    def _wait_listening(self, address, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            with contextlib.suppress(OSError), socket.create_connection((address, SSH_PORT), 0.5):
                return
            time.sleep(0.05)
        raise RuntimeError(f"sshd on {address}:{SSH_PORT} did not come up; see {self.dir}")

    def sshd_log(self, i):
        return self.dir / f"sshd{i}.log"

    def host_key(self, i, kind="ed25519"):
        """'TYPE BASE64' of host i's public key of that kind (as known_hosts holds it)."""
        return " ".join((self.dir / f"host{i}_{kind}.pub").read_text().split()[:2])

    # --- use ---------------------------------------------------------------------------------
    def env(self, **extra):
        """Environment for hvdrun: its HOME holds the client key and known_hosts."""
        env = dict(os.environ)
        env.pop("SSH_AUTH_SOCK", None)
        env["HOME"] = str(self.home)
        env.update(extra)
        return env

    def on_login_node(self, argv):
        """argv with this machine's /etc/hosts swapped for the hosts' (a mount namespace of its
        own; needs hostnames), so their names resolve as a login node's DNS resolves them."""
        setup = f'mount --bind {self.hosts_file} /etc/hosts && exec "$@"'
        return ["unshare", "--mount", "sh", "-c", setup, "sh", *map(str, argv)]

    def known_hosts(self):
        """known_hosts lines for every host's ed25519 key, as ssh records a non-22 port."""
        return "".join(f"[{a}]:{SSH_PORT} {self.host_key(i)}\n"
                       for i, a in enumerate(self.addresses))

    def hosts(self, slots):
        return ",".join(f"{a}:{slots}" for a in self.addresses)

    def stop_sshd(self, i):
        self.sshd[i].terminate()
        self.sshd[i].wait(10)

    def start_sshd(self, i):
        """Starts host i's sshd again (after stop_sshd), with the same keys and config."""
        self.sshd[i] = self._launch_sshd(i, self.namespaces[i])
        self._wait_listening(self.addresses[i])

    # --- teardown ----------------------------------------------------------------------------
    def close(self):
        for p in self.sshd:
            if p.poll() is None:
                p.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(10)
        # The veth pairs first, by their outer ends: deleting a namespace destroys its devices
        # asynchronously, and hosts made next in this process may take the same subnet and
        # so the same link names.
        for i in range(self.count):
            sh("ip", "link", "del", f"hvdv{self.tag}a{i}", check=False)
        for ns in self.namespaces:
            sh("ip", "netns", "del", ns, check=False)
        sh("ip", "link", "del", self.bridge, check=False)
        shutil.rmtree(self.dir, ignore_errors=True)
        for path, old in sorted(getattr(self, "_neigh_saved", {}).items()):  # thresh1 first
            pathlib.Path(path).write_text(str(old))
