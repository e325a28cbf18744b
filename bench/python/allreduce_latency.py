#!/usr/bin/env python3
"""What a small allreduce costs a Python script: hvd.allreduce (out of
place) and hvd.allreduce_ (in place) of --bytes of float32 under kolo.torch,
timed the way kolo-bench collectives times its C++ calls, so that the two
figures stand side by side (kolo-bench python prints both).

    kolorun -np 2 --backend shm python3 bench/python/allreduce_latency.py

Each form runs --warmup untimed calls, then --iters calls each timed alone;
an iteration's time is the slowest rank's (a max-allreduce of the times
after the loop), and the figure is the median over iterations. Rank 0
prints one line of JSON and, with --json, writes it there. Each form's
result is checked once, before the timed calls: the sum of the ranks'
values, exact in float32.
"""

import argparse
import json
import statistics
import time

import torch

import kolo.torch as hvd
from kolo import _kolo


def timed(call, warmup, iters):
    for _ in range(warmup):
        call()
    seconds = torch.empty(iters, dtype=torch.float64)
    for i in range(iters):
        start = time.perf_counter()
        call()
        seconds[i] = time.perf_counter() - start
    slowest = hvd.allreduce(seconds, op=hvd.Max, name="latency.times")
    return statistics.median(slowest.tolist()) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bytes", type=int, default=4096)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--json", help="rank 0 also writes its line here")
    args = parser.parse_args()
    hvd.init()
    elements = max(1, args.bytes // 4)
    value = float(hvd.rank() + 1)
    tensor = torch.full((elements,), value)
    # Checked once each, outside the timed calls.
    expected = torch.full((elements,), hvd.size() * (hvd.size() + 1) / 2)
    wrong = int(not torch.equal(hvd.allreduce(tensor, op=hvd.Sum), expected))
    checked = tensor.clone()
    hvd.allreduce_(checked, op=hvd.Sum)
    wrong += int(not torch.equal(checked, expected))
    figures = {
        "out_of_place_us": timed(lambda: hvd.allreduce(tensor, op=hvd.Sum),
                                 args.warmup, args.iters),
        "in_place_us": timed(lambda: hvd.allreduce_(tensor, op=hvd.Sum),
                             args.warmup, args.iters),
    }
    wrong_total = int(hvd.allreduce(torch.tensor([wrong]), op=hvd.Sum).item())
    if hvd.rank() == 0:
        line = json.dumps({"bytes": elements * 4, "ranks": hvd.size(),
                           "backend": _kolo.backend(),
                           "iters": args.iters, "wrong": wrong_total,
                           "torch_version": torch.__version__, **figures})
        print(line, flush=True)
        if args.json:
            with open(args.json, "w") as f:
                f.write(line + "\n")
    hvd.shutdown()
    if wrong_total:
        raise SystemExit(f"allreduce_latency: {wrong_total} results were wrong")


if __name__ == "__main__":
    main()
