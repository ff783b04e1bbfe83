"""Time from starting the launcher to every rank initialised (connected and past a barrier):
hvdrun with 4 ranks of a C++ worker (hvd-bench startup) on this machine, and torchrun with 4
ranks of init_process_group(gloo) + barrier as its peer; hvdrun with 4 ranks on 2 SSH hosts
(network namespaces running real sshd, as in the e2e tests; needs root), and OpenMPI's mpirun of
an MPI_Init + MPI_Barrier program on the same hosts as its peer. The SSH cases run twice: with
this machine's own login scripts (every remote shell reads ~/.bashrc) and with a plain login
(an empty HOME), since a slow ~/.bashrc is paid once per remote shell by any SSH launcher.
Where Horovod is installed (bench/install_horovod.sh), one horovod.torch script (init, barrier)
also runs under Horovod's horovodrun and under hvdrun --horovod-compat. `--local-ranks 16,64`
adds jobs of that many ranks on this one machine (more ranks than cores: hvdrun's shared memory,
mpirun --oversubscribe with vader).
Rounds alternate the configurations; medians are reported because the machine is shared and
noisy.

    python bench/startup_time.py --rounds 10 --json bench/results/startup_time.json
"""
import argparse
import atexit
import json
import os
import pathlib
import re
import shutil
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

TORCH_WORKER = """
import time, torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
import os; os.write(1, f"HVD_INITIALISED {time.time_ns()}\\n".encode())
dist.destroy_process_group()
"""

# One Horovod script, run by horovodrun on Horovod and by hvdrun --horovod-compat on hvd.
HOROVOD_WORKER = """
import os, time
import horovod.torch as hvd
hvd.init()
hvd.barrier()
os.write(1, f"HVD_INITIALISED {time.time_ns()}\\n".encode())
hvd.shutdown()
"""


def timed(cmd, env=None, ranks=4):
    """(seconds to the last rank's HVD_INITIALISED line, seconds until the launcher exited)."""
    start = time.time_ns()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    end = time.time_ns()
    stamps = [int(x) for x in re.findall(r"HVD_INITIALISED (\d+)", r.stdout)]
    if r.returncode != 0 or len(stamps) != ranks:
        raise RuntimeError(f"{cmd[0]} failed ({r.returncode}): {r.stdout[-2000:]} {r.stderr[-2000:]}")
    return (max(stamps) - start) / 1e9, (end - start) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--no-ssh", action="store_true", help="skip the SSH configuration")
    ap.add_argument("--no-torchrun", action="store_true", help="skip the torchrun peer")
    ap.add_argument("--no-mpirun", action="store_true", help="skip the mpirun peer")
    ap.add_argument("--no-horovod", action="store_true",
                    help="skip the Python pair: a horovod.torch script under horovodrun "
                         "(Horovod, from bench/install_horovod.sh) and hvdrun --horovod-compat")
    ap.add_argument("--local-ranks", default="",
                    help="also time jobs of these many ranks on this machine, e.g. 16,64")
    args = ap.parse_args()
    try:
        local_ranks = [int(n) for n in args.local_ranks.split(",") if n.strip()]
    except ValueError:
        raise SystemExit(f"--local-ranks: '{args.local_ranks}' is not a list of rank counts")

    # Every file this run writes (the MPI program, the plain login's home, the Python workers)
    # lives here and goes when the script exits, however it exits short of SIGKILL.
    work = pathlib.Path(tempfile.mkdtemp(prefix="hvd-startup-time-"))
    atexit.register(shutil.rmtree, work, True)
    configs = {"hvdrun local 4 ranks": lambda: timed(
        [str(HVDRUN), "-np", "4", "-H", "localhost:4", str(WORKER), "startup"])}
    host_sets = []
    skipped = {}
    mpi_program = None
    if not args.no_mpirun and shutil.which("mpicc") and shutil.which("mpirun"):
        mpi_program = work / "mpi_startup"
        subprocess.run(["mpicc", "-O2", str(REPO / "bench" / "peers" / "mpi_startup.c"), "-o",
                        str(mpi_program)], check=True)
    elif not args.no_mpirun:
        skipped["mpirun ssh"] = "mpicc/mpirun not found (Debian: openmpi-bin libopenmpi-dev)"
    mpi_env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for n in local_ranks:
        configs[f"hvdrun local {n} ranks"] = lambda n=n: timed(
            [str(HVDRUN), "-np", str(n), str(WORKER), "startup"], ranks=n)
        if mpi_program:
            configs[f"mpirun local {n} ranks (oversubscribed)"] = lambda n=n: timed(
                ["mpirun", "--oversubscribe", "-np", str(n), "--mca", "btl", "vader,self",
                 "--mca", "mpi_yield_when_idle", "1", str(mpi_program)], env=mpi_env, ranks=n)
    if not args.no_ssh:
        from ssh_hosts import SSH_PORT, SshHosts, unavailable_reason
        reason = unavailable_reason()
        if reason:
            skipped["hvdrun ssh"] = reason
        else:
            plain_home = work / "plain-home"
            plain_home.mkdir(mode=0o700)
            for label, subnet, home in (("own login", 240, None), ("plain login", 239, plain_home)):
                hosts = SshHosts(2, subnet, login_home=home).start()
                host_sets.append(hosts)
                configs[f"hvdrun ssh 2 hosts x 2 ranks ({label})"] = (
                    lambda hosts=hosts: timed(
                        [str(HVDRUN), "--ssh-port", str(SSH_PORT), "-np", "4", "-H",
                         hosts.hosts(2), str(WORKER), "startup"], env=hosts.env()))
                if mpi_program:
                    # ssh reads the passwd entry's home, not $HOME: name the files.
                    agent = (f"ssh -p {SSH_PORT} -i {hosts.key} -o BatchMode=yes "
                             "-o StrictHostKeyChecking=accept-new "
                             f"-o UserKnownHostsFile={hosts.home}/.ssh/known_hosts")
                    subnet_cidr = hosts.prefix + ".0/24"
                    configs[f"mpirun ssh 2 hosts x 2 ranks ({label})"] = (
                        lambda hosts=hosts, agent=agent, cidr=subnet_cidr: timed(
                            ["mpirun", "-np", "4", "-H", hosts.hosts(2),
                             "--mca", "plm_rsh_agent", agent, "--mca", "btl", "tcp,self",
                             "--mca", "btl_tcp_if_include", cidr,
                             "--mca", "oob_tcp_if_include", cidr, str(mpi_program)],
                            env=hosts.env(OMPI_ALLOW_RUN_AS_ROOT="1",
                                          OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")))
    torchrun = shutil.which("torchrun", path=str(pathlib.Path(sys.executable).parent))
    script = None
    if not args.no_torchrun and torchrun:
        script = work / "torch_init.py"
        script.write_text(TORCH_WORKER)
        env = dict(os.environ, OMP_NUM_THREADS="1")
        configs["torchrun local 4 ranks (gloo)"] = lambda: timed(
            [torchrun, "--standalone", "--nproc-per-node", "4", str(script)], env=env)
    elif not args.no_torchrun:
        skipped["torchrun local 4 ranks (gloo)"] = "torchrun not found next to this python"

    if not args.no_horovod:
        from torch_scaling import HOROVOD_PYTHON  # this directory
        if HOROVOD_PYTHON.exists():
            horovod_script = work / "horovod_init.py"
            horovod_script.write_text(HOROVOD_WORKER)
            env = dict(os.environ, OMP_NUM_THREADS="1")
            configs["hvdrun local 4 ranks (Python, horovod.torch)"] = lambda: timed(
                [str(HVDRUN), "-np", "4", "-H", "localhost:4", "--horovod-compat",
                 sys.executable, str(horovod_script)], env=env)
            configs["horovodrun local 4 ranks (Python, Horovod 0.28.1)"] = lambda: timed(
                [str(HOROVOD_PYTHON.parent / "horovodrun"), "--gloo", "-np", "4", "-H",
                 "localhost:4", str(HOROVOD_PYTHON), str(horovod_script)], env=env)
        else:
            skipped["horovodrun local 4 ranks"] = (f"no Horovod at {HOROVOD_PYTHON} "
                                                   "(bench/install_horovod.sh)")

    samples = {name: {"initialised_s": [], "launcher_exit_s": []} for name in configs}
    try:
        for name, run in configs.items():  # warm caches (first ssh handshake, imports)
            run()
        for _ in range(args.rounds):
            for name, run in configs.items():
                init, total = run()
                samples[name]["initialised_s"].append(init)
                samples[name]["launcher_exit_s"].append(total)
    finally:
        for hosts in host_sets:
            hosts.close()
    results = {}
    print(f"{'configuration':44} {'to all initialised (median)':>28} {'launcher exit':>14}")
    for name, s in samples.items():
        med = statistics.median(s["initialised_s"])
        results[name] = {"median_initialised_ms": round(med * 1000, 1),
                         "median_launcher_exit_ms": round(statistics.median(s["launcher_exit_s"]) * 1000, 1),
                         "samples_initialised_ms": [round(x * 1000, 1) for x in s["initialised_s"]]}
        print(f"{name:44} {med * 1000:25.1f} ms {statistics.median(s['launcher_exit_s']) * 1000:11.1f} ms")
    for name, why in skipped.items():
        print(f"{name:44} skipped: {why}")
    if args.json:
        pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"rounds": args.rounds, "results": results, "skipped": skipped,
                       "machine": {"cpus": os.cpu_count()}}, f, indent=2)


if __name__ == "__main__":
    main()
