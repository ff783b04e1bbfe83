"""hvd.ray.RayExecutor: a training job on a Ray cluster, one rank per Ray actor (Horovod's
horovod.ray.RayExecutor, with its constructor and methods).

start() reserves one bundle per worker in a placement group (so the job gets all its workers
or fails at the placement group's timeout, naming what it asked for), starts an actor in each,
and places the ranks host by host from the actors' Ray node ids (hvd/_ranks.py): local and
cross ranks follow the nodes. Rank 0's actor picks the rendezvous port and serves the job's
rendezvous itself (HVD_EXTERNAL_LAUNCHER=Ray); the driver hands every actor its HVD_*
placement through Ray, so no separate HTTP store sits between the workers. The actors keep
their process between calls: run() and execute() call into the same initialised hvd, as in
Horovod. A rank whose call raises fails the call at once with RunError (rank, node, traceback)
and stops the job's actors, whose peers would otherwise wait for it until the op timeout.

With min_workers/max_workers the job is elastic (hvd/ray/_elastic.py): hvdrun's elastic driver
runs it, with Ray's live nodes for its hosts and Ray actors for its workers, and the training
function uses hvd.elastic.run and a State as under hvdrun.

Needs Ray (``pip install 'hvd[ray]'``) and ``ray.init()`` (a cluster address) in the driver.
"""
from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

from hvd._run import RunError

_LAUNCHER = "hvd.ray"


def _ray():
    try:
        import ray
    except ImportError:
        raise ImportError("hvd.ray needs Ray: pip install 'hvd[ray]' (or ray)") from None
    return ray


@dataclass
class MiniSettings:
    """RayExecutor.create_settings()'s settings."""
    timeout_s: int = 30
    placement_group_timeout_s: int = 100
    nics: Optional[set] = None
    ssh_identity_file: Optional[str] = None


class _Worker:
    """The actor of one rank (made a Ray actor class in RayExecutor.start)."""

    def __init__(self, env: Dict[str, str]):
        import os
        os.environ.update(env)
        self.executable = None

    def node_id(self):
        import ray
        return ray.get_runtime_context().get_node_id()

    def free_port(self, host):
        from hvd import _ranks
        return _ranks.free_port(host)

    def join(self, env: Dict[str, str], nics, executable_cls, args, kwargs):
        import os

        from hvd import _ranks
        os.environ.update(_ranks.with_interface(env, nics))  # the first of them this node has
        if executable_cls is not None:
            self.executable = executable_cls(*(args or ()), **(kwargs or {}))
        return True

    # A rank's failure comes back as data (hvd/_outcome.py), with its traceback.
    def call(self, fn, args, kwargs):
        from hvd import _outcome
        return _outcome.call(fn, args or (), kwargs)

    def execute(self, fn):
        from hvd import _outcome
        return _outcome.call(fn, (self.executable,))


class RayExecutor:
    @classmethod
    def create_settings(cls, timeout_s=30, ssh_identity_file=None, ssh_str=None,
                        placement_group_timeout_s=100, nics=None):
        """Horovod's settings: `timeout_s` bounds the ranks' start (HVD_START_TIMEOUT_SECONDS),
        `placement_group_timeout_s` the wait for the cluster's resources, `nics` the ranks'
        interfaces. SSH is not used: Ray starts the workers."""
        del ssh_str
        return MiniSettings(timeout_s=timeout_s,
                            placement_group_timeout_s=placement_group_timeout_s,
                            nics=set(nics) if nics else None,
                            ssh_identity_file=ssh_identity_file)

    def __init__(self, settings=None, num_workers: Optional[int] = None,
                 num_hosts: Optional[int] = None, num_workers_per_host: int = 1,
                 cpus_per_worker: int = 1, use_gpu: bool = False,
                 gpus_per_worker: Optional[int] = None,
                 use_current_placement_group: bool = True, min_workers: Optional[int] = None,
                 max_workers: Optional[int] = None, reset_limit: Optional[int] = None,
                 cooldown_range=None, elastic_timeout: int = 600,
                 override_discovery: bool = True, cpus_per_slot: Optional[int] = None,
                 gpus_per_slot: Optional[int] = None):
        del use_current_placement_group, override_discovery
        self.settings = settings or MiniSettings()
        self.workers: List[Any] = []
        self._elastic = None
        if min_workers is not None or max_workers is not None:
            if num_workers is not None or num_hosts is not None:
                raise ValueError(f"{_LAUNCHER}: give num_workers (or num_hosts) for a fixed "
                                 "job, or min_workers/max_workers for an elastic one, not both")
            from hvd.ray._elastic import ElasticJob
            cpus = cpus_per_slot or cpus_per_worker
            gpus = (gpus_per_slot or gpus_per_worker or 1) if use_gpu else 0
            self._elastic = ElasticJob(self.settings, min_workers or 1, max_workers, cpus, gpus,
                                       reset_limit, cooldown_range, elastic_timeout)
            return
        del elastic_timeout, reset_limit, cooldown_range
        if num_workers is not None and num_hosts is not None:
            raise ValueError(f"{_LAUNCHER}: give num_workers, or num_hosts with "
                             "num_workers_per_host, not both")
        if num_workers is None and num_hosts is None:
            raise ValueError(f"{_LAUNCHER}: give num_workers (or num_hosts and "
                             "num_workers_per_host)")
        for name, value in (("num_workers", num_workers), ("num_hosts", num_hosts),
                            ("num_workers_per_host", num_workers_per_host)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{_LAUNCHER}: {name} must be a positive integer, got "
                                 f"{value!r}")
        self.num_hosts = num_hosts
        self.num_workers_per_host = num_workers_per_host
        self.num_workers = num_workers if num_workers is not None else \
            num_hosts * num_workers_per_host
        self.cpus_per_worker = cpus_per_slot or cpus_per_worker
        self.gpus_per_worker = (gpus_per_slot or gpus_per_worker or 1) if use_gpu else 0
        self.placements = []
        self.hosts: List[str] = []  # each rank's node address, by rank
        self._group = None

    # -- start ----------------------------------------------------------------------------
    def start(self, executable_cls: type = None, executable_args: Optional[List] = None,
              executable_kwargs: Optional[Dict] = None,
              extra_env_vars: Optional[Dict] = None):
        """Reserves the workers' resources, starts one actor per rank and gives each its
        placement; `executable_cls(*executable_args, **executable_kwargs)` is made in every
        actor after that (execute() calls into it)."""
        ray = _ray()
        from ray.util.placement_group import placement_group

        if self._elastic is not None:
            env = {str(k): str(v) for k, v in (extra_env_vars or {}).items()}
            return self._elastic.start(ray, executable_cls, executable_args, executable_kwargs,
                                       env)
        if self.workers:
            raise RuntimeError(f"{_LAUNCHER}: start() was called already; shutdown() first")
        bundle = {"CPU": self.cpus_per_worker}
        if self.gpus_per_worker:
            bundle["GPU"] = self.gpus_per_worker
        if self.num_hosts is not None:
            # Each host's workers in one bundle, the bundles on distinct nodes.
            bundles = [{k: v * self.num_workers_per_host for k, v in bundle.items()}
                       for _ in range(self.num_hosts)]
            strategy = "STRICT_SPREAD"
        else:
            bundles, strategy = [dict(bundle) for _ in range(self.num_workers)], "PACK"
        self._group = placement_group(bundles, strategy=strategy)
        timeout = self.settings.placement_group_timeout_s
        ready, _ = ray.wait([self._group.ready()], timeout=timeout)
        if not ready:
            total = ray.cluster_resources()
            free = ray.available_resources()
            ray.util.remove_placement_group(self._group)
            self._group = None
            raise RunError(
                f"{_LAUNCHER}: {self.num_workers} workers of {bundle} each ({strategy}) did "
                f"not fit on the Ray cluster within placement_group_timeout_s={timeout}: it "
                f"has {total.get('CPU', 0):g} CPUs ({free.get('CPU', 0):g} free) and "
                f"{total.get('GPU', 0):g} GPUs on {len(ray.nodes())} nodes")
        env = {str(k): str(v) for k, v in (extra_env_vars or {}).items()}
        env.setdefault("HVD_START_TIMEOUT", str(int(self.settings.timeout_s)))
        try:
            self._start_actors(ray, env, executable_cls, executable_args, executable_kwargs)
        except BaseException:
            self.shutdown()  # no actor or reservation outlives a start that failed
            raise

    def _start_actors(self, ray, env, executable_cls, executable_args, executable_kwargs):
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from hvd import _ranks

        actor = ray.remote(_Worker)
        self.workers = []
        for i in range(self.num_workers):
            index = i // self.num_workers_per_host if self.num_hosts is not None else i
            self.workers.append(actor.options(
                num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    self._group, placement_group_bundle_index=index)).remote(env))
        node_ids = ray.get([w.node_id.remote() for w in self.workers])
        self.placements = _ranks.place(node_ids)
        # The address each node's raylet registered (`ray start --node-ip-address`).
        ips = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()}
        zero = next(i for i, p in enumerate(self.placements) if p.rank == 0)
        rendezvous = ips[node_ids[zero]]
        port = ray.get(self.workers[zero].free_port.remote(rendezvous))
        secret, job_id = secrets.token_hex(32), f"ray-{secrets.token_hex(6)}"
        # Ranks in rank order from here on: run() returns results in that order.
        order = sorted(range(self.num_workers), key=lambda i: self.placements[i].rank)
        self.workers = [self.workers[i] for i in order]
        self.placements = [self.placements[i] for i in order]
        self.hosts = [ips[node_ids[i]] for i in order]
        joins = []
        for worker, p, host in zip(self.workers, self.placements, self.hosts):
            rank_env = _ranks.rank_environment(p, rendezvous, port, secret, "Ray", job_id)
            rank_env["HVD_HOSTNAME"] = host  # the node's address names it in messages
            joins.append(worker.join.remote(rank_env, sorted(self.settings.nics or ()),
                                            executable_cls, executable_args, executable_kwargs))
        ray.get(joins)

    # -- calls ----------------------------------------------------------------------------
    def run(self, fn: Callable, args: Optional[List] = None, kwargs: Optional[Dict] = None,
            callbacks: Optional[List[Callable]] = None) -> List[Any]:
        """fn(*args, **kwargs) on every rank; the results in rank order. Elastic: the results
        of the workers that finished (the last round's), in their rank order."""
        del callbacks
        if self._elastic is not None:
            return self._elastic.run(fn, args, kwargs)
        return self._gather([w.call.remote(fn, args, kwargs) for w in self._started()])

    def execute(self, fn: Callable, callbacks: Optional[List[Callable]] = None) -> List[Any]:
        """fn(executable) on every rank (the executable_cls instance start() made; elastic: made
        by each worker as it starts)."""
        del callbacks
        if self._elastic is not None:
            return self._elastic.execute(fn)
        return self._gather([w.execute.remote(fn) for w in self._started()])

    def execute_single(self, fn: Callable) -> Any:
        """fn(executable) on rank 0 only."""
        self._refuse_elastic("execute_single", "execute")
        return self._gather([self._started()[0].execute.remote(fn)])[0]

    def run_remote(self, fn: Callable, args: Optional[List] = None,
                   kwargs: Optional[Dict] = None) -> List[Any]:
        """fn(*args, **kwargs) on every rank, without waiting: Ray object refs in rank order;
        each resolves to (ok, return value or traceback, was it hvd's HorovodInternalError,
        when it ended)."""
        self._refuse_elastic("run_remote", "run")
        return [w.call.remote(fn, args, kwargs) for w in self._started()]

    def shutdown(self):
        """Stops the actors and frees their resources."""
        ray = _ray()
        if self._elastic is not None:
            return self._elastic.shutdown()
        for w in self.workers:
            ray.kill(w)
        self.workers = []
        if self._group is not None:
            ray.util.remove_placement_group(self._group)
            self._group = None

    def _refuse_elastic(self, method, instead):
        if self._elastic is not None:
            raise NotImplementedError(f"{_LAUNCHER}: {method}() has no meaning in an elastic job,"
                                      f" whose workers come and go between rounds; use "
                                      f"{instead}()")

    def _started(self):
        if not self.workers:
            raise RuntimeError(f"{_LAUNCHER}: call start() first")
        return self.workers

    def _gather(self, refs) -> List[Any]:
        """The results in rank order. A failure raises RunError at once, naming the rank that
        failed first for a reason of its own (the others' errors follow from it, as Spark's
        ranks' do: hvd/_ranks.py), and stops the job: its peers would wait for it in their
        collectives."""
        from hvd import _ranks

        ray = _ray()
        index = {ref: i for i, ref in enumerate(refs)}
        results: Dict[int, Any] = {}
        failures = []
        pending = list(refs)
        deadline = None  # after the first failure: how long the others may take to report
        while pending:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            done, pending = ray.wait(pending, num_returns=1, timeout=timeout)
            if not done:
                break
            i = index[done[0]]
            try:
                ok, value, peer, finished = ray.get(done[0])
            except ray.exceptions.RayActorError as e:
                ok, value, peer, finished = False, f"its actor died: {e}", False, time.time()
            if ok:
                results[i] = value
                continue
            host = self.hosts[i] if i < len(self.hosts) else "?"
            failures.append(_ranks.Outcome(i, host, False, value, "", finished, peer))
            if deadline is None:
                deadline = time.monotonic() + _FAILURE_GRACE
        if failures:
            first = _ranks.first_failure(failures)
            self.shutdown()
            raise RunError(_ranks.failure_message(_LAUNCHER, first, where="node"))
        return [results[i] for i in range(len(refs))]


@dataclass
class ElasticSettings:
    """ElasticRayExecutor.create_settings()'s settings."""
    min_num_proc: int = 1
    max_num_proc: Optional[int] = None
    reset_limit: Optional[int] = None
    elastic_timeout: int = 600
    timeout_s: int = 30
    nics: Optional[set] = None
    placement_group_timeout_s: int = 100
    cooldown_range: Optional[tuple] = None


class ElasticRayExecutor:
    """Horovod's older elastic Ray API: ``ElasticRayExecutor(settings, ...)``, ``start()``,
    ``run(worker_fn)`` calling ``worker_fn()`` on every worker. The same job as
    ``RayExecutor(min_workers=..., max_workers=...)``."""

    @staticmethod
    def create_settings(min_num_proc=1, max_num_proc=None, reset_limit=None,
                        elastic_timeout=600, timeout_s=30, ssh_identity_file=None, nics=None,
                        min_np=None, max_np=None, cooldown_range=None, **kwargs):
        del ssh_identity_file, kwargs  # SSH is not used: Ray starts the workers
        return ElasticSettings(min_num_proc=min_np or min_num_proc,
                               max_num_proc=max_np or max_num_proc, reset_limit=reset_limit,
                               elastic_timeout=elastic_timeout, timeout_s=timeout_s,
                               nics=set(nics) if nics else None, cooldown_range=cooldown_range)

    def __init__(self, settings: ElasticSettings, use_gpu: bool = False, cpus_per_slot: int = 1,
                 gpus_per_slot: Optional[int] = None, env_vars: Optional[dict] = None,
                 override_discovery: bool = True):
        del override_discovery
        if gpus_per_slot and not use_gpu:
            raise ValueError(f"{_LAUNCHER}: gpus_per_slot={gpus_per_slot} needs use_gpu=True")
        self._executor = RayExecutor(settings, min_workers=settings.min_num_proc,
                                     max_workers=settings.max_num_proc,
                                     cpus_per_slot=cpus_per_slot, use_gpu=use_gpu,
                                     gpus_per_slot=gpus_per_slot,
                                     reset_limit=settings.reset_limit,
                                     cooldown_range=settings.cooldown_range,
                                     elastic_timeout=settings.elastic_timeout)
        self._env = env_vars or {}

    def start(self):
        self._executor.start(extra_env_vars=self._env)

    def run(self, worker_fn: Callable, callbacks: Optional[List[Callable]] = None) -> List[Any]:
        """worker_fn() on every worker; the results of the workers that finished."""
        del callbacks
        return self._executor.run(worker_fn)

    def shutdown(self):
        self._executor.shutdown()


# How long the other ranks may take to report after the first failure, so that the report
# names the rank whose own error it was (its peers' HorovodInternalError often comes first).
_FAILURE_GRACE = 2.0


__all__ = ["ElasticRayExecutor", "RayExecutor", "RunError"]
