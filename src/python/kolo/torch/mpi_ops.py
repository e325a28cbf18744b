"""Horovod's PyTorch operations on kolo's runtime.

Every collective is a named operation of kolo's asynchronous runtime
(include/kolo/runtime.h): the ranks agree on what is ready, fuse small
tensors and run them in one order. Names follow Horovod: the name given, or
"<op>.noname.<n>" with a per-process counter, so ranks that call in the
same order meet. Handles are integers, as Horovod's are; ``synchronize``
waits (without the GIL) and returns the result.
"""

import itertools
import os
import secrets
import socket
import threading

import torch

from kolo import _kolo
from kolo.torch import process_sets as _sets
from kolo.torch.compression import Compression

InternalError = _kolo.InternalError
# Horovod's names for what a failed collective raises, and for what an
# elastic job's commit raises when its workers are about to change.
HorovodInternalError = InternalError
HostsUpdatedInterrupt = _kolo.MembershipChanged

# Reduction ops, with Horovod's names and values kolo's ReduceOp takes.
Sum = 0
Average = 1
Min = 2
Max = 3
Product = 4
Adasum = -1  # not built: operations refuse it, naming it


# ----------------------------------------------------------------- the world

_lock = threading.Lock()


def _torchrun_rendezvous():
    """Under torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and no
    launcher kolo knows), sets KOLO_* so that rank 0 serves kolo's store on a
    free port of MASTER_ADDR: the address and a fresh job secret travel
    through torchrun's own store."""
    env = os.environ
    if "KOLO_RANK" in env or "OMPI_COMM_WORLD_RANK" in env or "SLURM_PROCID" in env:
        return
    needed = ["RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"]
    if not all(k in env for k in needed):
        return
    rank, size = int(env["RANK"]), int(env["WORLD_SIZE"])
    store = torch.distributed.TCPStore(
        env["MASTER_ADDR"], int(env["MASTER_PORT"]), size, is_master=False,
        timeout=torch.distributed.constants.default_pg_timeout)
    key = "kolo/store/" + env.get("TORCHELASTIC_RUN_ID", "none") + "/" + env.get(
        "TORCHELASTIC_RESTART_COUNT", "0")
    if rank == 0:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((env["MASTER_ADDR"], 0))
            port = s.getsockname()[1]
        store.set(key, f"{env['MASTER_ADDR']}:{port} {secrets.token_hex(16)}")
    address, secret = store.get(key).decode().split(" ")
    local_size = int(env.get("LOCAL_WORLD_SIZE", size))
    env.update({
        "KOLO_RANK": str(rank), "KOLO_SIZE": str(size),
        "KOLO_STORE_ADDR": address, "KOLO_STORE_SECRET": secret,
    })
    env.setdefault("KOLO_BACKEND", "shm" if local_size == size else "tcp")


def init(comm=None, process_sets=None):
    """Joins the job its launcher describes (kolorun, torchrun, mpirun,
    srun). ``comm`` (an MPI communicator or a list of ranks) is not
    supported: start the ranks you want instead. ``process_sets``: the
    ProcessSet objects to register, or "dynamic" (any set may be added
    later, as kolo always allows)."""
    if comm is not None:
        raise ValueError("kolo.torch.init: comm is not supported; launch the "
                         "ranks that should train together")
    with _lock:
        # In an elastic job each round's world is joined by
        # kolo.torch.elastic.run, which knows the round.
        if _kolo.is_initialized() or _kolo.is_elastic_worker():
            return
        _torchrun_rendezvous()
        _kolo.init()
    _sets._setup(process_sets)


def shutdown():
    _sets._teardown()
    _forget_operations()
    _kolo.shutdown()


def _forget_operations():
    """Drops the handles and unnamed-operation counters of a world that
    ended: in the next one (an elastic reset) every rank counts from zero,
    newcomers too, so their names meet."""
    _handles.clear()
    _noname_counters.clear()


is_initialized = _kolo.is_initialized


def _initialized_world(value):
    def query():
        if not _kolo.is_initialized():
            if _kolo.is_elastic_worker():
                raise ValueError(
                    f"{value.__name__}(): in an elastic job (kolorun --elastic) "
                    "the world exists only inside the function decorated "
                    "with @hvd.elastic.run")
            raise ValueError("kolo has not been initialized; use hvd.init().")
        return value()
    query.__name__ = value.__name__
    return query


size = _initialized_world(_kolo.size)
rank = _initialized_world(_kolo.rank)
local_size = _initialized_world(_kolo.local_size)
local_rank = _initialized_world(_kolo.local_rank)
cross_size = _initialized_world(_kolo.cross_size)
cross_rank = _initialized_world(_kolo.cross_rank)


def is_homogeneous():
    """Whether every host runs the same number of ranks."""
    return size() == local_size() * cross_size()


# What this build of kolo has; Horovod's *_built answer whether a library
# was compiled in, *_enabled whether the job runs on it.
def mpi_built():
    return "mpi" in _kolo.build_info()["engines"]


def gloo_built():
    return "gloo" in _kolo.build_info()["engines"]


def nccl_built():
    return bool(_kolo.build_info()["nccl"])


def cuda_built():
    return bool(_kolo.build_info()["cuda"])


def ccl_built():
    return False


def rocm_built():
    return False


def ddl_built():
    return False


def mpi_enabled():
    return _kolo.is_initialized() and _kolo.backend() == "mpi"


def gloo_enabled():
    return _kolo.is_initialized() and _kolo.backend() == "gloo"


def mpi_threads_supported():
    return mpi_built()


def start_timeline(file_path, mark_cycles=False):
    """Starts writing a Chrome-trace timeline of kolo's runtime to
    ``file_path`` (rank 0 writes it; every rank calls this). kolo marks its
    negotiation cycles always; ``mark_cycles`` is accepted for Horovod's
    sake."""
    del mark_cycles
    _kolo.start_timeline(str(file_path))


def stop_timeline():
    """Closes the timeline start_timeline began."""
    _kolo.stop_timeline()


# ------------------------------------------------------------------ handles

_handles = {}
_next_handle = itertools.count(1)
_noname_counters = {}


def _name(kind, name):
    if name is not None:
        return f"{kind}.{name}"
    counter = _noname_counters.setdefault(kind, itertools.count())
    return f"{kind}.noname.{next(counter)}"


class _Pending:
    """What synchronize() needs to finish an operation: the native handle(s)
    and what to do with the result."""

    def __init__(self, native, finish):
        self.native = native
        self.finish = finish


def _register(native, finish=lambda output: output):
    handle = next(_next_handle)
    _handles[handle] = _Pending(native, finish)
    return handle


def poll(handle):
    """True once the operation behind ``handle`` has completed."""
    pending = _handles.get(handle)
    if pending is None:
        raise ValueError(f"handle {handle} is unknown or already synchronized")
    return pending.native.poll()


def synchronize(handle):
    """Waits for the operation behind ``handle`` and returns its result."""
    pending = _handles.get(handle)
    if pending is None:
        raise ValueError(f"handle {handle} is unknown or already synchronized")
    try:
        output = pending.native.wait()
    finally:
        del _handles[handle]
    return pending.finish(output)


def _op(average, op, default=Average):
    if average is not None:
        if op is not None:
            raise ValueError("the op parameter supersedes average; give one")
        return Average if average else Sum
    op = default if op is None else op
    if op == Adasum:
        raise NotImplementedError("kolo does not implement Adasum; use "
                                  "Average or Sum")
    if op not in (Sum, Average, Min, Max, Product):
        raise ValueError(f"unknown reduction op {op!r}")
    return op


def _check_tensor(tensor, what):
    """Each public operation checks its tensors once, here; the private
    functions it calls take them as checked."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{what} takes a torch.Tensor, not {type(tensor).__name__}")
    if tensor.is_sparse:
        raise ValueError(f"{what}: sparse tensors are not supported; "
                         "pass tensor.to_dense()")


def _scaled(tensor, factor):
    return tensor if factor == 1.0 else tensor * factor


def _postscale(factor):
    def finish(output):
        if factor != 1.0:
            output.mul_(factor)
        return output
    return finish


def _process_set(process_set):
    return _sets._resolve(process_set)


# ---------------------------------------------------------------- allreduce

def _direct(tensor, output, name, process_set):
    """Whether an unnamed synchronous call can take kolo.h's synchronous
    collectives (their direct path): CPU tensors, contiguous, on the whole
    world, of a type kolo moves."""
    return (name is None
            and (process_set is None or process_set is _sets.global_process_set)
            and tensor.dtype in _DIRECT_TYPES and not tensor.is_cuda
            and tensor.is_contiguous() and output.is_contiguous())


_DIRECT_TYPES = {torch.float32, torch.float64, torch.float16, torch.bfloat16,
                 torch.int8, torch.uint8, torch.int32, torch.int64}


def _allreduce_now(tensor, output, name, op, prescale_factor,
                   postscale_factor, process_set):
    """A synchronous allreduce: by call order when unnamed (kolo.h's
    synchronous path), else a named operation waited for."""
    if not _direct(tensor, output, name, process_set):
        return synchronize(_allreduce_async(tensor, output, name, op,
                                            prescale_factor, postscale_factor,
                                            process_set))
    _kolo.allreduce_now(_scaled(tensor, prescale_factor), output, op)
    return _postscale(postscale_factor)(output)


def _allreduce_async(tensor, output, name, op, prescale_factor,
                     postscale_factor, process_set):
    group = _process_set(process_set)
    if prescale_factor != 1.0:
        # The input must stay unchanged; the scaled copy is what travels.
        tensor = _scaled(tensor, prescale_factor)
    if group is not None:
        return group.allreduce_async(tensor, output, op, postscale_factor)
    native = _kolo.allreduce_async(_name("allreduce", name), tensor, output, op)
    return _register(native, _postscale(postscale_factor))


def _new_output(tensor):
    """A contiguous tensor shaped like ``tensor``, for a result."""
    return torch.empty_like(tensor, memory_format=torch.contiguous_format)


def allreduce_async(tensor, average=None, name=None, op=None,
                    prescale_factor=1.0, postscale_factor=1.0,
                    process_set=None):
    """Starts an allreduce of ``tensor`` into a new tensor; returns a handle."""
    _check_tensor(tensor, "allreduce")
    op = _op(average, op)
    return _allreduce_async(tensor, _new_output(tensor), name, op,
                            prescale_factor,
                            postscale_factor, process_set)


def allreduce_async_(tensor, average=None, name=None, op=None,
                     prescale_factor=1.0, postscale_factor=1.0,
                     process_set=None):
    """Starts an allreduce of ``tensor`` in place; returns a handle."""
    _check_tensor(tensor, "allreduce")
    op = _op(average, op)
    return _allreduce_async(tensor, tensor, name, op, prescale_factor,
                            postscale_factor, process_set)


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=None):
    _check_tensor(tensor, "allreduce")
    return _allreduce_now(tensor, tensor, name, _op(average, op),
                          prescale_factor, postscale_factor, process_set)


class _Allreduce(torch.autograd.Function):
    """allreduce with a gradient: the gradient is allreduced the same way."""

    @staticmethod
    def forward(ctx, tensor, name, op, prescale_factor, postscale_factor,
                process_set):
        ctx.op = op
        ctx.scales = (prescale_factor, postscale_factor)
        ctx.process_set = process_set
        return _allreduce_now(tensor, _new_output(tensor), name, op,
                              prescale_factor, postscale_factor, process_set)

    @staticmethod
    def backward(ctx, grad_output):
        reduced = allreduce(grad_output, op=ctx.op,
                            prescale_factor=ctx.scales[0],
                            postscale_factor=ctx.scales[1],
                            process_set=ctx.process_set)
        return reduced, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none,
              op=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=None):
    """The reduction of ``tensor`` over the ranks, as a new tensor; autograd
    passes gradients through it (allreduced with the same op)."""
    _check_tensor(tensor, "allreduce")
    op = _op(average, op)
    compressed, context = compression.compress(tensor)
    if compressed.requires_grad and torch.is_grad_enabled():
        reduced = _Allreduce.apply(compressed, name, op, prescale_factor,
                                   postscale_factor, process_set)
    else:
        # No graph to record: autograd's Function costs more than a small
        # allreduce itself.
        reduced = _allreduce_now(compressed, _new_output(compressed), name, op,
                                 prescale_factor, postscale_factor,
                                 process_set)
    return compression.decompress(reduced, context)


def _grouped_allreduce_async(tensors, outputs, name, op, prescale_factor,
                             postscale_factor, process_set):
    if not tensors:
        raise ValueError("grouped_allreduce needs at least one tensor")
    scaled = [_scaled(t, prescale_factor) for t in tensors]
    members = _process_set(process_set)
    if members is not None:
        return members.grouped_allreduce_async(scaled, outputs, op,
                                               postscale_factor)
    group = _name("grouped_allreduce", name)
    names = [f"{group}.{i}" for i in range(len(tensors))]
    natives = _kolo.grouped_allreduce_async(group, names, scaled, outputs, op)
    finish = _postscale(postscale_factor)
    return [_register(n, finish) for n in natives]


def grouped_allreduce_async(tensors, average=None, name=None, op=None,
                            prescale_factor=1.0, postscale_factor=1.0,
                            process_set=None):
    """Starts an allreduce of every tensor of ``tensors`` as one fused
    operation; returns a handle whose result is the list of outputs."""
    op = _op(average, op)
    for t in tensors:
        _check_tensor(t, "grouped_allreduce")
    return _group_handle(_grouped_allreduce_async(
        tensors, [_new_output(t) for t in tensors], name, op, prescale_factor,
        postscale_factor, process_set))


def grouped_allreduce_async_(tensors, average=None, name=None, op=None,
                             prescale_factor=1.0, postscale_factor=1.0,
                             process_set=None):
    op = _op(average, op)
    for t in tensors:
        _check_tensor(t, "grouped_allreduce")
    return _group_handle(_grouped_allreduce_async(
        tensors, list(tensors), name, op, prescale_factor, postscale_factor,
        process_set))


class _GroupNative:
    """Several native handles behind one Horovod handle."""

    def __init__(self, handles):
        self.handles = handles

    def poll(self):
        return all(poll(h) for h in self.handles)

    def wait(self):
        return [synchronize(h) for h in self.handles]


def _group_handle(handles):
    return _register(_GroupNative(handles))


def grouped_allreduce(tensors, average=None, name=None,
                      compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=None):
    op = _op(average, op)
    compressed = [compression.compress(t) for t in tensors]
    outputs = synchronize(grouped_allreduce_async(
        [c for c, _ in compressed], None, name, op, prescale_factor,
        postscale_factor, process_set))
    return [compression.decompress(o, ctx)
            for o, (_, ctx) in zip(outputs, compressed)]


def grouped_allreduce_(tensors, average=None, name=None, op=None,
                       prescale_factor=1.0, postscale_factor=1.0,
                       process_set=None):
    return synchronize(grouped_allreduce_async_(
        tensors, average, name, op, prescale_factor, postscale_factor,
        process_set))


# ---------------------------------------------------------------- allgather

def allgather_async(tensor, name=None, process_set=None):
    """Starts concatenating every rank's ``tensor`` along dimension 0 (whose
    size may differ between ranks)."""
    _check_tensor(tensor, "allgather")
    group = _process_set(process_set)
    if group is not None:
        return group.allgather_async(tensor)
    return _register(_kolo.allgather_async(_name("allgather", name), tensor))


class _Allgather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0] if tensor.dim() > 0 else 1
        ctx.process_set = process_set
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        # Horovod's rule: the averaged gradient, this rank's rows of it.
        reduced = allreduce(grad_output, op=Average,
                            process_set=ctx.process_set)
        rows = allgather(torch.tensor([ctx.rows], dtype=torch.int64),
                         process_set=ctx.process_set)
        me = _process_set_rank(ctx.process_set)
        offset = int(rows[:me].sum())
        return reduced.narrow(0, offset, ctx.rows), None, None


def _process_set_rank(process_set):
    group = _process_set(process_set)
    return rank() if group is None else group.rank()


def allgather(tensor, name=None, process_set=None):
    return _Allgather.apply(tensor, name, process_set)


# ---------------------------------------------------------------- broadcast

def _broadcast_async(tensor, root_rank, name, process_set, in_place):
    _check_tensor(tensor, "broadcast")
    group = _process_set(process_set)
    if group is not None:
        return group.broadcast_async(tensor, root_rank, in_place)
    native = _kolo.broadcast_async(_name("broadcast", name), tensor,
                                   root_rank, in_place)
    return _register(native)


def broadcast_async(tensor, root_rank, name=None, process_set=None):
    return _broadcast_async(tensor, root_rank, name, process_set, False)


def broadcast_async_(tensor, root_rank, name=None, process_set=None):
    return _broadcast_async(tensor, root_rank, name, process_set, True)


def broadcast_(tensor, root_rank, name=None, process_set=None):
    _check_tensor(tensor, "broadcast")
    if _direct(tensor, tensor, name, process_set):
        _kolo.broadcast_now(tensor, root_rank)
        return tensor
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name,
                                           process_set))

    @staticmethod
    def backward(ctx, grad_output):
        # Horovod's rule: the averaged gradient on the root, zero elsewhere.
        reduced = allreduce(grad_output, op=Average,
                            process_set=ctx.process_set)
        if _process_set_rank(ctx.process_set) != ctx.root_rank:
            reduced = reduced * 0
        return reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=None):
    return _Broadcast.apply(tensor, root_rank, name, process_set)


# ------------------------------------------------ alltoall and reducescatter

def alltoall_async(tensor, splits=None, name=None, process_set=None):
    """Starts sending ``splits[j]`` rows of ``tensor`` to rank j (equal parts
    when ``splits`` is None). The result is the received rows, and, when
    ``splits`` was given, how many came from each rank."""
    _check_tensor(tensor, "alltoall")
    wanted_splits = splits is not None
    if isinstance(splits, torch.Tensor):
        splits = splits.tolist()
    members = _process_set(process_set)
    if members is not None:
        output, received = members.alltoall(tensor, splits)
        native = _sets._Done(output)

        def received_rows():
            return received
    else:
        native = _kolo.alltoall_async(_name("alltoall", name), tensor,
                                      [] if splits is None else
                                      [int(s) for s in splits])

        def received_rows():
            return torch.tensor(native.received_rows(), dtype=torch.int32)

    def finish(output):
        if not wanted_splits:
            return output
        return output, received_rows()
    return _register(native, finish)


def alltoall(tensor, splits=None, name=None, process_set=None):
    return synchronize(alltoall_async(tensor, splits, name, process_set))


def reducescatter_async(tensor, name=None, op=Average, process_set=None,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Starts reducing ``tensor`` over the ranks and keeping this rank's
    block of dimension 0 (which must divide by the number of ranks)."""
    _check_tensor(tensor, "reducescatter")
    op = _op(None, op)
    members = _process_set(process_set)
    if members is not None:
        return members.reducescatter_async(_scaled(tensor, prescale_factor),
                                           op, postscale_factor)
    native = _kolo.reducescatter_async(_name("reducescatter", name),
                                       _scaled(tensor, prescale_factor), op)
    return _register(native, _postscale(postscale_factor))


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=None, prescale_factor=1.0, postscale_factor=1.0):
    compressed, context = compression.compress(tensor)
    output = synchronize(reducescatter_async(compressed, name, op, process_set,
                                             prescale_factor,
                                             postscale_factor))
    return compression.decompress(output, context)


# ------------------------------------------------------------ join, barrier

def join(device=-1):
    """Declares that this rank has no more data; until every rank has
    joined, the others' allreduces go on with this rank contributing zeros.
    Returns the rank that joined last."""
    return _kolo.join()


def barrier(process_set=None):
    group = _process_set(process_set)
    if group is not None:
        group.barrier()
    else:
        _kolo.barrier()
