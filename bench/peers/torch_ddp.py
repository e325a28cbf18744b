#!/usr/bin/env python3
"""PyTorch DistributedDataParallel peer of kolo's training benchmark.

Measures what plain PyTorch DistributedDataParallel (DDP) on the gloo backend
reaches for one of kolo's models, so that kolo's figures have a reference
measured under the same conditions on the same machine. Two modes:

  - throughput (the default): images per second over a timed window of
    --iters steps, as `kolo-train --benchmark-steps` measures it;
  - --epochs E: full training for E epochs, as `kolo-train --epochs E`
    trains: wall time, images per second, and the test accuracy after each
    epoch and at the end.

What is the same as in kolo-train:

  - the network: each model below reproduces kolo's model zoo
    (src/torch/models/) layer for layer, with the same parameter names, order
    and initialization, and the script refuses to run if the parameter count
    differs from kolo's;
  - the data: Fashion-MNIST, MNIST and CIFAR-10 are read whole into memory
    and normalised as kolo::data does ((x / 255 - mean) / std, with kolo's
    constants), each rank training on its own disjoint shard
    (DistributedSampler, shuffled with the seed, padded to equal shards);
    --train-subset and --test-subset keep the first N images, as kolo-train's
    flags of the same names do;
  - the recipe, kolo-train's defaults: cross-entropy, SGD with Nesterov
    momentum 0.9 and weight decay 1e-4, --lr (0.03) per worker times the
    world size. In epochs mode the rate also follows kolo-train's schedule
    (tools/kolo-train/plan.h): it climbs linearly from --lr to the scaled
    rate over --warmup-epochs (1; none at np 1, where the two are equal),
    then follows half a cosine down to zero at the last step. The same
    flags as kolo-train's change it: --optimizer adam or adamw (betas 0.9
    and 0.999, eps 1e-8, --weight-decay), --no-lr-scaling, --lr-schedule
    constant, --gradient-clipping (by the global norm, after DDP's
    allreduce) and --precision bf16 or fp16 (CPU autocast of the forward
    pass and the loss to bfloat16 or float16; the weights, gradients and
    optimizer stay fp32, as kolo's master weights do; fp16 also scales the
    loss with torch.amp.GradScaler and skips the steps that overflow, as
    kolo-train's loss scaler does, and needs a torch with CPU float16
    autocast, which 1.13 lacks: the script refuses it there);
  - the batches: --batch-size per worker; in epochs mode every epoch ends
    with the shard's partial last batch, as kolo's loader does;
  - the evaluation (epochs mode): after every epoch, rank 0's batch-norm
    statistics are copied to every rank, each rank classifies the real
    (unpadded) rows of its unshuffled shard of the test set, and the counts
    are summed across ranks;
  - the resources: --threads intra-op threads and one inter-op thread per
    worker, and --np worker processes on this host.

DDP runs as its users run it, with its defaults (25 MB gradient buckets,
batch-norm buffers broadcast from rank 0 every forward pass), and also with
one worker, so the --np 1 figure includes DDP's own overhead.

What still differs from kolo-train: batches are gathered (index_select from
the in-memory set) on the training thread, where kolo's loader prefetches
them on a thread of its own; CIFAR-10 is not augmented here, where
kolo-train crops and flips it in that loader thread; the synthetic images
default to 1x28x28 (kolo-train's are 3x32x32: pass --channels 3
--image-size 32) and follow kolo's recipe but not its random numbers; the
shuffle and the dropout masks are torch's, not kolo's; the throughput mode
keeps the rate at --lr times np (the schedule changes the values, not the
work); and the per-worker memory includes the Python interpreter and
torch's Python modules.

Timing, throughput mode: --warmup steps are run untimed, then every rank
waits at a barrier, runs --iters steps of forward, backward and optimizer
step, and waits at a barrier again; the time between the barriers is the
measured window, the same for all ranks. images/s = iters * batch size * np
/ seconds.

Timing, epochs mode (as kolo-train reports it): images/s counts the images
all ranks trained on (padding included) over the seconds spent in the
training loops, evaluation excluded; the wall time runs from the start of a
worker (reading the data, joining the group) to the end of the last
evaluation. Both are the slowest rank's.

  python3 bench/peers/torch_ddp.py --model lenet --dataset fashion-mnist \\
      --np 2 --batch-size 128 --threads 1 --warmup 5 --iters 50 --json out.json
  python3 bench/peers/torch_ddp.py --model lenet --dataset fashion-mnist \\
      --np 2 --batch-size 128 --threads 1 --epochs 15 --json out.json

The launcher starts the workers itself and rendezvouses them through a
TCPStore on 127.0.0.1 at a port the OS picks. If a worker fails, the launcher
stops the others and exits non-zero; workers also die with the launcher.
Exit status: 0 on success, 2 for bad flags or data, 1 for any other failure.

Across hosts, --from-env makes this process one worker of a world that
torchrun started: the rank, world size and rendezvous come from RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT, --np defaults to WORLD_SIZE (and
must equal it if given), --threads to the cores over LOCAL_WORLD_SIZE, and
gloo's interface from GLOO_SOCKET_IFNAME as torch reads it. On each host:

  GLOO_SOCKET_IFNAME=eth1 python3 -m torch.distributed.run --nnodes 2 \\
      --node_rank I --nproc_per_node 2 --master_addr H1 --master_port P \\
      --redirects 1 --tee 1 bench/peers/torch_ddp.py --from-env ...

(torch 1.13's torchrun spells its flags with underscores, and under Python
3.11 it fails unless --redirects and --tee are 1 or 2: it cannot parse 0
or 3 there.)

--zero wraps the optimizer in torch.distributed.optim.
ZeroRedundancyOptimizer on top of DDP: PyTorch's ZeRO stage 1, where each
rank keeps the optimizer state of its share of the parameters (whole
tensors, balanced by size, so the shares are uneven) and broadcasts its
updated parameters after the step. Gradients are still allreduced whole
by DDP; PyTorch has no ZeRO stage 2 for DDP.

--fsdp2 replaces DDP with FSDP2 (torch.distributed.fsdp.fully_shard, torch
2.6 and later), PyTorch's ZeRO stage 3: each rank keeps 1/np of every
parameter, its gradient and its optimizer state (flat shards, even), all-
gathers a module's parameters before its forward and backward and reduce-
scatters its gradients after. Each residual block is its own unit, as FSDP2
users shard each transformer block, so that only one block's parameters
are whole at a time; the rest of the model is the root's unit. Throughput
only (no --epochs).

Memory (both modes): result.memory holds, per rank, optimizer_state_bytes
(the bytes of the tensors in the rank's optimizer state, for --zero its
local shard's, for --fsdp2 the local shards of its DTensors),
gradient_bytes (the bytes of the parameters' .grad tensors after the last
step; for --fsdp2 their local shards) and master_weight_bytes (0: the
weights are fp32 already). DDP's gradient buckets, a second copy of every gradient, are
inside its C++ reducer and not visible from Python (they would be with
gradient_as_bucket_view=True, which makes .grad a view into them), so
gradient_bytes counts the .grad tensors only.

--compression fp16 registers DDP's own fp16_compress_hook, which sends
gradients in half precision the way kolo-train --compression fp16 does;
none (the default) leaves DDP as it is. There is no bf16: torch 1.13's DDP
refuses its bf16 hook without CUDA 11 and NCCL 2.10.
"""

import argparse
import ctypes
import datetime
import gzip
import importlib
import json
import math
import multiprocessing
import multiprocessing.connection
import os
import resource
import signal
import struct
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DistributedSampler

NUM_CLASSES = 10
# --optimizer: the classes, and their options beyond the learning rate.
OPTIMIZERS = ("sgd", "adam", "adamw")
# --precision: the dtype the forward pass and the loss autocast to.
AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
PRECISIONS = ("fp32", *AUTOCAST_DTYPES)
# --compression: DDP's hook that allreduces gradients in half precision
# (its bf16 hook needs CUDA and NCCL).
COMPRESSION_HOOKS = {"fp16": default_hooks.fp16_compress_hook}

# kolo's normalisation constants (include/kolo/data.h): per-channel mean and
# std of the training pixels scaled to [0, 1].
NORMALISATION = {
    "fashion-mnist": ((0.2860,), (0.3530,)),
    "mnist": ((0.1307,), (0.3081,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
}
DATASETS = (*NORMALISATION, "synthetic")
CIFAR10_RECORD_BYTES = 1 + 3 * 32 * 32  # label byte, then R, G, B planes
SYNTHETIC_SIZE = 8192  # images, as kolo-train's synthetic training set
# Evaluation keeps no activations, so it takes larger batches than training
# (kolo-train's kEvalBatchSize); the size changes nothing but speed.
EVAL_BATCH_SIZE = 512

# kolo's parameter counts for 10 classes (include/kolo/models.h,
# tests/torch/models_test.cc): (count, input channels it is given for,
# weights of the first convolution per input channel). Only the first
# convolution depends on the number of input channels.
KOLO_PARAMETERS = {
    "lenet": (21_840, 1, 10 * 5 * 5),
    "resnet18": (11_173_962, 3, 64 * 3 * 3),
    "resnet50": (23_520_842, 3, 64 * 3 * 3),
    "mobilenetv2": (2_236_682, 3, 32 * 3 * 3),
    "vgg16": (15_253_578, 3, 64 * 3 * 3),
}


class InputError(Exception):
    """A problem with the data or the flags, reported in one line (exit 2)."""


# Models: kolo's model zoo (src/torch/models/models.cc, residual.cc).


def conv(in_channels, out_channels, kernel, stride=1, groups=1, bias=False):
    """kolo's Conv(): square kernel, "same" padding (kernel // 2), no bias."""
    return nn.Conv2d(in_channels, out_channels, kernel, stride=stride,
                     padding=kernel // 2, groups=groups, bias=bias)


def init_convolutions_for_relu(module):
    """He normal (fan-out, ReLU) weights and zero biases, as kolo and
    torchvision initialize ResNet, MobileNetV2 and VGG."""
    for child in module.modules():
        if isinstance(child, nn.Conv2d):
            nn.init.kaiming_normal_(child.weight, mode="fan_out",
                                    nonlinearity="relu")
            if child.bias is not None:
                nn.init.zeros_(child.bias)


class LeNet(nn.Module):
    """The PyTorch MNIST example's network, returning logits; the second pool
    is adaptive to 4x4 (the same as a 2x2 pool for 28x28 input)."""

    def __init__(self, num_classes, in_channels):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 10, 5)
        self.conv2 = nn.Conv2d(10, 20, 5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.dropout = nn.Dropout()
        self.fc2 = nn.Linear(50, num_classes)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.adaptive_max_pool2d(self.conv2_drop(self.conv2(x)), 4))
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(self.dropout(x))


def projection(in_channels, out_channels, stride):
    """A residual block's shortcut when its shape changes: 1x1 conv, BN."""
    return nn.Sequential(conv(in_channels, out_channels, 1, stride),
                         nn.BatchNorm2d(out_channels))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_channels, planes, stride):
        super().__init__()
        self.conv1 = conv(in_channels, planes, 3, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv(planes, planes, 3)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = (projection(in_channels, planes, stride)
                           if stride != 1 or in_channels != planes else None)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        shortcut = self.downsample(x) if self.downsample is not None else x
        return F.relu(out + shortcut)


class Bottleneck(nn.Module):
    """1x1 down to `planes`, strided 3x3, 1x1 up to 4 * planes."""

    expansion = 4

    def __init__(self, in_channels, planes, stride):
        super().__init__()
        out_channels = planes * self.expansion
        self.conv1 = conv(in_channels, planes, 1)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv(planes, planes, 3, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv(planes, out_channels, 1)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.downsample = (projection(in_channels, out_channels, stride)
                           if stride != 1 or in_channels != out_channels
                           else None)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        shortcut = self.downsample(x) if self.downsample is not None else x
        return F.relu(out + shortcut)


class ResNet(nn.Module):
    """ResNet with the small-image stem: one 3x3 stride-1 convolution to 64
    channels, batch norm and relu, no max-pool."""

    def __init__(self, block, blocks, num_classes, in_channels):
        super().__init__()
        self.conv1 = conv(in_channels, 64, 3)
        self.bn1 = nn.BatchNorm2d(64)
        channels = 64
        self.stages = []
        for stage, (planes, count) in enumerate(zip((64, 128, 256, 512),
                                                    blocks)):
            layer = nn.Sequential()
            for i in range(count):
                stride = 2 if stage > 0 and i == 0 else 1
                layer.append(block(channels, planes, stride))
                channels = planes * block.expansion
            setattr(self, f"layer{stage + 1}", layer)
            self.stages.append(layer)
        self.fc = nn.Linear(channels, num_classes)
        init_convolutions_for_relu(self)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        for layer in self.stages:
            x = layer(x)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class InvertedResidual(nn.Module):
    """1x1 expansion (absent for ratio 1), 3x3 depthwise, linear 1x1
    projection; the input is added back when the shape is unchanged."""

    def __init__(self, in_channels, out_channels, stride, expand_ratio):
        super().__init__()
        self.residual = stride == 1 and in_channels == out_channels
        hidden = in_channels * expand_ratio
        if expand_ratio != 1:
            self.expand_conv = conv(in_channels, hidden, 1)
            self.expand_bn = nn.BatchNorm2d(hidden)
        else:
            self.expand_conv = None
        self.depthwise_conv = conv(hidden, hidden, 3, stride, groups=hidden)
        self.depthwise_bn = nn.BatchNorm2d(hidden)
        self.project_conv = conv(hidden, out_channels, 1)
        self.project_bn = nn.BatchNorm2d(out_channels)

    def forward(self, x):
        out = x
        if self.expand_conv is not None:
            out = F.relu6(self.expand_bn(self.expand_conv(out)))
        out = F.relu6(self.depthwise_bn(self.depthwise_conv(out)))
        out = self.project_bn(self.project_conv(out))
        return out + x if self.residual else out


class MobileNetV2(nn.Module):
    """Width 1.0, small-image strides: stride 1 in the stem and in the
    24-channel stage, so the network downsamples 8 times instead of 32."""

    # (expansion ratio, output channels, blocks, stride of the first block)
    STAGES = ((1, 16, 1, 1), (6, 24, 2, 1), (6, 32, 3, 2), (6, 64, 4, 2),
              (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, num_classes, in_channels):
        super().__init__()
        self.stem_conv = conv(in_channels, 32, 3)
        self.stem_bn = nn.BatchNorm2d(32)
        self.blocks = nn.Sequential()
        channels = 32
        for expand_ratio, out_channels, count, stride in self.STAGES:
            for i in range(count):
                self.blocks.append(InvertedResidual(
                    channels, out_channels, stride if i == 0 else 1,
                    expand_ratio))
                channels = out_channels
        self.head_conv = conv(channels, 1280, 1)
        self.head_bn = nn.BatchNorm2d(1280)
        self.dropout = nn.Dropout(0.2)
        self.classifier = nn.Linear(1280, num_classes)
        init_convolutions_for_relu(self)

    def forward(self, x):
        x = F.relu6(self.stem_bn(self.stem_conv(x)))
        x = self.blocks(x)
        x = F.relu6(self.head_bn(self.head_conv(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.classifier(self.dropout(x))


class VGG16(nn.Module):
    """VGG-16 with batch norm and biased convolutions; ceil-mode pools so
    28x28 input reaches 1x1; a 512 -> 512 -> 512 -> classes classifier."""

    STAGES = ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512),
              (512, 512, 512))

    def __init__(self, num_classes, in_channels):
        super().__init__()
        channels = in_channels
        self.stages = []
        for stage, widths in enumerate(self.STAGES, start=1):
            layers = []
            for i, width in enumerate(widths, start=1):
                layer_conv = conv(channels, width, 3, bias=True)
                layer_bn = nn.BatchNorm2d(width)
                setattr(self, f"conv{stage}_{i}", layer_conv)
                setattr(self, f"bn{stage}_{i}", layer_bn)
                layers.append((layer_conv, layer_bn))
                channels = width
            self.stages.append(layers)
        self.fc6 = nn.Linear(channels, 512)
        self.fc7 = nn.Linear(512, 512)
        self.fc8 = nn.Linear(512, num_classes)
        self.dropout = nn.Dropout(0.5)
        init_convolutions_for_relu(self)

    def forward(self, x):
        for layers in self.stages:
            for layer_conv, layer_bn in layers:
                x = F.relu(layer_bn(layer_conv(x)))
            x = F.max_pool2d(x, 2, 2, ceil_mode=True)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        x = self.dropout(F.relu(self.fc6(x)))
        x = self.dropout(F.relu(self.fc7(x)))
        return self.fc8(x)


MODELS = {
    "lenet": LeNet,
    "resnet18": lambda classes, channels: ResNet(BasicBlock, (2, 2, 2, 2),
                                                 classes, channels),
    "resnet50": lambda classes, channels: ResNet(Bottleneck, (3, 4, 6, 3),
                                                 classes, channels),
    "mobilenetv2": MobileNetV2,
    "vgg16": VGG16,
}


def count_parameters(model):
    return sum(parameter.numel() for parameter in model.parameters())


def kolo_parameter_count(name, in_channels):
    """kolo's parameter count of model `name` for 10 classes."""
    count, channels, per_channel = KOLO_PARAMETERS[name]
    return count + (in_channels - channels) * per_channel


def check_parameters(name, in_channels):
    """Builds model `name`, prints its parameter count and whether it equals
    kolo's; returns whether it does."""
    count = count_parameters(MODELS[name](NUM_CLASSES, in_channels))
    expected = kolo_parameter_count(name, in_channels)
    verdict = "as kolo" if count == expected else f"kolo has {expected:,}"
    print(f"{name}: {count:,} parameters for {in_channels} input "
          f"channel{'s' if in_channels > 1 else ''} and {NUM_CLASSES} "
          f"classes ({verdict})", flush=True)
    return count == expected


# Data: as kolo::data reads it (src/torch/data/datasets.cc).


def dataset_files(args, train=True):
    """The files the training (or test) set is read from; InputError if one
    is missing. IDX files may be raw or gzipped; the raw name wins."""
    if args.dataset == "synthetic":
        return []
    directory = args.data_dir or f"/usr/share/datasets/{args.dataset}"
    if args.dataset == "cifar10":
        names = ([f"data_batch_{i}.bin" for i in range(1, 6)] if train
                 else ["test_batch.bin"])
        paths = [os.path.join(directory, name) for name in names]
        for path in paths:
            if not os.path.isfile(path):
                raise InputError(f"{path}: no such file")
        return paths
    prefix = "train" if train else "t10k"
    paths = []
    for name in (f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte"):
        raw = os.path.join(directory, name)
        if os.path.isfile(raw):
            paths.append(raw)
        elif os.path.isfile(raw + ".gz"):
            paths.append(raw + ".gz")
        else:
            raise InputError(f"{raw}: no such file (nor {raw}.gz)")
    return paths


def read_idx(path, magic, dimensions):
    """An IDX array of unsigned bytes, from a raw or gzipped file."""
    with open(path, "rb") as file:
        data = file.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    header_bytes = 4 * (1 + dimensions)
    if len(data) < header_bytes:
        raise InputError(f"{path}: truncated IDX header")
    found, *shape = struct.unpack(f">{1 + dimensions}I", data[:header_bytes])
    if found != magic:
        raise InputError(f"{path}: bad magic 0x{found:08x}, expected "
                         f"0x{magic:08x}")
    array = np.frombuffer(data, np.uint8, offset=header_bytes)
    if array.size != np.prod(shape):
        raise InputError(f"{path}: {array.size} bytes of data after the "
                         f"header, which declares {np.prod(shape)}")
    return array.reshape(shape)


def normalise(pixels, mean, std):
    """uint8 N x C x H x W -> float32 (x / 255 - mean) / std, per channel,
    in the order and precision kolo computes it."""
    shape = (1, len(mean), 1, 1)
    x = pixels.astype(np.float32)
    x /= np.float32(255)
    x -= np.array(mean, np.float32).reshape(shape)
    x /= np.array(std, np.float32).reshape(shape)
    return torch.from_numpy(x)


def read_mnist_like(paths, mean, std):
    images_path, labels_path = paths
    pixels = read_idx(images_path, 0x00000803, 3)
    labels = read_idx(labels_path, 0x00000801, 1)
    if len(pixels) != len(labels):
        raise InputError(f"count mismatch: {images_path} has {len(pixels)} "
                         f"images but {labels_path} has {len(labels)} labels")
    return (normalise(pixels[:, None], mean, std),
            torch.from_numpy(labels.astype(np.int64)))


def read_cifar10(paths, mean, std):
    """The records of all `paths`, read into one array: a label byte, then
    the 32x32 red, green and blue planes."""
    sizes = [os.path.getsize(path) for path in paths]
    for path, size in zip(paths, sizes):
        if size % CIFAR10_RECORD_BYTES:
            raise InputError(f"{path}: size {size} bytes is not a multiple of "
                             f"the {CIFAR10_RECORD_BYTES}-byte CIFAR-10 "
                             "record")
    records = np.empty((sum(sizes) // CIFAR10_RECORD_BYTES,
                        CIFAR10_RECORD_BYTES), np.uint8)
    start = 0
    for path, size in zip(paths, sizes):
        chunk = records[start:start + size // CIFAR10_RECORD_BYTES]
        with open(path, "rb") as file:
            file.readinto(memoryview(chunk).cast("B"))
        if chunk[:, 0].max(initial=0) >= NUM_CLASSES:
            raise InputError(f"{path}: a record has a label above 9; "
                             "CIFAR-10 labels are 0-9")
        start += len(chunk)
    pixels = records[:, 1:].reshape(-1, 3, 32, 32)
    return (normalise(pixels, mean, std),
            torch.from_numpy(records[:, 0].astype(np.int64)))


def synthetic(shape, seed, count=SYNTHETIC_SIZE):
    """kolo's synthetic recipe: a uniform [-1, 1] prototype per class plus
    0.5 * standard normal noise, with uniform labels. Same distribution as
    kolo::data::Synthetic(), drawn from torch's generator. `count` images:
    the pipeline and checkpoint peers draw only the few they use, so that
    the set does not weigh on their peak RSS."""
    generator = torch.Generator().manual_seed(seed)
    prototypes = torch.rand((NUM_CLASSES, *shape), generator=generator) * 2 - 1
    labels = torch.randint(NUM_CLASSES, (count,), generator=generator)
    images = torch.randn((count, *shape), generator=generator)
    images.mul_(0.5)
    # In slices, so that memory holds one copy of the images, as in kolo.
    for rows, classes in zip(images.split(1024), labels.split(1024)):
        rows += prototypes[classes]
    return images, labels


def image_shape(args):
    """(channels, height, width) of the dataset's images."""
    if args.dataset == "synthetic":
        size = args.image_size or 28
        return (args.channels or 1, size, size)
    if args.dataset == "cifar10":
        return (3, 32, 32)
    return (1, 28, 28)


def load_dataset(args, paths):
    """The whole training set in memory: float32 images, int64 labels."""
    if args.dataset == "synthetic":
        return synthetic(image_shape(args), args.seed)
    mean, std = NORMALISATION[args.dataset]
    if args.dataset == "cifar10":
        return read_cifar10(paths, mean, std)
    return read_mnist_like(paths, mean, std)


def first_rows(images, labels, count, flag, split, paths):
    """The first `count` rows (all of them for 0), as kolo-train's
    --train-subset and --test-subset keep them; InputError naming the flag
    when the set is smaller."""
    if count == 0:
        return images, labels
    if count > len(labels):
        raise InputError(f"{flag} {count} is more than the {len(labels)} "
                         f"{split} images in {', '.join(paths)}")
    return images[:count], labels[:count]


def batches(images, labels, sampler, batch_size):
    """Full batches of this rank's shard, epoch after epoch, forever."""
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        order = torch.tensor(list(sampler))
        for start in range(0, len(order) - batch_size + 1, batch_size):
            rows = order[start:start + batch_size]
            yield images.index_select(0, rows), labels.index_select(0, rows)
        epoch += 1


# Workers.


def die_with_parent(parent_pid):
    """Has Linux kill this worker when the launcher dies, however it dies."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None).prctl(pr_set_pdeathsig, int(signal.SIGKILL))
    if os.getppid() != parent_pid:  # the launcher died before the prctl
        os._exit(1)


def set_threads(threads):
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # refused once inter-op work has started
        pass


def autocast(precision):
    """bf16 and fp16: the forward pass and the loss in that dtype where
    autocast has CPU kernels; the backward pass writes fp32 gradients into
    fp32 weights."""
    return torch.autocast("cpu", dtype=AUTOCAST_DTYPES.get(precision,
                                                           torch.bfloat16),
                          enabled=precision != "fp32")


def check_precision(precision):
    """InputError where this torch would not train in `precision`: torch
    1.13 turns CPU autocast to float16 off with a warning (and would train
    in fp32 unnoticed), and has no GradScaler for the CPU."""
    if precision != "fp16":
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with autocast(precision):
                pass
            torch.amp.GradScaler("cpu")
    except (AttributeError, RuntimeError, TypeError, UserWarning) as error:
        raise InputError(f"--precision fp16: torch {torch.__version__} has "
                         f"no CPU float16 autocast or GradScaler ({error}); "
                         "use a torch 2.x (scripts/setup.sh makes one in "
                         ".venv) or --precision bf16") from None


def make_scaler(args):
    """fp16's dynamic loss scaling (kolo-train's fp16 scales the loss too);
    None for fp32 and bf16, whose range needs none."""
    return torch.amp.GradScaler("cpu") if args.precision == "fp16" else None


def train_step(model, optimizer, images, labels, args, scaler=None):
    optimizer.zero_grad()  # fills with zeros, as LibTorch's zero_grad() does
    with autocast(args.precision):
        loss = F.cross_entropy(model(images), labels)
    if scaler is None:
        loss.backward()
    else:
        scaler.scale(loss).backward()
    if args.gradient_clipping > 0:
        if scaler is not None:
            scaler.unscale_(optimizer)
        # DDP has allreduced every gradient by now: this is the global norm.
        nn.utils.clip_grad_norm_(model.parameters(), args.gradient_clipping)
    if scaler is None:
        optimizer.step()
    else:
        # Skips the step when a gradient overflowed (every rank agrees:
        # the gradients are allreduced, and for FSDP2's sharded ones the
        # scaler reduces its overflow flag across the ranks).
        scaler.step(optimizer)
        scaler.update()
    return loss


def make_optimizer(model, args):
    """--optimizer at the scaled rate, wrapped in ZeroRedundancyOptimizer
    (ZeRO stage 1) with --zero."""
    if args.optimizer == "sgd":
        cls = torch.optim.SGD
        options = {"momentum": 0.9, "nesterov": True,
                   "weight_decay": args.weight_decay}
    else:
        # LibTorch's (and kolo-train's) Adam defaults.
        cls = (torch.optim.Adam if args.optimizer == "adam"
               else torch.optim.AdamW)
        options = {"betas": (0.9, 0.999), "eps": 1e-8,
                   "weight_decay": args.weight_decay}
    lr = scaled_lr(args)
    if args.zero:
        return ZeroRedundancyOptimizer(model.parameters(), optimizer_class=cls,
                                       lr=lr, **options)
    return cls(model.parameters(), lr=lr, **options)


def scaled_lr(args):
    """--lr times the workers, unless --no-lr-scaling."""
    return args.lr * (1 if args.no_lr_scaling else args.np)


def local(tensor):
    """This rank's part of `tensor`: the local shard of an FSDP2 DTensor,
    the tensor itself otherwise."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


def tensor_bytes(tensors):
    return sum(local(t).numel() * local(t).element_size() for t in tensors)


def memory_bytes(model, optimizer):
    """This rank's result.memory: the optimizer state's tensors (for
    ZeroRedundancyOptimizer, its local shard's state, optimizer.optim.state)
    and the .grad tensors (for FSDP2, the local shards of both). DDP's
    bucket copies of the gradients live in its C++ reducer, invisible from
    Python unless gradient_as_bucket_view makes .grad a view into them, so
    they are not counted."""
    inner = (optimizer.optim if isinstance(optimizer, ZeroRedundancyOptimizer)
             else optimizer)
    state = tensor_bytes(value for entry in inner.state.values()
                         for value in entry.values() if torch.is_tensor(value))
    gradients = tensor_bytes(p.grad for p in model.parameters()
                             if p.grad is not None)
    return {"optimizer_state_bytes": state, "gradient_bytes": gradients,
            "master_weight_bytes": 0}


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def load_shard(rank, args, paths):
    """The training set and this rank's sampler over it."""
    images, labels = first_rows(*load_dataset(args, paths["train"]),
                                args.train_subset, "--train-subset",
                                "training", paths["train"])
    sampler = DistributedSampler(range(len(labels)), num_replicas=args.np,
                                 rank=rank, shuffle=True, seed=args.seed)
    if len(sampler) < args.batch_size:
        raise InputError(f"the shard of {len(sampler)} images per rank is "
                         f"smaller than --batch-size {args.batch_size}")
    return images, labels, sampler


def measure(model, optimizer, data, args, scaler=None):
    """Runs the warm-up steps, then times the measured ones between two
    barriers. Returns the seconds and the last step's loss."""
    for _ in range(args.warmup):
        train_step(model, optimizer, *next(data), args, scaler)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(args.iters):
        loss = train_step(model, optimizer, *next(data), args, scaler)
    dist.barrier()
    return time.perf_counter() - start, loss.item()


def learning_rate(args, iteration, warmup_iterations, total_iterations):
    """kolo-train's schedule (tools/kolo-train/plan.cc): a linear climb from
    --lr to the scaled rate over the warm-up, then half a cosine down to 0
    at the last iteration."""
    scaled = scaled_lr(args)
    if iteration < warmup_iterations:
        return args.lr + (scaled - args.lr) * iteration / warmup_iterations
    decay = total_iterations - warmup_iterations
    if decay <= 0 or args.lr_schedule == "constant":
        return scaled
    progress = min(1.0, (iteration - warmup_iterations) / decay)
    return scaled * 0.5 * (1.0 + math.cos(math.pi * progress))


def unpadded_shard_size(dataset_size, rank, world_size):
    """The real rows of an unshuffled DistributedSampler shard: position p
    of the padded range is padding exactly when p >= dataset_size
    (kolo's DistributedSampler::real_samples)."""
    if rank >= dataset_size:
        return 0
    return (dataset_size - rank + world_size - 1) // world_size


def evaluate(model, images, labels, rank):
    """Test accuracy of the model rank 0 holds: its buffers (batch-norm
    statistics) go to every rank, each rank classifies the real rows of its
    unshuffled shard, and the counts are summed. Returns (correct, total).
    The bare module runs the forward passes, since DDP's forward would
    broadcast buffers in every call and the shards may differ in length."""
    module = model.module
    for buffer in module.buffers():
        dist.broadcast(buffer, 0)
    world_size = dist.get_world_size()
    sampler = DistributedSampler(range(len(labels)), num_replicas=world_size,
                                 rank=rank, shuffle=False)
    rows = torch.tensor(list(sampler), dtype=torch.int64)
    rows = rows[:unpadded_shard_size(len(labels), rank, world_size)]
    module.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(rows), EVAL_BATCH_SIZE):
            chunk = rows[start:start + EVAL_BATCH_SIZE]
            predicted = module(images.index_select(0, chunk)).argmax(1)
            correct += int(predicted.eq(labels.index_select(0, chunk)).sum())
    counts = torch.tensor([correct, len(rows)], dtype=torch.int64)
    dist.all_reduce(counts)
    module.train()
    if int(counts[1]) != len(labels):
        raise RuntimeError(f"evaluation counted {int(counts[1])} test images "
                           f"across the ranks, not {len(labels)}")
    return int(counts[0]), int(counts[1])


def train_epochs(model, optimizer, images, labels, sampler, test, rank, args,
                 scaler=None):
    """--epochs: trains on this rank's shard epoch after epoch with kolo-
    train's schedule, evaluating after each. Returns this rank's training
    seconds, the images all ranks trained on, and one record per epoch."""
    batches_per_epoch = math.ceil(len(sampler) / args.batch_size)
    warmup_iterations = (0 if args.np == 1
                         else args.warmup_epochs * batches_per_epoch)
    total_iterations = args.epochs * batches_per_epoch
    train_seconds = 0.0
    history = []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        order = torch.tensor(list(sampler), dtype=torch.int64)
        start = time.perf_counter()
        loss_sum = 0.0
        lr = args.lr
        for number in range(batches_per_epoch):
            rows = order[number * args.batch_size:
                         (number + 1) * args.batch_size]
            lr = learning_rate(args, epoch * batches_per_epoch + number,
                               warmup_iterations, total_iterations)
            for group in optimizer.param_groups:
                group["lr"] = lr
            loss = train_step(model, optimizer, images.index_select(0, rows),
                              labels.index_select(0, rows), args, scaler)
            loss_sum += loss.item() * len(rows)
        seconds = time.perf_counter() - start
        train_seconds += seconds
        correct, total = evaluate(model, *test, rank)
        mean_loss = torch.tensor([loss_sum / len(order)], dtype=torch.float64)
        dist.all_reduce(mean_loss)
        mean_loss = float(mean_loss[0]) / args.np
        history.append({"epoch": epoch + 1, "lr": lr, "train_loss": mean_loss,
                        "test_accuracy": correct / total,
                        "test_correct": correct, "test_total": total,
                        "seconds": seconds,
                        "images_per_second": len(order) * args.np / seconds})
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs}  train loss "
                  f"{mean_loss:.4f}  test accuracy {100 * correct / total:.2f}% "
                  f"({correct}/{total})  "
                  f"{len(order) * args.np / seconds:.0f} images/s  "
                  f"{seconds:.1f} s", flush=True)
    return train_seconds, args.epochs * len(sampler) * args.np, history


def train(rank, args, paths, port):
    """Joins the group, measures, and has rank 0 report every rank's
    figures."""
    start = time.perf_counter()
    images, labels, sampler = load_shard(rank, args, paths)
    if args.epochs:
        test = first_rows(*load_dataset(args, paths["test"]),
                          args.test_subset, "--test-subset", "test",
                          paths["test"])
    if port is None:  # --from-env: torchrun's MASTER_ADDR and MASTER_PORT
        dist.init_process_group(
            "gloo", init_method="env://", rank=rank, world_size=args.np,
            timeout=datetime.timedelta(seconds=args.timeout))
    else:
        join_group(rank, args.np, port, args.timeout)
    torch.manual_seed(args.seed)  # same initial weights on every rank
    module = MODELS[args.model](NUM_CLASSES, images.shape[1])
    if args.fsdp2:
        model = shard_fully(module)
    else:
        model = DistributedDataParallel(module)
    if args.compression != "none":
        model.register_comm_hook(None, COMPRESSION_HOOKS[args.compression])
    torch.manual_seed(args.seed + rank)  # different dropout masks per rank
    optimizer = make_optimizer(model, args)
    scaler = make_scaler(args)
    if args.epochs:
        seconds, images_trained, history = train_epochs(
            model, optimizer, images, labels, sampler, test, rank, args,
            scaler)
        measured = {"seconds": seconds, "images_trained": images_trained,
                    "history": history,
                    "wall_seconds": time.perf_counter() - start}
    else:
        seconds, loss = measure(
            model, optimizer,
            batches(images, labels, sampler, args.batch_size), args, scaler)
        measured = {"seconds": seconds, "loss": loss}
    measured["peak_rss_bytes"] = peak_rss_bytes()
    measured["memory"] = memory_bytes(model, optimizer)
    gathered = [None] * args.np if rank == 0 else None
    dist.gather_object(measured, gathered, dst=0)
    if rank == 0:
        report(args, count_parameters(module), gathered,
               len(labels), len(test[1]) if args.epochs else 0)


def join_group(rank, world_size, port, timeout):
    """Joins the gloo group of `world_size` ranks whose TCPStore the
    launcher serves on 127.0.0.1:`port`."""
    timeout = datetime.timedelta(seconds=timeout)
    store = dist.TCPStore("127.0.0.1", port, world_size, False, timeout)
    dist.init_process_group("gloo", store=store, rank=rank,
                            world_size=world_size, timeout=timeout)


def has_fsdp2():
    """Whether this torch has FSDP2 (torch.distributed.fsdp.fully_shard,
    2.6 and later); torch 1.13's fsdp package fails even to import under
    Python 3.11."""
    try:
        fsdp = importlib.import_module("torch.distributed.fsdp")
    except Exception:  # noqa: BLE001 (any failure means: not this torch)
        return False
    return hasattr(fsdp, "fully_shard")


def shard_fully(module):
    """FSDP2 over every rank: each residual block (the model's units that
    hold a shortcut) its own fully_shard unit, then the root for the rest.
    The blocks' all-gathers then overlap the previous block's compute and
    only one block is whole at a time, as FSDP2 shards transformer blocks.
    Imported here: torch 1.13 has no FSDP2, and the other modes need none.
    """
    from torch.distributed.fsdp import fully_shard  # torch 2.6 and later
    for child in module.modules():
        if isinstance(child, (BasicBlock, Bottleneck, InvertedResidual)):
            fully_shard(child)
    return fully_shard(module)


def worker(rank, args, paths, port, parent_pid):
    """One DDP rank: trains, and sends its measurements to rank 0, which
    reports them."""
    run_rank("torch_ddp", rank, args.threads, parent_pid,
             lambda: train(rank, args, paths, port))


def run_rank(name, rank, threads, parent_pid, body):
    """A worker process's whole life: dies with the launcher, runs `body`
    on `threads` intra-op threads, and exits 0, 2 on an InputError, 1 on
    any other error, naming `name` and the rank."""
    die_with_parent(parent_pid)
    set_threads(threads)
    try:
        body()
        status = 0
    except InputError as error:
        print(f"{name}: rank {rank}: {error}", file=sys.stderr)
        status = 2
    except BaseException:
        traceback.print_exc()
        status = 1
    # Leave without running destructors. Destroying DDP's reducer and the
    # gloo process group joins gloo's worker thread while holding the GIL,
    # and that thread may need the GIL to free a tensor: the worker then
    # hangs at exit (pytorch/pytorch#56297; seen here with torch 1.13).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


# Reporting.


def report(args, parameters, per_rank, train_images, test_images):
    """Prints the summary and writes --json, from each rank's measurements.
    """
    if args.epochs:
        report_epochs(args, parameters, per_rank, train_images, test_images)
        return
    seconds = max(rank["seconds"] for rank in per_rank)
    images_per_second = args.iters * args.batch_size * args.np / seconds
    result = {
        "images_per_second": images_per_second,
        "images_per_second_per_worker": images_per_second / args.np,
        "seconds": seconds,
        "step_ms": 1000 * seconds / args.iters,
        "peak_rss_bytes": [rank["peak_rss_bytes"] for rank in per_rank],
        "memory": per_rank_memory(per_rank),
        "final_loss": sum(rank["loss"] for rank in per_rank) / args.np,
    }
    rss_mib = "/".join(f"{rss / 2**20:.0f}"
                       for rss in result["peak_rss_bytes"])
    print(f"torch-ddp {args.model} {args.dataset}: np {args.np}, batch "
          f"{args.batch_size}, {args.threads} thread(s), {recipe(args)}: "
          f"{images_per_second:.0f} images/s "
          f"({result['images_per_second_per_worker']:.0f} per worker), "
          f"{result['step_ms']:.2f} ms/step over {args.iters} steps, "
          f"final loss {result['final_loss']:.4f}, peak RSS {rss_mib} MiB, "
          f"{memory_summary(result['memory'])}", flush=True)
    if args.json:
        config = {
            "model": args.model, "dataset": args.dataset, "np": args.np,
            "batch_size": args.batch_size, "threads": args.threads,
            "warmup": args.warmup, "iters": args.iters, "lr": args.lr,
            "scaled_lr": scaled_lr(args), "seed": args.seed,
            "compression": args.compression, **recipe_config(args),
            "parameters": parameters, **versions(),
        }
        write_json(args.json,
                   {"tool": "torch-ddp", "config": config, "result": result})


def report_epochs(args, parameters, per_rank, train_images, test_images):
    """--epochs: the summary line and --json, in kolo-train's terms (its
    result fields, accuracy as a fraction)."""
    seconds = max(rank["seconds"] for rank in per_rank)
    images_trained = per_rank[0]["images_trained"]
    history = per_rank[0]["history"]
    final = history[-1]
    images_per_second = images_trained / seconds
    result = {
        "test_accuracy": final["test_accuracy"],
        "test_correct": final["test_correct"],
        "test_total": final["test_total"],
        "train_loss": final["train_loss"],
        "wall_seconds": max(rank["wall_seconds"] for rank in per_rank),
        "train_seconds": seconds,
        "images_trained": images_trained,
        "images_per_second": images_per_second,
        "images_per_second_per_worker": images_per_second / args.np,
        "peak_rss_bytes": [rank["peak_rss_bytes"] for rank in per_rank],
        "memory": per_rank_memory(per_rank),
    }
    rss_mib = "/".join(f"{rss / 2**20:.0f}"
                       for rss in result["peak_rss_bytes"])
    print(f"torch-ddp {args.model} {args.dataset}: np {args.np}, batch "
          f"{args.batch_size}, {args.threads} thread(s), {recipe(args)}, "
          f"{args.epochs} "
          f"epoch(s) on {train_images} images: test accuracy "
          f"{100 * result['test_accuracy']:.2f}% of {test_images}, "
          f"{result['wall_seconds']:.1f} s wall, {images_per_second:.0f} "
          f"images/s, peak RSS {rss_mib} MiB", flush=True)
    if args.json:
        config = {
            "mode": "epochs", "model": args.model, "dataset": args.dataset,
            "np": args.np, "workers": args.np, "epochs": args.epochs,
            "train_images": train_images, "test_images": test_images,
            "batch_size": args.batch_size, "threads": args.threads,
            "lr": args.lr, "scaled_lr": scaled_lr(args),
            "warmup_epochs": 0 if args.np == 1 else args.warmup_epochs,
            "lr_schedule": args.lr_schedule, **recipe_config(args),
            "seed": args.seed,
            "parameters": parameters, **versions(),
        }
        write_json(args.json, {"tool": "torch-ddp", "config": config,
                               "history": history, "result": result})


def recipe_config(args):
    """The optimizer, ZeRO stage, precision and clipping of the run, as
    kolo-train's JSON names them."""
    config = {"optimizer": args.optimizer, "zero_stage": zero_stage(args),
              "fsdp2": args.fsdp2, "precision": args.precision,
              "gradient_clipping": args.gradient_clipping,
              "weight_decay": args.weight_decay,
              "lr_scaling": not args.no_lr_scaling}
    if args.optimizer == "sgd":
        config.update({"momentum": 0.9, "nesterov": True})
    else:
        config.update({"betas": [0.9, 0.999], "eps": 1e-8})
    return config


def zero_stage(args):
    """What the run shards, in ZeRO's terms: ZeroRedundancyOptimizer the
    optimizer state (1), FSDP2 the parameters, gradients and state (3)."""
    return 3 if args.fsdp2 else 1 if args.zero else 0


def recipe(args):
    """The recipe in a few words for the summary line: "adam, ZeRO-1"."""
    words = [args.optimizer]
    if args.zero:
        words.append("ZeRO-1")
    if args.fsdp2:
        words.append("FSDP2")
    if args.precision != "fp32":
        words.append(args.precision)
    if args.gradient_clipping > 0:
        words.append(f"clip {args.gradient_clipping:g}")
    return ", ".join(words)


def versions():
    """The torch this peer ran on and the interpreter that ran it, for its
    JSON: kolo-bench puts them beside kolo's LibTorch in every row."""
    return {"torch_version": torch.__version__, "python": sys.executable}


def per_rank_memory(per_rank):
    """result.memory: each field a list with one value per rank."""
    return {key: [rank["memory"][key] for rank in per_rank]
            for key in ("optimizer_state_bytes", "gradient_bytes",
                        "master_weight_bytes")}


def memory_summary(memory):
    def mib(values):
        return "/".join(f"{value / 2**20:.1f}" for value in values)
    return (f"optimizer state {mib(memory['optimizer_state_bytes'])} MiB, "
            f"gradients {mib(memory['gradient_bytes'])} MiB")


def write_json(path, value):
    """Writes `value` to `path` atomically: a temporary file in the same
    directory, renamed over `path`."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".torch_ddp.",
                                     suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as file:
            json.dump(value, file, indent=2)
            file.write("\n")
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


# Launcher.


def run_workers(args, paths):
    """Starts the DDP workers and waits for them; see launch()."""
    return launch("torch_ddp", args.np, args.timeout, worker, (args, paths))


def launch(name, world_size, timeout, target, target_args):
    """Starts `world_size` processes running target(rank, *target_args,
    port, launcher pid), with a TCPStore for them on a port the OS picks,
    and waits for them; the first to fail stops the rest. Returns the exit
    status. The pipeline and checkpoint peers start theirs here too."""
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # stay on loopback
    # Turn SIGINT and SIGTERM into an exit, whose `finally` stops the workers.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda number, frame: sys.exit(128 + number))
    store = dist.TCPStore("127.0.0.1", 0, None, True,
                          datetime.timedelta(seconds=timeout),
                          wait_for_workers=False)
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=target, name=f"{name}-rank{rank}",
                        args=(rank, *target_args, store.port, os.getpid()))
        for rank in range(world_size)
    ]
    try:
        for process in processes:
            process.start()
        return wait_for(processes, name)
    finally:
        stop(processes)


def wait_for(processes, name):
    """Waits until every worker has exited, or one has failed. Returns 0, or
    the failed worker's exit status (1 if a signal killed it)."""
    pending = {process.sentinel: rank
               for rank, process in enumerate(processes)}
    while pending:
        for sentinel in multiprocessing.connection.wait(list(pending)):
            rank = pending.pop(sentinel)
            processes[rank].join()
            code = processes[rank].exitcode
            if code == 0:
                continue
            if code > 0:
                how = f"exited with status {code}"
            else:
                how = f"was killed by signal {-code}"
            print(f"{name}: rank {rank} {how}; stopping the others",
                  file=sys.stderr)
            return max(code, 1)
    return 0


def stop(processes):
    """Terminates the workers still running, killing those that linger."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        if process.pid is not None:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
    return value


def non_negative_float(text):
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def positive_float(text):
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def check_json_path(parser, path):
    """Refuses --json `path` before any work when its directory is missing:
    the result could not be written at the end."""
    if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        parser.error(f"--json {path}: no such directory")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Training throughput of PyTorch DDP (gloo) on one of "
                    "kolo's models, for comparison with kolo.")
    parser.add_argument("--model", choices=MODELS, default="lenet")
    parser.add_argument("--dataset", choices=DATASETS, default="fashion-mnist")
    parser.add_argument("--data-dir",
                        help="directory of the dataset's files "
                             "(default /usr/share/datasets/<dataset>)")
    parser.add_argument("--np", type=positive_int,
                        help="worker processes (default 1; with --from-env "
                             "WORLD_SIZE)")
    parser.add_argument("--from-env", action="store_true",
                        help="be one worker of a world torchrun started "
                             "(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) "
                             "instead of starting --np workers here")
    parser.add_argument("--compression", choices=("none", *COMPRESSION_HOOKS),
                        default="none",
                        help="send gradients in fp16 through DDP's "
                             "compression hook (default none)")
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="sgd",
                        help="sgd (Nesterov momentum 0.9, as kolo-train's "
                             "default), adam or adamw (betas 0.9, 0.999, eps "
                             "1e-8)")
    parser.add_argument("--zero", action="store_true",
                        help="wrap the optimizer in ZeroRedundancyOptimizer "
                             "(ZeRO stage 1: optimizer state sharded)")
    parser.add_argument("--fsdp2", action="store_true",
                        help="FSDP2 (fully_shard) instead of DDP: "
                             "parameters, gradients and optimizer state "
                             "sharded (ZeRO stage 3); throughput only")
    parser.add_argument("--weight-decay", type=non_negative_float,
                        default=1e-4,
                        help="the optimizer's weight decay (default 1e-4, as "
                             "kolo-train's)")
    parser.add_argument("--gradient-clipping", type=non_negative_float,
                        default=0.0,
                        help="clip the gradients to this global norm "
                             "(default 0: no clipping)")
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32",
                        help="bf16 or fp16: CPU autocast of the forward pass "
                             "and the loss, fp16 with a GradScaler (default "
                             "fp32)")
    parser.add_argument("--no-lr-scaling", action="store_true",
                        help="do not multiply --lr by the number of workers")
    parser.add_argument("--lr-schedule", choices=("cosine", "constant"),
                        default="cosine",
                        help="--epochs, after the warm-up: cosine (down to 0 "
                             "at the last step) or constant")
    parser.add_argument("--batch-size", type=positive_int, default=128,
                        help="batch size per worker (default 128)")
    parser.add_argument("--threads", type=non_negative_int, default=0,
                        help="intra-op threads per worker "
                             "(default 0: cores / np)")
    parser.add_argument("--warmup", type=non_negative_int, default=5,
                        help="untimed steps before the timed ones (default 5)")
    parser.add_argument("--iters", type=positive_int, default=50,
                        help="timed steps (default 50)")
    parser.add_argument("--lr", type=positive_float, default=0.03,
                        help="learning rate of one worker, multiplied by "
                             "--np (default 0.03, as kolo-train's)")
    parser.add_argument("--epochs", type=non_negative_int, default=0,
                        help="train for this many epochs and report the "
                             "test accuracy, instead of timing --iters "
                             "steps (default 0: throughput)")
    parser.add_argument("--warmup-epochs", type=non_negative_int, default=1,
                        help="--epochs: epochs over which the rate climbs "
                             "from --lr to --lr times --np (default 1)")
    parser.add_argument("--train-subset", type=non_negative_int, default=0,
                        help="train on the first N training images "
                             "(default 0: all)")
    parser.add_argument("--test-subset", type=non_negative_int, default=0,
                        help="--epochs: evaluate on the first N test images "
                             "(default 0: all)")
    parser.add_argument("--seed", type=non_negative_int, default=42,
                        help="seed of the weights, shuffle and synthetic "
                             "data (default 42)")
    parser.add_argument("--image-size", type=positive_int,
                        help="synthetic images' height and width (default 28)")
    parser.add_argument("--channels", type=positive_int,
                        help="synthetic images' channels (default 1)")
    parser.add_argument("--timeout", type=positive_int, default=300,
                        help="seconds a rank waits for the others in a "
                             "collective before failing (default 300)")
    parser.add_argument("--json", help="write the result to this file")
    parser.add_argument("--count-parameters", action="store_true",
                        help="print every model's parameter count for 1 and "
                             "3 input channels, compare with kolo's, and exit")
    args = parser.parse_args(argv)
    if args.dataset != "synthetic" and (args.image_size or args.channels):
        parser.error("--image-size and --channels apply to --dataset "
                     "synthetic only")
    if args.epochs and args.dataset == "synthetic":
        parser.error("--epochs needs a real --dataset: the synthetic set has "
                     "no test split")
    if args.test_subset and not args.epochs:
        parser.error("--test-subset applies to --epochs only")
    if args.fsdp2 and (args.zero or args.compression != "none"):
        parser.error("--fsdp2 shards the optimizer and reduce-scatters the "
                     "gradients itself: leave out --zero and --compression")
    if args.fsdp2 and args.epochs:
        parser.error("--fsdp2 measures throughput only: its evaluation "
                     "would need every rank in every forward pass")
    check_json_path(parser, args.json)
    local_workers = args.np or 1
    if args.from_env:
        missing = [name for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR",
                                     "MASTER_PORT") if name not in os.environ]
        if missing:
            parser.error(f"--from-env: {', '.join(missing)} not set; start "
                         "it with torchrun (python3 -m torch.distributed.run)")
        world_size = int(os.environ["WORLD_SIZE"])
        if args.np is not None and args.np != world_size:
            parser.error(f"--np {args.np} differs from WORLD_SIZE "
                         f"{world_size}")
        args.np = world_size
        local_workers = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    elif args.np is None:
        args.np = 1
    if args.threads == 0:
        args.threads = max(1, (os.cpu_count() or 1) // local_workers)
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.count_parameters:
        checks = [check_parameters(name, channels)
                  for name in MODELS for channels in (1, 3)]
        return 0 if all(checks) else 1
    try:
        check_precision(args.precision)
        if args.fsdp2 and not has_fsdp2():
            raise InputError(f"--fsdp2: torch {torch.__version__} has no "
                             "FSDP2 (torch.distributed.fsdp.fully_shard, 2.6 "
                             "and later); run scripts/setup.sh, which makes "
                             ".venv with one")
        paths = {"train": dataset_files(args, train=True),
                 "test": (dataset_files(args, train=False) if args.epochs
                          else [])}
    except InputError as error:
        print(f"torch_ddp: {error}", file=sys.stderr)
        return 2
    if not check_parameters(args.model, image_shape(args)[0]):
        print(f"torch_ddp: {args.model} differs from kolo's; not measuring",
              file=sys.stderr)
        return 1
    if args.from_env:  # torchrun started this worker; it reports or fails
        worker(int(os.environ["RANK"]), args, paths, None, os.getppid())
    return run_workers(args, paths)


if __name__ == "__main__":
    sys.exit(main())
