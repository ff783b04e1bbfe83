"""hvd.run (and horovod.run under the compat package): a function run as a job from a Python
driver, on this machine and over two SSH hosts (ssh_hosts.py). The drivers are scripts of their
own, run as users run them (their functions live in __main__ and travel by value)."""
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import BUILD as _BUILD, REPO
from ssh_hosts import SSH_PORT, SshHosts, unavailable_reason

BUILD = _BUILD.resolve()  # the drivers run in their own directory
pytestmark = pytest.mark.xdist_group("hvd_run")


def run_driver(tmp_path, code, env=None, timeout=180):
    """The driver script `code`; hvd from this build (hvd.run finds the build's hvdrun)."""
    if env is None:
        env = {**os.environ, "PYTHONPATH": str(BUILD / "python")}
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, script], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=tmp_path)


# The PyTorch example's model and data, trained inside the function; each rank returns its rank,
# placement, a checksum of its final weights and their accuracy on the example's test set.
TRAIN = """
    import runpy, sys, zlib
    import hvd

    def train(epochs):
        import hvd.torch as h
        import torch
        sys.argv = ["pytorch_mnist.py"]
        example = runpy.run_path({example!r})  # its functions, not its main
        h.init()
        torch.manual_seed(42)
        train_set, test_set = example["load_data"](None)
        loader = torch.utils.data.DataLoader(train_set, batch_size=32, sampler=
            torch.utils.data.distributed.DistributedSampler(train_set, h.size(), h.rank()))
        model = example["Net"]()
        h.broadcast_parameters(model.state_dict(), root_rank=0)
        opt = h.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01 * h.size()),
                                     named_parameters=model.named_parameters())
        for _ in range(epochs):
            for data, target in loader:
                opt.zero_grad()
                torch.nn.functional.nll_loss(model(data), target).backward()
                opt.step()
        weights = b"".join(p.detach().numpy().tobytes() for p in model.parameters())
        model.eval()
        with torch.no_grad():
            images, labels = test_set.tensors
            accuracy = (model(images).argmax(1) == labels).float().mean().item()
        return (h.rank(), h.size(), h.local_rank(), h.cross_rank(), zlib.crc32(weights),
                accuracy)
"""


def test_a_function_runs_on_every_rank_and_returns_results_in_rank_order(tmp_path):
    r = run_driver(tmp_path, """
        import hvd

        def where(offset):
            import hvd.numpy as h, numpy as np
            h.init()
            total = h.allreduce(np.array([h.rank() + 1.0]), op=h.Sum)[0]
            return h.rank() * 10 + offset, h.size(), float(total)

        print("RESULTS", hvd.run(where, args=(1,), np=3))
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "RESULTS [(1, 3, 6.0), (11, 3, 6.0), (21, 3, 6.0)]" in r.stdout, r.stdout


def test_a_rank_that_raises_fails_the_call_within_5_s_with_its_traceback(tmp_path):
    r = run_driver(tmp_path, """
        import time, hvd

        def step():
            import time, hvd.numpy as h, numpy as np
            h.init()
            h.allreduce(np.ones(2), name="warm-up")
            if h.rank() == 1:
                raise ValueError(f"bad batch on rank 1 at {time.time()}")
            h.allreduce(np.ones(2), name="grads")

        try:
            hvd.run(step, np=2)
        except hvd.RunError as e:
            raised_at = float(str(e).rsplit(" at ", 1)[1].split()[0])
            print("RAISED after", round(time.time() - raised_at, 1), "s")
            print(e)
    """, timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    took = float(re.search(r"RAISED after ([\d.]+) s", r.stdout).group(1))
    assert took < 5, r.stdout
    assert re.search(r"rank 1 on host \S+ raised:\nTraceback \(most recent call last\):", r.stdout)
    assert re.search(r'File ".*", line \d+, in step\nValueError: bad batch on rank 1 at', r.stdout), \
        r.stdout
    assert "ValueError: bad batch on rank 1" in r.stdout, r.stdout


def test_horovod_run_under_the_compat_package_is_hvd_run(tmp_path):
    r = run_driver(tmp_path, """
        import horovod
        import horovod.torch as hvd

        def rank_and_size():
            hvd.init()
            return hvd.rank(), hvd.size()

        print("RESULTS", horovod.run(rank_and_size, np=2))
    """, env={**os.environ, "PYTHONPATH": f"{BUILD / 'python' / 'hvd' / 'compat'}:{BUILD / 'python'}"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "RESULTS [(0, 2), (1, 2)]" in r.stdout, r.stdout


def test_elastic_and_mpi_arguments_are_refused_saying_what_to_use(tmp_path):
    r = run_driver(tmp_path, """
        import hvd
        for kwargs in ({"min_np": 1}, {"use_mpi": True}):
            try:
                hvd.run(print, np=2, **kwargs)
            except ValueError as e:
                print("REFUSED", e)
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "REFUSED hvd.run: min_np, max_np, slots and reset_limit start an elastic job" in r.stdout
    assert "REFUSED hvd.run: hvd does not use MPI" in r.stdout


_ssh_reason = unavailable_reason()


@pytest.fixture(scope="module")
def hosts():
    h = SshHosts(2).start()
    yield h
    h.close()


@pytest.mark.skipif(_ssh_reason is not None, reason=f"SSH hosts: {_ssh_reason}")
def test_the_example_trains_on_4_ranks_over_2_ssh_hosts_with_identical_weights(hosts, tmp_path):
    env = hosts.env()
    env.pop("PYTHONPATH", None)
    env["PYTHONPATH"] = str(BUILD / "python")  # the driver's; hvdrun finds it for the workers
    env["OMP_NUM_THREADS"] = "1"
    r = run_driver(tmp_path, TRAIN.format(example=str(REPO / "examples" / "pytorch_mnist.py")) + f"""
    results = hvd.run(train, args=(1,), np=4, hosts={hosts.hosts(2)!r}, ssh_port={SSH_PORT})
    print("RESULTS", results)
    """, env=env, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    results = eval(r.stdout.split("RESULTS", 1)[1].strip())  # noqa: S307  (our own repr)
    assert [res[:4] for res in results] == [(0, 4, 0, 0), (1, 4, 1, 0), (2, 4, 0, 1),
                                            (3, 4, 1, 1)], results
    assert len({res[4] for res in results}) == 1, results  # identical weights


def test_what_hvd_lacks_of_horovod_spark_and_ray_says_so_and_what_to_use(tmp_path):
    """horovod.spark and horovod.ray import (with PySpark and Ray installed, as Horovod's need);
    what hvd lacks of them says so."""
    r = run_driver(tmp_path, """
        import horovod.spark, horovod.ray
        print("RUN", horovod.spark.run.__module__, horovod.ray.RayExecutor.__module__)
        for name in ("horovod.spark.torch", "horovod.spark.keras", "horovod.spark.common"):
            try:
                __import__(name)
            except ModuleNotFoundError as e:
                print("MISSING", e.name, "|", e)
        try:
            horovod.spark.run_elastic(print)
        except NotImplementedError as e:
            print("LATER", e)
        try:
            horovod.ray.RayExecutor(num_workers=2, min_workers=1, max_workers=2)
        except ValueError as e:
            print("REFUSED", e)
    """, env={**os.environ, "PYTHONPATH": f"{BUILD / 'python' / 'hvd' / 'compat'}:{BUILD / 'python'}"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "RUN hvd.spark hvd.ray" in r.stdout, r.stdout
    for name in ("horovod.spark.torch", "horovod.spark.keras", "horovod.spark.common"):
        assert f"MISSING {name} | {name}: hvd does not provide Horovod's Spark estimators " \
               "(TorchEstimator, KerasEstimator, LightningEstimator and their Store) yet; train " \
               "with horovod.spark.run" in r.stdout, r.stdout
    assert "LATER hvd.spark.run_elastic: elastic Spark jobs are not provided yet" in r.stdout
    assert "REFUSED hvd.ray: give num_workers (or num_hosts) for a fixed job, or " \
           "min_workers/max_workers for an elastic one, not both" in r.stdout
