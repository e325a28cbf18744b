"""The problem the elastic tests train, shared by the worker (elastic_worker.py)
and the test that replays it (test_elastic.py): a float64 two-layer model
fit to a fixed dataset by SGD with momentum.

A step's gradient is the sum of its samples' squared errors' gradients over
a constant, whichever workers computed which samples, so any sequence of
world sizes gives the update one process computes from the same samples.
"""

import torch

SAMPLES = 72
FEATURES = 4
DIVISOR = 16.0  # every step's loss is its samples' sum over this
LEARNING_RATE = 0.05
MOMENTUM = 0.9


def dataset():
    """(x, y) of SAMPLES rows, the same in every process."""
    i = torch.arange(SAMPLES * FEATURES, dtype=torch.float64)
    x = torch.sin(0.37 * i + 0.11).reshape(SAMPLES, FEATURES)
    y = (x * torch.arange(1, FEATURES + 1, dtype=torch.float64)).sum(1, keepdim=True)
    return x, torch.tanh(y)


def model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 3), torch.nn.Tanh(),
                               torch.nn.Linear(3, 1)).double()


def sgd(parameters):
    return torch.optim.SGD(parameters, lr=LEARNING_RATE, momentum=MOMENTUM)


def loss(net, x, y, indices):
    rows = torch.tensor(indices, dtype=torch.long)
    return (net(x[rows]) - y[rows]).pow(2).sum() / DIVISOR


def replay(steps):
    """The parameters one process reaches taking `steps`, each the list of
    every sample index the job's ranks used in it."""
    x, y = dataset()
    net = model()
    optimizer = sgd(net.parameters())
    for indices in steps:
        optimizer.zero_grad()
        loss(net, x, y, indices).backward()
        optimizer.step()
    return [p.detach().reshape(-1).tolist() for p in net.parameters()]
