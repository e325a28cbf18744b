"""Process sets, and the errors a script meets: a mismatch across ranks
names the ranks and the tensor; a bad call is a ValueError."""

import pytest
import torch

import kolo.torch as hvd


def test_a_process_set_has_collectives_of_its_own():
    evens = hvd.add_process_set(list(range(0, hvd.size(), 2)))
    try:
        assert evens.process_set_id is not None
        assert evens.included() == (hvd.rank() % 2 == 0)
        if evens.included():
            me = evens.rank()
            assert evens.ranks[me] == hvd.rank()
            members = evens.ranks
            t = torch.full((3,), float(hvd.rank()))
            total = hvd.allreduce(t, op=hvd.Sum, process_set=evens)
            assert torch.equal(total, torch.full((3,), float(sum(members))))
            gathered = hvd.allgather(torch.full((hvd.rank() + 1,), hvd.rank()),
                                     process_set=evens)
            assert gathered.tolist() == [r for r in members for _ in range(r + 1)]
            b = hvd.broadcast(t, members[-1], process_set=evens)
            assert torch.equal(b, torch.full((3,), float(members[-1])))
            hvd.barrier(process_set=evens)
        else:
            with pytest.raises(ValueError, match="not in process set"):
                hvd.allreduce(torch.ones(1), process_set=evens)
        # The world carries on beside the set.
        assert hvd.allreduce(torch.ones(1), op=hvd.Sum).item() == hvd.size()
    finally:
        assert hvd.remove_process_set(evens)
    assert not hvd.remove_process_set(evens)


def test_grouped_alltoall_and_reducescatter_on_a_process_set():
    # The first two ranks (the whole world at np 1 and 2, a part at np 3).
    pair = hvd.add_process_set(list(range(min(2, hvd.size()))))
    try:
        if not pair.included():
            return
        n, me = pair.size(), pair.rank()
        a = torch.full((2,), float(hvd.rank() + 1))
        b = torch.arange(3, dtype=torch.float64) * (hvd.rank() + 1)
        sums = hvd.grouped_allreduce([a, b], op=hvd.Sum, process_set=pair)
        total = sum(r + 1 for r in pair.ranks)
        assert torch.equal(sums[0], torch.full((2,), float(total)))
        assert torch.equal(sums[1], torch.arange(3, dtype=torch.float64) * total)
        hvd.grouped_allreduce_([a], op=hvd.Average, process_set=pair)
        assert torch.equal(a, torch.full((2,), total / n))

        # Member j sends j + 1 rows of value 10 * me + j to each member j.
        splits = torch.tensor([j + 1 for j in range(n)], dtype=torch.int32)
        rows = torch.cat([torch.full((j + 1, 2), 10.0 * me + j) for j in range(n)])
        received, received_splits = hvd.alltoall(rows, splits, process_set=pair)
        assert received_splits.tolist() == [me + 1] * n
        expected = torch.cat([torch.full((me + 1, 2), 10.0 * j + me) for j in range(n)])
        assert torch.equal(received, expected)
        # Without splits: equal parts, and only the rows come back.
        even = torch.arange(2 * n, dtype=torch.float32) + 100 * me
        got = hvd.alltoall(even, process_set=pair)
        assert got.tolist() == [100.0 * j + 2 * me + k for j in range(n) for k in range(2)]

        block = torch.arange(2 * n, dtype=torch.float32).reshape(n, 2) * (hvd.rank() + 1)
        mine = hvd.reducescatter(block, op=hvd.Sum, process_set=pair)
        assert torch.equal(mine, torch.arange(2 * n, dtype=torch.float32).reshape(n, 2)[me:me + 1] * total)
        if n > 1:
            with pytest.raises(ValueError, match="does not divide"):
                hvd.reducescatter(torch.ones(2 * n + 1), process_set=pair)
        with pytest.raises(ValueError, match="splits"):
            hvd.alltoall(torch.ones(3), [5] * n, process_set=pair)
    finally:
        hvd.remove_process_set(pair)


def test_process_set_arguments_are_checked():
    with pytest.raises(ValueError, match="repeat"):
        hvd.ProcessSet([0, 0])
    with pytest.raises(ValueError, match="not in a world"):
        hvd.add_process_set([hvd.size()])
    with pytest.raises(ValueError, match="cannot be removed"):
        hvd.remove_process_set(hvd.global_process_set)
    assert hvd.global_process_set.size() == hvd.size()


def test_a_mismatch_across_ranks_names_ranks_and_tensor():
    t = torch.ones(hvd.rank() + 1)
    if hvd.size() == 1:
        # Alone, nothing can differ: the call succeeds.
        assert hvd.allreduce(t, name="shapes.differ").tolist() == [1.0]
        return
    with pytest.raises(hvd.HorovodInternalError) as raised:
        hvd.allreduce(t, name="shapes.differ")
    message = str(raised.value)
    assert "shapes.differ" in message
    assert "rank 0" in message and "rank 1" in message
    # The job goes on after a mismatch.
    assert hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [hvd.size()] * 2


def test_bad_calls_raise_value_errors_naming_the_cause():
    if hvd.size() > 1:
        with pytest.raises(ValueError, match="rows do not split evenly"):
            hvd.reducescatter(torch.ones(hvd.size() * 2 + 1))
    with pytest.raises(ValueError, match="cannot move tensors of type Bool"):
        hvd.allreduce(torch.ones(2, dtype=torch.bool))
    with pytest.raises(TypeError, match="torch.Tensor"):
        hvd.allreduce([1.0, 2.0])
    with pytest.raises(ValueError, match="splits add up to"):
        hvd.alltoall(torch.ones(4, 1), splits=[5] + [0] * (hvd.size() - 1))
