"""DistributedOptimizer: N ranks with batch b take the step one process takes
on the global batch of N*b (float64, 1e-10), with momentum, several
backward passes per step, and fp16 compression within its precision."""

import copy

import pytest
import torch

import kolo.torch as hvd


def make_model():
    torch.manual_seed(7)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(),
                               torch.nn.Linear(16, 16), torch.nn.Tanh(),
                               torch.nn.Linear(16, 3)).double()


def global_batch(step, rows):
    g = torch.Generator().manual_seed(100 + step)
    return (torch.randn(rows, 6, generator=g, dtype=torch.float64),
            torch.randn(rows, 3, generator=g, dtype=torch.float64))


def mine(tensor, per_rank):
    return tensor[hvd.rank() * per_rank:(hvd.rank() + 1) * per_rank]


def assert_same_parameters(model, reference, tolerance):
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(p, q, rtol=tolerance, atol=tolerance,
                                   msg=lambda m: f"{name}: {m}")


def step_beside_reference(model, optimizer, reference, reference_optimizer,
                          steps, per_rank, rank, size):
    """Steps the distributed model on rank's share of each global batch and
    the reference on all of it."""
    for step in range(steps):
        x, y = global_batch(step, per_rank * size)
        rows = slice(rank * per_rank, (rank + 1) * per_rank)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x[rows]), y[rows]).backward()
        optimizer.step()
        reference_optimizer.zero_grad()
        torch.nn.functional.mse_loss(reference(x), y).backward()
        reference_optimizer.step()


@pytest.mark.parametrize("make_optimizer", [
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: torch.optim.Adam(ps, lr=0.01),
], ids=["sgd-momentum", "adam"])
def test_ranks_take_the_global_batch_step(make_optimizer):
    per_rank, n = 4, hvd.size()
    model = make_model()
    reference = copy.deepcopy(model)
    optimizer = hvd.DistributedOptimizer(make_optimizer(model.parameters()),
                                         named_parameters=model.named_parameters())
    assert isinstance(optimizer, type(make_optimizer([torch.zeros(1)])))
    reference_optimizer = make_optimizer(reference.parameters())
    step_beside_reference(model, optimizer, reference, reference_optimizer,
                          5, per_rank, hvd.rank(), n)
    assert_same_parameters(model, reference, 1e-10)


def test_backward_passes_per_step_sum_as_horovod_does():
    per_rank, passes, n = 3, 2, hvd.size()
    model = make_model()
    reference = copy.deepcopy(model)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.05),
        named_parameters=model.named_parameters(),
        backward_passes_per_step=passes)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.05)
    for step in range(3):
        x, y = global_batch(step, per_rank * n * passes)
        optimizer.zero_grad()
        for p in range(passes):
            xs, ys = x[p * per_rank * n:(p + 1) * per_rank * n], y[p * per_rank * n:(p + 1) * per_rank * n]
            # The script scales its loss by the passes (Horovod sums them).
            loss = torch.nn.functional.mse_loss(model(mine(xs, per_rank)), mine(ys, per_rank))
            (loss / passes).backward()
        optimizer.step()
        reference_optimizer.zero_grad()
        torch.nn.functional.mse_loss(reference(x), y).backward()
        reference_optimizer.step()
    assert_same_parameters(model, reference, 1e-10)


def test_synchronize_then_skip_synchronize_clips_the_reduced_gradients():
    per_rank, n = 4, hvd.size()
    model = make_model()
    reference = copy.deepcopy(model)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters())
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    x, y = global_batch(0, per_rank * n)
    torch.nn.functional.mse_loss(model(mine(x, per_rank)), mine(y, per_rank)).backward()
    optimizer.synchronize()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.01)
    with optimizer.skip_synchronize():
        optimizer.step()
    torch.nn.functional.mse_loss(reference(x), y).backward()
    torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.01)
    reference_optimizer.step()
    assert_same_parameters(model, reference, 1e-10)


def test_fp16_compression_stays_within_half_precision():
    per_rank, n = 4, hvd.size()
    model = make_model().float()
    reference = copy.deepcopy(model)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters(),
                                         compression=hvd.Compression.fp16)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(3):
        x, y = global_batch(step, per_rank * n)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(mine(x, per_rank).float()),
                                     mine(y, per_rank).float()).backward()
        optimizer.step()
        reference_optimizer.zero_grad()
        torch.nn.functional.mse_loss(reference(x.float()), y.float()).backward()
        reference_optimizer.step()
    assert_same_parameters(model, reference, 2e-3)


def test_parameters_left_unused_on_some_ranks_do_not_stall():
    model = make_model()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters())
    x, y = global_batch(0, 2)
    # Rank 0 skips the last layer: its gradient is reduced as zeros.
    head = model[:4] if hvd.rank() == 0 else model
    out = head(x)
    (out.sum() if hvd.rank() == 0 else torch.nn.functional.mse_loss(out, y)).backward()
    optimizer.step()


def test_named_parameters_must_be_unique_and_complete():
    model = make_model()
    named = list(model.named_parameters())
    with pytest.raises(ValueError, match="unique"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=[named[0], named[0]] + named[1:])
    with pytest.raises(ValueError, match="not in it"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 named_parameters=named[1:])


def test_broadcast_parameters_and_optimizer_state_make_ranks_equal():
    torch.manual_seed(hvd.rank())
    model = torch.nn.Linear(4, 2).double()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01 * (hvd.rank() + 1))
    if hvd.rank() == 0:
        model(torch.ones(3, 4, dtype=torch.float64)).sum().backward()
        optimizer.step()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    weights = hvd.allgather(model.weight.detach().reshape(1, -1))
    assert torch.equal(weights, weights[0].expand_as(weights))
    assert optimizer.param_groups[0]["lr"] == 0.01
    state = optimizer.state[model.weight]
    sums = hvd.allgather(state["exp_avg"].reshape(1, -1))
    assert torch.equal(sums, sums[0].expand_as(sums))
    assert float(state["step"]) == 1.0


def test_explicit_groups_take_the_global_batch_step():
    per_rank, n = 4, hvd.size()
    model = make_model()
    reference = copy.deepcopy(model)
    # The first layer travels as one group, the last layer's weight alone;
    # the rest by size. groups=int is num_groups.
    groups = [[model[0].weight, model[0].bias], [model[4].weight]]
    for g in (groups, 3):
        optimizer = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.1),
            named_parameters=model.named_parameters(), groups=g)
        reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
        step_beside_reference(model, optimizer, reference, reference_optimizer,
                              3, per_rank, hvd.rank(), n)
        assert_same_parameters(model, reference, 1e-10)
        del optimizer


def test_groups_name_parameters_the_optimizer_has():
    model = make_model()
    with pytest.raises(ValueError, match="not one of the optimizer's"):
        hvd.DistributedOptimizer(torch.optim.SGD(model[0].parameters(), lr=0.1),
                                 groups=[[model[4].weight]])
    with pytest.raises(ValueError, match="list of lists"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 groups=[model[0].weight])


def test_a_process_set_takes_the_step_of_its_members_global_batch():
    per_rank = 4
    pair = hvd.add_process_set(list(range(min(2, hvd.size()))))
    try:
        if not pair.included():
            return
        n, me = pair.size(), pair.rank()
        model = make_model()
        reference = copy.deepcopy(model)
        optimizer = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
            named_parameters=model.named_parameters(), process_set=pair)
        reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
        step_beside_reference(model, optimizer, reference, reference_optimizer,
                              3, per_rank, me, n)
        assert_same_parameters(model, reference, 1e-10)
    finally:
        hvd.remove_process_set(pair)


def test_parameters_left_unused_on_some_members_of_a_set_do_not_stall():
    pair = hvd.add_process_set(list(range(min(2, hvd.size()))))
    try:
        if not pair.included():
            return
        model = make_model()
        optimizer = hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=0.1),
            named_parameters=model.named_parameters(), process_set=pair)
        x, y = global_batch(0, 2)
        # The set's first member skips the last layer: reduced as zeros.
        head = model[:4] if pair.rank() == 0 else model
        out = head(x)
        (out.sum() if pair.rank() == 0 else torch.nn.functional.mse_loss(out, y)).backward()
        optimizer.step()
        assert model[4].weight.grad is not None
        weights = hvd.allgather(model[4].weight.detach().reshape(1, -1), process_set=pair)
        assert torch.equal(weights, weights[0].expand_as(weights))
    finally:
        hvd.remove_process_set(pair)
