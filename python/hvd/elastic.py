"""Elastic training without a framework: NumPy arrays or any picklable objects kept in an
``ObjectState`` (see hvd/_elastic.py for the model; hvd.torch.elastic and
hvd.tensorflow.elastic add their frameworks' states):

    import hvd.numpy as hvd  # hvd.numpy.elastic is this module

    @hvd.elastic.run
    def train(state):
        while state.step < steps:
            ...
            state.step += 1
            state.commit()

    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, weights=w, step=0)
    train(state)
"""
from hvd._elastic import ObjectState, State, reset_runtime, run_fn

__all__ = ["ObjectState", "State", "run"]


def run(func):
    """Runs ``func(state, ...)`` through the job's rounds: after a failed round the state is
    restored to its last commit, and each round starts from rank 0's state."""
    from hvd import init, shutdown
    return run_fn(func, reset_runtime(init, shutdown))
