"""hvd.ray.RayExecutor (and horovod.ray's under the compat package) on a real Ray cluster
(ray_cluster.py): a head node and a worker node of 2 CPUs each, in network namespaces. Each
driver is a script of its own, run on the head node as users run it."""
import os
import sys
import textwrap

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
    code += textwrap.dedent(TRAIN.format(example=str(EXAMPLE))) + textwrap.dedent(body)
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

        def fails():
            import hvd.numpy as h, numpy as np
            h.init()
            h.allreduce(np.ones(2, np.float32), name="warm.fails")
            if h.rank() == 3:
                raise ValueError("rank three's bad batch")
            h.allreduce(np.ones(2, np.float32), name="after.fails")
            return h.rank()

        start = time.monotonic()
        try:
            executor.run(fails)
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
        from horovod.ray import RayExecutor
        executor = RayExecutor(RayExecutor.create_settings(), num_hosts=2,
                               num_workers_per_host=2)
        executor.start()
        out = {"train": executor.run(train, args=(10,)), "done": True}
        executor.shutdown()
        print("OUTCOME " + json.dumps(out), flush=True)
    """
    compat = f"{BUILD / 'python' / 'hvd' / 'compat'}{os.pathsep}{BUILD / 'python'}"
    outcome = run_driver(cluster, tmp_path, body, compat)
    assert_trained_as_one_job(outcome["train"])
