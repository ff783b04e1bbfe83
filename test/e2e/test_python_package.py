"""The Python package through hvdrun on real processes: found without PYTHONPATH, the examples
(training to an accuracy, checkpoints by rank 0 alone, resume), the horovod compatibility
package (only when asked for, loud when it shadows a real Horovod), and `pip install .`."""
import os
import subprocess
import sys
import zipfile

import pytest

from conftest import BUILD, REPO, run_hvdrun

EXAMPLES = REPO / "examples"


def clean_env(**extra):
    """hvdrun's environment without PYTHONPATH: hvdrun must find the package itself."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(extra)
    return env


def rank_lines(stdout, rank):
    prefix = f"[{rank}]<stdout>:"
    return [line[len(prefix):] for line in stdout.splitlines() if line.startswith(prefix)]


def test_numpy_example_finds_the_package_without_pythonpath():
    r = run_hvdrun("-np", 3, sys.executable, EXAMPLES / "numpy_allreduce.py", env=clean_env())
    assert r.returncode == 0, r.stderr
    for rank in range(3):
        assert rank_lines(r.stdout, rank) == [f"rank {rank}/3: sum of ranks = 3"]


# Records every file the example creates or renames under the checkpoint folder, per rank,
# through Python's audit hooks (open, os.open and os.rename all raise audit events).
AUDITED_RUN = """
import os, runpy, sys
ckpt = os.path.realpath(sys.argv[1]); script = sys.argv[2]
rank = os.environ["HVD_RANK"]
def hook(event, args):
    if event in ("open", "os.rename", "os.replace") and args and isinstance(args[0], str):
        writing = event != "open" or (args[1] is not None and any(c in args[1] for c in "wax")) \
            or (args[1] is None and args[2] & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
        if writing and os.path.realpath(args[0]).startswith(ckpt):
            print(f"AUDIT rank={rank} {event} {os.path.basename(args[0])}", file=sys.stderr)
sys.addaudithook(hook)
sys.argv = [script] + sys.argv[3:]
runpy.run_path(script, run_name="__main__")
"""


def test_mnist_example_trains_and_only_rank_0_writes_checkpoints(tmp_path):
    ckpt = tmp_path / "ckpt"
    args = ["-np", 2, "-H", "localhost:2", sys.executable, "-c", AUDITED_RUN, ckpt,
            EXAMPLES / "pytorch_mnist.py", "--checkpoint-dir", ckpt]
    r = run_hvdrun(*args, "--epochs", 2, timeout=240, env=clean_env())
    assert r.returncode == 0, r.stderr[-3000:]
    out = rank_lines(r.stdout, 0)
    assert any(line.startswith("epoch 2: test loss") for line in out), r.stdout
    accuracy = float(out[-1].split(":")[1].strip().rstrip("%"))
    assert accuracy > 85.0, out
    assert rank_lines(r.stdout, 1) == []  # metrics are printed once, by rank 0
    audits = [line for line in r.stderr.splitlines() if "AUDIT" in line]
    assert audits and all("rank=0" in line for line in audits), audits
    assert sorted(p.name for p in ckpt.iterdir()) == ["checkpoint-1.pt", "checkpoint-2.pt"]

    import torch
    state = torch.load(ckpt / "checkpoint-2.pt", weights_only=False)
    assert state["epoch"] == 2 and "fc1.weight" in state["model"]

    # A later run resumes from the latest checkpoint and trains only the remaining epoch.
    r = run_hvdrun(*args, "--epochs", 3, timeout=240, env=clean_env())
    assert r.returncode == 0, r.stderr[-3000:]
    out = rank_lines(r.stdout, 0)
    assert out[0].startswith("resuming from") and out[0].endswith("checkpoint-2.pt")
    assert [line.split(":")[0] for line in out if line.startswith("epoch")] == ["epoch 3"]


def test_keras_example_trains_and_only_rank_0_writes_checkpoints(tmp_path):
    pytest.importorskip("tensorflow")
    ckpt = tmp_path / "ckpt"
    args = ["-np", 2, sys.executable, "-c", AUDITED_RUN, ckpt, EXAMPLES / "keras_mnist.py",
            "--checkpoint-dir", ckpt]
    r = run_hvdrun(*args, "--epochs", 3, timeout=300, env=clean_env())
    assert r.returncode == 0, r.stderr[-3000:]
    out = rank_lines(r.stdout, 0)
    accuracy = float(out[-1].split(":")[1].strip().rstrip("%"))
    assert accuracy > 90.0, out
    assert rank_lines(r.stdout, 1) == []  # rank 0 alone reports
    audits = [line for line in r.stderr.splitlines() if "AUDIT" in line]
    assert audits and all("rank=0" in line for line in audits), audits
    assert sorted(p.name for p in ckpt.iterdir()) == [f"checkpoint-{e}.keras" for e in (1, 2, 3)]

    r = run_hvdrun(*args, "--epochs", 4, timeout=300, env=clean_env())
    assert r.returncode == 0, r.stderr[-3000:]
    out = rank_lines(r.stdout, 0)
    assert out[0] == f"resuming from {ckpt / 'checkpoint-3.keras'}"
    assert [line.split()[1] for line in out if line.startswith("Epoch ")] == ["4/4"]


HOROVOD_KERAS_SCRIPT = """
import numpy as np, keras, tensorflow as tf
import horovod.tensorflow.keras as hvd
import horovod.tensorflow as hvd_tf
from horovod.tensorflow.keras.callbacks import MetricAverageCallback
hvd.init()
model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(1)])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01 * hvd.size())),
              loss="mse")
x = np.random.default_rng(hvd.rank()).normal(size=(32, 3)).astype("float32")
model.fit(x, x.sum(axis=1), batch_size=8, epochs=2, verbose=0,
          callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), MetricAverageCallback()])
w = hvd_tf.allgather(tf.concat([tf.reshape(v, [-1]) for v in model.trainable_variables], 0)[None])
assert np.array_equal(w[0].numpy(), w[-1].numpy())
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(model(x))
grads = hvd_tf.DistributedGradientTape(tape).gradient(loss, model.trainable_variables)
print(f"horovod.tensorflow.keras on {hvd.__name__.split('.')[0]}: rank {hvd.rank()} of "
      f"{hvd.size()}, {len(grads)} gradients, compat={__import__('horovod').IS_HVD_COMPAT}")
"""


def test_horovod_keras_scripts_run_unchanged_with_the_compat_flag():
    pytest.importorskip("tensorflow")
    r = run_hvdrun("-np", 2, "--horovod-compat", "-x", "TF_CPP_MIN_LOG_LEVEL=2", sys.executable,
                   "-c", HOROVOD_KERAS_SCRIPT, timeout=180, env=clean_env())
    assert r.returncode == 0, r.stderr[-3000:]
    for rank in range(2):
        assert rank_lines(r.stdout, rank) == [
            f"horovod.tensorflow.keras on horovod: rank {rank} of 2, 4 gradients, compat=True"]


HOROVOD_SCRIPT = """
import torch
import horovod.torch as hvd
# Horovod's submodules, as scripts import from them
from horovod.torch.mpi_ops import Sum, allreduce_async_, size, synchronize
from horovod.torch.compression import Compression, FP16Compressor
from horovod.torch.functions import broadcast_object
from horovod.torch.optimizer import DistributedOptimizer
from horovod.torch.sync_batch_norm import SyncBatchNorm
from horovod.common.exceptions import HorovodInternalError
hvd.init()
model = torch.nn.Sequential(torch.nn.Linear(3, 4), SyncBatchNorm(4), torch.nn.Linear(4, 1))
opt = DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                           named_parameters=model.named_parameters(),
                           compression=Compression.fp16)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(4, 3) * (hvd.rank() + 1)).pow(2).mean().backward()
    opt.step()
w = hvd.allgather(model[0].weight.detach().flatten().unsqueeze(0))
assert torch.equal(w[0], w[1]), w
t = torch.ones(2)
synchronize(allreduce_async_(t, op=Sum, name="ones"))
assert t.tolist() == [size()] * 2 and broadcast_object("x", 0) == "x"
assert Compression.fp16 is FP16Compressor and issubclass(HorovodInternalError, Exception)
print(f"horovod.torch on {hvd.__name__.split('.')[0]}: rank {hvd.rank()} of {hvd.size()}, "
      f"compat={__import__('horovod').IS_HVD_COMPAT}")
"""


def test_horovod_scripts_run_unchanged_with_the_compat_flag_or_variable():
    r = run_hvdrun("-np", 2, "--horovod-compat", sys.executable, "-c", HOROVOD_SCRIPT,
                   timeout=120, env=clean_env())
    assert r.returncode == 0, r.stderr[-3000:]
    assert rank_lines(r.stdout, 1) == ["horovod.torch on horovod: rank 1 of 2, compat=True"]
    # The variable without the flag: the same package found (what the script does with it, the
    # run above showed).
    r = run_hvdrun("-np", 1, sys.executable, "-c", "import horovod; print(horovod.IS_HVD_COMPAT)",
                   timeout=120, env=clean_env(HVD_HOROVOD_COMPAT="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert rank_lines(r.stdout, 0) == ["True"], r.stdout


def test_horovods_elastic_modules_import_from_the_compat_package():
    script = ("import horovod.tensorflow as hvd_tf, horovod.keras.elastic, horovod.torch as hvd\n"
              "from horovod.common.elastic import ObjectState, run_fn\n"
              "from horovod.torch.elastic import ElasticSampler, TorchState\n"
              "from horovod.tensorflow.keras.elastic import CommitStateCallback, KerasState\n"
              "import hvd.tensorflow.keras.elastic as ours\n"
              "print(hvd.elastic.run.__module__, hvd_tf.elastic.TensorFlowKerasState.__module__,\n"
              "      KerasState is ours.KerasState and CommitStateCallback is ours.CommitStateCallback)\n")
    r = run_hvdrun("-np", 1, "--horovod-compat", sys.executable, "-c", script, timeout=120,
                   env=clean_env(TF_CPP_MIN_LOG_LEVEL="2"))
    assert r.returncode == 0, r.stderr[-3000:]
    # The same objects as hvd's: a Horovod elastic Keras script runs what hvd's elastic tests
    # run (test_hvdrun_elastic.py).
    assert "hvd.torch.elastic hvd.tensorflow.elastic True" in r.stdout


def test_without_asking_there_is_no_horovod_module():
    r = run_hvdrun("-np", 1, sys.executable, "-c", "import horovod", env=clean_env())
    assert r.returncode != 0
    assert "No module named 'horovod'" in r.stderr


def test_shadowing_a_real_horovod_is_said_out_loud(tmp_path):
    real = tmp_path / "site" / "horovod"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("raise SystemExit('the real horovod was imported')\n")
    r = run_hvdrun("-np", 1, "--horovod-compat", sys.executable, "-c",
                   "import horovod.torch; print('compat', horovod.IS_HVD_COMPAT)",
                   env=clean_env(PYTHONPATH=str(tmp_path / "site")))
    assert r.returncode == 0, r.stderr
    assert "[0]<stdout>:compat True" in r.stdout
    assert f"shadows the Horovod installed at {real / '__init__.py'}" in r.stderr


# Each rank runs the case argv[1 + its rank] names, so that one job checks a case per rank
# (each run starts the framework on every rank): "plain", or "omp" where the user's
# OMP_NUM_THREADS asks for every CPU of the machine (set before the framework starts, as the
# environment would).
THREADS_SCRIPT = """
import os, sys
if sys.argv[1 + int(os.environ["HVD_RANK"])] == "omp":
    os.environ["OMP_NUM_THREADS"] = str(len(os.sched_getaffinity(0)))
import torch
before = torch.get_num_threads()  # torch's pool, sized at import from the whole mask
import hvd.torch as hvd
hvd.init()
print(f"before={before} after={torch.get_num_threads()} cpus={len(os.sched_getaffinity(0))}")
"""


def thread_counts(stdout, np):
    """{rank: (torch threads before init, after init, CPUs the rank may use after init)}"""
    out = {}
    for rank in range(np):
        (line,) = rank_lines(stdout, rank)
        fields = dict(f.split("=") for f in line.split())
        out[rank] = (int(fields["before"]), int(fields["after"]), int(fields["cpus"]))
    return out


def test_torch_threads_fit_each_ranks_cpus_unless_omp_num_threads_says_otherwise():
    allowed = len(os.sched_getaffinity(0))
    env = {k: v for k, v in clean_env().items() if k not in ("OMP_NUM_THREADS", "HVD_BIND_TO")}
    # Bound (the default): rank 0's threads fit its slice, and it says so at info level. Rank
    # 1's OMP_NUM_THREADS stands, even where it oversubscribes the rank's CPUs.
    r = run_hvdrun("-np", 2, "--log-level", "info", sys.executable, "-c", THREADS_SCRIPT,
                   "plain", "omp", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    counts = thread_counts(r.stdout, 2)
    before, after, cpus = counts[0]
    assert after == min(before, cpus), (before, after, cpus)
    if before > after:
        assert f"[rank 0/2] info [torch] torch intra-op threads {before} -> {after}" in r.stderr
    before, after, cpus = counts[1]
    assert after == before == allowed and (allowed < 2 or before > cpus), (before, after, cpus)
    assert "[rank 1/2] info [torch] torch intra-op threads" not in r.stderr
    # Unbound: the local ranks split the CPUs.
    r = run_hvdrun("-np", 2, "--bind-to", "none", sys.executable, "-c", THREADS_SCRIPT,
                   "plain", "plain", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    for before, after, cpus in thread_counts(r.stdout, 2).values():
        assert cpus == allowed and after == min(before, max(1, allowed // 2))
    # One rank has the whole machine: nothing to fit.
    r = run_hvdrun("-np", 1, sys.executable, "-c", THREADS_SCRIPT, "plain", env=env,
                   timeout=120)
    assert r.returncode == 0, r.stderr
    ((before, after, cpus),) = thread_counts(r.stdout, 1).values()
    assert after == before


# argv[1 + rank]: "early" (TensorFlow has not run an op before hvd.init) or "late" (it has).
TF_THREADS_SCRIPT = """
import os, sys
late = sys.argv[1 + int(os.environ["HVD_RANK"])] == "late"
import tensorflow as tf
if late:
    tf.constant(1.0) + 1.0  # TensorFlow starts, which fixes its pool sizes
import hvd.tensorflow as hvd
hvd.init()
print(len(os.sched_getaffinity(0)), tf.config.threading.get_intra_op_parallelism_threads())
"""


def test_tensorflow_threads_fit_each_ranks_cpus_when_tensorflow_has_not_started():
    pytest.importorskip("tensorflow")
    env = {k: v for k, v in clean_env(TF_CPP_MIN_LOG_LEVEL="2").items()
           if k not in ("OMP_NUM_THREADS", "HVD_BIND_TO")}
    r = run_hvdrun("-np", 2, "--log-level", "info", sys.executable, "-c", TF_THREADS_SCRIPT,
                   "early", "late", env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    cpus, intra = map(int, rank_lines(r.stdout, 0)[0].split())
    assert intra == cpus, (cpus, intra)  # bound: the rank's own CPUs
    assert f"[rank 0/2] info [tensorflow] TensorFlow intra-op threads: {cpus}" in r.stderr
    # Rank 1's TensorFlow already ran an op: its pools keep their sizes, and hvd says why at
    # info level.
    assert rank_lines(r.stdout, 1)[0].split()[1] == "0"
    assert "[rank 1/2] info [tensorflow] TensorFlow intra-op threads" not in r.stderr
    assert "TensorFlow started before hvd.init(): its thread pools keep their sizes" in r.stderr
    # OMP_NUM_THREADS is the user's choice.
    r = run_hvdrun("-np", 2, sys.executable, "-c", TF_THREADS_SCRIPT, "early", "early",
                   env=dict(env, OMP_NUM_THREADS="2"), timeout=120)
    assert r.returncode == 0, r.stderr
    assert [rank_lines(r.stdout, q)[0].split()[1] for q in range(2)] == ["0", "0"]

ONE_PROCESS_SCRIPT = """
import torch, hvd, hvd.torch as hvdt
hvdt.init()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 2))
reference = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 2))
reference.load_state_dict(model.state_dict())
opt = hvdt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                named_parameters=model.named_parameters(),
                                compression=hvdt.Compression.fp16)
ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
before = hvd._core.stats()["submitted"]
for step in range(3):
    x = torch.randn(4, 5)
    for m, o in ((model, opt), (reference, ref_opt)):
        o.zero_grad()
        m(x).pow(2).sum().backward()
        o.step()
assert hvd._core.stats()["submitted"] == before, hvd._core.stats()
for a, b in zip(model.parameters(), reference.parameters()):
    assert torch.equal(a, b), (a, b)
print("one process: no reductions, plain steps")
"""


def test_one_process_optimizer_steps_as_the_wrapped_one_without_reductions():
    # hvdrun -np 1 (one GPU, the same script): nothing to average, so no per-gradient hooks
    # and no fp16 round trip, as in Horovod; the steps equal the plain optimizer's bit for bit.
    r = run_hvdrun("-np", 1, sys.executable, "-c", ONE_PROCESS_SCRIPT, env=clean_env(),
                   timeout=120)
    assert r.returncode == 0, r.stderr
    assert "one process: no reductions, plain steps" in r.stdout


def test_a_python_error_on_one_rank_stops_the_job_naming_it():
    code = ("import hvd.torch as hvd, torch; hvd.init()\n"
            "if hvd.rank() == 1: raise RuntimeError('bad batch on rank 1')\n"
            "hvd.allreduce(torch.ones(1), name='never')\n")
    r = run_hvdrun("-np", 2, sys.executable, "-c", code, timeout=60, env=clean_env())
    assert r.returncode == 1
    # the root cause is reported, not rank 0's failure that followed from it
    assert "job failed: rank 1 on host" in r.stderr and "bad batch on rank 1" in r.stderr


def same_compiler_as_the_build():
    """The project build's C++ compiler and launcher (ccache, when scripts/build.sh found it), so
    the wheel's compiles of unchanged sources are cache hits instead of a second full build.
    ccache keys on the compiler's name too, and scikit-build-core alone would pick g++ where
    CMake picked c++."""
    cache = BUILD / "CMakeCache.txt"
    entries = {}
    if cache.exists():
        for line in cache.read_text().splitlines():
            key, _, value = line.partition("=")
            entries[key.split(":")[0]] = value
    env = {}
    if entries.get("CMAKE_CXX_COMPILER"):
        env["CXX"] = entries["CMAKE_CXX_COMPILER"]
    if entries.get("CMAKE_CXX_COMPILER_LAUNCHER"):
        env["CMAKE_CXX_COMPILER_LAUNCHER"] = entries["CMAKE_CXX_COMPILER_LAUNCHER"]
        # Keys relative to the checkout, as scripts/build.sh's: the wheel's build folder is
        # another one, and a clone elsewhere has other paths.
        env["CCACHE_BASEDIR"] = str(REPO)
        env["CCACHE_NOHASHDIR"] = "1"
    return env


@pytest.mark.skipif(os.environ.get("HVD_SKIP_WHEEL_TEST") == "1",
                    reason="HVD_SKIP_WHEEL_TEST=1")
def test_pip_install_builds_a_working_package_and_hvdrun(tmp_path):
    wheels = tmp_path / "wheels"
    # scikit-build-core builds in a folder that persists (as its docs advise for repeated
    # builds), beside the project's build: with the same generator (Ninja) and the same relative
    # paths, each compile is a ccache hit of the project build's (scripts/build.sh).
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
         "--disable-pip-version-check", "--config-settings",
         f"build-dir={BUILD.resolve().parent / (BUILD.resolve().name + '-wheel')}",
         "-w", str(wheels), str(REPO)],
        capture_output=True, text=True, timeout=900,
        env={**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2),
             **same_compiler_as_the_build()})
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("hvd-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("hvd/_core") and n.endswith(".so") for n in names), names
    assert "hvd/torch/optimizer.py" in names
    assert "hvd/compat/horovod/torch/__init__.py" in names
    assert any(n.endswith(".data/scripts/hvdrun") for n in names), names
    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--disable-pip-version-check",
         "--target", str(target), str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr
    code = ("import hvd.numpy as h, numpy as np; h.init(); "
            "print(h.allreduce(np.ones(2), op=h.Sum), h.__file__)")
    r = subprocess.run([str(target / "bin" / "hvdrun"), "-np", "2", sys.executable, "-c", code],
                       capture_output=True, text=True, timeout=120,
                       env=clean_env(PYTHONPATH=str(target)))
    assert r.returncode == 0, r.stderr
    assert f"[1]<stdout>:[2. 2.] {target / 'hvd' / 'numpy.py'}" in r.stdout


TORCH_DISTRIBUTED = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")  # env://, as under torchrun
t = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(t)
print("TD", dist.get_rank(), dist.get_world_size(), int(t.item()), os.environ["MASTER_PORT"],
      flush=True)
dist.destroy_process_group()
"""


def test_torch_distributed_env_rendezvous_works_as_under_torchrun():
    r = run_hvdrun("-np", 3, sys.executable, "-c", TORCH_DISTRIBUTED, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = sorted(line.split("TD ", 1)[1].split() for line in r.stdout.splitlines()
                  if "TD " in line)
    assert [row[:3] for row in rows] == [["0", "3", "6"], ["1", "3", "6"], ["2", "3", "6"]]
    # A port the user gives is kept (what torch.distributed does with a port, the run above
    # showed).
    r = run_hvdrun("-np", 2, "-x", "MASTER_PORT=29613", sys.executable, "-c",
                   "import os; print('TD', os.environ['MASTER_PORT'])", timeout=120)
    assert r.returncode == 0, r.stderr
    assert sorted(line for line in r.stdout.splitlines() if "TD " in line) == [
        "[0]<stdout>:TD 29613", "[1]<stdout>:TD 29613"], r.stdout
