"""hvdrun --check-build: the build's and the machine's GPU facts, the room in /dev/shm for the
shared-memory transport, and what the workers' python3 finds, with status 1 when that python3
cannot import hvd."""
import os
import re
import sys
from importlib import metadata

import pytest

from conftest import BUILD, run_hvdrun


def path_with(folder):
    return dict(os.environ, PATH=f"{folder}:{os.environ.get('PATH', '')}")


def test_reports_the_build_the_devices_and_the_python_side(tmp_path):
    # The workers' python3 is the first on PATH: make it this interpreter's (a virtualenv's
    # bin folder has python3 beside python).
    bindir = os.path.dirname(sys.executable)
    assert os.path.exists(os.path.join(bindir, "python3"))
    r = run_hvdrun("--check-build", env=path_with(bindir))
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert out.startswith("hvd ")
    assert "[X] TCP transport (host memory tensors)" in out
    # Either a CUDA build, with what the machine has, or a build without it, said so.
    if "[X] CUDA " in out:
        assert "[X] NCCL " in out and "CUDA driver" in out and "NCCL library" in out
    else:
        assert "[ ] CUDA (built without the CUDA toolkit" in out
    assert f"[X] hvd 0.1.0 from {BUILD / 'python' / 'hvd'}" in out, out
    for dist, label in (("torch", "PyTorch (hvd.torch)"), ("numpy", "NumPy (hvd.numpy)")):
        try:
            assert f"[X] {label} {metadata.version(dist)}" in out, out
        except metadata.PackageNotFoundError:
            assert f"[ ] {label}: not installed" in out, out
    # TensorFlow: its version and hvd.tensorflow importing against it; Keras beside it.
    tensorflow = None
    for dist in ("tensorflow", "tensorflow-cpu"):
        try:
            tensorflow = metadata.version(dist)
            break
        except metadata.PackageNotFoundError:
            pass
    if tensorflow:
        assert f"[X] TensorFlow (hvd.tensorflow) {tensorflow}" in out, out
    else:
        assert "[ ] TensorFlow (hvd.tensorflow): not installed" in out, out
    try:
        assert f"Keras (hvd.tensorflow.keras) {metadata.version('keras')}" in out, out
    except metadata.PackageNotFoundError:
        assert "[ ] Keras (hvd.tensorflow.keras): not installed" in out, out


@pytest.mark.whole_machine  # compares /dev/shm's free space over time
@pytest.mark.parametrize("ring", [None, 1 << 30])
def test_reports_the_room_in_dev_shm_for_the_ring_size_workers_would_use(ring):
    env = dict(os.environ)
    env.pop("HVD_SHM_BUFFER_BYTES", None)
    if ring:
        env["HVD_SHM_BUFFER_BYTES"] = str(ring)
    r = run_hvdrun("--check-build", env=env)
    assert "[X] shared-memory transport (host memory tensors, ranks of one host)" in r.stdout
    m = re.search(r"\[( |X)\] /dev/shm: (\d+) MiB free; 8 ranks on one host need room for (\d+) MiB "
                  r"with HVD_SHM_BUFFER_BYTES=(\d+)(.*)", r.stdout)
    assert m, r.stdout
    mark, free_mib, need_mib, shown, note = m.groups()
    ring = ring or 1 << 20
    assert int(shown) == ring
    # Each of 8 ranks has a data ring of `ring` bytes and a control ring of at most 64 KiB per
    # peer, plus small headers.
    rings_mib = 8 * 7 * (ring + min(ring, 64 << 10)) / (1 << 20)
    assert rings_mib <= int(need_mib) <= rings_mib + 1
    fs = os.statvfs("/dev/shm")
    assert abs(int(free_mib) - fs.f_bavail * fs.f_frsize / (1 << 20)) < 64
    fits = int(free_mib) >= int(need_mib)
    assert (mark == "X") == fits
    assert ("would fall back to TCP" in note) == (not fits)


def test_a_python_that_cannot_import_hvd_fails_the_check_with_its_error(tmp_path):
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'hvd'\" >&2\nexit 1\n")
    fake.chmod(0o755)
    r = run_hvdrun("--check-build", env=path_with(tmp_path))
    assert r.returncode == 1
    assert ("[ ] python3 exited with status 1: ModuleNotFoundError: No module named 'hvd'"
            in r.stdout), r.stdout
    assert "[X] TCP transport" in r.stdout  # the build's part is still reported


def test_a_python_whose_report_is_unreadable_is_named_not_a_crash(tmp_path):
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\necho '{\"python\": \"3.99\"}'\n")
    fake.chmod(0o755)
    r = run_hvdrun("--check-build", env=path_with(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "[ ] python3's report could not be read" in r.stdout, r.stdout


def test_no_python_on_path_is_named(tmp_path):
    r = run_hvdrun("--check-build", env=dict(os.environ, PATH=str(tmp_path)))
    assert r.returncode == 1
    assert "python3: command not found" in r.stdout, r.stdout
