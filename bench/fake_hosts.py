"""hvd against OpenMPI over many SSH hosts, in one run: fake hosts are network namespaces joined
by a bridge, each running a real sshd (test/e2e/ssh_hosts.py), reached with a plain login. For each
topology (hosts x ranks per host) both launchers start the same kind of light C++ worker:

- launch: from starting the launcher to every rank initialised (connected, past a barrier):
  hvd-bench initialising as hvd_init does under hvdrun, MPI_Init + MPI_Barrier under mpirun;
- allreduce: float32 sum, out of place, 4 B to 16 MiB by factors of 4 (4 B, 64 KiB, 1 MiB and
  16 MiB are the sizes the tables show): hvd-bench's sweep under hvdrun, MPI_Allreduce under
  mpirun (bench/peers/mpi_allreduce.cc, the same timing loop).

One launch gives both (`--startup-first`: the worker stamps its initialisation, then sweeps on
new collectives), so each round launches each tool once; a first contact with one rank per host
(host keys learnt, caches warm) goes before the rounds. On topologies of one rank per host and
up to 16 ranks `hvd-bench calibrate` then times each allreduce algorithm on the topology's own
hosts (up to --max-bytes or 16 MiB), as a user tunes hvd for a cluster, and hvd's launches read
that model (HVD_NETWORK_MODEL): auto picks from what it measured (`--no-calibrate`, and
topologies of several ranks per host, which calibrate refuses: from the built-in model's
formulas). Its time and picks are in the JSON.

- training (`--training`, default 1x2 and 4x4): the MNIST example's CNN as bench/torch_scaling.py
  trains it (batch 128 per rank, one thread per rank), hvd's DistributedOptimizer under hvdrun
  against torch DDP over gloo started by torchrun on each host over SSH (as a user of torchrun
  starts a multi-host job); samples/s of the whole job.

Each launcher gets the same hosts and slots. OpenMPI runs with its TCP and shared-memory BTLs
(vader between the ranks of one fake host, as hvd uses its shared-memory transport there), the
bridge's subnet for both its data and its daemons, and mpi_yield_when_idle: every fake host
shares this machine's cores, which OpenMPI cannot see from a host list of one slot each, and
its default busy polling then starves the other ranks (hvd adapts its own waiting by itself). The tools alternate, rounds interleave,
medians are reported. Needs root (it makes and removes its namespaces; nothing is left behind,
also when interrupted).

    sudo python bench/fake_hosts.py --json bench/results/fake_hosts.json
"""
import argparse
import importlib.util
import json
import os
import pathlib
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(os.environ.get("HVD_BUILD_DIR", REPO / "build"))
HVDRUN = BUILD / "apps" / "hvdrun"
WORKER = BUILD / "apps" / "hvd-bench"
sys.path.insert(0, str(REPO / "test" / "e2e"))
from ssh_hosts import SSH_PORT, SshHosts, unavailable_reason  # noqa: E402

SHOWN_SIZES = [4, 64 << 10, 1 << 20, 16 << 20]
DEFAULT_TOPOLOGIES = "4x1,8x1,16x1,32x1,64x1,4x4,8x8"


def parse_topologies(text):
    out = []
    for item in text.split(","):
        m = re.fullmatch(r"(\d+)x(\d+)", item.strip())
        if not m or int(m[1]) < 1 or int(m[2]) < 1 or int(m[1]) > 250:
            raise SystemExit(f"--topologies: '{item}' is not HOSTSxRANKS_PER_HOST "
                             "(1 to 250 hosts), e.g. 8x1 or 4x4")
        out.append((int(m[1]), int(m[2])))
    return out


def run(cmd, env, timeout):
    """stdout of cmd; raises with the tail of its output when it fails or times out."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                           cwd=REPO, start_new_session=True)
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(f"{cmd[0]} did not finish within {timeout} s: "
                           f"{(e.stdout or b'')[-1500:]!r}") from None
    if r.returncode != 0:
        raise RuntimeError(f"{cmd[0]} exited with {r.returncode}:\n{r.stdout[-1500:]}\n"
                           f"{r.stderr[-1500:]}")
    return r.stdout


class Launchers:
    """The command lines of both launchers for one set of hosts."""

    def __init__(self, hosts, per_host, mpi_dir):
        self.hosts, self.per_host, self.np = hosts, per_host, hosts.count * per_host
        self.mpi_dir = mpi_dir
        cidr = hosts.prefix + ".0/24"
        # ssh reads the passwd entry's home, not $HOME: name the key and known_hosts.
        agent = (f"ssh -p {SSH_PORT} -i {hosts.key} -o BatchMode=yes "
                 "-o StrictHostKeyChecking=accept-new "
                 f"-o UserKnownHostsFile={hosts.home}/.ssh/known_hosts")
        self.mpirun = ["mpirun", "-np", str(self.np), "-H", hosts.hosts(per_host),
                       "--mca", "plm_rsh_agent", agent, "--mca", "pml", "ob1",
                       "--mca", "btl", "tcp,vader,self", "--mca", "btl_tcp_if_include", cidr,
                       "--mca", "oob_tcp_if_include", cidr, "--mca", "mpi_yield_when_idle", "1"]
        self.hvdrun = [str(HVDRUN), "--ssh-port", str(SSH_PORT), "-np", str(self.np), "-H",
                       hosts.hosts(per_host)]
        self.env = hosts.env(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    def launched(self, tool, start, out):
        """Seconds from `start` (time_ns) to the last rank's HVD_INITIALISED line in out."""
        stamps = [int(x) for x in re.findall(r"HVD_INITIALISED (\d+)", out)]
        if len(stamps) != self.np:
            raise RuntimeError(f"{tool}: {len(stamps)} of {self.np} ranks initialised:\n{out[-1500:]}")
        return (max(stamps) - start) / 1e9

    def launch(self, tool, timeout):
        """Seconds to every rank initialised, for a worker that does nothing else."""
        cmd = (self.hvdrun + [str(WORKER), "startup"] if tool == "hvd"
               else self.mpirun + [str(self.mpi_dir / "mpi_startup")])
        start = time.time_ns()
        return self.launched(tool, start, run(cmd, self.env, timeout))

    def calibrate(self, max_bytes, timeout):
        """hvd-bench calibrate on these hosts and ranks, as a user tunes hvd for a cluster: each
        allreduce algorithm timed by size on this layout, saved to a model file that the hvd
        launches after it read (HVD_NETWORK_MODEL); auto then picks from it. Returns the
        seconds it took and auto's pick at each size."""
        model = self.hosts.home / f"network_model-{self.hosts.count}x{self.per_host}.json"
        start = time.time()
        run(self.hvdrun + [str(WORKER), "-e", str(max_bytes), "calibrate", "--save", str(model)],
            self.env, timeout)
        seconds = round(time.time() - start, 1)
        table = next(t for t in json.loads(model.read_text())["measured_allreduce"]
                     if t["ranks"] == self.np and t.get("ranks_per_host", self.np) == self.per_host)
        picks = {str(int(size)): min(table["seconds"], key=lambda a: table["seconds"][a][i])
                 for i, size in enumerate(table["bytes"])}
        self.env = dict(self.env, HVD_NETWORK_MODEL=str(model))
        return {"seconds": seconds, "max_bytes": max_bytes, "picks": picks}

    def sweep(self, tool, max_bytes, iters, timeout):
        """(launch seconds, {size: microseconds}) of one launch that initialises, then sweeps
        4 B to max_bytes by factors of 4."""
        args = ["-b", "4", "-e", str(max_bytes), "-f", "4", "-w", "3", "-n", str(iters),
                "--startup-first"]
        start = time.time_ns()
        if tool == "hvd":
            with tempfile.NamedTemporaryFile(suffix=".json") as f:
                out = run(self.hvdrun + [str(WORKER)] + args + ["-c", "0", "--placement", "out",
                                                                "--json", f.name],
                          self.env, timeout)
                report = json.load(open(f.name))
            return (self.launched(tool, start, out),
                    {row["size"]: row["out_of_place"]["time_us"] for row in report["rows"]})
        out = run(self.mpirun + [str(self.mpi_dir / "mpi_allreduce")] + args, self.env, timeout)
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        wrong = [r["size"] for r in rows if r["wrong"]]
        if wrong:
            raise RuntimeError(f"mpirun: wrong allreduce results at sizes {wrong}")
        return self.launched(tool, start, out), {r["size"]: r["time_us"] for r in rows}


PYTHON = pathlib.Path(os.environ.get("HVD_VENV", pathlib.Path.home() / ".cache/hvd/venv")) \
    / "bin" / "python"
TRAINING_SCRIPT = REPO / "bench" / "torch_scaling.py"


def training_run(tool, hosts, per_host, args, timeout):
    """samples/s of one training job (rank 0's record of bench/torch_scaling.py's worker)."""
    worker = [str(TRAINING_SCRIPT), "--worker", tool, "--steps", str(args.training_steps),
              "--warmup", "3", "--batch", "128", "--model", "mnist"]
    env = hosts.env()
    if tool == "hvd":
        out = run([str(HVDRUN), "--ssh-port", str(SSH_PORT), "-np", str(hosts.count * per_host),
                   "-H", hosts.hosts(per_host), str(PYTHON)] + worker, env, timeout)
    else:
        # torchrun on every host, as a DDP user starts a multi-host job; rank 0's host is
        # the store. gloo takes the namespace's one interface.
        port = 29400 + os.getpid() % 500
        procs = []
        for i, address in enumerate(hosts.addresses):
            remote = (f"cd {REPO} && PYTHONPATH={BUILD / 'python'} GLOO_SOCKET_IFNAME=eth0 "
                      f"OMP_NUM_THREADS=1 {PYTHON} -m "
                      f"torch.distributed.run --nnodes {hosts.count} --node-rank {i} "
                      f"--nproc-per-node {per_host} --master-addr {hosts.addresses[0]} "
                      f"--master-port {port} " + " ".join(worker))
            procs.append(subprocess.Popen(
                ["ssh", "-p", str(SSH_PORT), "-i", str(hosts.key), "-o", "BatchMode=yes",
                 "-o", "StrictHostKeyChecking=accept-new",
                 "-o", f"UserKnownHostsFile={hosts.home}/.ssh/known_hosts", address, remote],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                start_new_session=True))
        out, failed = "", []
        for i, p in enumerate(procs):
            try:
                o, e = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                o, e = "", "timed out"
            out += o
            if p.returncode != 0:
                failed.append(f"host {hosts.addresses[i]}: {e[-3000:]}")
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if failed:
            raise RuntimeError("torchrun failed on " + "; ".join(failed))
    records = [json.loads(line.split(":", 1)[1] if line.startswith("[") else line)
               for line in out.splitlines() if "samples_per_s" in line]
    if len(records) != 1:
        raise RuntimeError(f"{tool}: expected one result line:\n{out[-1500:]}")
    return records[0]["samples_per_s"]


def measure_training(topology, subnet, args, plain_home, first):
    """first: the tool that runs first in the first round (rounds alternate from it)."""
    n_hosts, per_host = topology
    hosts = SshHosts(n_hosts, subnet, login_home=plain_home,
                     hostnames=[f"fakehost{i}" for i in range(n_hosts)])
    result = {"hosts": n_hosts, "ranks_per_host": per_host, "ranks": n_hosts * per_host,
              "steps": args.training_steps, "batch_per_rank": 128,
              "rounds": args.training_rounds, "first": first}
    try:
        hosts.start()
        timeout = 120 + 20 * n_hosts * per_host
        tools = ["hvd", "ddp"]
        samples = {t: [] for t in tools}
        for r in range(args.training_rounds):
            for tool in tools if (r + tools.index(first)) % 2 == 0 else tools[::-1]:
                samples[tool].append(training_run(tool, hosts, per_host, args, timeout))
        result["samples_per_s"] = {t: {"median": round(statistics.median(s), 1),
                                       "samples": [round(x, 1) for x in s]}
                                   for t, s in samples.items()}
    finally:
        hosts.close()
    return result


def build_mpi_peers():
    missing = [t for t in ("mpicc", "mpicxx", "mpirun") if not shutil.which(t)]
    if missing:
        raise SystemExit(f"fake_hosts: {', '.join(missing)} not found "
                         "(Debian: apt-get install openmpi-bin libopenmpi-dev)")
    where = pathlib.Path(tempfile.mkdtemp(prefix="hvd-mpi-peers-"))
    subprocess.run(["mpicc", "-O2", str(REPO / "bench/peers/mpi_startup.c"), "-o",
                    str(where / "mpi_startup")], check=True)
    subprocess.run(["mpicxx", "-O3", "-std=c++17", str(REPO / "bench/peers/mpi_allreduce.cc"),
                    "-o", str(where / "mpi_allreduce")], check=True)
    return where


def measure(topology, subnet, args, mpi_dir, plain_home):
    n_hosts, per_host = topology
    np_ = n_hosts * per_host
    hosts = SshHosts(n_hosts, subnet, login_home=plain_home,
                     hostnames=[f"fakehost{i}" for i in range(n_hosts)])
    result = {"hosts": n_hosts, "ranks_per_host": per_host, "ranks": np_}
    try:
        t0 = time.time()
        hosts.start()
        result["hosts_setup_s"] = round(time.time() - t0, 1)
        tools = ["hvd", "mpi"]
        first_contact = Launchers(hosts, 1, mpi_dir)  # host keys learnt, caches warm
        for tool in tools:
            first_contact.launch(tool, 60 + 2 * n_hosts)
        launchers = Launchers(hosts, per_host, mpi_dir)
        if args.calibrate and per_host == 1 and np_ <= 16:
            result["calibration"] = launchers.calibrate(min(args.max_bytes, 16 << 20),
                                                        300 + 10 * np_)
        iters = args.iters if np_ <= 16 else 3
        rounds = args.rounds if np_ <= 16 else args.large_rounds
        launch = {t: [] for t in tools}
        sweeps = {t: [] for t in tools}
        for r in range(rounds):
            for tool in tools if r % 2 == 0 else tools[::-1]:
                seconds, sweep = launchers.sweep(tool, args.max_bytes, iters, 120 + 6 * np_)
                launch[tool].append(seconds)
                sweeps[tool].append(sweep)
        result["rounds"] = rounds
        result["launch_s"] = {t: {"median": round(statistics.median(s), 4),
                                  "samples": [round(x, 4) for x in s]} for t, s in launch.items()}
        result["allreduce_us"] = {}
        for tool, runs in sweeps.items():
            sizes = sorted(set.intersection(*(set(s) for s in runs)))
            result["allreduce_us"][tool] = {
                str(size): {"median": round(statistics.median(s[size] for s in runs), 2),
                            "samples": [round(s[size], 2) for s in runs]} for size in sizes}
        result["iters"] = iters
    finally:
        hosts.close()
    return result


def print_tables(results):
    print(f"\n{'topology':>10} {'ranks':>5} | {'launch hvd':>10} {'mpirun':>8} {'ratio':>6} |"
          + "".join(f" {human(s):>16}" for s in SHOWN_SIZES))
    for r in results:
        if "error" in r:
            print(f"{r['hosts']:>5}x{r['ranks_per_host']:<4} {r['ranks']:>5} | failed: {r['error'][:200]}")
            continue
        lh, lm = r["launch_s"]["hvd"]["median"], r["launch_s"]["mpi"]["median"]
        cells = ""
        for s in SHOWN_SIZES:
            h = r["allreduce_us"]["hvd"].get(str(s), {}).get("median")
            m = r["allreduce_us"]["mpi"].get(str(s), {}).get("median")
            cells += f" {f'{h:.0f}/{m:.0f}':>16}" if h and m else f" {'-':>16}"
        print(f"{r['hosts']:>5}x{r['ranks_per_host']:<4} {r['ranks']:>5} | {lh * 1000:8.0f}ms "
              f"{lm * 1000:6.0f}ms {lm / lh:5.2f}x |{cells}")
    print("allreduce cells: hvd/mpirun median microseconds; ratios > 1: hvd faster")


def print_training(training):
    if not training:
        return
    print(f"\n{'training':>10} {'ranks':>5} | {'hvd samples/s':>14} {'DDP':>8} {'hvd/DDP':>8}")
    for r in training:
        if "error" in r:
            print(f"{r['hosts']:>5}x{r['ranks_per_host']:<4} {r['ranks']:>5} | failed: {r['error'][:300]}")
            continue
        h, d = r["samples_per_s"]["hvd"]["median"], r["samples_per_s"]["ddp"]["median"]
        print(f"{r['hosts']:>5}x{r['ranks_per_host']:<4} {r['ranks']:>5} | {h:14.1f} {d:8.1f} "
              f"{h / d:7.2f}x")


def markdown(results, training):
    """The tables docs/performance.md shows."""
    lines = ["| hosts x ranks | launch hvd | launch mpirun | "
             + " | ".join(f"{human(s)} hvd / mpirun (us)" for s in SHOWN_SIZES) + " |",
             "|---|---|---|" + "---|" * len(SHOWN_SIZES)]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['hosts']} x {r['ranks_per_host']} | failed | | "
                         + " | ".join("" for _ in SHOWN_SIZES) + " |")
            continue
        cells = []
        for s in SHOWN_SIZES:
            h = r["allreduce_us"]["hvd"].get(str(s), {}).get("median")
            m = r["allreduce_us"]["mpi"].get(str(s), {}).get("median")
            cells.append(f"{h:.0f} / {m:.0f} ({m / h:.2f}x)" if h and m else "-")
        lines.append(f"| {r['hosts']} x {r['ranks_per_host']} | "
                     f"{r['launch_s']['hvd']['median'] * 1000:.0f} ms | "
                     f"{r['launch_s']['mpi']['median'] * 1000:.0f} ms | " + " | ".join(cells) + " |")
    if training:
        lines += ["", "| hosts x ranks | hvd samples/s | DDP samples/s | hvd / DDP |",
                  "|---|---|---|---|"]
        for r in training:
            if "error" in r:
                lines.append(f"| {r['hosts']} x {r['ranks_per_host']} | failed | | |")
                continue
            h, d = r["samples_per_s"]["hvd"]["median"], r["samples_per_s"]["ddp"]["median"]
            lines.append(f"| {r['hosts']} x {r['ranks_per_host']} | {h:.0f} | {d:.0f} | "
                         f"{h / d:.2f}x |")
    return "\n".join(lines)


def plot(results, path):
    """Allreduce time against hosts (one rank each) per size: hvd solid, mpirun dashed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in results if "error" not in r and r["ranks_per_host"] == 1]
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, size in enumerate(SHOWN_SIZES):
        color = f"C{i}"
        for tool, style, label in (("hvd", "-", "hvd"), ("mpi", "--", "mpirun")):
            points = [(r["hosts"], r["allreduce_us"][tool][str(size)]["median"]) for r in runs
                      if str(size) in r["allreduce_us"][tool]]
            if points:
                ax.plot(*zip(*points), style, marker="o", color=color,
                        label=f"{human(size)} {label}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("fake hosts (one rank each, all on this machine's cores)")
    ax.set_ylabel("allreduce time (us), median")
    ax.set_title("hvd (solid) and OpenMPI (dashed) over SSH fake hosts")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")


def human(size):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topologies", default=DEFAULT_TOPOLOGIES,
                    help=f"HOSTSxRANKS_PER_HOST, comma-separated (default {DEFAULT_TOPOLOGIES})")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternated launches of each tool, each initialising then sweeping, "
                         "on topologies of up to 16 ranks (default 3)")
    ap.add_argument("--large-rounds", type=int, default=2,
                    help="the same above 16 ranks, where a round takes 10-60 s (default 2)")
    ap.add_argument("--iters", type=int, default=10,
                    help="timed allreduces per size (3 above 16 ranks)")
    ap.add_argument("--max-bytes", type=int, default=16 << 20)
    ap.add_argument("--training", default="1x2,4x4",
                    help="topologies for the training comparison ('' for none)")
    ap.add_argument("--training-rounds", type=int, default=1,
                    help="alternated runs of each tool per training topology; the first tool "
                         "alternates between topologies too (default 1: a 16-rank run takes "
                         "about 90 s here, two thirds of it importing torch)")
    ap.add_argument("--training-steps", type=int, default=8)
    ap.add_argument("--no-calibrate", dest="calibrate", action="store_false",
                    help="leave out `hvd-bench calibrate` on each topology of one rank per host "
                         "and up to 16 ranks before its rounds (hvd then chooses its algorithms "
                         "from the built-in network model)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--plot", help="write the PNG (time against hosts per size) here")
    ap.add_argument("--from-json", help="only print the tables and redraw the plot from this file")
    args = ap.parse_args()
    if args.from_json:
        saved = json.loads(pathlib.Path(args.from_json).read_text())
        print(markdown(saved["results"], saved.get("training", [])))
        if args.plot:
            plot(saved["results"], args.plot)
        return
    reason = unavailable_reason()
    if reason:
        raise SystemExit(f"fake_hosts: {reason}")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise SystemExit(f"fake_hosts: --plot needs matplotlib, which {sys.executable} lacks "
                         "(scripts/setup.sh --bench installs it into the project's venv)")
    for tool in (HVDRUN, WORKER):
        if not tool.exists():
            raise SystemExit(f"fake_hosts: {tool} not found; build first (scripts/build.sh)")
    # SIGTERM/SIGHUP unwind through the finally blocks that remove the namespaces.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: sys.exit(128 + sig))
    mpi_dir = build_mpi_peers()
    plain_home = pathlib.Path(tempfile.mkdtemp(prefix="hvd-plain-home-"))
    started = time.time()
    results, training = [], []
    try:
        for i, topology in enumerate(parse_topologies(args.topologies) if args.topologies else []):
            t0 = time.time()
            try:
                results.append(measure(topology, 150 + i, args, mpi_dir, plain_home))
            except RuntimeError as e:
                results.append({"hosts": topology[0], "ranks_per_host": topology[1],
                                "ranks": topology[0] * topology[1], "error": str(e)})
            results[-1]["wall_s"] = round(time.time() - t0, 1)
            print(f"fake_hosts: {topology[0]}x{topology[1]} done in {results[-1]['wall_s']} s",
                  file=sys.stderr, flush=True)
        for i, topology in enumerate(parse_topologies(args.training) if args.training else []):
            t0 = time.time()
            try:
                training.append(measure_training(topology, 200 + i, args, plain_home,
                                                 ("hvd", "ddp")[i % 2]))
            except RuntimeError as e:
                training.append({"hosts": topology[0], "ranks_per_host": topology[1],
                                 "ranks": topology[0] * topology[1], "error": str(e)})
            training[-1]["wall_s"] = round(time.time() - t0, 1)
            print(f"fake_hosts: training {topology[0]}x{topology[1]} done in "
                  f"{training[-1]['wall_s']} s", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(mpi_dir, ignore_errors=True)
        shutil.rmtree(plain_home, ignore_errors=True)
    print_tables(results)
    print_training(training)
    print("\n" + markdown(results, training))
    if args.json:
        pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.json).write_text(json.dumps({
            "date": time.strftime("%Y-%m-%d"), "wall_s": round(time.time() - started, 1),
            "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or
                        platform.machine()},
            "openmpi": subprocess.run(["mpirun", "--version"], capture_output=True,
                                      text=True).stdout.splitlines()[0],
            "rounds": args.rounds, "large_rounds": args.large_rounds,
            "results": results, "training": training}, indent=1) + "\n")
    if args.plot:
        plot(results, args.plot)
    if any("error" in r for r in results + training):
        sys.exit(1)


if __name__ == "__main__":
    main()
