"""SyncBatchNorm over N ranks with batch b is BatchNorm on the global batch of
N*b: outputs, running statistics and gradients (float64, 1e-10)."""

import torch

import kolo.torch as hvd


def test_sync_batch_norm_equals_batch_norm_on_the_global_batch():
    per_rank, channels = 3, 4
    g = torch.Generator().manual_seed(11)
    x = torch.randn(per_rank * hvd.size(), channels, 5, 5, generator=g,
                    dtype=torch.float64) * 3 + 1
    upstream = torch.randn(x.shape, generator=g, dtype=torch.float64)
    reference = torch.nn.BatchNorm2d(channels).double()
    sync = hvd.SyncBatchNorm(channels).double()
    with torch.no_grad():
        for bn in (reference, sync):
            bn.weight.copy_(torch.linspace(0.5, 2.0, channels))
            bn.bias.copy_(torch.linspace(-1.0, 1.0, channels))
    rows = slice(hvd.rank() * per_rank, (hvd.rank() + 1) * per_rank)
    mine = x[rows].clone().requires_grad_()
    everyone = x.clone().requires_grad_()
    out = sync(mine)
    expected = reference(everyone)
    torch.testing.assert_close(out, expected[rows], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(sync.running_mean, reference.running_mean, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(sync.running_var, reference.running_var, rtol=1e-10, atol=1e-10)
    (out * upstream[rows]).sum().backward()
    (expected * upstream).sum().backward()
    torch.testing.assert_close(mine.grad, everyone.grad[rows], rtol=1e-10, atol=1e-10)
    # The parameters' gradients sum over ranks to the global batch's.
    for mine_p, ref_p in ((sync.weight, reference.weight), (sync.bias, reference.bias)):
        total = hvd.allreduce(mine_p.grad, op=hvd.Sum)
        torch.testing.assert_close(total, ref_p.grad, rtol=1e-10, atol=1e-10)
    sync.eval()
    reference.eval()
    torch.testing.assert_close(sync(x[rows]), reference(x[rows]), rtol=1e-10, atol=1e-10)
