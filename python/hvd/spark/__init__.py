"""hvd.spark.run: a training function on a Spark cluster, one rank per Spark task.

The ranks are the tasks of one barrier stage (Spark's gang scheduling: all start together or
none does), so a job that cannot get its slots fails at once instead of hanging with part of
its ranks. Each task learns from the barrier context where every task runs, takes its rank
host by host (hvd/_ranks.py), and rank 0's task picks the rendezvous port and tells the others
through the barrier's allGather. Rank 0 serves the rendezvous itself: the executors need to
reach each other, as any data-parallel job does, but never the driver. Each rank runs the
function in a Python process of its own and returns its result (or traceback) and output to
the driver through Spark.

Needs PySpark (``pip install hvd[spark]``) and an active SparkContext (or SparkSession).
"""
from __future__ import annotations

import os
import secrets
import sys
import threading
import time
from typing import List

from hvd._run import RunError

_LAUNCHER = "hvd.spark.run"
_DEFAULT_START_TIMEOUT = 600


def _spark_context():
    try:
        import pyspark
    except ImportError:
        raise ImportError("hvd.spark needs PySpark: pip install 'hvd[spark]' (or pyspark)") \
            from None
    sc = pyspark.SparkContext._active_spark_context
    if sc is None:
        raise RuntimeError("hvd.spark.run: no active SparkContext; create one (or a "
                           "SparkSession) first")
    return sc


def _slots(sc) -> int:
    """Tasks the cluster can run at once now (registered executors' cores / spark.task.cpus)."""
    jsc = sc._jsc.sc()
    try:
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return int(jsc.maxNumConcurrentTasks(profile))
    except Exception:  # noqa: BLE001  (an API private to Spark, which may move)
        return sc.defaultParallelism // int(sc.getConf().get("spark.task.cpus", "1"))


def _wait_for_slots(sc, num_proc: int, start_timeout: float) -> None:
    deadline = time.monotonic() + start_timeout
    slots = _slots(sc)
    while slots < num_proc:
        if time.monotonic() >= deadline:
            raise RunError(f"{_LAUNCHER}: num_proc={num_proc} needs {num_proc} task slots at "
                           f"once, but the Spark cluster ({sc.master}) offered {slots} within "
                           f"start_timeout={start_timeout:g} s: lower num_proc, or give the "
                           "cluster more executor cores (a barrier stage starts all its tasks "
                           "together or none)")
        time.sleep(0.2)
        slots = _slots(sc)


def _rank_task(payload, secret, job_id, executable, env, nics):
    """The barrier stage's function: runs on each executor, returns [Outcome]."""
    def task(_):
        import secrets

        from pyspark import BarrierTaskContext

        from hvd import _ranks

        ctx = BarrierTaskContext.get()
        index = ctx.partitionId()
        hosts = [info.address.rsplit(":", 1)[0] for info in ctx.getTaskInfos()]
        placements = _ranks.place(hosts)
        me = placements[index]
        zero = next(i for i, p in enumerate(placements) if p.rank == 0)
        # Rank 0's task picks the port, and names this run of the stage: one Spark runs again
        # is a job of its own (rendezvous keys, shared memory).
        mine = f"{_ranks.free_port(hosts[zero])} {secrets.token_hex(4)}" if index == zero else ""
        port, run = ctx.allGather(mine)[zero].split()
        rank_env = _ranks.with_interface(env, nics)
        rank_env.update(_ranks.rank_environment(me, hosts[zero], int(port), secret, "Spark",
                                                f"{job_id}-{run}"))
        outcome = _ranks.run_rank(payload, rank_env, me, executable,
                                  echo=lambda line: sys.stdout.write(line))
        yield outcome

    return task


def run(fn, args=(), kwargs=None, num_proc=None, start_timeout=None, use_mpi=None,
        use_gloo=None, extra_mpi_args=None, env=None, stdout=None, stderr=None, verbose=1,
        nics=None, prefix_output_with_timestamp=False, executable=None) -> List[object]:
    """Runs ``fn(*args, **kwargs)`` on ``num_proc`` ranks, each in a Spark task, and returns
    their results in rank order (Horovod's horovod.spark.run).

    ``num_proc`` defaults to spark.default.parallelism. ``start_timeout`` (seconds; default
    HOROVOD_SPARK_START_TIMEOUT or 600) bounds the wait for the cluster's slots. ``env`` adds to
    the ranks' environment. Each rank's output is written, prefixed with its rank, to
    ``stdout`` (default sys.stdout) when it ends, with ``verbose`` >= 1; ``stderr`` gets the
    failing rank's traceback. ``nics``: each rank uses the first of them its host has. A rank
    that raises fails the call with RunError naming the rank, its host and its traceback. MPI
    arguments are refused: hvd's own transports run the job.
    """
    if use_mpi or extra_mpi_args:
        raise ValueError(f"{_LAUNCHER}: hvd does not use MPI (use_mpi, extra_mpi_args); its "
                         "own transports run the job")
    del use_gloo, prefix_output_with_timestamp
    import cloudpickle

    sc = _spark_context()
    if num_proc is None:
        num_proc = sc.defaultParallelism
    if not isinstance(num_proc, int) or isinstance(num_proc, bool) or num_proc < 1:
        raise ValueError(f"{_LAUNCHER}: num_proc must be a positive integer, got {num_proc!r}")
    if start_timeout is None:
        start_timeout = float(os.environ.get("HOROVOD_SPARK_START_TIMEOUT",
                                             _DEFAULT_START_TIMEOUT))
    _wait_for_slots(sc, num_proc, start_timeout)
    payload = cloudpickle.dumps((fn, tuple(args), dict(kwargs or {})))
    job_id = f"spark-{secrets.token_hex(6)}"
    task = _rank_task(payload, secrets.token_hex(32), job_id, executable, dict(env or {}),
                      sorted(nics or ()))
    group = f"hvd.spark.run.{job_id}"
    outcomes = _collect(sc, group, num_proc, task)
    return _results(outcomes, num_proc, stdout or sys.stdout, stderr or sys.stderr, verbose)


def _collect(sc, group, num_proc, task):
    """Runs the barrier stage in a thread, so that Ctrl-C in the driver cancels it."""
    done = {}

    def stage():
        try:
            sc.setJobGroup(group, f"hvd.spark.run: {num_proc} ranks", interruptOnCancel=True)
            rdd = sc.parallelize(range(num_proc), num_proc)
            done["outcomes"] = rdd.barrier().mapPartitions(task).collect()
        except BaseException as e:  # noqa: B036  (reported in the caller's thread)
            done["error"] = e

    thread = threading.Thread(target=stage, name="hvd.spark.run", daemon=True)
    thread.start()
    try:
        while thread.is_alive():
            thread.join(0.2)
    except BaseException:
        sc.cancelJobGroup(group)
        raise
    if "error" in done:
        raise RunError(f"{_LAUNCHER}: the Spark stage of {num_proc} ranks failed: "
                       f"{done['error']}") from done["error"]
    return done["outcomes"]


def _results(outcomes, num_proc, out, err, verbose):
    from hvd import _ranks

    outcomes = sorted(outcomes, key=lambda o: o.rank)
    if verbose >= 1:
        for o in outcomes:
            for line in o.output.splitlines():
                out.write(f"[{o.rank}]<{o.host}>: {line}\n")
        out.flush()
    failure = _ranks.first_failure(outcomes)
    if failure is not None:
        message = _ranks.failure_message(_LAUNCHER, failure)
        err.write(message + "\n")
        raise RunError(message)
    if [o.rank for o in outcomes] != list(range(num_proc)):
        raise RunError(f"{_LAUNCHER}: expected ranks 0-{num_proc - 1}, got "
                       f"{[o.rank for o in outcomes]}")
    return [o.value for o in outcomes]


def run_elastic(*args, **kwargs):
    raise NotImplementedError(f"hvd.spark.run_elastic: elastic Spark jobs are not provided yet; "
                              "run hvd.spark.run with a fixed num_proc, or an elastic job under "
                              "hvdrun (docs/elastic.md)")


__all__ = ["run", "run_elastic", "RunError"]
