"""kolo.torch.elastic's states and sampler outside an elastic job, on every
rank of the suite's job: what commit, restore and sync keep, and how the
sampler splits an epoch (tests/python/elastic/ runs real elastic jobs)."""

import pytest
import torch

import kolo.torch as hvd
from kolo import _kolo


def model_and_optimizer():
    torch.manual_seed(100 + hvd.rank())  # different on every rank
    model = torch.nn.Linear(3, 2).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    return model, optimizer


def take_step(model, optimizer):
    optimizer.zero_grad()
    model(torch.ones(1, 3, dtype=torch.float64)).sum().backward()
    optimizer.step()


def test_restore_puts_back_the_model_optimizer_and_attributes_of_the_commit():
    model, optimizer = model_and_optimizer()
    state = hvd.elastic.TorchState(model, optimizer, epoch=0, batch=0, seen=[])
    take_step(model, optimizer)
    state.epoch, state.batch, state.seen = 2, 5, [1, 2]
    state.commit()
    committed = [p.clone() for p in model.parameters()]
    momentum = [optimizer.state[p]["momentum_buffer"].clone()
                for p in model.parameters()]
    take_step(model, optimizer)
    state.epoch, state.batch, state.seen = 3, 0, [1, 2, 3]
    state.restore()
    assert (state.epoch, state.batch, state.seen) == (2, 5, [1, 2])
    for p, q in zip(model.parameters(), committed):
        assert torch.equal(p, q)
    for p, m in zip(model.parameters(), momentum):
        assert torch.equal(optimizer.state[p]["momentum_buffer"], m)


def test_run_syncs_every_rank_to_rank_0_and_returns_what_train_returns():
    model, optimizer = model_and_optimizer()
    state = hvd.elastic.TorchState(model, optimizer, epoch=hvd.rank())

    @hvd.elastic.run
    def train(state, scale):
        return [p.detach() * scale for p in state.model.parameters()]

    scaled = train(state, 2.0)
    assert state.epoch == 0
    for p, s in zip(model.parameters(), scaled):
        everyone = hvd.allgather(p.detach().unsqueeze(0))
        assert all(torch.equal(everyone[0], e) for e in everyone)
        assert torch.equal(s, p.detach() * 2)


def test_a_python_error_in_a_field_leaves_as_itself():
    state = hvd.elastic.ObjectState(epoch=0)
    state._track("broken", lambda: 1 // 0, lambda data: None)
    with pytest.raises(ZeroDivisionError):
        state.save()


def test_a_failed_collective_raises_horovod_internal_error_with_its_code():
    # A mismatched collective fails on every rank without breaking the job.
    if hvd.size() == 1:
        return  # one rank cannot mismatch; the np 2 and 3 runs check it
    with pytest.raises(hvd.HorovodInternalError) as raised:
        hvd.allreduce(torch.zeros(hvd.rank() + 1), name="elastic.mismatch")
    assert isinstance(raised.value.code, int) and raised.value.code > 0


def test_hosts_updated_interrupt_is_membership_changed():
    assert hvd.HostsUpdatedInterrupt is _kolo.MembershipChanged
    assert hvd.elastic.HostsUpdatedInterrupt is hvd.HostsUpdatedInterrupt
    assert hvd.elastic.HorovodInternalError is hvd.HorovodInternalError


@pytest.mark.parametrize("shuffle", [False, True])
def test_the_sampler_splits_what_is_left_of_the_epoch_over_the_ranks(shuffle):
    sampler = hvd.elastic.ElasticSampler(list(range(23)), shuffle=shuffle)
    sampler.set_epoch(1)
    shares = [sampler._rank_indices(r) for r in range(hvd.size())]
    assert list(sampler) == shares[hvd.rank()]
    assert len(sampler) == len(shares[0]) == -(-23 // hvd.size())
    assert sorted(set(i for s in shares for i in s)) == list(range(23))
    sampler.record_batch(0, 2)
    done = {i for s in shares for i in s[:2]}
    assert sampler.processed_indices == done
    assert sampler.state_dict() == dict(epoch=1, processed_indices=done)
    sampler.load_state_dict(sampler.state_dict())
    left = [i for s in (sampler._rank_indices(r) for r in range(hvd.size()))
            for i in s]
    assert set(left) == set(range(23)) - done
    sampler.set_epoch(2)
    assert sampler.processed_indices == set() and len(sampler.remaining_indices) == 23
