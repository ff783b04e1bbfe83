"""hvd.spark.run (and horovod.spark.run under the compat package) on a real Spark standalone
cluster (spark_cluster.py): a master and two 2-core workers in network namespaces. Each driver
is a script of its own, run as users run it, with a SparkSession on the cluster."""
import os
import sys
import textwrap

import pytest

from conftest import BUILD as _BUILD, REPO
from outcome_driver import run_outcome_driver
from spark_cluster import SparkCluster, unavailable_reason
from test_hvd_run import TRAIN

BUILD = _BUILD.resolve()
EXAMPLE = REPO / "examples" / "pytorch_mnist.py"
pytestmark = [pytest.mark.skipif(unavailable_reason() is not None,
                                 reason=str(unavailable_reason())),
              pytest.mark.xdist_group("spark")]

SESSION = """
    import json, sys, time
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master({master!r}).appName("hvd-e2e")
             .config("spark.driver.host", {driver!r}).config("spark.driver.bindAddress", {driver!r})
             .config("spark.ui.enabled", "false").config("spark.executor.memory", "1g")
             .config("spark.executorEnv.PYTHONPATH", {pythonpath!r})
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
"""


@pytest.fixture(scope="module")
def cluster():
    c = SparkCluster(python=sys.executable, pythonpath=str(BUILD / "python")).start()
    yield c
    c.close()


def run_driver(cluster, tmp_path, body, pythonpath):
    code = textwrap.dedent(SESSION.format(master=cluster.master_url, driver=cluster.driver_host,
                                          pythonpath=pythonpath))
    code += textwrap.dedent(TRAIN.format(example=str(EXAMPLE))) + textwrap.dedent(body)
    # PySpark starts the executors' Python from the driver's PYSPARK_PYTHON (default python3).
    env = {**os.environ, "PYTHONPATH": pythonpath, "PYSPARK_PYTHON": sys.executable}
    return run_outcome_driver(lambda script: [sys.executable, script], code, tmp_path, env)


def assert_trained_as_one_job(results):
    """4 results in rank order, two ranks per host (by the ranks' own placement), one set of
    weights."""
    assert [r[0] for r in results] == [0, 1, 2, 3]
    assert {r[1] for r in results} == {4}
    assert sorted(r[2] for r in results) == [0, 0, 1, 1]  # local ranks: 2 per host
    assert sorted(r[3] for r in results) == [0, 0, 1, 1]  # cross ranks: 2 hosts
    assert len({r[4] for r in results}) == 1, results


@pytest.fixture(scope="module")
def hvd_flows(cluster, tmp_path_factory):
    """One driver: training on 4 ranks, a job larger than the cluster, a rank that raises."""
    body = """
        import hvd.spark
        from hvd import RunError
        out = {}
        out["train"] = hvd.spark.run(train, args=(1,), num_proc=4, verbose=0)

        start = time.monotonic()
        try:
            hvd.spark.run(train, args=(1,), num_proc=6, start_timeout=5)
        except RunError as e:
            out["too_big"] = [str(e), time.monotonic() - start]

        def fails():
            import hvd.numpy as h, numpy as np
            h.init()
            h.allreduce(np.ones(2, np.float32), name="warm")
            if h.rank() == 2:
                raise ValueError("rank two's bad batch")
            h.allreduce(np.ones(2, np.float32), name="after")  # the others wait here
            return h.rank()

        start = time.monotonic()
        try:
            hvd.spark.run(fails, num_proc=4, verbose=0)
        except RunError as e:
            out["fails"] = [str(e), time.monotonic() - start]
        out["done"] = True
        print("OUTCOME " + json.dumps(out), flush=True)
    """
    return run_driver(cluster, tmp_path_factory.mktemp("spark"), body, str(BUILD / "python"))


def test_the_example_trains_on_4_spark_tasks_over_2_workers_with_identical_weights(hvd_flows):
    assert_trained_as_one_job(hvd_flows["train"])


def test_a_job_larger_than_the_cluster_fails_within_start_timeout_naming_its_slots(hvd_flows):
    message, seconds = hvd_flows["too_big"]
    assert "num_proc=6 needs 6 task slots" in message
    assert "offered 4 within start_timeout=5 s" in message
    assert seconds < 15


def test_a_rank_that_raises_fails_the_call_naming_rank_host_and_traceback(hvd_flows, cluster):
    message, seconds = hvd_flows["fails"]
    assert "hvd.spark.run: rank 2 on host " in message
    host = message.split("rank 2 on host ", 1)[1].split()[0]
    assert host in cluster.hosts.addresses[1:]
    assert "ValueError: rank two's bad batch" in message
    assert "Traceback" in message
    assert seconds < 30


def test_horovod_spark_under_the_compat_package(cluster, tmp_path):
    body = """
        import horovod.spark
        out = {"train": horovod.spark.run(train, args=(1,), num_proc=4, verbose=0)}
        try:
            import horovod.spark.torch  # noqa: F401
        except ModuleNotFoundError as e:
            out["estimators"] = str(e)
        out["done"] = True
        print("OUTCOME " + json.dumps(out), flush=True)
    """
    compat = f"{BUILD / 'python' / 'hvd' / 'compat'}{os.pathsep}{BUILD / 'python'}"
    outcome = run_driver(cluster, tmp_path, body, compat)
    assert_trained_as_one_job(outcome["train"])
    assert outcome["estimators"].startswith("horovod.spark.torch: hvd does not provide "
                                            "Horovod's Spark estimators")
