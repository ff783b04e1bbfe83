"""TorchState: a model, an optimizer, ElasticSamplers and plain attributes kept across the
rounds of an elastic job."""
from __future__ import annotations

import copy

import torch

from hvd._basics import rank
from hvd._elastic import ObjectState
from hvd.torch.elastic.sampler import ElasticSampler
from hvd.torch.functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                                 broadcast_parameters)


class _StateDictHandler:
    """Keeps a deep copy of value.state_dict() at every save. Restore loads a copy of that copy:
    an optimizer's load_state_dict keeps the very tensors it is given, which its next steps then
    change in place, and a second restore from the same commit must find them unchanged."""

    def __init__(self, value):
        self.value = value
        self.save()

    def save(self):
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(copy.deepcopy(self._saved))


class _ModelHandler(_StateDictHandler):
    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class _OptimizerHandler(_StateDictHandler):
    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class _SamplerHandler(_StateDictHandler):
    def sync(self):
        # Every worker's processed samples count (each saw its own share), then every worker
        # takes rank 0's epoch with that union and repartitions what is left over the new size.
        processed = set()
        for part in allgather_object(set(self.value.processed_indices)):
            processed |= part
        state = self.value.state_dict()
        state["processed_indices"] = processed
        self.value.load_state_dict(broadcast_object(state, root_rank=0))


def _handler_for(value):
    if isinstance(value, torch.nn.Module):
        return _ModelHandler(value)
    if isinstance(value, torch.optim.Optimizer):
        return _OptimizerHandler(value)
    if isinstance(value, ElasticSampler):
        return _SamplerHandler(value)
    return None


class TorchState(ObjectState):
    """``TorchState(model, optimizer, epoch=0, batch=0, sampler=ElasticSampler(...))``: modules,
    optimizers and ElasticSamplers (under any keyword) are saved with deep copies of their
    state_dicts and synced by broadcast from rank 0; other keywords are plain attributes."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        if model is not None:
            kwargs["model"] = model
        if optimizer is not None:
            kwargs["optimizer"] = optimizer
        handlers, plain = {}, {}
        for name, value in kwargs.items():
            handler = _handler_for(value)
            if handler is None:
                plain[name] = value
            else:
                handlers[name] = handler
        object.__setattr__(self, "_handlers", handlers)
        for name, handler in handlers.items():
            object.__setattr__(self, name, handler.value)
        super().__init__(bcast_object=broadcast_object, get_rank=rank, **plain)

    def __setattr__(self, name, value):
        handlers = self.__dict__.get("_handlers", {})
        if name in handlers:
            handlers[name] = _handler_for(value) or handlers[name]
        object.__setattr__(self, name, value)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super().sync()

    def committed(self):
        return {**super().committed(),
                "state_dicts": {name: h._saved for name, h in self._handlers.items()}}

    def load_committed(self, committed):
        for name, saved in committed["state_dicts"].items():
            self._handlers[name]._saved = saved
        super().load_committed(committed)
