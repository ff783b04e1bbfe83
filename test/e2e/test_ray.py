"""hvd.ray.RayExecutor (and horovod.ray's under the compat package) on a real Ray cluster
(ray_cluster.py): a head node and a worker node of 2 CPUs each, in network namespaces. Each
driver is a script of its own, run on the head node as users run it."""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import BUILD as _BUILD, REPO
from outcome_driver import run_outcome_driver
from ray_cluster import RayCluster, unavailable_reason
from test_hvd_run import TRAIN

BUILD = _BUILD.resolve()
EXAMPLE = REPO / "examples" / "pytorch_mnist.py"
pytestmark = [pytest.mark.skipif(unavailable_reason() is not None,
                                 reason=str(unavailable_reason())),
              pytest.mark.xdist_group("ray")]

# A rank that raises between two collectives: the others' collective fails because of it.
FAILS = """
    def fails(bad_rank, message):
        import hvd.numpy as h, numpy as np
        h.init()
        h.allreduce(np.ones(2, np.float32), name="warm.fails")
        if h.rank() == bad_rank:
            raise ValueError(message)
        h.allreduce(np.ones(2, np.float32), name="after.fails")
        return h.rank()
"""

CONNECT = """
    import json, time
    import ray
    ray.init(address={address!r}, logging_level="ERROR", log_to_driver=False)
"""


@pytest.fixture(scope="module")
def cluster():
    c = RayCluster(pythonpath=str(BUILD / "python")).start()
    yield c
    c.close()


def run_driver(cluster, tmp_path, body, pythonpath):
    code = textwrap.dedent(CONNECT.format(address=cluster.address))
    code += textwrap.dedent(TRAIN.format(example=str(EXAMPLE))) + textwrap.dedent(FAILS)
    code += textwrap.dedent(body)
    env = {**cluster.env(), "PYTHONPATH": pythonpath}
    return run_outcome_driver(lambda script: cluster.on_head([sys.executable, script]), code,
                              tmp_path, env, context=lambda: f"head node:\n{cluster.log(0)[-2000:]}")


def assert_trained_as_one_job(results):
    assert [r[0] for r in results] == [0, 1, 2, 3]
    assert {r[1] for r in results} == {4}
    assert [r[2] for r in results] == [0, 1, 0, 1]  # local ranks: two per node
    assert [r[3] for r in results] == [0, 0, 1, 1]  # cross ranks: two nodes
    assert len({r[4] for r in results}) == 1, results  # identical weights
    assert min(r[5] for r in results) > 0.85, results  # the example's test accuracy


@pytest.fixture(scope="module")
def ray_flows(cluster, tmp_path_factory):
    body = """
        from hvd.ray import RayExecutor
        from hvd import RunError
        out = {}
        settings = RayExecutor.create_settings(timeout_s=30, placement_group_timeout_s=30)
        executor = RayExecutor(settings, num_workers=4, cpus_per_worker=1)
        executor.start()
        out["hosts"] = executor.hosts
        out["train"] = executor.run(train, args=(10,))

        start = time.monotonic()
        try:
            executor.run(fails, args=(3, "rank three's bad batch"))
        except RunError as e:
            out["fails"] = [str(e), time.monotonic() - start]
        executor.shutdown()

        start = time.monotonic()
        try:
            RayExecutor(RayExecutor.create_settings(placement_group_timeout_s=3),
                        num_workers=6).start()
        except RunError as e:
            out["too_big"] = [str(e), time.monotonic() - start]
        out["done"] = True
        print("OUTCOME " + json.dumps(out), flush=True)
    """
    return run_driver(cluster, tmp_path_factory.mktemp("ray"), body, str(BUILD / "python"))


def test_the_example_trains_on_4_ray_actors_over_2_nodes_with_identical_weights(ray_flows,
                                                                               cluster):
    assert_trained_as_one_job(ray_flows["train"])
    hosts = ray_flows["hosts"]  # by rank: two ranks on each node
    assert hosts[0] == hosts[1] and hosts[2] == hosts[3]
    assert sorted({hosts[0], hosts[2]}) == sorted(cluster.hosts.addresses)


def test_a_rank_that_raises_fails_the_run_at_once_naming_rank_node_and_traceback(ray_flows,
                                                                                 cluster):
    message, seconds = ray_flows["fails"]
    assert f"hvd.ray: rank 3 on node {ray_flows['hosts'][3]} failed:" in message
    assert "ValueError: rank three's bad batch" in message
    assert seconds < 10


def test_workers_that_do_not_fit_fail_at_the_placement_timeout_naming_the_cluster(ray_flows):
    message, seconds = ray_flows["too_big"]
    assert "hvd.ray: 6 workers of {'CPU': 1} each (PACK) did not fit" in message
    assert "it has 4 CPUs" in message and "on 2 nodes" in message
    assert seconds < 15


def test_horovod_ray_under_the_compat_package(cluster, tmp_path):
    body = """
        from horovod.ray import ElasticRayExecutor, RayExecutor
        executor = RayExecutor(RayExecutor.create_settings(), num_hosts=2,
                               num_workers_per_host=2)
        executor.start()
        out = {"train": executor.run(train, args=(10,))}
        executor.shutdown()

        def ranks():
            import horovod.torch as h
            h.init()
            return h.rank(), h.size()

        elastic = ElasticRayExecutor(ElasticRayExecutor.create_settings(min_num_proc=2,
                                                                        max_num_proc=4))
        elastic.start()
        out["elastic"] = elastic.run(ranks)
        elastic.shutdown()
        elastic.start()  # the same executor serves again after a shutdown
        out["elastic_again"] = elastic.run(ranks)
        elastic.shutdown()
        out["done"] = True
        print("OUTCOME " + json.dumps(out), flush=True)
    """
    compat = f"{BUILD / 'python' / 'hvd' / 'compat'}{os.pathsep}{BUILD / 'python'}"
    outcome = run_driver(cluster, tmp_path, body, compat)
    assert_trained_as_one_job(outcome["train"])
    assert outcome["elastic"] == [[0, 4], [1, 4], [2, 4], [3, 4]]
    assert outcome["elastic_again"] == outcome["elastic"]


ELASTIC = """
    from hvd.ray import RayExecutor
    from hvd import RunError

    def train(progress, last_batches):
        import time, zlib, torch, hvd.torch as h
        h.init()
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 1)
        opt = h.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                     named_parameters=model.named_parameters())
        state = h.elastic.TorchState(model=model, optimizer=opt, batch=0, sizes=[], done=0)

        @h.elastic.run
        def loop(state):
            # Every rank decides from the synced state alone, so all stop at the same batch:
            # `last_batches` after the job has been at 3 workers, then fewer, then 3 again.
            while state.batch < 3000 and state.done < last_batches:
                if not state.sizes or state.sizes[-1] != h.size():
                    state.sizes = state.sizes + [h.size()]
                x = torch.randn(16, 8)
                opt.zero_grad()
                ((model(x) - x.sum(1, keepdim=True)) ** 2).mean().backward()
                opt.step()
                state.batch += 1
                if len(state.sizes) >= 3 and state.sizes[-3:][0] == 3 and h.size() == 3:
                    state.done += 1
                if h.rank() == 0:
                    with open(progress, "a") as f:
                        f.write(f"{state.batch} {h.size()}\\n")
                time.sleep(0.05)
                state.commit()

        loop(state)
        weights = b"".join(p.detach().numpy().tobytes() for p in model.parameters())
        return h.rank(), h.size(), state.sizes, zlib.crc32(weights)

    out = {}
    executor = RayExecutor(RayExecutor.create_settings(timeout_s=30), min_workers=2,
                           max_workers=3, cpus_per_slot=1, cooldown_range=(1, 10))
    executor.start()
    out["train"] = executor.run(train, args=(PROGRESS, 30))
    start = time.monotonic()
    try:
        executor.run(fails, args=(2, "rank two's bad batch"))
    except RunError as e:
        out["fails"] = [str(e), time.monotonic() - start]
    executor.shutdown()
    out["done"] = True
    print("OUTCOME " + json.dumps(out), flush=True)
"""


def sizes_seen(progress):
    """The sizes rank 0 trained at, in order, each once per stretch."""
    sizes = []
    for line in progress.read_text().splitlines():
        size = int(line.split()[1])
        if not sizes or sizes[-1] != size:
            sizes.append(size)
    return sizes


def wait_for(condition, timeout, what, driver):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if driver.poll() is not None:
            pytest.fail(f"the driver ended while waiting for {what}:\n{driver.stdout.read()}")
        time.sleep(0.2)
    pytest.fail(f"no {what} within {timeout} s")


def test_an_elastic_job_goes_on_without_a_node_that_leaves_and_grows_back(cluster, tmp_path):
    """min_workers=2, max_workers=3 on 2 nodes of 2 CPUs: 3 workers, 2 on the driver's node.
    The other node's raylet stops: training goes on with 2; it starts again: back to 3. A rank
    that raises fails the next run at once naming its rank, node and traceback."""
    progress = tmp_path / "progress"
    progress.touch()
    code = textwrap.dedent(CONNECT.format(address=cluster.address))
    code += textwrap.dedent(FAILS)
    code += textwrap.dedent(ELASTIC).replace("PROGRESS", repr(str(progress)))
    script = tmp_path / "driver.py"
    script.write_text(code)
    env = {**cluster.env(), "PYTHONPATH": str(BUILD / "python")}
    driver = subprocess.Popen(cluster.on_head([sys.executable, str(script)]), env=env,
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        wait_for(lambda: sizes_seen(progress)[-1:] == [3], 90, "training at 3 workers", driver)
        cluster.stop_node(1)
        left = time.monotonic()
        wait_for(lambda: sizes_seen(progress)[-1:] == [2], 30, "training at 2 workers", driver)
        shrunk = time.monotonic() - left
        cluster.start_node(1)
        wait_for(lambda: sizes_seen(progress)[-1:] == [3] and len(sizes_seen(progress)) >= 3,
                 120, "training at 3 workers again", driver)
        output, _ = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        cluster.wait_for_nodes(2)  # for the module's other tests
    outcome = {}
    for line in output.splitlines():
        if line.startswith("OUTCOME "):
            outcome.update(json.loads(line[len("OUTCOME "):]))
    assert outcome.get("done"), output[-6000:]
    results = outcome["train"]
    assert [r[0] for r in results] == [0, 1, 2]
    assert {r[1] for r in results} == {3}
    assert len({r[3] for r in results}) == 1, results  # identical weights
    assert results[0][2][-3:] == [3, 2, 3], results  # the sizes the state went through
    assert shrunk < 15, shrunk
    node = cluster.hosts.addresses[1]
    assert f"the worker on node {node} was lost with its Ray actor" in output
    message, seconds = outcome["fails"]
    assert "rank 2 on host" in message and "ValueError: rank two's bad batch" in message
    assert seconds < 15
