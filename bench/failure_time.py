"""How fast a job stops when one rank fails, and whether the launcher says which: hvdrun
against Horovod's horovodrun, on one horovod.torch script.

Every rank initialises and allreduces once; then the last rank fails (it raises an exception,
or kills itself with SIGKILL, as an out-of-memory kill would) while the others wait in an
allreduce it will never join. Reported: seconds from the failure to the launcher's exit (the
failing rank prints its clock just before failing), the launcher's exit code, and whether its
verdict names the failed rank (not another rank that stopped because of it). Runs that do not
end within --timeout count as hangs.

    python bench/failure_time.py --rounds 5 --json bench/results/failure_time.json

Horovod comes from bench/install_horovod.sh (torch_scaling.HOROVOD_PYTHON).
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

from torch_scaling import BUILD, HOROVOD_PYTHON  # this directory

WORKER = """
import os, signal, sys, time
import torch
import horovod.torch as hvd
hvd.init()
hvd.allreduce(torch.ones(1), name="warm-up")
if hvd.rank() == hvd.size() - 1:
    os.write(1, f"FAILING_AT {time.time_ns()}\\n".encode())
    if sys.argv[1] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError("rank failed on purpose")
hvd.allreduce(torch.ones(1), name="never-completes")
"""


def launcher(library, ranks, script, mode):
    if library == "hvd":
        return [str(BUILD / "apps" / "hvdrun"), "-np", str(ranks), "--horovod-compat",
                sys.executable, script, mode]
    return [str(HOROVOD_PYTHON.parent / "horovodrun"), "--gloo", "-np", str(ranks), "-H",
            f"localhost:{ranks}", str(HOROVOD_PYTHON), script, mode]


def run_once(library, ranks, script, mode, timeout):
    failed_rank = ranks - 1
    try:
        r = subprocess.run(launcher(library, ranks, script, mode), capture_output=True,
                           text=True, timeout=timeout, env=dict(os.environ, OMP_NUM_THREADS="1"))
    except subprocess.TimeoutExpired as e:
        # The launcher's process group is left to subprocess.run, which killed the launcher.
        return {"hang": True, "seconds": None, "exit_code": None, "names_rank": False,
                "tail": (e.stderr or b"")[-500:].decode(errors="replace")}
    end = time.time_ns()
    stamp = re.search(r"FAILING_AT (\d+)", r.stdout)
    output = r.stdout + r.stderr
    # The launcher's own verdict, not the ranks' prefixed output lines: hvdrun's "job failed:
    # rank N", horovodrun's "The first process to do so was: Process name: N".
    verdict = (rf"job failed: rank {failed_rank}\b" if library == "hvd"
               else rf"first process to do so was:\s*Process name: {failed_rank}\b")
    names = bool(re.search(verdict, output))
    return {"hang": False, "seconds": (end - int(stamp.group(1))) / 1e9 if stamp else None,
            "exit_code": r.returncode, "names_rank": names,
            "tail": [line for line in output.splitlines()
                     if not line.startswith(("[0]", "[1]", "[2]", "[3]"))][-6:]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--json")
    args = ap.parse_args()
    if not HOROVOD_PYTHON.exists():
        raise SystemExit(f"no Horovod at {HOROVOD_PYTHON}: run bench/install_horovod.sh")
    work = pathlib.Path(tempfile.mkdtemp(prefix="hvd-failure-time-"))
    atexit.register(shutil.rmtree, work, True)
    script = work / "failing_rank.py"
    script.write_text(WORKER)
    configs = [(lib, mode) for mode in ("exception", "kill") for lib in ("hvd", "horovod")]
    runs = {f"{lib} {mode}": [] for lib, mode in configs}
    for _ in range(args.rounds):
        for lib, mode in configs:
            runs[f"{lib} {mode}"].append(run_once(lib, args.ranks, str(script), mode,
                                                  args.timeout))
    print(f"{args.ranks} ranks, {args.rounds} rounds; the last rank fails\n")
    print("| launcher | failure | failure to launcher exit, median s | exit codes | verdict "
          "names the failed rank | hangs |\n|---|---|---|---|---|---|")
    summary = {}
    for key, samples in runs.items():
        times = [s["seconds"] for s in samples if s["seconds"] is not None]
        summary[key] = {"median_s": statistics.median(times) if times else None,
                        "exit_codes": sorted({s["exit_code"] for s in samples},
                                             key=str),
                        "names_rank": all(s["names_rank"] for s in samples),
                        "hangs": sum(s["hang"] for s in samples)}
        lib, mode = key.split()
        m = summary[key]
        median = f"{m['median_s']:.3f}" if m["median_s"] is not None else "-"
        print(f"| {'hvdrun' if lib == 'hvd' else 'horovodrun (Horovod 0.28.1)'} | {mode} | "
              f"{median} | {m['exit_codes']} | {m['names_rank']} | {m['hangs']} |")
    for key, samples in runs.items():
        print(f"\n{key}, last lines of one run:\n  " + "\n  ".join(map(str, samples[-1]["tail"])))
    if args.json:
        pathlib.Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"benchmark": "failure_time", "ranks": args.ranks, "rounds": args.rounds,
                       "summary": summary, "runs": runs}, f, indent=2)


if __name__ == "__main__":
    main()
