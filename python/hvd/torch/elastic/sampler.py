"""ElasticSampler: a DistributedSampler that survives changes of round. It remembers which
samples of the epoch were processed (record_batch), and at every new round spreads only the
rest over the new number of workers, so an epoch neither skips nor repeats committed work."""
from __future__ import annotations

import math

import torch

from hvd._basics import rank, size


class ElasticSampler(torch.utils.data.Sampler):
    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_indices = set()
        self.indices = []
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch `epoch` afresh: nothing of it is processed yet."""
        self.epoch = epoch
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """Marks this worker's batch `batch_idx` (of this round's iteration) as processed."""
        self.record_indices(self.get_indices(batch_idx, batch_size))

    def record_indices(self, indices):
        self.processed_indices.update(indices)

    def get_indices(self, batch_idx, batch_size):
        start = batch_idx * batch_size
        return self.indices[start:min(start + batch_size, len(self.indices))]

    def state_dict(self):
        return {"epoch": self.epoch, "processed_indices": set(self.processed_indices)}

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_indices = set(state_dict["processed_indices"])
        self.reset()

    def reset(self):
        """Spreads the epoch's unprocessed samples over the current ranks."""
        self.num_replicas = size()
        self.rank = rank()
        self.remaining_indices = [i for i in range(len(self.dataset))
                                  if i not in self.processed_indices]
        self.num_samples = int(math.ceil(len(self.remaining_indices) / self.num_replicas))
        self.total_size = self.num_samples * self.num_replicas
        self.indices = self._my_indices()

    def _my_indices(self):
        indices = list(self.remaining_indices)
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            order = torch.randperm(len(indices), generator=g).tolist()
            indices = [indices[i] for i in order]
        while indices and len(indices) < self.total_size:  # every rank gets as many samples
            indices += indices[:self.total_size - len(indices)]
        return indices[self.rank:self.total_size:self.num_replicas]

    def __iter__(self):
        self.indices = self._my_indices()
        return iter(self.indices)

    def __len__(self):
        return self.num_samples
