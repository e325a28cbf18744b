"""Starting every rank from the same state, and exchanging Python objects."""

import pickle

import torch

from kolo.torch import mpi_ops


def broadcast_parameters(params, root_rank, process_set=None):
    """Makes every rank's parameters (a model's state_dict() or
    named_parameters(), or a list of (name, tensor)) equal to root's, in
    place."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, list):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        params = list(params)
    handles = []
    for index, (name, p) in enumerate(params):
        if p is None:
            continue
        if not isinstance(p, torch.Tensor):
            raise ValueError(f"broadcast_parameters: parameter {name or index} "
                             f"is a {type(p).__name__}, not a tensor")
        key = f"parameter.{name if name is not None else index}"
        handles.append(mpi_ops.broadcast_async_(p.data if p.requires_grad else p,
                                                root_rank, name=key,
                                                process_set=process_set))
    for handle in handles:
        mpi_ops.synchronize(handle)


def broadcast_object(obj, root_rank=0, name=None, process_set=None):
    """Root's ``obj`` (any picklable object) on every rank."""
    name = name or type(obj).__name__
    if mpi_ops._process_set_rank(process_set) == root_rank:
        payload = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
        length = torch.tensor([payload.numel()], dtype=torch.int64)
    else:
        payload = None
        length = torch.zeros(1, dtype=torch.int64)
    mpi_ops.broadcast_(length, root_rank, name=f"object.{name}.size",
                       process_set=process_set)
    if payload is None:
        payload = torch.zeros(int(length), dtype=torch.uint8)
    mpi_ops.broadcast_(payload, root_rank, name=f"object.{name}.data",
                       process_set=process_set)
    return pickle.loads(payload.numpy().tobytes())


def allgather_object(obj, name=None, process_set=None):
    """Every rank's ``obj``, in rank order."""
    name = name or type(obj).__name__
    payload = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
    sizes = mpi_ops.allgather(torch.tensor([payload.numel()], dtype=torch.int64),
                              name=f"object.{name}.sizes", process_set=process_set)
    gathered = mpi_ops.allgather(payload, name=f"object.{name}.data",
                                 process_set=process_set)
    result, offset = [], 0
    for size in sizes.tolist():
        result.append(pickle.loads(gathered[offset:offset + size].numpy().tobytes()))
        offset += size
    return result


def broadcast_optimizer_state(optimizer, root_rank, process_set=None):
    """Makes every rank's optimizer state (momenta, step counts) and
    hyper-parameters equal to root's. Ranks whose optimizer has no state yet
    get root's."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("broadcast_optimizer_state does not support LBFGS")
    state = optimizer.state_dict()
    root_state = broadcast_object(
        {"param_groups": state["param_groups"],
         "state_keys": {k: sorted((n, tuple(v.shape), str(v.dtype))
                                  if torch.is_tensor(v) else (n, None, None)
                                  for n, v in s.items())
                        for k, s in state["state"].items()}},
        root_rank, name="optimizer.layout", process_set=process_set)
    new_state = {}
    handles = []
    for key, entries in sorted(root_state["state_keys"].items()):
        mine = state["state"].get(key, {})
        new_state[key] = {}
        for entry, shape, dtype in entries:
            value = mine.get(entry)
            if shape is None:
                new_state[key][entry] = broadcast_object(
                    value, root_rank, name=f"optimizer.state.{key}.{entry}",
                    process_set=process_set)
                continue
            if value is None or tuple(value.shape) != tuple(shape):
                value = torch.zeros(shape, dtype=getattr(torch, dtype.split(".")[1]))
            new_state[key][entry] = value
            handles.append(mpi_ops.broadcast_async_(
                value, root_rank, name=f"optimizer.state.{key}.{entry}",
                process_set=process_set))
    for handle in handles:
        mpi_ops.synchronize(handle)
    optimizer.load_state_dict({"state": new_state,
                               "param_groups": root_state["param_groups"]})
