#!/usr/bin/env python3
"""Runs Horovod's own test/parallel suites, unmodified, against hvd through
`hvdrun --horovod-compat`, one pytest run per file, and prints (and writes as JSON) passed /
failed / skipped / errors per file and rank count.

Nothing is fetched: HOROVOD_SRC (or --horovod-src) names a Horovod source tree, either a
checkout or a bare git directory (the files are then read from its HEAD). The files are laid out
as Horovod's test/ (test/parallel/<file>, test/utils/common.py) in a temporary directory.

    HOROVOD_SRC=~/src/horovod scripts/horovod_suites.py --np 2 test_torch.py

With --horovodrun (and --python of Horovod's virtualenv) the same files run on Horovod itself,
which tells the tests that fail there with these library versions from hvd's own failures.

Horovod's test utilities need `mock` and `parameterized` from PyPI in the interpreter that runs
them (`pip install mock parameterized`).
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

REPO = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_FILES = ["test_torch.py", "test_tensorflow.py", "test_tensorflow_process_sets.py",
                 "test_process_sets_static.py", "test_timeline.py", "test_adasum_pytorch.py",
                 "test_tensorflow2_keras.py", "test_tensorflow2_keras_process_sets.py"]


def read_source(src: pathlib.Path, path: str) -> bytes:
    if (src / path).exists():
        return (src / path).read_bytes()
    git_dir = src if (src / "HEAD").exists() else src / ".git"
    return subprocess.run(["git", "--git-dir", str(git_dir), "show", f"HEAD:{path}"],
                          check=True, capture_output=True).stdout


def listing(src: pathlib.Path, folder: str):
    if (src / folder).is_dir():
        return [f"{folder}/{p.name}" for p in (src / folder).iterdir() if p.is_file()]
    git_dir = src if (src / "HEAD").exists() else src / ".git"
    out = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "--name-only", "HEAD",
                          f"{folder}/"], check=True, capture_output=True, text=True).stdout
    return out.split()


def lay_out(src: pathlib.Path, where: pathlib.Path) -> pathlib.Path:
    """Horovod's test/parallel and test/utils (the suites import their base classes and
    helpers from there)."""
    for path in listing(src, "test/utils") + listing(src, "test/parallel"):
        target = where / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(read_source(src, path))
    for d in ["test", "test/utils", "test/parallel"]:
        (where / d / "__init__.py").touch()
    return where / "test" / "parallel"


def counts(xml_path: pathlib.Path):
    if not xml_path.exists():
        return None
    suite = ET.parse(xml_path).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    out = {"passed": 0, "failed": 0, "skipped": 0, "errors": 0, "failures": []}
    for case in suite.iter("testcase"):
        kinds = {child.tag for child in case}
        name = case.get("name")
        if "skipped" in kinds:
            out["skipped"] += 1
        elif "error" in kinds:
            out["errors"] += 1
            out["failures"].append(name)
        elif "failure" in kinds:
            out["failed"] += 1
            out["failures"].append(name)
        else:
            out["passed"] += 1
    return out


def launch_command(hvdrun, horovodrun, np_, hvdrun_args):
    """hvdrun --horovod-compat, or (to see which tests fail on Horovod itself) Horovod's own
    horovodrun with its Gloo controller."""
    hosts = ["-np", str(np_), "-H", f"localhost:{np_}"]
    if horovodrun:
        return [str(horovodrun), *hosts, "--gloo"]
    return [str(hvdrun), *hosts, "--horovod-compat", *hvdrun_args]


def run_file(launcher, python, parallel_dir, name, timeout, extra):
    with tempfile.TemporaryDirectory() as out:
        script = (f'exec "{python}" -m pytest -q -p no:cacheprovider {" ".join(extra)} '
                  f'--junitxml="{out}/rank${{HVD_RANK:-$HOROVOD_RANK}}.xml" "{name}"')
        started = time.monotonic()
        try:
            r = subprocess.run([*launcher, "sh", "-c", script],
                               cwd=parallel_dir,
                               capture_output=True, text=True, timeout=timeout)
            code = r.returncode
            tail = (r.stdout + r.stderr)[-3000:]
        except subprocess.TimeoutExpired as e:
            code, tail = "timeout", str(e.stdout or "")[-3000:]
        result = counts(pathlib.Path(out) / "rank0.xml") or {"passed": 0, "failed": 0,
                                                             "skipped": 0, "errors": 0,
                                                             "failures": []}
        result.update(file=name, np=int(launcher[launcher.index("-np") + 1]), exit=code, seconds=round(time.monotonic() - started, 1))
        if result["passed"] + result["failed"] + result["errors"] == 0:
            result["tail"] = tail
        return result


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", default=DEFAULT_FILES)
    parser.add_argument("--horovod-src", default=os.environ.get("HOROVOD_SRC"))
    parser.add_argument("--np", type=int, action="append", help="rank counts (default 2)")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--hvdrun", default=str(pathlib.Path(
        os.environ.get("HVD_BUILD_DIR", REPO / "build")) / "apps" / "hvdrun"))
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per file")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("-k", help="pytest -k expression")
    parser.add_argument("--hvdrun-arg", action="append", default=[],
                        help="an extra hvdrun argument, e.g. --hvdrun-arg=--check-replicas "
                             "--hvdrun-arg=off (some of Horovod's tests train ranks that never "
                             "broadcast, which hvd's replica check stops)")
    parser.add_argument("--horovodrun", help="run the files under this horovodrun (Horovod "
                        "itself, e.g. bench/install_horovod.sh's) instead of hvdrun; give "
                        "--python that virtualenv's interpreter")
    args = parser.parse_args()
    if not args.horovod_src:
        parser.error("give a Horovod source tree with HOROVOD_SRC or --horovod-src")
    extra = ["-k", repr(args.k)] if args.k else []
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        parallel = lay_out(pathlib.Path(args.horovod_src).expanduser(), pathlib.Path(tmp))
        for np_ in args.np or [2]:
            for name in args.files:
                launcher = launch_command(args.hvdrun, args.horovodrun, np_, args.hvdrun_arg)
                r = run_file(launcher, args.python, parallel, name, args.timeout, extra)
                results.append(r)
                ran = r["passed"] + r["failed"] + r["errors"]
                rate = f"{100 * r['passed'] / ran:.0f}%" if ran else "-"
                print(f"{name:42s} np={np_} passed {r['passed']:3d} failed {r['failed']:3d} "
                      f"skipped {r['skipped']:3d} errors {r['errors']:3d}  {rate:>4s}  "
                      f"({r['seconds']} s, exit {r['exit']})", flush=True)
                for f in r["failures"]:
                    print(f"    {f}")
                if "tail" in r:
                    print("    " + r["tail"].replace("\n", "\n    "))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
