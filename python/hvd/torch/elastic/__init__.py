"""Elastic training for PyTorch, as horovod.torch.elastic (see hvd/_elastic.py for the model):

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch, (x, y) in enumerate(loader, start=state.batch):
                ...
                state.commit()
            state.batch = 0

    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0)
    train(state)

Run it with ``hvdrun --min-np 2 --max-np 4 --host-discovery-script ./hosts.sh python train.py``.
"""
from hvd._elastic import ObjectState, State, reset_runtime, run_fn
from hvd.torch.elastic.sampler import ElasticSampler
from hvd.torch.elastic.state import TorchState

__all__ = ["ElasticSampler", "ObjectState", "State", "TorchState", "run"]


def run(func):
    """Runs ``func(state, ...)`` through the job's rounds: after a failed round the state is
    restored to its last commit, and each round starts from rank 0's state."""
    from hvd.torch import init, shutdown
    return run_fn(func, reset_runtime(init, shutdown))
