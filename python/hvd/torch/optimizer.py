"""DistributedOptimizer: Horovod's recipe. A hook on every parameter starts the allreduce of its
gradient the moment backward has accumulated it, so communication overlaps the rest of
backward; step() waits for all of them, writes the averaged gradients back and steps the
wrapped optimizer. Where overlapping cannot help (host-memory gradients with every rank on one
host and torch's threads filling the rank's CPUs: moving them is CPU work on the cores backward
is using), step() starts them all instead (HVD_GRADIENT_OVERLAP, docs/environment.md)."""
from __future__ import annotations

import contextlib
import warnings
from typing import Dict, List, Optional

import numpy as np
import torch

from hvd import _basics, _core, _replicas
from hvd._accumulation import BackwardPasses
from hvd._basics import Average, HorovodInternalError, global_process_set
from hvd.torch.compression import Compression
from hvd.torch.mpi_ops import _c, _SparsePending, allreduce


def load_keeping_param_groups(optimizer, load) -> None:
    """Runs `load` (a load_state_dict of `optimizer`) and then puts the loaded param groups into
    the dicts `optimizer` had before. load_state_dict makes new dicts, but an LR scheduler, and
    the optimizer a DistributedOptimizer wraps, hold the old ones: without this, a scheduler
    made before a resume or a broadcast would change an lr that no step reads."""
    groups = optimizer.param_groups
    load()
    for old, loaded in zip(groups, optimizer.param_groups):
        if old is not loaded:
            old.clear()
            old.update(loaded)
    optimizer.param_groups = groups


def _overlap_policy(gradient_overlap):
    """HVD_GRADIENT_OVERLAP, or the optimizer's own `gradient_overlap`: auto, on or off."""
    policy = _core.gradient_overlap() if gradient_overlap is None else gradient_overlap
    if policy not in ("auto", "on", "off"):
        raise ValueError("DistributedOptimizer: gradient_overlap must be 'auto', 'on' or 'off', "
                         f"got {policy!r}")
    return policy


def starts_in_backward(policy, *, on_gpu, one_host, compute_threads, cpu_share):
    """Whether a gradient's allreduce starts from its backward hook (True) or at step(), for
    HVD_GRADIENT_OVERLAP's `policy`. auto overlaps unless overlapping can only take turns with
    backward: between ranks of one host a host-memory gradient is copied and reduced by the
    CPU, and when torch's compute threads already fill this rank's share of the CPUs, that work
    is taken from backward's (docs/performance.md)."""
    if policy != "auto":
        return policy == "on"
    return on_gpu or not one_host or compute_threads < cpu_share


def _participation(process_set):
    """(process set, its id, whether this rank communicates). As Horovod: a one-process job has
    nothing to combine and a rank outside the process set takes no part, so neither pays for
    hooks or collectives; their step() is the wrapped optimizer's. An elastic job of one worker
    may grow in a later round, so it communicates. The id is looked up once, not per gradient."""
    process_set = global_process_set if process_set is None else process_set
    elastic = _core.elastic_round() >= 0
    communicates = (_basics.size() > 1 or elastic) and process_set.included()
    return process_set, _basics.process_set_id(process_set), communicates


_FIX = ("broadcast them from rank 0 before training (hvd.broadcast_parameters("
        "model.state_dict(), root_rank=0) and hvd.broadcast_optimizer_state(optimizer, "
        "root_rank=0)), and let DistributedOptimizer reduce every gradient")


def replica_guard(process_set, communicates):
    """The optimizer's replica check (HVD_CHECK_REPLICAS; see hvd._replicas), or None."""
    guard = _replicas.Guard("DistributedOptimizer", process_set, _FIX)
    return guard if communicates and guard.enabled else None


def check_replicas(guard, params, names) -> None:
    """Counts an update and, when the check is due, compares the parameters across ranks."""
    if guard is None or not guard.tick():
        return
    _replicas.run_check(guard, params, lambda p: _parameter_name(names[id(p)]), summarise)


def _parameter_name(internal: str) -> str:
    # The allreduce names: "DistributedOptimizer.<name>", or "allreduce.noname.<i>" without
    # named_parameters.
    if internal.startswith("allreduce.noname."):
        return f"parameter {internal.rsplit('.', 1)[1]} (pass named_parameters for names)"
    return internal.split(".", 1)[1]


def summarise(params, chunk: int = 1 << 22):
    """_replicas.summarise() in torch, on the parameters' device (no copy to host memory), a
    few torch calls per parameter (grouping small ones measured slower: index_add_ and
    segment_reduce cost more than the calls they save)."""
    rows = []
    with torch.no_grad():
        for p in params:
            flat = p.detach()
            flat = (torch.view_as_real(flat) if flat.is_complex() else flat).reshape(-1)
            total = torch.zeros(3, dtype=torch.float64, device=flat.device)
            for start in range(0, flat.numel(), chunk):
                c = flat[start:start + chunk].to(torch.float64)
                pairs = c[:-1].dot(c[1:]) if c.numel() > 1 else c.new_zeros(())
                total += torch.stack([c.sum(), c.dot(c), pairs])
            rows.append(total)
    if not rows:
        return np.zeros((0, 3))
    return _replicas.finite_or_marked(torch.stack(rows).cpu().numpy())


class _DistributedOptimizer(torch.optim.Optimizer):
    # Methods of this class are mixed into a subclass of the user's optimizer class (see
    # DistributedOptimizer), so isinstance(opt, torch.optim.SGD) stays true.
    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, groups, sparse_as_dense, process_set,
                 gradient_overlap):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        self._op = _basics.check_reduce_op(op, "DistributedOptimizer")
        overlap = _overlap_policy(gradient_overlap)
        if self._op not in (Average, _basics.Sum):
            raise ValueError("DistributedOptimizer: op must be hvd.Average or hvd.Sum")
        if gradient_predivide_factor != 1.0 and self._op != Average:
            raise ValueError("DistributedOptimizer: gradient_predivide_factor needs op=Average")
        # autograd adds each pass into .grad; _hook counts the passes per gradient.
        self._passes = BackwardPasses(backward_passes_per_step)
        self._prescale = 1.0 / float(gradient_predivide_factor)
        self._postscale = float(gradient_predivide_factor)
        self._sparse_as_dense = sparse_as_dense
        self._densified = set()  # ids of sparse gradients reduced as dense this step
        self._process_set, self._process_set_id, self._communicates = _participation(process_set)

        # Per-parameter state is keyed by id(p): a dict keyed by the tensor itself calls
        # torch's Python-level Tensor.__hash__, several times per gradient per step.
        all_params = [p for g in self.param_groups for p in g["params"]]
        self._names = self._name_parameters(named_parameters, all_params)
        self._requires_update = [p for p in all_params if p.requires_grad]
        self._groups = self._make_groups(groups)
        self._group_of = {id(p): i for i, g in enumerate(self._groups) for p in g}
        # Gradients whose allreduce step() starts, not their hook (decided here, for the
        # devices the parameters are on now).
        one_host = _basics.local_size() == _basics.size()
        threads, share = torch.get_num_threads(), _core.cpu_share()
        self._deferred = {id(p) for p in self._requires_update
                          if not starts_in_backward(overlap, on_gpu=p.is_cuda, one_host=one_host,
                                                    compute_threads=threads, cpu_share=share)}
        # id(p) -> (core handle or _SparsePending or None, (compressed, ctx))
        self._handles: Dict[int, tuple] = {}
        self._group_ready: Dict[int, List[torch.Tensor]] = {}
        self._passes.restart(self._keys())
        self._synchronized = False
        self._should_synchronize = True
        self._hooks = [p.register_post_accumulate_grad_hook(self._hook)
                       for p in self._requires_update] if self._communicates else []
        self._replica_guard = replica_guard(self._process_set, self._communicates)

    @property
    def backward_passes_per_step(self) -> int:
        return self._passes.steps

    @backward_passes_per_step.setter
    def backward_passes_per_step(self, steps):
        """Takes effect from the next step, as in Horovod."""
        self._passes.steps = BackwardPasses(steps).steps

    @property
    def _parameter_names(self):
        """{parameter: name}, as Horovod's optimizer has it (scripts and tests read it): the
        named_parameters' names, else "allreduce.noname.<i>"."""
        params = [p for g in self.param_groups for p in g["params"]]
        return {p: self._names[id(p)].removeprefix("DistributedOptimizer.") for p in params}

    # -- construction ------------------------------------------------------------------------
    @staticmethod
    def _name_parameters(named_parameters, all_params):
        if named_parameters is None:
            return {id(p): f"allreduce.noname.{i}" for i, p in enumerate(all_params)}
        named = list(named_parameters)
        if any(not isinstance(x, tuple) or len(x) != 2 for x in named):
            raise ValueError("named_parameters should be a sequence of (name, parameter) "
                             "tuples, usually model.named_parameters()")
        names = [n for n, _ in named]
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise ValueError("DistributedOptimizer: parameter names in named_parameters must "
                             f"be unique; repeated: {', '.join(dups)}")
        by_param = {id(p): n for n, p in named}
        unnamed = [i for i, p in enumerate(all_params) if id(p) not in by_param]
        if unnamed:
            raise ValueError("DistributedOptimizer: named_parameters was given but "
                             f"{len(unnamed)} of the optimizer's parameters are not in it "
                             f"(positions {unnamed[:10]} in the optimizer's param groups); pass "
                             "the named_parameters of the model the optimizer optimizes")
        return {id(p): f"DistributedOptimizer.{by_param[id(p)]}" for p in all_params}

    def _make_groups(self, groups) -> List[List[torch.Tensor]]:
        if groups is None or groups == 0:
            return []
        if isinstance(groups, int):
            if groups < 0:
                raise ValueError(f"DistributedOptimizer: groups must be >= 0, got {groups}")
            params = self._requires_update
            k = min(groups, len(params)) or 1
            size, extra = divmod(len(params), k)
            out, start = [], 0
            for i in range(k):
                end = start + size + (1 if i < extra else 0)
                out.append(params[start:end])
                start = end
            return [g for g in out if g]
        out = [list(g) for g in groups]
        seen = set()
        for g in out:
            for p in g:
                if id(p) in seen:
                    raise ValueError("DistributedOptimizer: a parameter is in two groups")
                if id(p) not in self._names:
                    raise ValueError("DistributedOptimizer: groups contain a tensor that is not "
                                     "one of the optimizer's parameters")
                seen.add(id(p))
        return out

    # -- communication -----------------------------------------------------------------------
    def _keys(self):
        return [id(p) for p in self._requires_update]

    def _grad_of(self, p):
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        if p.grad.is_sparse and self._sparse_as_dense:
            p.grad = p.grad.to_dense()
            self._densified.add(id(p))  # sparse again once reduced, for the optimizer
        if not p.grad.is_sparse and not p.grad.is_contiguous():
            p.grad = p.grad.contiguous()
        return p.grad

    def _allreduce_grad_async(self, p):
        grad = self._grad_of(p)
        name = self._names[id(p)]
        if grad.is_sparse:
            return _SparsePending(grad, name, self._op, self._process_set), None
        compressed, ctx = self._compression.compress(grad)
        handle = _c.enqueue_inplace_allreduce([compressed], self._op, name, self._prescale,
                                              self._postscale,
                                              self._process_set_id)
        return handle, (compressed, ctx)

    def _allreduce_group_async(self, index):
        params = self._groups[index]
        grads = [self._grad_of(p) for p in params]
        if any(g.is_sparse for g in grads):
            raise ValueError("DistributedOptimizer: sparse gradients cannot be grouped; use "
                             "sparse_as_dense=True")
        pairs = [self._compression.compress(g) for g in grads]
        handle = _c.enqueue_inplace_allreduce([c for c, _ in pairs], self._op,
                                              f"group.{index}", self._prescale, self._postscale,
                                              self._process_set_id)
        for p, pair in zip(params, pairs):
            self._handles[id(p)] = (handle, pair)

    def _hook(self, p):
        key = id(p)
        if self._passes.step_done(key) and (key in self._deferred or
                                            self._handles.get(key, (None,))[0] is not None):
            raise AssertionError("Gradients were computed more than backward_passes_per_step "
                                 "times before optimizer.step() or synchronize(); increase "
                                 "backward_passes_per_step to accumulate gradients locally")
        if not self._passes.arrive(key) or key in self._deferred:  # synchronize() starts it
            self._handles.setdefault(key, (None, None))
            return
        index = self._group_of.get(key)
        if index is not None:
            ready = self._group_ready.setdefault(index, [])
            ready.append(p)
            self._handles.setdefault(key, (None, None))
            if len(ready) == len(self._groups[index]):
                del self._group_ready[index]
                self._allreduce_group_async(index)
            return
        self._handles[key] = self._allreduce_grad_async(p)

    def synchronize(self):
        """Waits for every gradient's allreduce (starting those backward did not reach, with
        zeros for gradients it did not produce) and writes the results to .grad."""
        if not self._communicates:
            self._synchronized = True
            return
        handles = self._handles
        for index in range(len(self._groups)):
            if any(handles.get(id(p), (None,))[0] is None for p in self._groups[index]):
                self._group_ready.pop(index, None)
                self._allreduce_group_async(index)
        for p in self._requires_update:
            if handles.get(id(p), (None,))[0] is None:
                handles[id(p)] = self._allreduce_grad_async(p)
        waited = set()  # a grouped allreduce's handle serves every tensor of the group
        for p in self._requires_update:
            key = id(p)
            handle, pair = handles[key]
            if isinstance(handle, _SparsePending):
                p.grad = handle.wait()
            else:
                if id(handle) not in waited:
                    waited.add(id(handle))
                    handle.wait()
                compressed, ctx = pair
                if ctx is not None:  # compressed to another dtype: write back
                    p.grad.copy_(self._compression.decompress(compressed, ctx))
                if key in self._densified:  # SparseAdam and the like take sparse gradients
                    self._densified.discard(key)
                    p.grad = p.grad.to_sparse()
        self._passes.restart(self._keys())
        handles.clear()
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """For `optimizer.synchronize(); clip...; with optimizer.skip_synchronize():
        optimizer.step()`."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(): the gradients are "
                              "reduced again, which slows training (wrap the step in `with "
                              "optimizer.skip_synchronize():`)")
            self.synchronize()
        self._synchronized = False
        if closure is not None and self._communicates:
            closure = self._reduced(closure)
        loss = super(self.__class__, self).step(closure)
        check_replicas(self._replica_guard, self._requires_update, self._names)
        return loss

    def _reduced(self, closure):
        """step(closure)'s closure, returning what the combined batch would: the optimizer
        (LBFGS and the like, possibly several times per step) reads .grad right after each
        evaluation, so its gradients are reduced before it returns, and its loss is reduced
        with the same op, so that every rank's optimizer takes the same decisions (LBFGS's
        tolerance_change and line search compare losses) and the parameters stay identical."""
        def evaluate():
            loss = closure()
            self.synchronize()
            self._synchronized = False  # not the user's synchronize(): the next step() may not warn
            if loss is None:
                return None
            local = loss.detach() if isinstance(loss, torch.Tensor) else torch.tensor(float(loss))
            reduced = allreduce(local, name="DistributedOptimizer.closure_loss", op=self._op,
                                process_set=self._process_set)
            return reduced if isinstance(loss, torch.Tensor) else float(reduced)
        return evaluate

    def load_state_dict(self, state_dict):
        # A load starts a fresh accumulation, as in Horovod: reductions already started finish
        # (so their names leave the engine) and are discarded, and the per-step counts reset.
        for handle, _ in self._handles.values():
            if handle is not None:
                try:
                    handle.wait()
                except HorovodInternalError:
                    pass  # an elastic job restoring its state after a failed round
        self._handles.clear()
        self._group_ready.clear()
        self._passes.restart(self._keys())
        self._synchronized = False
        load_keeping_param_groups(
            self, lambda: super(self.__class__, self).load_state_dict(state_dict))

    def zero_grad(self, set_to_none: bool = True):
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(); the "
                                 "gradients are still being reduced")
        return super(self.__class__, self).zero_grad(set_to_none)


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    """op=Adasum, as Horovod's: each rank steps the wrapped optimizer on its own gradients, and
    the ranks combine the resulting parameter changes with Adasum (an allreduce per parameter;
    Adasum tensors are never fused), so the learning rate needs no scaling by the number of
    ranks. step() waits for the combination; there is no overlap with backward."""

    def __init__(self, params, named_parameters, compression, backward_passes_per_step, op,
                 gradient_predivide_factor, groups, sparse_as_dense, process_set,
                 gradient_overlap):
        super(self.__class__, self).__init__(params)
        # Adasum; per parameter anyway; changes are dense; combined at step() anyway
        del op, groups, sparse_as_dense
        _overlap_policy(gradient_overlap)
        if gradient_predivide_factor != 1.0:
            raise ValueError("DistributedOptimizer: gradient_predivide_factor needs op=Average "
                             "(Adasum needs no scaling)")
        BackwardPasses(backward_passes_per_step)  # checks it; each step() combines anyway
        self.backward_passes_per_step = backward_passes_per_step
        self._compression = compression
        self._process_set, self._process_set_id, self._communicates = _participation(process_set)
        all_params = [p for g in self.param_groups for p in g["params"]]
        self._param_names = _DistributedOptimizer._name_parameters(named_parameters, all_params)
        self._names = {key: f"{name}.adasum_delta" for key, name in self._param_names.items()}
        self._replica_guard = replica_guard(self._process_set, self._communicates)

    def synchronize(self):
        """Nothing to wait for before the step: the ranks combine the steps' changes."""

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Nothing to skip: synchronize() waits for nothing (kept for Horovod's API)."""
        yield

    def step(self, closure=None):
        params = [p for g in self.param_groups for p in g["params"] if p.requires_grad]
        if not self._communicates:
            return super(self.__class__, self).step(closure)
        for p in params:
            if p.is_cuda:
                raise ValueError(f"DistributedOptimizer(op=Adasum): "
                                 f"{self._names[id(p)].rsplit('.', 1)[0]} is a GPU tensor; "
                                 "Adasum runs on host memory only")
        starts = [p.detach().clone() for p in params]
        loss = super(self.__class__, self).step(closure)
        pending = []
        with torch.no_grad():
            for p, start in zip(params, starts):
                delta = p.detach() - start
                compressed, ctx = self._compression.compress(delta)
                compressed = compressed.contiguous()
                handle = _c.enqueue_inplace_allreduce([compressed], _basics.Adasum,
                                                      self._names[id(p)], 1.0, 1.0,
                                                      self._process_set_id)
                pending.append((p, start, ctx, compressed, handle))
            for p, start, ctx, compressed, handle in pending:
                handle.wait()
                p.copy_(start + self._compression.decompress(compressed, ctx))
        check_replicas(self._replica_guard, params, self._param_names)
        return loss


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set, gradient_overlap=None):
    """Wraps `optimizer` so that step() uses gradients averaged (op=Average) or summed over
    the ranks of `process_set`. Every rank must wrap the same model the same way.
    `num_groups` is Horovod's deprecated spelling of an integer `groups`. `gradient_overlap`
    ('auto', 'on', 'off'; None: HVD_GRADIENT_OVERLAP) says whether each gradient's allreduce
    starts from its backward hook (on) or at step() (off); auto is off for host-memory
    gradients when every rank is on one host and torch's intra-op threads fill this rank's
    share of the CPUs (see starts_in_backward)."""
    if num_groups:
        warnings.warn("DistributedOptimizer: num_groups is deprecated; pass groups instead",
                      DeprecationWarning, stacklevel=2)
        if groups is not None:
            raise ValueError("DistributedOptimizer: pass groups or the deprecated num_groups, "
                             "not both")
        groups = num_groups
    mixin = _DistributedAdasumOptimizer if op == _basics.Adasum else _DistributedOptimizer
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,), dict(mixin.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step,
               op, gradient_predivide_factor, groups, sparse_as_dense, process_set,
               gradient_overlap)
