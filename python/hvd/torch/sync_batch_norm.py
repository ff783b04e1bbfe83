"""Batch normalisation over the global batch: statistics are reduced across the ranks of the
process set in training, so N ranks with batch B normalise as one process with batch N*B.
The reductions are the differentiable allreduce, so backward reduces the statistics' gradients
the same way."""
from __future__ import annotations

import torch
from torch.nn.modules.batchnorm import _BatchNorm

from hvd._basics import Sum, global_process_set
from hvd.torch.mpi_ops import allreduce


class SyncBatchNorm(_BatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_set=global_process_set):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self.process_set = process_set

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"SyncBatchNorm: expected at least 2D input (got {input.dim()}D)")

    def forward(self, input):
        self._check_input_dim(input)
        if not self.training or self.process_set.size() == 1:
            return super().forward(input)
        channels = input.shape[1]
        dims = [0] + list(range(2, input.dim()))
        shape = [1, channels] + [1] * (input.dim() - 2)
        count = torch.tensor([input.numel() // channels], dtype=input.dtype, device=input.device)
        # Two passes (mean, then centred squares) for the same accuracy as a local BatchNorm.
        totals = allreduce(torch.cat([input.sum(dims), count]), op=Sum,
                           process_set=self.process_set)
        n = totals[channels]
        mean = totals[:channels] / n
        centred = input - mean.view(shape)
        var = allreduce((centred * centred).sum(dims), op=Sum,
                        process_set=self.process_set) / n
        out = centred * torch.rsqrt(var + self.eps).view(shape)
        if self.affine:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        if self.track_running_stats:
            with torch.no_grad():
                self.num_batches_tracked += 1
                momentum = (1.0 / float(self.num_batches_tracked) if self.momentum is None
                            else self.momentum)
                unbiased = var * (n / (n - 1)) if float(n) > 1 else var
                self.running_mean.mul_(1 - momentum).add_(momentum * mean.detach())
                self.running_var.mul_(1 - momentum).add_(momentum * unbiased.detach())
        return out
