"""Horovod's DistributedOptimizer on kolo's GradientReducer.

The reducer (include/kolo/torch.h) hooks every parameter from C++: each
gradient is copied into its bucket the moment autograd produces it and a
full bucket is allreduced at once, overlapping the rest of the backward
pass, with no Python on the way. step() waits for the buckets, writes the
reduced gradients into .grad and steps the wrapped optimizer's class.
"""

import contextlib
import math
import warnings
import weakref

import torch

from kolo import _kolo
from kolo.torch import mpi_ops
from kolo.torch.compression import Compression
from kolo.torch import process_sets

# Gradients travel in buckets of about this many bytes unless num_groups
# asks for a number of them.
_BUCKET_BYTES = 1 << 20

# Every DistributedOptimizer alive: an elastic reset gives each a reducer
# for the new world (kolo.torch.elastic).
_live = weakref.WeakSet()


def _rebuild_reducers():
    for optimizer in list(_live):
        optimizer._build_reducer()


class _DistributedOptimizer(torch.optim.Optimizer):
    def __init__(self, params, named_parameters, compression,
                 backward_passes_per_step, op, gradient_predivide_factor,
                 num_groups, groups, bucket_bytes, process_set):
        super(self.__class__, self).__init__(params)
        named = self._named(named_parameters)
        wire = getattr(compression, "wire", None)
        if wire is None:
            raise ValueError(f"DistributedOptimizer: compression {compression!r} "
                             "is not one of Compression.none, fp16 or bf16")
        if num_groups > 0:
            total = sum(p.numel() for _, p in named if p.requires_grad) * 4
            bucket_bytes = max(1, math.ceil(total / num_groups))
        self.backward_passes_per_step = backward_passes_per_step
        self._set = process_sets._resolve(process_set)
        if self._set is not None:
            self._set_args = (named, op, compression, gradient_predivide_factor)
        # Horovod sums the passes' gradients (its scripts scale the loss).
        self._reducer_args = (named, op, wire, backward_passes_per_step,
                              False, gradient_predivide_factor, bucket_bytes,
                              self._group_names(named, groups))
        self._reducer = None
        # An elastic job's world comes later, with its first round.
        if _kolo.is_initialized() and self._set is None:
            self._build_reducer()
        _live.add(self)
        self._synchronized = False
        self._should_synchronize = True

    def _build_reducer(self):
        """A reducer for the current world; the old one's hooks go first."""
        if self._set is not None:
            return
        self._reducer = None
        self._reducer = _kolo.GradientReducer(*self._reducer_args)
        self._synchronized = False

    @staticmethod
    def _group_names(named, groups):
        """Horovod's groups= (lists of parameters) as lists of names."""
        if groups is None:
            return []
        name_of = {id(p): n for n, p in named}
        names = []
        for group in groups:
            if isinstance(group, torch.Tensor):
                raise ValueError("DistributedOptimizer groups: a list of lists "
                                 "of parameters, not a list of parameters")
            missing = [i for i, p in enumerate(group) if id(p) not in name_of]
            if missing:
                raise ValueError(f"DistributedOptimizer groups: parameter "
                                 f"{missing[0]} of group {len(names)} is not "
                                 "one of the optimizer's")
            names.append([name_of[id(p)] for p in group])
        return names

    def _reduce_on_set(self):
        """The set's allreduce of every .grad, one flat buffer per type, on
        this thread: kolo's runtime reduces over the whole world only, so a
        process set's gradients do not overlap the backward pass."""
        named, op, compression, predivide = self._set_args
        grads = []
        for _, p in named:
            if not p.requires_grad:
                continue
            # As the world's reducer does: a parameter left unused on this
            # rank is reduced as zeros, so every member sends the same
            # buffers; sparse gradients travel, and stay, dense.
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            elif p.grad.is_sparse:
                p.grad = p.grad.to_dense()
            grads.append(p.grad)
        by_type = {}
        for g in grads:
            by_type.setdefault(g.dtype, []).append(g)
        size = self._set.set.size()
        for same in by_type.values():
            flat = torch.cat([g.detach().reshape(-1) for g in same])
            if op == mpi_ops.Average:
                flat.div_(predivide)
            wire, context = compression.compress(flat)
            wire = wire.contiguous()
            self._set.group.allreduce(wire, mpi_ops.Sum)
            flat = compression.decompress(wire, context)
            if op == mpi_ops.Average:
                flat.mul_(predivide / size)
            offset = 0
            with torch.no_grad():
                for g in same:
                    g.copy_(flat[offset:offset + g.numel()].view_as(g))
                    offset += g.numel()

    def _named(self, named_parameters):
        mine = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is None:
            return [(f"allreduce.noname.{i}", p) for i, p in enumerate(mine)]
        named = list(named_parameters)
        if any(not isinstance(n, tuple) or len(n) != 2 for n in named):
            raise ValueError("named_parameters should be a sequence of tuples "
                             "(name, parameter), usually model.named_parameters()")
        names = [n for n, _ in named]
        if len(set(names)) != len(names):
            repeated = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"parameter names in named_parameters must be "
                             f"unique; repeated: {', '.join(repeated)}")
        given = {id(p) for _, p in named}
        missing = [i for i, p in enumerate(mine) if id(p) not in given]
        if missing:
            raise ValueError(f"named_parameters was specified, but {len(missing)} "
                             "of the optimizer's parameters are not in it")
        ours = {id(p) for p in mine}
        return [(n, p) for n, p in named if id(p) in ours]

    def synchronize(self):
        """Waits for every gradient's reduction and writes them into .grad."""
        if self._set is not None:
            self._reduce_on_set()
        elif self._reducer is None:
            raise ValueError("DistributedOptimizer: kolo has no world yet; in an "
                             "elastic job step inside @hvd.elastic.run")
        else:
            self._reducer.synchronize()
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Inside it, step() does not synchronize (call synchronize() first,
        e.g. to clip the reduced gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without "
                              "optimizer.skip_synchronize() after "
                              "optimizer.synchronize(); this synchronizes "
                              "again")
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)


def DistributedOptimizer(optimizer, named_parameters=None,
                         compression=Compression.none,
                         backward_passes_per_step=1, op=mpi_ops.Average,
                         gradient_predivide_factor=1.0, num_groups=0,
                         groups=None, sparse_as_dense=False,
                         process_set=process_sets.global_process_set):
    """Wraps ``optimizer`` (an instance) so that step() applies the gradients
    reduced over every rank. Returns an object of a subclass of the
    optimizer's class, as Horovod does."""
    if op not in (mpi_ops.Average, mpi_ops.Sum):
        if op == mpi_ops.Adasum:
            raise NotImplementedError("kolo does not implement Adasum")
        raise ValueError("DistributedOptimizer's op is Average or Sum")
    if gradient_predivide_factor != 1.0 and op != mpi_ops.Average:
        raise ValueError("gradient_predivide_factor needs op=Average")
    if isinstance(groups, int):
        num_groups, groups = groups, None
    # Sparse gradients are reduced as dense ones whatever sparse_as_dense
    # says: kolo has no sparse allreduce.
    del sparse_as_dense
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression,
               backward_passes_per_step, op, gradient_predivide_factor,
               num_groups, groups, _BUCKET_BYTES, process_set)
