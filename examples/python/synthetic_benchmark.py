"""Training throughput of one script under kolo.torch, Horovod, PyTorch DDP or
plain PyTorch, in the shape of Horovod's pytorch_synthetic_benchmark.py:

    kolorun -np 2 python3 synthetic_benchmark.py --model resnet18 --batch-size 32
    torchrun --nproc-per-node 2 synthetic_benchmark.py --framework ddp
    horovodrun -np 2 python3 synthetic_benchmark.py --framework horovod
    python3 synthetic_benchmark.py --framework none          # one process

--data fashion-mnist trains on Debian's Fashion-MNIST instead of random
images (LeNet, 28x28). Rank 0 prints one line of JSON per run with the
images per second of the whole job (median over --num-iters).
"""

import argparse
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F

from fashion_mnist import DATA, LeNet, dataset


class Framework:
    """What the loop needs of a data-parallel library."""

    def __init__(self, name):
        self.name = name
        if name in ("kolo", "horovod"):
            if name == "kolo":
                import kolo.torch as hvd
            else:
                import horovod.torch as hvd
            hvd.init()
            self.hvd = hvd
            self.rank, self.size = hvd.rank(), hvd.size()
            self.local_size = hvd.local_size()
        elif name == "ddp":
            import torch.distributed as dist
            dist.init_process_group("gloo")
            self.dist = dist
            self.rank, self.size = dist.get_rank(), dist.get_world_size()
            self.local_size = int(os.environ.get("LOCAL_WORLD_SIZE", self.size))
        elif name == "none":
            self.rank, self.size, self.local_size = 0, 1, 1
        else:
            raise SystemExit(f"--framework {name}: kolo, horovod, ddp or none")

    def wrap(self, model, optimizer):
        if self.name in ("kolo", "horovod"):
            self.hvd.broadcast_parameters(model.state_dict(), root_rank=0)
            optimizer = self.hvd.DistributedOptimizer(
                optimizer, named_parameters=model.named_parameters())
        elif self.name == "ddp":
            model = torch.nn.parallel.DistributedDataParallel(model)
        return model, optimizer

    def sum(self, value):
        if self.name in ("kolo", "horovod"):
            return self.hvd.allreduce(torch.tensor([value]), op=self.hvd.Sum).item()
        if self.name == "ddp":
            t = torch.tensor([value])
            self.dist.all_reduce(t)
            return t.item()
        return value

    def shutdown(self):
        if self.name in ("kolo", "horovod"):
            self.hvd.shutdown()
        elif self.name == "ddp":
            self.dist.destroy_process_group()


def batches(args, rank, size):
    """Endless (data, target) batches of this rank."""
    if args.data == "synthetic":
        side = 224 if args.model == "resnet18" else 28
        channels = 3 if args.model == "resnet18" else 1
        data = torch.randn(args.batch_size, channels, side, side)
        target = torch.randint(0, 10, (args.batch_size,))
        while True:
            yield data, target
    train = dataset(args.data_dir, "train", 0)
    loader = torch.utils.data.DataLoader(
        train, batch_size=args.batch_size, drop_last=True,
        sampler=torch.utils.data.distributed.DistributedSampler(
            train, num_replicas=size, rank=rank))
    epoch = 0
    while True:
        loader.sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--framework", default="kolo")
    parser.add_argument("--model", default="resnet18", choices=["resnet18", "lenet"])
    parser.add_argument("--data", default="synthetic", choices=["synthetic", "fashion-mnist"])
    parser.add_argument("--data-dir", default=DATA)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--num-warmup-batches", type=int, default=5)
    parser.add_argument("--num-batches-per-iter", type=int, default=10)
    parser.add_argument("--num-iters", type=int, default=5)
    parser.add_argument("--json", help="rank 0 also writes its line here")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads per rank (0: cores / local ranks)")
    args = parser.parse_args()

    framework = Framework(args.framework)
    torch.manual_seed(1)
    # The same share of the cores under every launcher: torchrun sets
    # OMP_NUM_THREADS=1, kolorun and horovodrun leave torch's default (every
    # core, in each rank).
    torch.set_num_threads(args.threads or
                          max(1, (os.cpu_count() or 1) // framework.local_size))
    if args.model == "resnet18":
        import torchvision
        model = torchvision.models.resnet18(num_classes=10)
    else:
        model = LeNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01 * framework.size)
    model, optimizer = framework.wrap(model, optimizer)
    data = batches(args, framework.rank, framework.size)

    def step():
        x, y = next(data)
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()

    for _ in range(args.num_warmup_batches):
        step()
    rates = []
    for _ in range(args.num_iters):
        start = time.perf_counter()
        for _ in range(args.num_batches_per_iter):
            step()
        mine = args.batch_size * args.num_batches_per_iter / (time.perf_counter() - start)
        rates.append(framework.sum(mine))
    if framework.rank == 0:
        line = json.dumps({"framework": args.framework, "model": args.model,
                           "data": args.data, "batch_size": args.batch_size,
                           "ranks": framework.size,
                           "images_per_second": statistics.median(rates),
                           "per_iteration": rates,
                           "threads_per_rank": torch.get_num_threads(),
                           "torch_version": torch.__version__})
        print(line, flush=True)
        if args.json:
            with open(args.json, "w") as f:
                f.write(line + "\n")
    framework.shutdown()


if __name__ == "__main__":
    main()
