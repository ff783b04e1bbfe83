"""The small model, batches and checks the DistributedOptimizer tests share."""
import torch

import hvd.torch as hvd

BATCH = 4


def make_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def batch_of(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(BATCH, 6, generator=g), torch.randint(0, 3, (BATCH,), generator=g)


def combined_batch(step):
    xs, ys = zip(*[batch_of(r, step) for r in range(hvd.size())])
    return torch.cat(xs), torch.cat(ys)


def flat(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def assert_identical_on_all_ranks(model):
    rows = hvd.allgather(flat(model).unsqueeze(0))
    for r in range(1, rows.shape[0]):
        assert torch.equal(rows[0], rows[r]), f"rank {r} differs from rank 0"
