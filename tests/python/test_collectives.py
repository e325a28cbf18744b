"""kolo.torch's collectives against closed forms, on every dtype kolo moves,
in place and out of place, synchronous and through handles."""

import pytest
import torch

import kolo.torch as hvd
from dtypes import DTYPES


def ramp(dtype, shape=(3, 5), rank=None):
    """A tensor whose values are small integers depending on the rank, exact
    in every dtype (int8 and uint8 included, up to 3 ranks)."""
    rank = hvd.rank() if rank is None else rank
    base = torch.arange(int(torch.tensor(shape).prod())).reshape(shape) % 7
    return (base + rank).to(dtype)


def expected_sum(dtype, shape=(3, 5)):
    return sum(ramp(torch.float64, shape, r) for r in range(hvd.size()))


def close(actual, expected, dtype):
    tolerance = {torch.float16: 1e-2, torch.bfloat16: 5e-2}.get(dtype, 1e-6)
    torch.testing.assert_close(actual.double(), expected.double(),
                               rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allreduce_sum_average_min_max(dtype):
    t = ramp(dtype)
    close(hvd.allreduce(t, op=hvd.Sum, name="sum"), expected_sum(dtype), dtype)
    ranks = [ramp(torch.float64, rank=r) for r in range(hvd.size())]
    close(hvd.allreduce(t, op=hvd.Min), torch.stack(ranks).min(0).values, dtype)
    close(hvd.allreduce(t, op=hvd.Max), torch.stack(ranks).max(0).values, dtype)
    if dtype.is_floating_point:
        close(hvd.allreduce(t), expected_sum(dtype) / hvd.size(), dtype)
    assert torch.equal(t, ramp(dtype)), "the input must not change"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64],
                         ids=str)
def test_allreduce_product(dtype):
    t = torch.full((4,), hvd.rank() + 2).to(dtype)
    expected = 1
    for r in range(hvd.size()):
        expected *= r + 2
    close(hvd.allreduce(t, op=hvd.Product), torch.full((4,), expected), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allreduce_in_place_and_async(dtype):
    t = ramp(dtype)
    result = hvd.allreduce_(t, op=hvd.Sum)
    assert result is t
    close(t, expected_sum(dtype), dtype)
    u = ramp(dtype)
    handle = hvd.allreduce_async_(u, op=hvd.Sum, name="async.inplace")
    assert hvd.synchronize(handle) is u
    close(u, expected_sum(dtype), dtype)
    v = ramp(dtype)
    handle = hvd.allreduce_async(v, op=hvd.Sum, name="async.copy")
    output = hvd.synchronize(handle)
    close(output, expected_sum(dtype), dtype)
    assert torch.equal(v, ramp(dtype))


def test_allreduce_of_a_non_contiguous_tensor_in_place():
    t = ramp(torch.float32, (5, 3)).t()
    assert not t.is_contiguous()
    hvd.allreduce_(t, op=hvd.Sum)
    close(t, expected_sum(torch.float32, (5, 3)).t(), torch.float32)


def test_prescale_and_postscale():
    t = ramp(torch.float64)
    out = hvd.allreduce(t, op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.25)
    close(out, expected_sum(torch.float64) * 0.5, torch.float64)
    assert torch.equal(t, ramp(torch.float64))


def test_average_flag_is_horovods_old_spelling():
    t = ramp(torch.float64)
    close(hvd.allreduce(t, average=False), expected_sum(torch.float64),
          torch.float64)
    with pytest.raises(ValueError, match="supersedes"):
        hvd.allreduce(t, average=True, op=hvd.Sum)


def test_adasum_is_refused_by_name():
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.allreduce(torch.ones(2), op=hvd.Adasum)


def test_poll_becomes_true_and_synchronize_returns_the_result():
    handle = hvd.allreduce_async(torch.ones(1000), op=hvd.Sum, name="polled")
    while not hvd.poll(handle):
        pass
    assert torch.equal(hvd.synchronize(handle), torch.full((1000,), float(hvd.size())))
    with pytest.raises(ValueError, match="unknown or already synchronized"):
        hvd.synchronize(handle)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.float16],
                         ids=str)
def test_grouped_allreduce_forms(dtype):
    tensors = [ramp(dtype, (2, 3)), ramp(dtype, (7,))]
    expected = [expected_sum(dtype, (2, 3)), expected_sum(dtype, (7,))]
    for out, want in zip(hvd.grouped_allreduce(tensors, op=hvd.Sum), expected):
        close(out, want, dtype)
    handle = hvd.grouped_allreduce_async_(tensors, op=hvd.Sum, name="g")
    results = hvd.synchronize(handle)
    assert results[0] is tensors[0] and results[1] is tensors[1]
    for out, want in zip(tensors, expected):
        close(out, want, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allgather_with_rows_that_differ_between_ranks(dtype):
    mine = torch.full((hvd.rank() + 1, 2), hvd.rank()).to(dtype)
    gathered = hvd.allgather(mine)
    expected = torch.cat([torch.full((r + 1, 2), r) for r in range(hvd.size())])
    close(gathered, expected, dtype)
    handle = hvd.allgather_async(mine, name="gathered")
    close(hvd.synchronize(handle), expected, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_broadcast_forms(dtype):
    root = hvd.size() - 1
    t = ramp(dtype)
    out = hvd.broadcast(t, root)
    close(out, ramp(dtype, rank=root), dtype)
    assert torch.equal(t, ramp(dtype)), "broadcast must not change its input"
    hvd.broadcast_(t, root, name="in.place")
    close(t, ramp(dtype, rank=root), dtype)
    u = ramp(dtype)
    assert hvd.synchronize(hvd.broadcast_async_(u, 0)) is u
    close(u, ramp(dtype, rank=0), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bfloat16],
                         ids=str)
def test_alltoall_with_and_without_splits(dtype):
    n, me = hvd.size(), hvd.rank()
    # Rank r sends j+1 rows to rank j, each row holding 10*r + j.
    rows = torch.cat([torch.full((j + 1, 2), 10 * me + j) for j in range(n)])
    out, received = hvd.alltoall(rows.to(dtype), splits=[j + 1 for j in range(n)])
    expected = torch.cat([torch.full((me + 1, 2), 10 * r + me) for r in range(n)])
    close(out, expected, dtype)
    assert received.tolist() == [me + 1] * n
    equal = torch.arange(2 * n).reshape(2 * n, 1).to(dtype) + me
    out = hvd.alltoall(equal)
    expected = torch.cat([torch.arange(2 * me, 2 * me + 2).reshape(2, 1) + r
                          for r in range(n)])
    close(out, expected, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32],
                         ids=str)
def test_reducescatter_keeps_this_ranks_block(dtype):
    n, me = hvd.size(), hvd.rank()
    t = (torch.arange(2 * n * 3).reshape(2 * n, 3) + me).to(dtype)
    out = hvd.reducescatter(t, op=hvd.Sum)
    full = sum(torch.arange(2 * n * 3).reshape(2 * n, 3) + r for r in range(n))
    close(out, full[2 * me:2 * me + 2], dtype)
    scaled = hvd.reducescatter(t, op=hvd.Sum, prescale_factor=2.0,
                               postscale_factor=0.5)
    close(scaled, full[2 * me:2 * me + 2], dtype)


def test_autograd_through_allreduce_allgather_broadcast():
    n, me = hvd.size(), hvd.rank()
    x = torch.full((3,), float(me + 1), dtype=torch.float64, requires_grad=True)
    (hvd.allreduce(x, op=hvd.Sum) * (me + 1)).sum().backward()
    # d/dx of sum_r (r+1) * sum(allreduce(x)): the gradient (me+1) summed.
    assert torch.allclose(x.grad, torch.full((3,), float(sum(range(1, n + 1))),
                                             dtype=torch.float64))
    y = torch.full((me + 1, 2), 1.0, dtype=torch.float64, requires_grad=True)
    (hvd.allgather(y) * 2).sum().backward()
    # Horovod's rule: the averaged gradient's rows of this rank.
    assert torch.allclose(y.grad, torch.full((me + 1, 2), 2.0, dtype=torch.float64))
    z = torch.ones(4, dtype=torch.float64, requires_grad=True)
    (hvd.broadcast(z, 0) * 3).sum().backward()
    assert torch.allclose(z.grad, torch.full((4,), 3.0 if me == 0 else 0.0,
                                             dtype=torch.float64))


def test_objects_travel_pickled():
    root = hvd.size() - 1
    assert hvd.broadcast_object({"rank": hvd.rank()}, root_rank=root) == {"rank": root}
    assert hvd.allgather_object(("r", hvd.rank())) == [("r", r) for r in range(hvd.size())]


def test_barrier_and_world_queries():
    hvd.barrier()
    assert 0 <= hvd.rank() < hvd.size()
    assert 0 <= hvd.local_rank() < hvd.local_size()
    assert hvd.cross_size() == 1 and hvd.cross_rank() == 0
    assert hvd.is_initialized() and hvd.is_homogeneous()
    assert hvd.mpi_built() and hvd.gloo_built()
    assert not hvd.rocm_built() and not hvd.ccl_built() and not hvd.ddl_built()


def test_a_handle_keeps_its_tensors_alive():
    import gc
    handles = [hvd.allreduce_async(torch.full((4096,), float(hvd.rank() + i)),
                                   op=hvd.Sum, name=f"alive.{i}")
               for i in range(4)]
    gc.collect()  # the inputs have no other reference
    n = hvd.size()
    for i, handle in enumerate(handles):
        expected = float(sum(r + i for r in range(n)))
        assert torch.equal(hvd.synchronize(handle), torch.full((4096,), expected))


def test_join_lets_ranks_with_more_data_carry_on():
    # Rank r has r + 1 batches; a joined rank contributes zeros, and an
    # average divides by the ranks that contributed.
    for step in range(hvd.rank() + 1):
        reduced = hvd.allreduce(torch.ones(3), name=f"uneven.{step}")
        assert torch.equal(reduced, torch.ones(3))
    assert hvd.join() == hvd.size() - 1


def test_a_timeline_started_and_stopped_at_run_time(tmp_path):
    import json
    path = hvd.broadcast_object(str(tmp_path / "timeline.json"), root_rank=0)
    hvd.start_timeline(path)
    for step in range(3):
        hvd.allreduce(torch.ones(8), name="traced")
    hvd.stop_timeline()
    hvd.allreduce(torch.ones(8), name="after.the.timeline")
    if hvd.rank() == 0:
        with open(path) as f:
            events = json.load(f)
        names = json.dumps(events)
        assert "allreduce.traced" in names
        assert "after.the.timeline" not in names
    with pytest.raises(ValueError, match="path is empty"):
        hvd.start_timeline("")
