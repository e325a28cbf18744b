"""One rank of a launcher test: joins the job its launcher describes, checks
the world against the launcher's own variables, and takes one optimizer
step that must equal the global batch's (float64)."""

import copy
import os
import sys

import torch

import kolo.torch as hvd


def launcher_rank():
    for key in ("KOLO_RANK", "OMPI_COMM_WORLD_RANK", "RANK", "SLURM_PROCID"):
        if key in os.environ:
            return int(os.environ[key])
    return 0


def main():
    hvd.init()
    assert hvd.rank() == launcher_rank(), (hvd.rank(), launcher_rank())
    expected_size = int(sys.argv[1])
    assert hvd.size() == expected_size, (hvd.size(), expected_size)
    torch.manual_seed(3)
    model = torch.nn.Linear(5, 2).double()
    reference = copy.deepcopy(model)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                         named_parameters=model.named_parameters())
    x = torch.randn(4 * hvd.size(), 5, dtype=torch.float64)
    mine = x[4 * hvd.rank():4 * hvd.rank() + 4]
    model(mine).pow(2).mean().backward()
    optimizer.step()
    reference(x).pow(2).mean().backward()
    torch.optim.SGD(reference.parameters(), lr=0.5).step()
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-10, atol=1e-10)
    print(f"rank {hvd.rank()} of {hvd.size()}: ok on {os.environ.get('KOLO_BACKEND', 'default')}")
    hvd.shutdown()


if __name__ == "__main__":
    main()
