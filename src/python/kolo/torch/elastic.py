"""Horovod's elastic API (``horovod.torch.elastic``) on kolo's elastic core.

    import kolo.torch as hvd

    hvd.init()
    model = Net()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                         named_parameters=model.named_parameters())
    sampler = hvd.elastic.ElasticSampler(dataset)
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            ...
            state.commit()

    train(state)

Started by ``kolorun --elastic`` (docs/reference/kolorun.md), ``train`` runs
in rounds of kolo::elastic::Run (include/kolo/elastic.h): when a collective
fails because a worker died or froze, every survivor puts back the last
commit and joins the next round; when a worker is about to join or leave,
every rank's commit raises HostsUpdatedInterrupt and they re-join without
putting anything back. Each round's rank 0 then gives every rank its state,
the reset callbacks run and ``train`` is called again.

What differs from Horovod: the world exists only inside ``train`` (before
it, hvd.rank() and hvd.size() raise, and settings that depend on the size
belong in a reset callback or in ``train``); the core, not bcast_object,
syncs the state; ElasticSampler.record_batch records the batch of every
rank, which each rank can compute, so a commit needs no collective for it.
"""

import copy
import functools
import io
import math
import pickle
import random

import torch

from kolo import _kolo
from kolo.torch import mpi_ops
from kolo.torch import optimizer as _optimizer
from kolo.torch.mpi_ops import HorovodInternalError, HostsUpdatedInterrupt

__all__ = ["run", "State", "ObjectState", "TorchState", "ElasticSampler",
           "HorovodInternalError", "HostsUpdatedInterrupt"]


def _to_bytes(value):
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _from_bytes(data):
    return torch.load(io.BytesIO(data), weights_only=False)


class State:
    """What a training function's resets keep: every field the subclass
    tracks is saved at commit(), put back by restore() and made rank 0's by
    sync()."""

    def __init__(self):
        self._native = _kolo.ElasticState()
        self._reset_callbacks = []
        self._world_prepared = None  # the reset count it was prepared at
        self._native.on_reset(self._on_reset)

    def register_reset_callbacks(self, callbacks):
        """Functions of no argument called after every reset, once the
        state is synced, in order: rescale the learning rate here."""
        self._reset_callbacks.extend(callbacks)

    def commit(self):
        """Saves the state, then raises HostsUpdatedInterrupt on every rank
        when the job's workers are about to change. A collective: every rank
        commits at the same step."""
        self._native.commit()

    def check_host_updates(self):
        """commit() without the save."""
        self._native.check_membership()

    def save(self):
        """Saves the state in memory (no collective)."""
        self._native.save()

    def restore(self):
        """Puts back what the last save or commit saved."""
        self._native.restore()

    def sync(self):
        """Makes every rank's state rank 0's (a collective)."""
        self._native.sync()

    def _track(self, name, save, load):
        self._native.track(name, save, load)

    def _prepare_world(self):
        """Once per round, before anything Python runs in it: unnamed
        operations count from zero on every rank, each DistributedOptimizer
        gets a reducer for this world, and ElasticSamplers split what is
        left of their epoch over it."""
        if self._world_prepared == self._native.resets:
            return
        self._world_prepared = self._native.resets
        mpi_ops._forget_operations()
        _optimizer._rebuild_reducers()
        self._reset_samplers()

    def _reset_samplers(self):
        pass

    def _on_reset(self):
        self._prepare_world()
        for callback in self._reset_callbacks:
            callback()


class ObjectState(State):
    """A State of picklable attributes: ``ObjectState(epoch=0)`` gives
    ``state.epoch``, saved and synced with the rest. ``bcast_object`` and
    ``get_rank`` are Horovod's; kolo's core syncs, so they are unused."""

    def __init__(self, bcast_object=None, get_rank=None, **kwargs):
        del bcast_object, get_rank
        super().__init__()
        for name, value in kwargs.items():
            setattr(self, name, value)
            self._track(name, functools.partial(self._save_attribute, name),
                        functools.partial(self._load_attribute, name))

    def _save_attribute(self, name):
        return pickle.dumps(getattr(self, name))

    def _load_attribute(self, name, data):
        setattr(self, name, pickle.loads(data))


class TorchState(ObjectState):
    """A State of a model, an optimizer and any other attributes: modules,
    optimizers and ElasticSamplers through their state_dict, the rest
    pickled. The model's parameters keep their identity across a restore
    or a sync (load_state_dict copies into them), so a DistributedOptimizer
    built over them stays valid."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        handled = dict(model=model, optimizer=optimizer)
        handled.update({k: v for k, v in kwargs.items()
                        if isinstance(v, (torch.nn.Module, torch.optim.Optimizer,
                                          ElasticSampler))})
        plain = {k: v for k, v in kwargs.items() if k not in handled}
        super().__init__(**plain)
        self._samplers = []
        for name, value in handled.items():
            setattr(self, name, value)
            if value is None:
                continue
            if isinstance(value, ElasticSampler):
                self._samplers.append(name)
            self._track(name, functools.partial(self._save_handled, name),
                        functools.partial(self._load_handled, name))

    def _save_handled(self, name):
        return _to_bytes(getattr(self, name).state_dict())

    def _load_handled(self, name, data):
        getattr(self, name).load_state_dict(_from_bytes(data))

    def _reset_samplers(self):
        for name in self._samplers:
            getattr(self, name).reset()


def run(func):
    """Decorates ``func(state, *args, **kwargs)`` to run elastically: it is
    called again after every reset, from the last commit after a lost
    worker, and its last call's return value is returned. Outside an
    elastic job it syncs the state and calls ``func`` once."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if not _kolo.is_elastic_worker():
            # One world, already joined: its optimizers and names stand.
            state.sync()
            state._reset_samplers()
            return func(state, *args, **kwargs)
        returned = []

        def train():
            state._prepare_world()
            returned[:] = [func(state, *args, **kwargs)]

        state._native.run(train)
        return returned[0]

    return wrapper


class ElasticSampler(torch.utils.data.Sampler):
    """Horovod's ElasticSampler: each rank's share of what is left of the
    epoch, re-split over the new world after every reset.

    record_batch(i, batch_size) marks batch i of every rank processed (all
    ranks compute the same split), so a commit holds the whole job's
    progress. record_indices(indices) marks the indices given: pass every
    rank's (allgather them) to keep the ranks' records equal. As Horovod's,
    the split pads the last rank's share with the first indices so that
    every rank has the same number of batches."""

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_indices = set()
        self.num_replicas = 1
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0
        self.indices = []
        self.reset()

    def set_epoch(self, epoch):
        """Starts epoch ``epoch``: nothing of it is processed yet."""
        self.epoch = epoch
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        for rank in range(self.num_replicas):
            self.record_indices(self._rank_indices(rank)[
                batch_idx * batch_size:(batch_idx + 1) * batch_size])

    def record_indices(self, indices):
        self.processed_indices.update(int(i) for i in indices)

    def get_indices(self, batch_idx, batch_size):
        """This rank's indices of batch ``batch_idx``."""
        return self.indices[batch_idx * batch_size:(batch_idx + 1) * batch_size]

    def state_dict(self):
        return dict(epoch=self.epoch, processed_indices=set(self.processed_indices))

    def load_state_dict(self, state_dict):
        self.epoch = state_dict["epoch"]
        self.processed_indices = set(state_dict["processed_indices"])
        self.reset()

    def reset(self):
        """Splits the epoch's unprocessed indices over the current world
        (a world of one before it exists)."""
        if _kolo.is_initialized():
            self.num_replicas, self.rank = mpi_ops.size(), mpi_ops.rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = [i for i in order
                                  if i not in self.processed_indices]
        self.num_samples = math.ceil(len(self.remaining_indices) / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.indices = self._rank_indices(self.rank)

    def _rank_indices(self, rank):
        padded = copy.copy(self.remaining_indices)
        while padded and len(padded) < self.total_size:
            padded += padded[:self.total_size - len(padded)]
        return padded[rank:self.total_size:self.num_replicas]

    def __iter__(self):
        self.indices = self._rank_indices(self.rank)
        return iter(self.indices)

    def __len__(self):
        return self.num_samples
