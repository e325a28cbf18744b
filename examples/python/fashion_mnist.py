"""Horovod's PyTorch MNIST example, on kolo: LeNet on Fashion-MNIST (Debian's
dataset-fashion-mnist), data parallel over every rank.

    kolorun -np 2 python3 examples/python/fashion_mnist.py --epochs 3

The script is a Horovod script with one import changed.
"""

import argparse
import gzip
import os
import struct
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import kolo.torch as hvd

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """An IDX file (gzip-compressed) as a numpy array."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, kind, dims = struct.unpack(">HBB", data[:4])
    if zero != 0 or kind != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims)
    if body.size != int(np.prod(shape)):
        raise ValueError(f"{path}: {body.size} bytes for shape {shape}")
    return body.reshape(shape)


def dataset(data_dir, split, limit):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    if limit:
        images, labels = images[:limit], labels[:limit]
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    x = (x - 0.2860) / 0.3530
    return TensorDataset(x, torch.from_numpy(labels.astype(np.int64)))


class LeNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 6, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(6, 16, 5)
        self.fc1 = torch.nn.Linear(16 * 5 * 5, 120)
        self.fc2 = torch.nn.Linear(120, 84)
        self.fc3 = torch.nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def metric_average(value, name):
    return hvd.allreduce(torch.tensor(value, dtype=torch.float64), name=name).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--data-dir", default=DATA)
    parser.add_argument("--train-limit", type=int, default=0,
                        help="use only this many training images (0: all)")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()

    hvd.init()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    train = dataset(args.data_dir, "train", args.train_limit)
    test = dataset(args.data_dir, "test", 0)
    train_sampler = DistributedSampler(train, num_replicas=hvd.size(), rank=hvd.rank())
    test_sampler = DistributedSampler(test, num_replicas=hvd.size(), rank=hvd.rank(),
                                      shuffle=False)
    train_loader = DataLoader(train, batch_size=args.batch_size, sampler=train_sampler)
    test_loader = DataLoader(test, batch_size=1000, sampler=test_sampler)

    model = LeNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=0.9)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())

    for epoch in range(1, args.epochs + 1):
        model.train()
        train_sampler.set_epoch(epoch)
        start, images = time.perf_counter(), 0
        for data, target in train_loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(data), target)
            loss.backward()
            optimizer.step()
            images += len(data)
        seconds = time.perf_counter() - start
        model.eval()
        correct, test_loss, seen = 0, 0.0, 0
        with torch.no_grad():
            for data, target in test_loader:
                output = model(data)
                test_loss += F.cross_entropy(output, target, reduction="sum").item()
                correct += (output.argmax(1) == target).sum().item()
                seen += len(data)
        accuracy = metric_average(correct / seen, "accuracy")
        test_loss = metric_average(test_loss / seen, "test_loss")
        rate = metric_average(images / seconds, "images_per_second") * hvd.size()
        if hvd.rank() == 0:
            print(f"epoch {epoch}: test loss {test_loss:.4f}, test accuracy "
                  f"{100 * accuracy:.2f}%, {rate:.0f} images/s on {hvd.size()} ranks",
                  flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    main()
