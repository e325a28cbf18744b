#!/usr/bin/env python3
"""torch.distributed.pipelining peer of kolo-bench pipeline.

Measures what PyTorch's own pipeline parallelism (torch.distributed.
pipelining, torch 2.4 and later) reaches on one of kolo's models cut into
the same stages kolo-train cuts it into, so that kolo's pipeline schedules
have a reference measured under the same conditions on the same machine.

What is the same as in `kolorun -np P kolo-train --pipeline-stages P
--micro-batches M --schedule gpipe|1f1b --benchmark-steps I`:

  - the network and its cut: the model is torch_ddp.py's copy of kolo's
    (same layers, same parameter count), laid out as the flat sequence
    kolo's CreateSequentialModel() makes of it (src/torch/models/
    sequential.cc: a residual block stays one layer, a stage of blocks is
    unpacked, a function in forward() becomes a parameter-free layer), and
    --split gives each stage's number of layers; kolo-bench passes the
    split kolo-train reported for the same job. Without --split the layers
    are balanced by parameter count exactly as kolo's BalanceStages() does
    (the contiguous cut that minimises the largest stage, the earliest cut
    winning ties);
  - the schedules: ScheduleGPipe (all forwards, then all backwards) and
    Schedule1F1B (warm-up forwards, then one forward and one backward in
    turn), over M micro-batches of the batch;
  - the data: --batch-size synthetic images of kolo's recipe per step, the
    first stage reading the images and the last the labels;
  - the recipe, kolo-train's defaults: cross-entropy on each micro-batch,
    SGD with Nesterov momentum 0.9, weight decay 1e-4, lr 0.03 (one
    pipeline: nothing to scale), each stage stepping its own parameters;
  - the resources: one process per stage, --threads intra-op threads each,
    on gloo over loopback.

Timing: --warmup steps untimed (the first also lets each stage learn the
shapes it receives), then every rank waits at a barrier, runs --iters
steps and waits again; images/s = iters * batch size / seconds. The bubble
is measured as kolo's PipelineStatistics measures it: the time a stage
spent blocked in the schedule's receives and sends (the schedules' one
wait, schedules._wait_batch_p2p, is timed) over its time in the steps.

Memory: result.pipeline gives each rank's parameter and optimizer-state
bytes, and result.peak_rss_bytes each rank's peak RSS (getrusage), which
includes the Python interpreter and torch's Python modules.

  python3 bench/peers/torch_pipeline.py --model vgg16 --stages 2 \\
      --micro-batches 4 --schedule 1f1b --batch-size 32 --image-size 32 \\
      --warmup 1 --iters 3 --json out.json

Exit status: 0 on success, 2 for bad flags, 1 for any other failure.
"""

import argparse
import importlib.util
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import torch_ddp as common

SCHEDULES = ("gpipe", "1f1b")


# The model as kolo's flat sequence (src/torch/models/sequential.cc).


def lenet_layers(model):
    return [model.conv1, nn.MaxPool2d(2), nn.ReLU(), model.conv2,
            model.conv2_drop, nn.AdaptiveMaxPool2d(4), nn.ReLU(),
            nn.Flatten(), model.fc1, nn.ReLU(), model.dropout, model.fc2]


def vgg16_layers(model):
    layers = []
    for stage in model.stages:
        for layer_conv, layer_bn in stage:
            layers += [layer_conv, layer_bn, nn.ReLU()]
        layers.append(nn.MaxPool2d(2, 2, ceil_mode=True))
    p = model.dropout.p  # applied twice by the model: two layers here
    return layers + [nn.AdaptiveAvgPool2d(1), nn.Flatten(), model.fc6,
                     nn.ReLU(), nn.Dropout(p), model.fc7, nn.ReLU(),
                     nn.Dropout(p), model.fc8]


def resnet_layers(model):
    layers = [model.conv1, model.bn1, nn.ReLU()]
    for stage in model.stages:
        layers += list(stage)
    return layers + [nn.AdaptiveAvgPool2d(1), nn.Flatten(), model.fc]


def mobilenetv2_layers(model):
    return [model.stem_conv, model.stem_bn, nn.ReLU6(), *model.blocks,
            model.head_conv, model.head_bn, nn.ReLU6(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), model.dropout,
            model.classifier]


SEQUENCES = {
    "lenet": lenet_layers,
    "vgg16": vgg16_layers,
    "resnet18": resnet_layers,
    "resnet50": resnet_layers,
    "mobilenetv2": mobilenetv2_layers,
}


def balance_stages(costs, stages):
    """kolo's BalanceStages (src/torch/pipeline/schedule.cc): the number of
    layers of each of `stages` contiguous, non-empty stages that minimises
    the largest stage's total cost; among equal cuts the earliest start
    wins, so every rank (and kolo) cuts the same way."""
    n = len(costs)
    if stages < 1 or n < stages:
        raise common.InputError(f"cannot cut {n} layers into {stages} "
                                "non-empty pipeline stages")
    prefix = [0.0]
    for cost in costs:
        prefix.append(prefix[-1] + cost)
    best = [[float("inf")] * (n + 1) for _ in range(stages + 1)]
    cut = [[0] * (n + 1) for _ in range(stages + 1)]
    best[0][0] = 0.0
    for k in range(1, stages + 1):
        for i in range(k, n + 1):
            for j in range(k - 1, i):
                cost = max(best[k - 1][j], prefix[i] - prefix[j])
                if cost < best[k][i]:
                    best[k][i] = cost
                    cut[k][i] = j
    split = [0] * stages
    end = n
    for k in range(stages, 0, -1):
        split[k - 1] = end - cut[k][end]
        end = cut[k][end]
    return split


def stage_split(layers, args):
    """--split, checked against the layers, or the balance by parameters."""
    if args.split is None:
        return balance_stages([sum(p.numel() for p in layer.parameters())
                               for layer in layers], args.stages)
    if (len(args.split) != args.stages or sum(args.split) != len(layers) or
            min(args.split) < 1):
        raise common.InputError(
            f"--split {','.join(map(str, args.split))} does not cut "
            f"{args.model}'s {len(layers)} layers into {args.stages} "
            "non-empty stages")
    return args.split


# Workers.


class WaitClock:
    """Times the schedules' waits for their receives and sends: every
    blocking wait of torch.distributed.pipelining's schedules goes through
    schedules._wait_batch_p2p, which this wraps for the whole process."""

    def __init__(self):
        from torch.distributed.pipelining import schedules
        if not hasattr(schedules, "_wait_batch_p2p"):
            raise RuntimeError(
                f"torch {torch.__version__}'s pipelining schedules have no "
                "_wait_batch_p2p to time their waits by")
        self.seconds = 0.0
        wait = schedules._wait_batch_p2p

        def timed(work):
            start = time.perf_counter()
            try:
                return wait(work)
            finally:
                self.seconds += time.perf_counter() - start

        schedules._wait_batch_p2p = timed


def make_schedule(stage, args):
    from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe
    cls = ScheduleGPipe if args.schedule == "gpipe" else Schedule1F1B
    return cls(stage, n_microbatches=args.micro_batches,
               loss_fn=F.cross_entropy)


def run(rank, args, port):
    """Builds this rank's stage, times the steps, and has rank 0 report
    every rank's figures."""
    from torch.distributed.pipelining import PipelineStage
    common.join_group(rank, args.stages, port, args.timeout)
    shape = (args.channels, args.image_size, args.image_size)
    images, labels = common.synthetic(shape, args.seed, args.batch_size)
    torch.manual_seed(args.seed)  # the same weights as the unsplit model
    model = common.MODELS[args.model](common.NUM_CLASSES, args.channels)
    layers = SEQUENCES[args.model](model)
    split = stage_split(layers, args)
    begin = sum(split[:rank])
    module = nn.Sequential(*layers[begin:begin + split[rank]])
    module.train()
    stage = PipelineStage(module, rank, args.stages, torch.device("cpu"))
    schedule = make_schedule(stage, args)
    optimizer = torch.optim.SGD(module.parameters(), lr=args.lr, momentum=0.9,
                                nesterov=True, weight_decay=1e-4)
    clock = WaitClock()
    last = rank == args.stages - 1
    losses = []

    def step():
        optimizer.zero_grad()
        losses.clear()
        if rank == 0:
            schedule.step(images)
        elif last:
            schedule.step(target=labels, losses=losses)
        else:
            schedule.step()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    dist.barrier()
    clock.seconds = 0.0
    start = time.perf_counter()
    for _ in range(args.iters):
        step()
    own_seconds = time.perf_counter() - start
    dist.barrier()
    seconds = time.perf_counter() - start
    state = common.tensor_bytes(value for entry in optimizer.state.values()
                                for value in entry.values()
                                if torch.is_tensor(value))
    measured = {
        "busy_seconds": own_seconds - clock.seconds,
        "idle_seconds": clock.seconds,
        "parameter_bytes": common.tensor_bytes(module.parameters()),
        "optimizer_state_bytes": state,
        "peak_rss_bytes": common.peak_rss_bytes(),
        "loss": sum(loss.item() for loss in losses) / max(len(losses), 1),
    }
    gathered = [None] * args.stages if rank == 0 else None
    dist.gather_object(measured, gathered, dst=0)
    if rank == 0:
        report(args, common.count_parameters(model), split, seconds, gathered)


def worker(rank, args, port, parent_pid):
    common.run_rank("torch_pipeline", rank, args.threads, parent_pid,
                    lambda: run(rank, args, port))


# Reporting.


def report(args, parameters, split, seconds, per_rank):
    images_per_second = args.iters * args.batch_size / seconds
    busy = [rank["busy_seconds"] for rank in per_rank]
    idle = [rank["idle_seconds"] for rank in per_rank]
    bubbles = [i / (b + i) if b + i > 0 else 0.0 for b, i in zip(busy, idle)]
    result = {
        "images_per_second": images_per_second,
        "images_per_second_per_worker": images_per_second / args.stages,
        "seconds": seconds,
        "step_ms": 1000 * seconds / args.iters,
        "peak_rss_bytes": [rank["peak_rss_bytes"] for rank in per_rank],
        "final_loss": per_rank[-1]["loss"],
        "pipeline": {
            "bubble_fraction": sum(bubbles) / len(bubbles),
            "busy_seconds": busy,
            "idle_seconds": idle,
            "parameter_bytes": [rank["parameter_bytes"] for rank in per_rank],
            "optimizer_state_bytes": [rank["optimizer_state_bytes"]
                                      for rank in per_rank],
        },
    }
    rss_mib = "/".join(f"{rss / 2**20:.0f}"
                       for rss in result["peak_rss_bytes"])
    print(f"torch-pipelining {args.model}: {args.stages} stages (layers "
          f"{'+'.join(map(str, split))}), {args.schedule}, "
          f"{args.micro_batches} micro-batches, batch {args.batch_size}, "
          f"{args.threads} thread(s) per stage: {images_per_second:.1f} "
          f"images/s, {result['step_ms']:.1f} ms/step over {args.iters} "
          f"steps, bubble {result['pipeline']['bubble_fraction']:.3f} "
          f"(mean over the stages), peak RSS {rss_mib} MiB", flush=True)
    if args.json:
        config = {
            "model": args.model, "dataset": "synthetic",
            "image_size": args.image_size, "channels": args.channels,
            "batch_size": args.batch_size, "threads": args.threads,
            "warmup": args.warmup, "iters": args.iters,
            "pipeline_stages": args.stages,
            "micro_batches": args.micro_batches, "schedule": args.schedule,
            "split": split, "optimizer": "sgd", "lr": args.lr,
            "momentum": 0.9, "nesterov": True, "weight_decay": 1e-4,
            "seed": args.seed, "parameters": parameters, **common.versions(),
        }
        common.write_json(args.json, {"tool": "torch-pipelining",
                                      "config": config, "result": result})


def split_list(text):
    try:
        return [int(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated layer counts, got '{text}'") from None


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Throughput and bubble of torch.distributed.pipelining "
                    "(GPipe, 1F1B) on one of kolo's models, cut as kolo-"
                    "train cuts it, for comparison with kolo's pipeline.")
    parser.add_argument("--model", choices=SEQUENCES, default="vgg16")
    parser.add_argument("--stages", type=common.positive_int, default=2,
                        help="pipeline stages, one process each (default 2)")
    parser.add_argument("--micro-batches", type=common.positive_int,
                        default=4, help="micro-batches per step (default 4)")
    parser.add_argument("--schedule", choices=SCHEDULES, default="1f1b")
    parser.add_argument("--split", type=split_list,
                        help="layers per stage, comma-separated (default: "
                             "balanced by parameters, as kolo-train does)")
    parser.add_argument("--batch-size", type=common.positive_int, default=32,
                        help="images per step (default 32)")
    parser.add_argument("--image-size", type=common.positive_int, default=32,
                        help="synthetic images' height and width (default "
                             "32)")
    parser.add_argument("--channels", type=common.positive_int, default=3,
                        help="synthetic images' channels (default 3, as "
                             "kolo-train's)")
    parser.add_argument("--threads", type=common.positive_int, default=1,
                        help="intra-op threads per stage (default 1)")
    parser.add_argument("--warmup", type=common.non_negative_int, default=1,
                        help="untimed steps before the timed ones (default "
                             "1)")
    parser.add_argument("--iters", type=common.positive_int, default=3,
                        help="timed steps (default 3)")
    parser.add_argument("--lr", type=common.positive_float, default=0.03,
                        help="SGD's learning rate (default 0.03, as "
                             "kolo-train's)")
    parser.add_argument("--seed", type=common.non_negative_int, default=42)
    parser.add_argument("--timeout", type=common.positive_int, default=300,
                        help="seconds a rank waits for the others (default "
                             "300)")
    parser.add_argument("--json", help="write the result to this file")
    args = parser.parse_args(argv)
    if args.batch_size < args.micro_batches:
        parser.error(f"--batch-size {args.batch_size} has fewer images than "
                     f"--micro-batches {args.micro_batches}")
    if args.stages < 2:
        parser.error("--stages must be at least 2: one stage is no pipeline")
    common.check_json_path(parser, args.json)
    return args


def main(argv=None):
    args = parse_args(argv)
    if importlib.util.find_spec("torch.distributed.pipelining") is None:
        print(f"torch_pipeline: torch {torch.__version__} has no "
              "torch.distributed.pipelining (torch 2.4 and later); run "
              "scripts/setup.sh, which makes .venv with one", file=sys.stderr)
        return 2
    try:
        layers = SEQUENCES[args.model](
            common.MODELS[args.model](common.NUM_CLASSES, args.channels))
        split = stage_split(layers, args)
    except common.InputError as error:
        print(f"torch_pipeline: {error}", file=sys.stderr)
        return 2
    if not common.check_parameters(args.model, args.channels):
        print(f"torch_pipeline: {args.model} differs from kolo's; not "
              "measuring", file=sys.stderr)
        return 1
    print(f"{args.model}: {len(layers)} layers, cut "
          f"{'+'.join(map(str, split))}", flush=True)
    return common.launch("torch_pipeline", args.stages, args.timeout, worker,
                         (args,))


if __name__ == "__main__":
    sys.exit(main())
