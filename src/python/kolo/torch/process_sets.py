"""Horovod's process sets on kolo's process groups (kolo::NewGroup).

A process set is a sorted list of global ranks with collectives of its own.
Adding one is a collective of the whole world (every rank calls
add_process_set with the same ranks, in the same order). Its collectives
run on the calling thread, so their handles are complete when returned.
Roots (broadcast's root_rank) are global ranks, which must be members.
"""

import torch

from kolo import _kolo


class ProcessSet:
    """A set of ranks: ``ProcessSet([0, 2])``. ``process_set_id`` is set once
    it is registered (init(process_sets=...) or add_process_set)."""

    def __init__(self, ranks):
        ranks = sorted(int(r) for r in ranks)
        if len(set(ranks)) != len(ranks):
            raise ValueError(f"process set ranks {ranks} repeat a rank")
        self.ranks = ranks
        self.process_set_id = None
        self._group = None

    def _member_group(self):
        if self._group is None:
            raise ValueError(f"process set {self.ranks} is not registered; "
                             "use hvd.add_process_set")
        return self._group

    def included(self):
        return self._member_group().member

    def size(self):
        return len(self.ranks)

    def rank(self):
        return self._member_group().rank

    def __repr__(self):
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks})"


class _GlobalProcessSet(ProcessSet):
    """Every rank: operations on it are the runtime's own."""

    def __init__(self):
        self.ranks = None
        self.process_set_id = 0
        self._group = None

    def included(self):
        return True

    def size(self):
        return _kolo.size()

    def rank(self):
        return _kolo.rank()

    def __repr__(self):
        return "ProcessSet(process_set_id=0, ranks=all)"


global_process_set = _GlobalProcessSet()
_registered = {}
_next_id = [1]


class _Done:
    """The handle of an operation already complete."""

    def __init__(self, output):
        self.output = output

    def poll(self):
        return True

    def wait(self):
        return self.output


class _GroupOps:
    """A registered set's collectives, as mpi_ops calls them."""

    def __init__(self, process_set):
        self.set = process_set
        self.group = process_set._member_group()

    def rank(self):
        return self.group.rank

    def _register(self, output, finish=lambda o: o):
        from kolo.torch import mpi_ops
        return mpi_ops._register(_Done(output), finish)

    def allreduce_async(self, tensor, output, op, postscale_factor):
        from kolo.torch import mpi_ops
        buffer = tensor.detach().contiguous().clone()
        self.group.allreduce(buffer, op)
        with torch.no_grad():
            output.copy_(buffer)
        return self._register(output, mpi_ops._postscale(postscale_factor))

    def broadcast_async(self, tensor, root_rank, in_place):
        if root_rank not in self.set.ranks:
            raise ValueError(f"broadcast root {root_rank} is not in process "
                             f"set {self.set.ranks}")
        buffer = tensor.detach().contiguous().clone()
        self.group.broadcast(buffer, self.set.ranks.index(root_rank))
        if in_place:
            with torch.no_grad():
                tensor.copy_(buffer)
            return self._register(tensor)
        return self._register(buffer.view_as(tensor))

    def allgather_async(self, tensor):
        # Rows may differ between members: gather the counts, then rows
        # padded to the longest, then keep each member's own.
        source = tensor.detach().contiguous()
        if source.dim() == 0:
            source = source.reshape(1)
        rows = torch.tensor([source.shape[0]], dtype=torch.int64)
        counts = torch.empty(self.group.size, dtype=torch.int64)
        self.group.allgather(rows, counts)
        longest = int(counts.max())
        padded = source.new_zeros((longest,) + tuple(source.shape[1:]))
        padded[:source.shape[0]] = source
        gathered = source.new_empty((self.group.size * longest,) +
                                    tuple(source.shape[1:]))
        self.group.allgather(padded, gathered)
        parts = [gathered[i * longest:i * longest + int(c)]
                 for i, c in enumerate(counts)]
        return self._register(torch.cat(parts))

    def grouped_allreduce_async(self, tensors, outputs, op, postscale_factor):
        return [self.allreduce_async(t, o, op, postscale_factor)
                for t, o in zip(tensors, outputs)]

    def alltoall(self, tensor, splits):
        """Composed of two allgathers (every member's splits, then its rows
        padded to the longest): members receive all rows and keep theirs,
        n times the traffic of a direct exchange."""
        n, me = self.group.size, self.group.rank
        source = tensor.detach().contiguous()
        if splits is None:
            if source.shape[0] % n:
                raise ValueError(f"alltoall: {source.shape[0]} rows do not "
                                 f"split evenly over process set {self.set.ranks}")
            splits = [source.shape[0] // n] * n
        splits = [int(s) for s in splits]
        if len(splits) != n or any(s < 0 for s in splits) or sum(splits) != source.shape[0]:
            raise ValueError(f"alltoall: splits {splits} are not {n} counts "
                             f"that add up to {source.shape[0]} rows")
        counts = torch.empty(n * n, dtype=torch.int64)
        self.group.allgather(torch.tensor(splits, dtype=torch.int64), counts)
        counts = counts.view(n, n)
        longest = int(counts.sum(1).max())
        padded = source.new_zeros((longest,) + tuple(source.shape[1:]))
        padded[:source.shape[0]] = source
        gathered = source.new_empty((n * longest,) + tuple(source.shape[1:]))
        self.group.allgather(padded, gathered)
        parts = []
        for j in range(n):
            start = j * longest + int(counts[j, :me].sum())
            parts.append(gathered[start:start + int(counts[j, me])])
        return torch.cat(parts), counts[:, me].to(torch.int32)

    def reducescatter_async(self, tensor, op, postscale_factor):
        """An allreduce over the set of which this member keeps its block."""
        from kolo.torch import mpi_ops
        n, me = self.group.size, self.group.rank
        if tensor.dim() == 0 or tensor.shape[0] % n:
            raise ValueError(f"reducescatter: dimension 0 of a tensor of shape "
                             f"{tuple(tensor.shape)} does not divide over "
                             f"process set {self.set.ranks}")
        buffer = tensor.detach().contiguous().clone()
        self.group.allreduce(buffer, op)
        block = tensor.shape[0] // n
        return self._register(buffer[me * block:(me + 1) * block].clone(),
                              mpi_ops._postscale(postscale_factor))

    def barrier(self):
        self.group.barrier()


def _resolve(process_set):
    """None for the whole world; else the set's operations."""
    if process_set is None or process_set is global_process_set:
        return None
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"process_set must be a ProcessSet, not "
                        f"{type(process_set).__name__}")
    if process_set.ranks is None:
        return None
    group = process_set._member_group()
    if not group.member:
        raise ValueError(f"rank {_kolo.rank()} is not in process set "
                         f"{process_set.ranks}")
    return _GroupOps(process_set)


def add_process_set(process_set):
    """Registers a set (a ProcessSet or a list of ranks) on every rank; a
    collective of the whole world. Returns the ProcessSet."""
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.process_set_id is not None:
        raise ValueError(f"{process_set} is registered already")
    for r in process_set.ranks:
        if not 0 <= r < _kolo.size():
            raise ValueError(f"process set {process_set.ranks}: rank {r} is "
                             f"not in a world of {_kolo.size()}")
    process_set._group = _kolo.new_group(process_set.ranks)
    process_set.process_set_id = _next_id[0]
    _next_id[0] += 1
    _registered[process_set.process_set_id] = process_set
    return process_set


def remove_process_set(process_set):
    """Forgets a registered set; True when it was registered."""
    if process_set is global_process_set:
        raise ValueError("the global process set cannot be removed")
    removed = _registered.pop(process_set.process_set_id, None)
    if removed is None:
        return False
    removed._group = None
    removed.process_set_id = None
    return True


def _setup(process_sets):
    if process_sets is None or process_sets == "dynamic":
        return
    for process_set in process_sets:
        add_process_set(process_set)


def _teardown():
    for process_set in list(_registered.values()):
        remove_process_set(process_set)
