#!/usr/bin/env python3
"""PyTorch Distributed Checkpoint (DCP) peer of kolo-bench checkpoint.

kolo's ZeroOptimizer writes a checkpoint as per-rank shard files plus one
manifest and loads it at any number of ranks (kolo/torch_zero.h); DCP
(torch.distributed.checkpoint) is PyTorch's design of the same idea: each
rank writes its shards of a sharded state dict, rank 0 the global
metadata, and a load at another world size reads each rank's new shards
from whichever files hold them. This script measures one DCP save or load
of a sharded model's training state, so that kolo-bench can put kolo's
beside it:

  --mode save --np N   N ranks build the model (the seed's weights), shard
                       it with FSDP2 (torch_ddp.py's shard_fully: every
                       parameter, gradient and optimizer state split over
                       the ranks, as ZeRO shards kolo's), take one Adam step
                       on a synthetic batch of --batch-size images per rank
                       (so the optimizer holds its moments), and time
                       dcp.save of {model, optimizer} into --dir;
  --mode load --np M   M ranks build the model from another seed (so that
                       nothing passes unless the load overwrites it), shard
                       it, and time get_state_dict, dcp.load from --dir and
                       set_state_dict: what resuming at M ranks costs.

Timing: every rank waits at a barrier before and after the operation; the
seconds between them are the operation's. The result also holds the bytes
and the number of files in --dir, the sum of every parameter and of every
optimizer moment (float64, over the ranks' shards, the Adam step counts
left out) so that kolo-bench can check that a load restored what the save
wrote, and each rank's peak RSS.

  python3 bench/peers/torch_checkpoint.py --mode save --np 2 \\
      --model resnet18 --dir /tmp/ckpt --json save.json
  python3 bench/peers/torch_checkpoint.py --mode load --np 4 \\
      --model resnet18 --dir /tmp/ckpt --json load.json

Exit status: 0 on success, 2 for bad flags, 1 for any other failure.
"""

import argparse
import importlib
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import torch_ddp as common


def directory_size(path):
    """(bytes, files) of the regular files under `path`."""
    total, files = 0, 0
    for root, _, names in os.walk(path):
        for name in names:
            total += os.path.getsize(os.path.join(root, name))
            files += 1
    return total, files


def sums(model, optimizer):
    """The float64 sums of every parameter and of every optimizer moment
    over all the ranks' shards (the step counts left out)."""
    parameters = sum(common.local(p).double().sum().item()
                     for p in model.parameters())
    moments = sum(common.local(value).double().sum().item()
                  for entry in optimizer.state.values()
                  for key, value in entry.items()
                  if torch.is_tensor(value) and key != "step")
    both = torch.tensor([parameters, moments], dtype=torch.float64)
    dist.all_reduce(both)
    return float(both[0]), float(both[1])


def run(rank, args, port):
    from torch.distributed import checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (get_state_dict,
                                                         set_state_dict)
    common.join_group(rank, args.np, port, args.timeout)
    # The saved run's weights come from --seed; the loading run starts
    # from other weights, which only a working load replaces.
    torch.manual_seed(args.seed if args.mode == "save" else args.seed + 1)
    module = common.MODELS[args.model](common.NUM_CLASSES, args.channels)
    model = common.shard_fully(module)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr,
                                 betas=(0.9, 0.999), eps=1e-8)
    if args.mode == "save":
        shape = (args.channels, args.image_size, args.image_size)
        images, labels = common.synthetic(shape, args.seed + rank,
                                          args.batch_size)
        F.cross_entropy(model(images), labels).backward()
        optimizer.step()
        model_state, optimizer_state = get_state_dict(model, optimizer)
        dist.barrier()
        start = time.perf_counter()
        dcp.save({"model": model_state, "optimizer": optimizer_state},
                 checkpoint_id=args.dir)
        dist.barrier()
    else:
        dist.barrier()
        start = time.perf_counter()
        # get_state_dict gives the optimizer its (empty) moments to load
        # into; set_state_dict puts what dcp.load read into the model.
        model_state, optimizer_state = get_state_dict(model, optimizer)
        state = {"model": model_state, "optimizer": optimizer_state}
        dcp.load(state, checkpoint_id=args.dir)
        set_state_dict(model, optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optimizer"])
        dist.barrier()
    seconds = time.perf_counter() - start
    parameter_sum, moment_sum = sums(model, optimizer)
    gathered = [None] * args.np if rank == 0 else None
    dist.gather_object(common.peak_rss_bytes(), gathered, dst=0)
    if rank == 0:
        report(args, common.count_parameters(module), seconds, parameter_sum,
               moment_sum, gathered)


def worker(rank, args, port, parent_pid):
    common.run_rank("torch_checkpoint", rank, args.threads, parent_pid,
                    lambda: run(rank, args, port))


def report(args, parameters, seconds, parameter_sum, moment_sum, rss):
    size, files = directory_size(args.dir)
    result = {"seconds": seconds, "bytes": size, "files": files,
              "parameter_sum": parameter_sum,
              "optimizer_state_sum": moment_sum, "peak_rss_bytes": rss}
    print(f"torch-dcp {args.model}: {args.mode} at np {args.np} in "
          f"{seconds:.3f} s; {args.dir} holds {size / 2**20:.1f} MiB in "
          f"{files} files; parameter sum {parameter_sum:.6f}, moment sum "
          f"{moment_sum:.6f}", flush=True)
    if args.json:
        config = {"mode": args.mode, "model": args.model, "np": args.np,
                  "sharding": "fsdp2", "optimizer": "adam", "lr": args.lr,
                  "batch_size": args.batch_size, "threads": args.threads,
                  "image_size": args.image_size, "channels": args.channels,
                  "seed": args.seed, "parameters": parameters,
                  **common.versions()}
        common.write_json(args.json, {"tool": "torch-dcp", "config": config,
                                      "result": result})


def has_fsdp2_and_dcp():
    """Whether this torch has FSDP2 and distributed checkpoints (torch 2.6
    and later); torch 1.13's modules of those names fail even to import
    under Python 3.11."""
    if not common.has_fsdp2():
        return False
    try:
        importlib.import_module("torch.distributed.checkpoint")
    except Exception:  # noqa: BLE001 (any failure means: not this torch)
        return False
    return True


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Time one PyTorch Distributed Checkpoint save, or one "
                    "load at another world size, of an FSDP2-sharded model "
                    "and its Adam state, for comparison with kolo's ZeRO "
                    "checkpoints.")
    parser.add_argument("--mode", choices=("save", "load"), required=True)
    parser.add_argument("--np", type=common.positive_int, default=1,
                        help="ranks (default 1)")
    parser.add_argument("--model", choices=common.MODELS, default="resnet18")
    parser.add_argument("--dir", required=True,
                        help="the checkpoint directory (save: created)")
    parser.add_argument("--batch-size", type=common.positive_int, default=8,
                        help="images per rank in the step before the save "
                             "(default 8)")
    parser.add_argument("--image-size", type=common.positive_int, default=32)
    parser.add_argument("--channels", type=common.positive_int, default=3)
    parser.add_argument("--threads", type=common.positive_int, default=1)
    parser.add_argument("--lr", type=common.positive_float, default=1e-3,
                        help="Adam's learning rate (default 1e-3)")
    parser.add_argument("--seed", type=common.non_negative_int, default=42)
    parser.add_argument("--timeout", type=common.positive_int, default=300)
    parser.add_argument("--json", help="write the result to this file")
    args = parser.parse_args(argv)
    if args.mode == "load" and not os.path.isdir(args.dir):
        parser.error(f"--dir {args.dir}: no such directory to load")
    common.check_json_path(parser, args.json)
    return args


def main(argv=None):
    args = parse_args(argv)
    if not has_fsdp2_and_dcp():
        print(f"torch_checkpoint: torch {torch.__version__} has no FSDP2 or "
              "distributed checkpoint (torch 2.6 and later); run "
              "scripts/setup.sh, which makes .venv with one", file=sys.stderr)
        return 2
    if args.mode == "save":
        os.makedirs(args.dir, exist_ok=True)
    return common.launch("torch_checkpoint", args.np, args.timeout, worker,
                         (args,))


if __name__ == "__main__":
    sys.exit(main())
