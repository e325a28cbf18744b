"""Horovod's SyncBatchNorm: batch normalization whose training statistics are
those of the global batch, every rank's samples together.

The forward pass allreduces (Sum) one packed tensor per call: the sample
count, and the per-channel sums of x and x*x. The normalization is written
with differentiable operations over that allreduce, whose gradient is the
allreduce (Sum) of the incoming gradients (mpi_ops._Allreduce), so
autograd gives each rank the gradient of the global batch's statistics
without a hand-written backward pass.
"""

import itertools

import torch
from torch.nn.modules.batchnorm import _BatchNorm

from kolo.torch import mpi_ops


class SyncBatchNorm(_BatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        # Every rank builds its layers in the same order: the k-th layer's
        # statistics travel under the same name everywhere.
        self._name = f"sync_batch_norm.{next(SyncBatchNorm._created)}"

    _created = itertools.count()

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        if not (self.training or not self.track_running_stats) or mpi_ops.size() == 1:
            return super().forward(input)
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                momentum = 1.0 / float(self.num_batches_tracked)
        channels = input.shape[1]
        # (N, C, ...) -> (C, N*...): each channel's samples in one row.
        flat = input.transpose(0, 1).reshape(channels, -1)
        count = torch.full((1,), float(flat.shape[1]), dtype=input.dtype)
        packed = torch.cat([count, flat.sum(1), (flat * flat).sum(1)])
        total = mpi_ops.allreduce(packed, op=mpi_ops.Sum,
                                  name=self._name)
        n = total[0]
        mean = total[1:1 + channels] / n
        var = total[1 + channels:] / n - mean * mean
        if self.training and self.track_running_stats:
            with torch.no_grad():
                unbiased = var * n / (n - 1)
                self.running_mean.mul_(1 - momentum).add_(mean.detach(), alpha=momentum)
                self.running_var.mul_(1 - momentum).add_(unbiased.detach(), alpha=momentum)
        shape = [1, channels] + [1] * (input.dim() - 2)
        out = (input - mean.view(shape)) * torch.rsqrt(var.view(shape) + self.eps)
        if self.affine:
            out = out * self.weight.view(shape) + self.bias.view(shape)
        return out
